#include "config.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"

#include <inttypes.h>
#include <string.h>

uint64_t stk_counters[STK_C_COUNT];

#define STK_COUNTER_NAME(id, name, help) name,
static const char *const counter_names[STK_C_COUNT] = { STK_COUNTER_LIST(STK_COUNTER_NAME) };
#undef STK_COUNTER_NAME

int stk_counter_get(const char *name, uint64_t *value)
{
	for (int i = 0; i < STK_C_COUNT; i++) {
		if (strcmp(counter_names[i], name) == 0) {
			*value = __atomic_load_n(&stk_counters[i], __ATOMIC_RELAXED);
			return 0;
		}
	}
	return -1;
}

void stk_counters_log(void)
{
	for (int i = 0; i < STK_C_COUNT; i++) {
		uint64_t v = __atomic_load_n(&stk_counters[i], __ATOMIC_RELAXED);
		if (v)
			FSK_INFO("counter %s = %" PRIu64, counter_names[i], v);
	}
}
