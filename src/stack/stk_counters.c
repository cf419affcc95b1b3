#include "config.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"

#include <inttypes.h>
#include <string.h>

uint64_t stk_counters[STK_C_COUNT];
uint64_t *stk_counters_mirror;

void stk_counters_set_mirror(uint64_t *mirror)
{
	__atomic_store_n(&stk_counters_mirror, mirror, __ATOMIC_RELEASE);
}

#define STK_COUNTER_NAME(id, name, help) name,
static const char *const counter_names[STK_C_COUNT] = { STK_COUNTER_LIST(STK_COUNTER_NAME) };
#undef STK_COUNTER_NAME

bool stk_counters_of_prov(const char *prov, struct stk_prov_counters *out)
{
	static const struct {
		const char *name;
		struct stk_prov_counters c;
	} provs[] = {
		{ "shm", { STK_C_CONN_ACCEL_SHM, STK_C_BYTES_TX_SHM, STK_C_BYTES_RX_SHM } },
		{ "tcp", { STK_C_CONN_ACCEL_TCP, STK_C_BYTES_TX_TCP, STK_C_BYTES_RX_TCP } },
		{ "dpdk", { STK_C_CONN_ACCEL_DPDK, STK_C_BYTES_TX_DPDK, STK_C_BYTES_RX_DPDK } },
	};
	for (size_t i = 0; i < sizeof(provs) / sizeof(provs[0]); i++) {
		if (strcmp(provs[i].name, prov) == 0) {
			*out = provs[i].c;
			return true;
		}
	}
	return false;
}

static stk_counters_live_fn *live_fn; /* atomic */

void stk_counters_set_live(stk_counters_live_fn *fn)
{
	__atomic_store_n(&live_fn, fn, __ATOMIC_RELEASE);
}

static void snapshot(uint64_t out[STK_C_COUNT])
{
	for (int i = 0; i < STK_C_COUNT; i++)
		out[i] = __atomic_load_n(&stk_counters[i], __ATOMIC_RELAXED);
	stk_counters_live_fn *fn = __atomic_load_n(&live_fn, __ATOMIC_ACQUIRE);
	if (fn)
		fn(out);
}

int stk_counter_get(const char *name, uint64_t *value)
{
	for (int i = 0; i < STK_C_COUNT; i++) {
		if (strcmp(counter_names[i], name) == 0) {
			uint64_t all[STK_C_COUNT];
			snapshot(all);
			*value = all[i];
			return 0;
		}
	}
	return -1;
}

void stk_counters_log(void)
{
	uint64_t all[STK_C_COUNT];
	snapshot(all);
	for (int i = 0; i < STK_C_COUNT; i++) {
		uint64_t v = all[i];
		if (v)
			STK_INFO("counter %s = %" PRIu64, counter_names[i], v);
	}
}
