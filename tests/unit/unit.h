/* Each unit test program defines its suite; unit_main.c runs it. */
#ifndef UNIT_H
#define UNIT_H

#include <check.h>

Suite *unit_suite(void);

#endif
