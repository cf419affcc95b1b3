/* stk.h's readiness: the fd lookups the readiness layer uses (stk_ready.h),
 * and epoll_ctl/epoll_wait on the application's epoll fds (the objects of
 * stk_epoll.h, kept in the preload's fd table as handles). */
#include "config.h"
#include "stack/stk.h"
#include "stack/stk_accel.h"
#include "stack/stk_cork.h"
#include "stack/stk_epoll.h"
#include "stack/stk_hooks.h"
#include "stack/stk_ready.h"
#include "stack/stk_sock.h"
#include "stack/stk_sys.h"
#include "stack/stk_udp.h"

#include <errno.h>
#include <pthread.h>

static struct stk_sock *no_fd(int fd)
{
	(void)fd;
	return NULL;
}

static int no_set(int fd, struct stk_sock *sock)
{
	(void)fd;
	(void)sock;
	return -EBADF;
}

struct stk_fd_table stk_fds = { .get = no_fd, .set = no_set };

/* The connection readiness goes through for sock, or NULL: settled on the
 * kernel, or migrated there with nothing left to read, is a kernel fd for
 * readiness; epoll sets still holding it hand it to their kernel set first
 * (so the app's next epoll_ctl finds it there). */
static struct stk_conn *ready_conn(struct stk_sock *sock)
{
	if (sock && sock->udp)
		return stk_udp_ready_obj(sock->udp);
	struct stk_conn *conn = sock ? sock->conn : NULL;
	if (conn && stk_ready_phase(conn) == STK_PHASE_KERNEL) {
		int saved_errno = errno;
		stk_fi_enter();
		stk_epoll_conn_changed(conn);
		stk_fi_leave();
		errno = saved_errno;
		return NULL;
	}
	return conn;
}

static struct stk_conn *ready_lookup(int fd)
{
	return ready_conn(stk_fds.get(fd));
}

static struct stk_epoll *ready_lookup_set(int fd)
{
	struct stk_sock *sock = stk_fds.get(fd);
	return sock ? sock->epoll : NULL;
}

void stk_set_fd_table(const struct stk_fd_table *table)
{
	stk_fds = *table;
	stk_ready_lookup = ready_lookup;
	stk_ready_lookup_set = ready_lookup_set;
}

/* The object attached to the app's epoll fd epfd, created on first need. */
static struct stk_epoll *epoll_object(int epfd, int *err)
{
	static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
	struct stk_sock *sock = stk_fds.get(epfd);
	if (sock && sock->epoll)
		return sock->epoll;
	struct stk_epoll *ep = NULL;
	pthread_mutex_lock(&create_lock);
	sock = stk_fds.get(epfd); /* another thread may have won */
	if (sock && sock->epoll) {
		ep = sock->epoll;
	} else if ((*err = stk_epoll_create(epfd, &ep)) == 0) {
		sock = stk_sock_new_epoll(ep);
		if (sock && stk_fds.set(epfd, sock) == 0) {
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

int stk_sock_epoll_ctl(int epfd, int op, int fd, struct stk_sock *sock, struct epoll_event *ev)
{
	struct stk_conn *conn = ready_conn(sock);
	if (conn) {
		/* Accelerated: registered in the object only; the kernel socket under it
		 * carries nothing the app should see. */
		int err = -ENOMEM;
		struct stk_epoll *ep = epoll_object(epfd, &err);
		if (!ep)
			return err ? err : -ENOMEM;
		int ret = stk_epoll_ctl(ep, op, fd, conn, ev);
		/* settled on the kernel since the look above: the negotiation's
		 * thread handed the item to the kernel set (watch_kernel) */
		if (ret == -ENOENT && op != EPOLL_CTL_ADD && !ready_conn(sock))
			return STK_KERNEL;
		return ret;
	}
	if (!sock->epoll)
		return STK_KERNEL;
	/* An epoll set holding accelerated sockets, nested in epfd: the kernel's
	 * loop and depth checks first. */
	int saved_errno = errno;
	int ret = stk_sys.epoll_ctl(epfd, op, fd, ev);
	if (ret != 0) {
		ret = -errno;
		errno = saved_errno;
		return ret;
	}
	int err;
	struct stk_epoll *outer = epoll_object(epfd, &err);
	if (!outer || stk_epoll_ctl_inner(outer, op, fd, sock->epoll, ev) != 0)
		stk_epoll_expose(sock->epoll); /* at least the kernel sees it ready */
	errno = saved_errno;
	return 0;
}

/* Wait on the object of epsock, holding a reference so a concurrent close of
 * its fd cannot free it under us. */
static int object_wait(struct stk_sock *epsock, struct epoll_event *evs, int max,
		       int timeout_ms, bool use_ts, const struct timespec *ts,
		       const sigset_t *sigmask)
{
	stk_sock_ref(epsock);
	int ret = use_ts ? stk_epoll_wait_ts(epsock->epoll, evs, max, ts, sigmask)
			 : stk_epoll_wait(epsock->epoll, evs, max, timeout_ms, sigmask);
	int saved_errno = errno;
	stk_fi_enter();
	stk_sock_unref(epsock);
	stk_fi_leave();
	errno = saved_errno;
	return ret;
}

int stk_sock_epoll_wait(struct stk_sock *epsock, struct epoll_event *evs, int max,
			int timeout_ms, const sigset_t *sigmask)
{
	/* Coalesced sends leave before the app waits, also on a set the stack
	 * does not know. */
	stk_cork_before_wait();
	if (__builtin_expect(!epsock || !epsock->epoll, 1))
		return STK_KERNEL;
	return object_wait(epsock, evs, max, timeout_ms, false, NULL, sigmask);
}

int stk_sock_epoll_wait_ts(struct stk_sock *epsock, struct epoll_event *evs, int max,
			   const struct timespec *ts, const sigset_t *sigmask)
{
	stk_cork_before_wait();
	if (__builtin_expect(!epsock || !epsock->epoll, 1))
		return STK_KERNEL;
	/* the timespec as given: the stack validates it (EINVAL) and keeps ns */
	return object_wait(epsock, evs, max, -1, true, ts, sigmask);
}

int stk_epoll_real_done(int epfd, struct epoll_event *evs, int n, int max, int timeout_ms,
			const sigset_t *sigmask)
{
	if (!__atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED))
		return n;
	/* An object was attached while the real wait ran (stk_epoll_kick): drop
	 * its exposure tag and, if nothing else was ready, go on in the stack. */
	int out = 0;
	for (int i = 0; i < n; i++)
		if (evs[i].data.u64 != STK_EPOLL_EXPOSE_TAG)
			evs[out++] = evs[i];
	if (out > 0)
		return out;
	struct stk_sock *epsock = stk_fds.get(epfd);
	if (!epsock || !epsock->epoll)
		return 0; /* cannot happen: the tag is ours; report a timeout-like 0 */
	return object_wait(epsock, evs, max, timeout_ms, false, NULL, sigmask);
}
