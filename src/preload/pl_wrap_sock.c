/* Socket lifecycle wrappers: creation, naming, connection. They keep the fd table
 * in step and take the accelerate-or-kernel decision once a socket's role is
 * known; the calls themselves always reach the kernel socket. */
#include "config.h"
#include "preload/pl_wrap.h"
#include "stack/stk_sock.h"

#include <errno.h>

void pl_decide(int fd, struct stk_sock *sock, enum stk_role role,
	       const struct sockaddr *local, const struct sockaddr *remote)
{
	int saved_errno = errno;
	pl_enter();
	if (!stk_sock_decide(sock, fd, role, local, remote)) {
		struct stk_sock *old = pl_fdtab_take(&pl_fdtab, fd);
		if (old)
			stk_sock_unref(old);
	}
	pl_leave();
	errno = saved_errno;
}

void pl_decide_local(int fd, struct stk_sock *sock, enum stk_role role)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	int saved_errno = errno;
	bool known = PL_REAL(getsockname)(fd, (struct sockaddr *)&local, &len) == 0;
	errno = saved_errno;
	pl_decide(fd, sock, role, known ? (struct sockaddr *)&local : NULL, NULL);
}

void pl_forget_stale(int fd)
{
	if (__builtin_expect(pl_fdtab_get(&pl_fdtab, fd) == NULL, 1))
		return;
	int saved_errno = errno;
	pl_fdtab_set(&pl_fdtab, fd, NULL);
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

PL_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int ret = PL_REAL(bind)(fd, addr, len);
	struct stk_sock *sock;
	if (ret == 0 && (sock = pl_undecided(fd)) && sock->kind == STK_SOCK_UDP)
		pl_decide_local(fd, sock, STK_ROLE_UDP_RECEIVER);
	return ret;
}

PL_EXPORT int listen(int fd, int backlog)
{
	int ret = PL_REAL(listen)(fd, backlog);
	struct stk_sock *sock;
	if (ret == 0 && (sock = pl_undecided(fd)) && sock->kind == STK_SOCK_TCP)
		pl_decide_local(fd, sock, STK_ROLE_TCP_SERVER);
	return ret;
}

PL_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	int newfd = PL_REAL(accept)(fd, addr, len);
	if (newfd >= 0)
		pl_forget_stale(newfd);
	return newfd;
}

PL_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	int newfd = PL_REAL(accept4)(fd, addr, len, flags);
	if (newfd >= 0)
		pl_forget_stale(newfd);
	return newfd;
}

PL_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct stk_sock *sock = pl_undecided(fd);
	const struct sockaddr *remote = PL_SA(addr);
	if (sock && remote && len >= sizeof(sa_family_t) &&
	    (remote->sa_family == AF_INET || remote->sa_family == AF_INET6))
		pl_decide(fd, sock,
			  sock->kind == STK_SOCK_TCP ? STK_ROLE_TCP_CLIENT : STK_ROLE_UDP_CONNECT,
			  NULL, remote);
	return PL_REAL(connect)(fd, addr, len);
}

/* A UDP socket's first datagram to an explicit destination decides udp_sender. */
static void decide_sender(int fd, const void *dest, socklen_t dest_len)
{
	struct stk_sock *sock = pl_undecided(fd);
	const struct sockaddr *remote = dest;
	if (sock && sock->kind == STK_SOCK_UDP && remote && dest_len >= sizeof(sa_family_t) &&
	    (remote->sa_family == AF_INET || remote->sa_family == AF_INET6))
		pl_decide(fd, sock, STK_ROLE_UDP_SENDER, NULL, remote);
}

PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	decide_sender(fd, PL_SA(addr), alen);
	return PL_REAL(sendto)(fd, buf, len, flags, addr, alen);
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (msg)
		decide_sender(fd, msg->msg_name, msg->msg_namelen);
	return PL_REAL(sendmsg)(fd, msg, flags);
}

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	if (vec && vlen > 0)
		decide_sender(fd, vec[0].msg_hdr.msg_name, vec[0].msg_hdr.msg_namelen);
	return PL_REAL(sendmmsg)(fd, vec, vlen, flags);
}
