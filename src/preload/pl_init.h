/* pl_init: start-up of the preload (idempotent, safe from any wrapper, any thread). */
#ifndef PL_INIT_H
#define PL_INIT_H

#include <stdbool.h>

extern bool pl_enabled; /* written once by pl_init(); false = pure pass-through */

/* Resolve symbols, load the configuration, size the fd table. Returns pl_enabled. */
bool pl_init(void);

#endif
