/* stk_hooks: calls the stack makes around every libfabric call.
 *
 * libfabric (and the providers under it) open files, sockets, eventfds and epoll
 * sets of their own; under LD_PRELOAD those calls must bypass the wrappers. The
 * guard that does that lives in src/preload, which the stack must not include, so
 * the preload installs it once at start-up, before any fabric is opened
 * (stk_set_guard, stk.h).
 * Defaults are no-ops (unit tests, the stk_ API used as a library). Written once,
 * read-only afterwards: no lock. Calls nest. */
#ifndef STK_HOOKS_H
#define STK_HOOKS_H

struct stk_hooks {
	void (*enter)(void);
	void (*leave)(void);
};

extern struct stk_hooks stk_hooks;

static inline void stk_fi_enter(void)
{
	stk_hooks.enter();
}

static inline void stk_fi_leave(void)
{
	stk_hooks.leave();
}

#endif
