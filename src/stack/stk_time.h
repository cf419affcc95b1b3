/* stk_time: the stack's clock (CLOCK_MONOTONIC, nanoseconds; vDSO, no system
 * call). */
#ifndef STK_TIME_H
#define STK_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t stk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
