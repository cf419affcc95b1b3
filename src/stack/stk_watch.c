#include "config.h"
#include "stack/stk_watch.h"

const struct stk_watch_ops *stk_watch_ops;

void stk_watch_install(const struct stk_watch_ops *ops)
{
	__atomic_store_n(&stk_watch_ops, ops, __ATOMIC_RELEASE);
}

void stk_watch_kernel(struct stk_watch *w)
{
	const struct stk_watch_ops *ops = __atomic_load_n(&stk_watch_ops, __ATOMIC_ACQUIRE);
	if (ops)
		ops->kernel(w);
}
