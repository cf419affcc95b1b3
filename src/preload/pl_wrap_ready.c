/* Readiness wrappers: poll, select, epoll. While the process has no accelerated
 * connection and no epoll object (stk_accel_live, stk_epoll_live), every call is
 * the real one after one load. Otherwise the stack's readiness layer
 * (stk_ready.h, stk_epoll.h) merges accelerated sockets with kernel fds; the
 * integration contract is spelled out in stk_epoll.h. */
#include "config.h"
#include "preload/pl_wrap.h"
#include "stack/stk_accel.h"
#include "stack/stk_cork.h"
#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"

#include <errno.h>
#include <pthread.h>

extern void __chk_fail(void) __attribute__((noreturn));

static inline bool stack_involved(void)
{
	return (__atomic_load_n(&stk_accel_live, __ATOMIC_RELAXED) |
		__atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED)) != 0 &&
	       !pl_guarded();
}

/* Coalesced sends (stk_cork.h) leave before the app waits, also on a set the
 * stack does not know; not from a provider's own epoll_wait inside our call
 * into it (it holds its locks). */
static inline void cork_before_real_wait(void)
{
	if (!pl_guarded())
		stk_cork_before_wait();
}

static inline int pl_ret(int ret)
{
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

/* An epoll fd with an object handed to poll/select is refreshed by the stack
 * (stk_ready_lookup_set). */
static int stack_poll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		      const sigset_t *mask)
{
	return pl_ret(stk_poll(fds, nfds, timeout, mask));
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
	return pl_ret(stk_select(nfds, rfds, wfds, efds, timeout));
}

PL_EXPORT int pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		      const struct timespec *timeout, const sigset_t *mask)
{
	if (!stack_involved())
		return PL_REAL(pselect)(nfds, rfds, wfds, efds, timeout, mask);
	return pl_ret(stk_pselect(nfds, rfds, wfds, efds, timeout, mask));
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

/* The object attached to the app's epoll fd epfd, created on first need. */
static struct stk_epoll *epoll_object(int epfd, int *err)
{
	static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, epfd);
	if (sock && sock->epoll)
		return sock->epoll;
	struct stk_epoll *ep = NULL;
	pthread_mutex_lock(&create_lock);
	sock = pl_fdtab_get(&pl_fdtab, epfd); /* another thread may have won */
	if (sock && sock->epoll) {
		ep = sock->epoll;
	} else if ((*err = stk_epoll_create(epfd, &ep)) == 0) {
		sock = stk_sock_new_epoll(ep);
		if (sock && pl_fdtab_set(&pl_fdtab, epfd, sock) == 0) {
			stk_sock_unref(sock); /* the table holds it */
			stk_epoll_kick(ep); /* a thread may sleep in the real wait on E */
		} else {
			if (sock)
				stk_sock_unref(sock); /* destroys ep */
			else
				stk_epoll_destroy(ep);
			ep = NULL;
		}
	}
	pthread_mutex_unlock(&create_lock);
	return ep;
}

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (!stack_involved())
		return PL_REAL(epoll_ctl)(epfd, op, fd, ev);
	/* NULL for a kernel fd, also one settled or migrated on the kernel (the
	 * lookup moves it out of our sets first, so the real call finds it) */
	struct stk_conn *conn = stk_ready_lookup(fd);
	if (conn) {
		/* Accelerated: registered in the object only; the kernel socket under it
		 * carries nothing the app should see. */
		int err = -ENOMEM;
		struct stk_epoll *ep = epoll_object(epfd, &err);
		if (!ep)
			return pl_ret(err ? err : -ENOMEM);
		return pl_ret(stk_epoll_ctl(ep, op, fd, conn, ev));
	}
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
	int ret = PL_REAL(epoll_ctl)(epfd, op, fd, ev);
	if (ret == 0 && sock && sock->epoll) {
		/* An epoll set holding accelerated sockets, nested in epfd. */
		int saved_errno = errno;
		int err;
		struct stk_epoll *outer = epoll_object(epfd, &err);
		if (!outer || stk_epoll_ctl_inner(outer, op, fd, sock->epoll, ev) != 0)
			stk_epoll_expose(sock->epoll); /* at least the kernel sees it ready */
		errno = saved_errno;
	}
	return ret;
}

/* Wait on the object of epfd, holding a reference so a concurrent close(epfd)
 * cannot free it under us. */
static int stack_epoll_wait(struct stk_sock *sock, struct epoll_event *evs, int max,
			    int timeout_ms, const sigset_t *mask)
{
	stk_sock_ref(sock);
	int ret = stk_epoll_wait(sock->epoll, evs, max, timeout_ms, mask);
	int saved_errno = errno;
	pl_enter();
	stk_sock_unref(sock);
	pl_leave();
	errno = saved_errno;
	return pl_ret(ret);
}

/* A real wait on an epoll fd that had no object when it began returned: when
 * an object was attached meanwhile (stk_epoll_kick), drop its exposure tag and,
 * if nothing else was ready, go on waiting in the stack. */
static int after_real_wait(int epfd, struct epoll_event *evs, int n, int max, int timeout,
			   const sigset_t *mask)
{
	int out = 0;
	for (int i = 0; i < n; i++)
		if (evs[i].data.u64 != STK_EPOLL_EXPOSE_TAG)
			evs[out++] = evs[i];
	if (out > 0)
		return out;
	struct stk_sock *sock = pl_tracked(epfd);
	if (!sock || !sock->epoll)
		return 0; /* cannot happen: the tag is ours; report a timeout-like 0 */
	return stack_epoll_wait(sock, evs, max, timeout, mask);
}

static inline int real_wait_done(int epfd, struct epoll_event *evs, int n, int max,
				 int timeout, const sigset_t *mask)
{
	if (__builtin_expect(n > 0 && __atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED), 0))
		return after_real_wait(epfd, evs, n, max, timeout, mask);
	return n;
}

PL_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	cork_before_real_wait();
	struct stk_sock *sock = pl_tracked(epfd);
	if (__builtin_expect(!sock || !sock->epoll, 1))
		return real_wait_done(epfd, evs, PL_REAL(epoll_wait)(epfd, evs, max, timeout), max,
				      timeout, NULL);
	return stack_epoll_wait(sock, evs, max, timeout, NULL);
}

PL_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			  const sigset_t *mask)
{
	cork_before_real_wait();
	struct stk_sock *sock = pl_tracked(epfd);
	if (__builtin_expect(!sock || !sock->epoll, 1))
		return real_wait_done(epfd, evs, PL_REAL(epoll_pwait)(epfd, evs, max, timeout, mask),
				      max, timeout, mask);
	return stack_epoll_wait(sock, evs, max, timeout, mask);
}

PL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			   const struct timespec *timeout, const sigset_t *mask)
{
	cork_before_real_wait();
	struct stk_sock *sock = pl_tracked(epfd);
	if (__builtin_expect(!sock || !sock->epoll, 1)) {
		int n = PL_REAL(epoll_pwait2)(epfd, evs, max, timeout, mask);
		int ms = !timeout ? -1 : (int)(timeout->tv_sec * 1000 + timeout->tv_nsec / 1000000);
		return real_wait_done(epfd, evs, n, max, ms, mask);
	}
	/* the timespec as given: the stack validates it (EINVAL) and keeps ns */
	stk_sock_ref(sock);
	int ret = stk_epoll_wait_ts(sock->epoll, evs, max, timeout, mask);
	int saved_errno = errno;
	pl_enter();
	stk_sock_unref(sock);
	pl_leave();
	errno = saved_errno;
	return pl_ret(ret);
}
