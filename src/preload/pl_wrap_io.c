/* Data wrappers: a kernel fd costs one lookup and goes to the real call; a
 * tracked socket makes one call into the stack (stk.h), which carries it or
 * answers STK_KERNEL (then the real call runs); -errno results become errno
 * here, once. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/sendfile.h>

extern void __chk_fail(void) __attribute__((noreturn));

_Static_assert(sizeof(off_t) == sizeof(off64_t), "sendfile64 shares the off_t path");

/* The kernel raises SIGPIPE on the sending thread unless MSG_NOSIGNAL. */
static ssize_t pl_send_ret(ssize_t ret, int flags)
{
	if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	return pl_ret(ret);
}

/* A fortified call on a tracked socket checks its buffer as glibc's does. */
static inline void chk_len(size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
}

PL_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, 0, NULL, NULL);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(read)(fd, buf, len);
}

PL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		chk_len(len, buflen);
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, 0, NULL, NULL);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(__read_chk)(fd, buf, len, buflen);
}

PL_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, flags, NULL, NULL);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(recv)(fd, buf, len, flags);
}

PL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		chk_len(len, buflen);
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, flags, NULL, NULL);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(__recv_chk)(fd, buf, len, buflen, flags);
}

PL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			   socklen_t *alen)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, flags, PL_SA(addr), alen);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(recvfrom)(fd, buf, len, flags, addr, alen);
}

PL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				 __SOCKADDR_ARG addr, socklen_t *alen)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		chk_len(len, buflen);
		ssize_t ret = stk_sock_recvfrom(sock, buf, len, flags, PL_SA(addr), alen);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(__recvfrom_chk)(fd, buf, len, buflen, flags, addr, alen);
}

PL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_recvv(sock, iov, iovcnt, 0);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(readv)(fd, iov, iovcnt);
}

PL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_recvmsg(sock, msg, flags);
		if (ret != STK_KERNEL)
			return pl_ret(ret);
	}
	return PL_REAL(recvmsg)(fd, msg, flags);
}

PL_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		       struct timespec *timeout)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		int ret = stk_sock_recvmmsg(sock, vec, vlen, flags, timeout);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return PL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
}

PL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_sendto(sock, buf, len, 0, NULL, 0);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, 0);
	}
	return PL_REAL(write)(fd, buf, len);
}

PL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_sendto(sock, buf, len, flags, NULL, 0);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, flags);
	}
	return PL_REAL(send)(fd, buf, len, flags);
}

PL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock != NULL, 0)) {
		ssize_t ret = stk_sock_sendv(sock, iov, iovcnt, 0);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, 0);
	}
	return PL_REAL(writev)(fd, iov, iovcnt);
}

/* preadv2/pwritev2 with offset -1 are readv/writev with per-call flags; any
 * other offset is the kernel's business (ESPIPE or EINVAL on a socket, as
 * preadv/pwritev/pread/pwrite, which therefore need no wrapper). The flags the
 * kernel accepts on a socket: RWF_NOWAIT is MSG_DONTWAIT, the others change
 * nothing; unknown bits are the kernel's to refuse (EOPNOTSUPP). */
#define PL_RWF_KNOWN (RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND)

static inline struct stk_sock *rwv2_sock(int fd, long long offset, int rwf)
{
	return offset == -1 && !(rwf & ~PL_RWF_KNOWN) ? pl_tracked(fd) : NULL;
}

static inline int rwf_msg_flags(int rwf)
{
	return (rwf & RWF_NOWAIT) ? MSG_DONTWAIT : 0;
}

static inline ssize_t pwritev2_ret(ssize_t ret)
{
	return pl_send_ret(ret, 0);
}

#define PL_RWV2_WRAPPER(name, off_type, stack_call, ret_of) \
	PL_EXPORT ssize_t name(int fd, const struct iovec *iov, int iovcnt, off_type offset, \
			       int rwf) \
	{ \
		struct stk_sock *sock = rwv2_sock(fd, offset, rwf); \
		if (sock) { \
			ssize_t ret = stack_call(sock, iov, iovcnt, rwf_msg_flags(rwf)); \
			if (ret != STK_KERNEL) \
				return ret_of(ret); \
		} \
		return PL_REAL(name)(fd, iov, iovcnt, offset, rwf); \
	}
PL_RWV2_WRAPPER(preadv2, off_t, stk_sock_recvv, pl_ret)
PL_RWV2_WRAPPER(preadv64v2, off64_t, stk_sock_recvv, pl_ret)
PL_RWV2_WRAPPER(pwritev2, off_t, stk_sock_sendv, pwritev2_ret)
PL_RWV2_WRAPPER(pwritev64v2, off64_t, stk_sock_sendv, pwritev2_ret)

/* SCM_RIGHTS: an accelerated socket handed to another process (or back to us
 * under another number) must be a kernel socket that carries its stream. The
 * connections move before the real sendmsg; the check costs nothing when the
 * message has no control data or nothing is accelerated. */
static void pass_rights(const struct msghdr *msg)
{
	if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(struct cmsghdr) ||
	    !pl_enabled || pl_guarded())
		return;
	int saved_errno = errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
	     c = CMSG_NXTHDR((struct msghdr *)msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
			if (!sock)
				continue;
			pl_enter();
			stk_sock_leave(sock, STK_LEAVE_PASS);
			pl_leave();
		}
	}
	errno = saved_errno;
}

/* sendto/sendmsg/sendmmsg also decide udp_sender for undecided sockets. */
PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		ssize_t ret = stk_sock_sendto(sock, buf, len, flags, PL_SA(addr), alen);
		if (ret == STK_KERNEL && pl_decide_sender(fd, sock, PL_SA(addr), alen))
			ret = stk_sock_sendto(sock, buf, len, flags, PL_SA(addr), alen);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, flags);
	}
	return PL_REAL(sendto)(fd, buf, len, flags, addr, alen);
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		ssize_t ret = stk_sock_sendmsg(sock, msg, flags);
		if (ret == STK_KERNEL && msg &&
		    pl_decide_sender(fd, sock, msg->msg_name, msg->msg_namelen))
			ret = stk_sock_sendmsg(sock, msg, flags);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, flags);
	}
	pass_rights(msg);
	return PL_REAL(sendmsg)(fd, msg, flags);
}

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		int ret = stk_sock_sendmmsg(sock, vec, vlen, flags);
		if (ret == STK_KERNEL && vec && vlen > 0 &&
		    pl_decide_sender(fd, sock, vec[0].msg_hdr.msg_name,
				     vec[0].msg_hdr.msg_namelen))
			ret = stk_sock_sendmmsg(sock, vec, vlen, flags);
		if (ret != STK_KERNEL)
			return (int)pl_send_ret(ret, flags);
	}
	for (unsigned int i = 0; vec && i < vlen; i++)
		pass_rights(&vec[i].msg_hdr);
	return PL_REAL(sendmmsg)(fd, vec, vlen, flags);
}

PL_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct stk_sock *sock = pl_tracked(out_fd);
	if (sock) {
		ssize_t ret = stk_sock_sendfile(sock, in_fd, offset, count);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, 0);
	}
	return PL_REAL(sendfile)(out_fd, in_fd, offset, count);
}

PL_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	struct stk_sock *sock = pl_tracked(out_fd);
	if (sock) {
		ssize_t ret = stk_sock_sendfile(sock, in_fd, (off_t *)offset, count);
		if (ret != STK_KERNEL)
			return pl_send_ret(ret, 0);
	}
	return PL_REAL(sendfile64)(out_fd, in_fd, offset, count);
}

PL_EXPORT int shutdown(int fd, int how)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		int ret = stk_sock_shutdown(sock, how);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return PL_REAL(shutdown)(fd, how);
}
