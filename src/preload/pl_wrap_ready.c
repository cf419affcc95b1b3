/* Readiness wrappers: poll, select, epoll. While the process has no accelerated
 * connection and no epoll object (stk_ready_involved), every call is the real
 * one after one load. Otherwise the stack's readiness calls (stk.h) merge
 * accelerated sockets with kernel fds. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>

extern void __chk_fail(void) __attribute__((noreturn));

static inline bool stack_involved(void)
{
	return stk_ready_involved() && !pl_guarded();
}

/* An epoll fd with an object handed to poll/select is refreshed by the stack. */
static int stack_poll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		      const sigset_t *mask)
{
	return (int)pl_ret(stk_poll(fds, nfds, timeout, mask));
}

static int stack_poll_ms(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
	return stack_poll(fds, nfds, timeout_ms < 0 ? NULL : &ts, NULL);
}

PL_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	if (!stack_involved())
		return PL_REAL(poll)(fds, nfds, timeout);
	return stack_poll_ms(fds, nfds, timeout);
}

PL_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (!stack_involved())
		return PL_REAL(__poll_chk)(fds, nfds, timeout, fdslen);
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return stack_poll_ms(fds, nfds, timeout);
}

PL_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		    const sigset_t *mask)
{
	if (!stack_involved())
		return PL_REAL(ppoll)(fds, nfds, timeout, mask);
	return stack_poll(fds, nfds, timeout, mask);
}

PL_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			  const sigset_t *mask, size_t fdslen)
{
	if (!stack_involved())
		return PL_REAL(__ppoll_chk)(fds, nfds, timeout, mask, fdslen);
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return stack_poll(fds, nfds, timeout, mask);
}

PL_EXPORT int select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		     struct timeval *timeout)
{
	if (!stack_involved())
		return PL_REAL(select)(nfds, rfds, wfds, efds, timeout);
	return (int)pl_ret(stk_select(nfds, rfds, wfds, efds, timeout));
}

PL_EXPORT int pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		      const struct timespec *timeout, const sigset_t *mask)
{
	if (!stack_involved())
		return PL_REAL(pselect)(nfds, rfds, wfds, efds, timeout, mask);
	return (int)pl_ret(stk_pselect(nfds, rfds, wfds, efds, timeout, mask));
}

PL_EXPORT int epoll_create(int size)
{
	int epfd = PL_REAL(epoll_create)(size);
	if (epfd >= 0)
		pl_forget_stale(epfd);
	return epfd;
}

PL_EXPORT int epoll_create1(int flags)
{
	int epfd = PL_REAL(epoll_create1)(flags);
	if (epfd >= 0)
		pl_forget_stale(epfd);
	return epfd;
}

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (!stack_involved())
		return PL_REAL(epoll_ctl)(epfd, op, fd, ev);
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
	if (sock) {
		int ret = stk_sock_epoll_ctl(epfd, op, fd, sock, ev);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return PL_REAL(epoll_ctl)(epfd, op, fd, ev);
}

/* The real wait returned n: the stack removes its own tag (and may go on
 * waiting) when the process has epoll objects. */
static inline int real_wait_done(int epfd, struct epoll_event *evs, int n, int max,
				 int timeout, const sigset_t *mask)
{
	if (__builtin_expect(n > 0 && __atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED), 0))
		return (int)pl_ret(stk_epoll_real_done(epfd, evs, n, max, timeout, mask));
	return n;
}

/* Coalesced sends leave before the app waits (inside the stack's call), also on
 * a set the stack does not know. */
PL_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (stack_involved()) {
		int ret = stk_sock_epoll_wait(pl_tracked(epfd), evs, max, timeout, NULL);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return real_wait_done(epfd, evs, PL_REAL(epoll_wait)(epfd, evs, max, timeout), max,
			      timeout, NULL);
}

PL_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			  const sigset_t *mask)
{
	if (stack_involved()) {
		int ret = stk_sock_epoll_wait(pl_tracked(epfd), evs, max, timeout, mask);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return real_wait_done(epfd, evs, PL_REAL(epoll_pwait)(epfd, evs, max, timeout, mask),
			      max, timeout, mask);
}

PL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			   const struct timespec *timeout, const sigset_t *mask)
{
	if (stack_involved()) {
		int ret = stk_sock_epoll_wait_ts(pl_tracked(epfd), evs, max, timeout, mask);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	int n = PL_REAL(epoll_pwait2)(epfd, evs, max, timeout, mask);
	int ms = !timeout ? -1 : (int)(timeout->tv_sec * 1000 + timeout->tv_nsec / 1000000);
	return real_wait_done(epfd, evs, n, max, ms, mask);
}
