/* pl_guard: keeps the library's own calls out of the wrappers.
 *
 * While a thread is inside the library (stack code, libfabric, DPDK), every
 * interposed call it makes goes straight to the real function. The counter is
 * thread-local (initial-exec: one %fs-relative load), so threads never contend.
 * Nesting is allowed. */
#ifndef PL_GUARD_H
#define PL_GUARD_H

extern __thread int pl_inside __attribute__((tls_model("initial-exec")));

static inline int pl_guarded(void)
{
	return __builtin_expect(pl_inside != 0, 0);
}

static inline void pl_enter(void)
{
	pl_inside++;
}

static inline void pl_leave(void)
{
	pl_inside--;
}

#endif
