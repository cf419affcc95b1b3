#include "config.h"
#include "stack/stk_hooks.h"

static void hook_noop(void)
{
}

struct stk_hooks stk_hooks = {
	.enter = hook_noop,
	.leave = hook_noop,
};
