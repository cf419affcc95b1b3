/* stk_counters: per-process event counters (relaxed atomics, slow paths only).
 * Readable by tests through fsk_counter() and dumped at exit with FABSOCK_LOG=info. */
#ifndef STK_COUNTERS_H
#define STK_COUNTERS_H

#include <stdint.h>

#define STK_COUNTER_LIST(X) \
	X(SOCKETS_TRACKED, "sockets_tracked", "TCP/UDP sockets seen at creation") \
	X(KERNEL_BY_RULE, "kernel_by_rule", "sockets a rule sent to the kernel") \
	X(KERNEL_BY_DEFAULT, "kernel_by_default", "sockets the default sent to the kernel") \
	X(ACCEL_REQUESTED, "accel_requested", "sockets a rule or the default chose to accelerate") \
	X(FALLBACK_NO_TRANSPORT, "fallback_no_transport", \
	  "accelerations refused: no accelerated transport for this socket type yet") \
	X(ACCELERATED, "accelerated", "sockets running on a fabric provider")

#define STK_COUNTER_ENUM(id, name, help) STK_C_##id,
enum stk_counter { STK_COUNTER_LIST(STK_COUNTER_ENUM) STK_C_COUNT };
#undef STK_COUNTER_ENUM

extern uint64_t stk_counters[STK_C_COUNT];

static inline void stk_count(enum stk_counter c)
{
	__atomic_fetch_add(&stk_counters[c], 1, __ATOMIC_RELAXED);
}

/* Value of the counter called name; -1 if there is none. */
int stk_counter_get(const char *name, uint64_t *value);
/* One info line per non-zero counter. */
void stk_counters_log(void);

#endif
