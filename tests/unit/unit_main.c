#include "config.h"

#include <stdlib.h>

#include "unit.h"

int main(void)
{
	SRunner *runner = srunner_create(unit_suite());
	srunner_run_all(runner, CK_NORMAL);
	int failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
