/* Socket lifecycle wrappers: creation, naming, connection. They keep the fd table
 * in step and hand each step of a tracked socket to the stack (stk.h), which
 * takes the accelerate-or-kernel decision once the socket's role is known,
 * around the kernel connect/listen/accept (which always happen, as the app
 * asked). When the stack says the kernel keeps a socket, its fd is forgotten. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>

void pl_untrack(int fd)
{
	int saved_errno = errno;
	struct stk_sock *old = pl_fdtab_take(&pl_fdtab, fd);
	if (old) {
		pl_enter();
		stk_sock_unref(old);
		pl_leave();
	}
	errno = saved_errno;
}

void pl_forget_stale(int fd)
{
	if (__builtin_expect(pl_fdtab_get(&pl_fdtab, fd) == NULL, 1))
		return;
	int saved_errno = errno;
	pl_fdtab_set(&pl_fdtab, fd, NULL);
	errno = saved_errno;
}

/* A step of sock's life (behind fd) in the stack, inside the guard; when the
 * stack answers that the kernel keeps the socket, fd is forgotten. errno is
 * preserved. */
static void life_step(int fd, struct stk_sock *sock, bool (*step)(struct stk_sock *, int))
{
	int saved_errno = errno;
	pl_enter();
	bool keep = step(sock, fd);
	pl_leave();
	if (!keep)
		pl_untrack(fd);
	errno = saved_errno;
}

PL_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = PL_REAL(socket)(domain, type, protocol);
	if (fd < 0 || pl_guarded() || !pl_init())
		return fd;
	int saved_errno = errno;
	pl_enter();
	struct stk_sock *sock = stk_sock_new(domain, type, protocol);
	if (sock) {
		pl_fdtab_set(&pl_fdtab, fd, sock);
		stk_sock_unref(sock); /* the table holds it now */
	} else {
		pl_forget_stale(fd);
	}
	pl_leave();
	errno = saved_errno;
	return fd;
}

/* The dpdk port's own IP is not the kernel's: the stack binds there itself. */
PL_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int ret = PL_REAL(bind)(fd, addr, len);
	struct stk_sock *sock = ret == 0 || errno == EADDRNOTAVAIL ? pl_tracked(fd) : NULL;
	if (ret != 0 && sock && stk_sock_bind_port_ip(sock, fd, PL_SA(addr), len) == 0)
		ret = 0;
	if (ret == 0 && sock)
		life_step(fd, sock, stk_sock_bound);
	return ret;
}

/* A listener the rules accelerate saves its clients' SYNs (before the kernel
 * listen) so each accepted connection can tell a libfabsock client. */
PL_EXPORT int listen(int fd, int backlog)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock)
		life_step(fd, sock, stk_sock_listen);
	return PL_REAL(listen)(fd, backlog);
}

/* A connection accepted on an accelerating listener gets the server's HELLO at
 * once; the rest of the negotiation runs lazily (accept never waits). */
static int after_accept(int listen_fd, int newfd)
{
	if (newfd < 0)
		return newfd;
	struct stk_sock *listener = pl_tracked(listen_fd);
	if (!listener) {
		pl_forget_stale(newfd);
		return newfd;
	}
	int saved_errno = errno;
	pl_enter();
	struct stk_sock *sock = stk_sock_accepted(listener, newfd);
	pl_leave();
	if (sock) {
		pl_fdtab_set(&pl_fdtab, newfd, sock);
		stk_sock_unref(sock); /* the table holds it now */
	} else {
		pl_forget_stale(newfd);
	}
	errno = saved_errno;
	return newfd;
}

PL_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return after_accept(fd, PL_REAL(accept)(fd, addr, len));
}

PL_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	return after_accept(fd, PL_REAL(accept4)(fd, addr, len, flags));
}

/* A TCP client the rules accelerate marks its SYN and connects in the kernel as
 * the app asked (blocking or not); the negotiation then runs lazily. */
PL_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct stk_sock *sock = pl_tracked(fd);
	int step = STK_CONNECT_PLAIN;
	if (sock) {
		int saved_errno = errno;
		pl_enter();
		step = stk_sock_connect_begin(sock, fd, PL_SA(addr), len);
		pl_leave();
		if (step == STK_CONNECT_FORGET)
			pl_untrack(fd);
		errno = saved_errno;
	}
	int ret = PL_REAL(connect)(fd, addr, len);
	if (step == STK_CONNECT_NEGOTIATE) {
		int saved_errno = errno;
		pl_enter();
		bool keep = stk_sock_connect_end(sock, fd, ret == 0 ? 0 : -saved_errno);
		pl_leave();
		if (!keep)
			pl_untrack(fd);
		errno = saved_errno;
	}
	return ret;
}

bool pl_decide_sender(int fd, struct stk_sock *sock, const void *dest, socklen_t dest_len)
{
	if (!sock || !dest)
		return false;
	int saved_errno = errno;
	pl_enter();
	bool was_carried = stk_sock_state(sock) & STK_SOCK_CARRIED;
	bool keep = stk_sock_send_to(sock, fd, dest, dest_len);
	bool carried = keep && !was_carried && (stk_sock_state(sock) & STK_SOCK_CARRIED);
	pl_leave();
	if (!keep)
		pl_untrack(fd);
	errno = saved_errno;
	return carried;
}

/* SO_ZEROCOPY on: MSG_ZEROCOPY completions come from the kernel socket's error
 * queue, so the kernel carries the socket (stk_sock_zerocopy). */
PL_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct stk_sock *tracked = pl_tracked(fd);
	if (tracked) {
		int done = stk_sock_setsockopt(tracked, fd, level, name, val, len);
		if (done != STK_KERNEL)
			return (int)pl_ret(done);
	}
	int ret = PL_REAL(setsockopt)(fd, level, name, val, len);
	if (__builtin_expect(level == SOL_SOCKET && name == SO_ZEROCOPY, 0) && ret == 0 &&
	    val && len >= sizeof(int) && *(const int *)val != 0) {
		struct stk_sock *sock = pl_tracked(fd);
		if (sock)
			life_step(fd, sock, stk_sock_zerocopy);
	}
	return ret;
}

/* SO_ERROR of an accelerated socket is the connection's, reported once like
 * the kernel's (the kernel socket's own is taken too, so neither lingers). */
PL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int ret = PL_REAL(getsockopt)(fd, level, name, val, len);
	if (ret != 0 || level != SOL_SOCKET || name != SO_ERROR || *len < sizeof(int))
		return ret;
	struct stk_sock *sock = pl_tracked(fd);
	if (sock)
		*(int *)val = stk_sock_so_error(sock, *(int *)val);
	return ret;
}
