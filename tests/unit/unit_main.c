#include "config.h"

#include <stdlib.h>

#include "unit.h"
#include "../lib/check_main.h"

int main(void)
{
	return check_main_run(unit_suite());
}
