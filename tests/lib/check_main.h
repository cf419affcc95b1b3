/* The main() of a Check suite program: run every test of the suite with
 * Check's normal output; exit status 0 when all passed, 1 otherwise. */
#ifndef FSK_TESTS_CHECK_MAIN_H
#define FSK_TESTS_CHECK_MAIN_H

#include <check.h>

static inline int check_main_run(Suite *suite)
{
	SRunner *runner = srunner_create(suite);
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}

#endif
