/* Wrappers that only call the real function: nothing these calls see needs the
 * stack (getsockopt and friends act on the kernel socket, which an accelerated
 * connection keeps). Generated from PL_SYMBOLS_PASS so the
 * signature list lives in one place (pl_real.h). */
#include "config.h"
#include "preload/pl_real.h"
#include "preload/pl_wrap.h"

#define PL_UNPACK(...) __VA_ARGS__
#define PL_PASS_WRAPPER(ret, name, params, args) \
	PL_EXPORT ret name params \
	{ \
		return PL_REAL(name)(PL_UNPACK args); \
	}
PL_SYMBOLS_PASS(PL_PASS_WRAPPER, PL_PASS_WRAPPER)
