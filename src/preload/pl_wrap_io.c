/* Data wrappers: a kernel fd costs one lookup and goes to the real call; an
 * accelerated socket goes to the stack (stk_send/stk_recv and friends), whose
 * -errno results become errno here, once. */
#include "config.h"
#include "preload/pl_wrap.h"
#include "stack/stk_accel.h"
#include "stack/stk_lazy.h"
#include "stack/stk_log.h"
#include "stack/stk_stream.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/sendfile.h>

extern void __chk_fail(void) __attribute__((noreturn));

_Static_assert(sizeof(off_t) == sizeof(off64_t), "sendfile64 shares the off_t path");

static inline ssize_t pl_ret(ssize_t ret)
{
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* The kernel raises SIGPIPE on the sending thread unless MSG_NOSIGNAL. */
static ssize_t pl_send_ret(ssize_t ret, int flags)
{
	if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
		pthread_kill(pthread_self(), SIGPIPE);
	return pl_ret(ret);
}

/* The conn of sock is still negotiating (or settled on the kernel): let the
 * stack settle it for this call. Returns sock when the call goes to the fabric,
 * NULL when it goes to the kernel, NULL with *gate = -errno when it must fail. */
static struct stk_sock *settle(struct stk_sock *sock, bool for_write, int flags, ssize_t *gate)
{
	int saved_errno = errno;
	pl_enter();
	int phase = stk_accel_settle(sock, for_write, flags);
	pl_leave();
	errno = saved_errno;
	if (phase == STK_PHASE_FABRIC)
		return sock;
	if (phase < 0)
		*gate = phase;
	return NULL;
}

/* The accelerated socket behind fd for a receive or a send (flags: the call's),
 * or NULL for the kernel; *gate: an error to return instead of calling either. */
static inline struct stk_sock *accel_sock(int fd, bool for_write, int flags, ssize_t *gate)
{
	*gate = 0;
	struct stk_sock *sock = pl_tracked(fd);
	if (__builtin_expect(sock == NULL, 1) || !stk_accel_conn(sock))
		return NULL;
	if (__builtin_expect(stk_conn_on_fabric(sock->conn), 1))
		return sock;
	return settle(sock, for_write, flags, gate);
}

static inline struct stk_sock *rx_sock(int fd, int flags, ssize_t *gate)
{
	return accel_sock(fd, false, flags, gate);
}

static inline struct stk_sock *tx_sock(int fd, int flags, ssize_t *gate)
{
	return accel_sock(fd, true, flags, gate);
}

PL_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_ret(stk_recv(sock->conn, buf, len, 0));
	return PL_REAL(read)(fd, buf, len);
}

PL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock) {
		if (len > buflen)
			__chk_fail();
		return pl_ret(stk_recv(sock->conn, buf, len, 0));
	}
	return PL_REAL(__read_chk)(fd, buf, len, buflen);
}

PL_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_ret(stk_recv(sock->conn, buf, len, flags));
	return PL_REAL(recv)(fd, buf, len, flags);
}

PL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock) {
		if (len > buflen)
			__chk_fail();
		return pl_ret(stk_recv(sock->conn, buf, len, flags));
	}
	return PL_REAL(__recv_chk)(fd, buf, len, buflen, flags);
}

/* A connected TCP socket reports no source address (length 0), as the kernel. */
static ssize_t recvfrom_accel(struct stk_sock *sock, void *buf, size_t len, int flags,
			      socklen_t *alen)
{
	ssize_t ret = stk_recv(sock->conn, buf, len, flags);
	if (ret >= 0 && alen)
		*alen = 0;
	return pl_ret(ret);
}

PL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			   socklen_t *alen)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return recvfrom_accel(sock, buf, len, flags, PL_SA(addr) ? alen : NULL);
	return PL_REAL(recvfrom)(fd, buf, len, flags, addr, alen);
}

PL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				 __SOCKADDR_ARG addr, socklen_t *alen)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock) {
		if (len > buflen)
			__chk_fail();
		return recvfrom_accel(sock, buf, len, flags, PL_SA(addr) ? alen : NULL);
	}
	return PL_REAL(__recvfrom_chk)(fd, buf, len, buflen, flags, addr, alen);
}

PL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_ret(stk_accel_recvv(sock, iov, iovcnt, 0));
	return PL_REAL(readv)(fd, iov, iovcnt);
}

static ssize_t recvmsg_accel(struct stk_sock *sock, struct msghdr *msg, int flags)
{
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE; /* as the kernel's recvmsg (readv: EINVAL) */
	ssize_t ret = stk_accel_recvv(sock, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (ret >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = flags & MSG_OOB; /* as Linux marks an urgent byte */
	}
	return ret;
}

PL_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (__builtin_expect(flags & MSG_ERRQUEUE, 0)) /* always the kernel socket's */
		return PL_REAL(recvmsg)(fd, msg, flags);
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_ret(recvmsg_accel(sock, msg, flags));
	return PL_REAL(recvmsg)(fd, msg, flags);
}

/* On a stream, each message takes what is there; only the first may wait. The
 * timeout argument is not applied to accelerated sockets. */
PL_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
		       struct timespec *timeout)
{
	ssize_t gate;
	struct stk_sock *sock = rx_sock(fd, flags, &gate);
	if (gate)
		return (int)pl_ret(gate);
	if (!sock)
		return PL_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	unsigned int done = 0;
	for (; done < vlen; done++) {
		int f = flags & ~MSG_WAITFORONE;
		if (done && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		ssize_t ret = recvmsg_accel(sock, &vec[done].msg_hdr, f);
		if (ret <= 0) {
			if (done == 0 && ret < 0)
				return (int)pl_ret(ret);
			if (ret == 0 && done == 0)
				vec[done++].msg_len = 0;
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
	}
	return (int)done;
}

PL_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(stk_send(sock->conn, buf, len, 0), 0);
	return PL_REAL(write)(fd, buf, len);
}

PL_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(stk_send(sock->conn, buf, len, flags), flags);
	return PL_REAL(send)(fd, buf, len, flags);
}

PL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(stk_accel_sendv(sock, iov, iovcnt, 0), 0);
	return PL_REAL(writev)(fd, iov, iovcnt);
}

/* preadv2/pwritev2 with offset -1 are readv/writev with per-call flags; any
 * other offset is the kernel's business (ESPIPE or EINVAL on a socket, as
 * preadv/pwritev/pread/pwrite, which therefore need no wrapper). The flags the
 * kernel accepts on a socket: RWF_NOWAIT is MSG_DONTWAIT, the others change
 * nothing; unknown bits are EOPNOTSUPP. */
#define PL_RWF_KNOWN (RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT | RWF_APPEND)

static inline int rwf_msg_flags(int rwf)
{
	return (rwf & RWF_NOWAIT) ? MSG_DONTWAIT : 0;
}

static ssize_t preadv2_accel(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int rwf)
{
	if (rwf & ~PL_RWF_KNOWN)
		return -EOPNOTSUPP;
	return stk_accel_recvv(sock, iov, iovcnt, rwf_msg_flags(rwf));
}

static ssize_t pwritev2_accel(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int rwf)
{
	if (rwf & ~PL_RWF_KNOWN)
		return -EOPNOTSUPP;
	return stk_accel_sendv(sock, iov, iovcnt, rwf_msg_flags(rwf));
}

/* preadv2/pwritev2 and their 64-bit twins: offset -1 on an accelerated
 * socket is readv/writev; any other offset is the kernel's answer. */
#define PL_RWV2_WRAPPER(name, off_type, pick, accel_ret) \
	PL_EXPORT ssize_t name(int fd, const struct iovec *iov, int iovcnt, off_type offset, \
			       int rwf) \
	{ \
		ssize_t gate = 0; \
		struct stk_sock *sock = offset == -1 ? pick(fd, rwf_msg_flags(rwf), &gate) : NULL; \
		if (sock) \
			return accel_ret; \
		if (offset == -1 && gate) \
			return pl_ret(gate); \
		return PL_REAL(name)(fd, iov, iovcnt, offset, rwf); \
	}
PL_RWV2_WRAPPER(preadv2, off_t, rx_sock, pl_ret(preadv2_accel(sock, iov, iovcnt, rwf)))
PL_RWV2_WRAPPER(preadv64v2, off64_t, rx_sock, pl_ret(preadv2_accel(sock, iov, iovcnt, rwf)))
PL_RWV2_WRAPPER(pwritev2, off_t, tx_sock,
		pl_send_ret(pwritev2_accel(sock, iov, iovcnt, rwf), 0))
PL_RWV2_WRAPPER(pwritev64v2, off64_t, tx_sock,
		pl_send_ret(pwritev2_accel(sock, iov, iovcnt, rwf), 0))

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
			if (sock && sock->conn) {
				pl_enter();
				stk_accel_refuse(sock); /* still negotiating: the kernel */
				pl_leave();
			}
			if (!sock || !sock->conn ||
			    __atomic_load_n(&sock->conn->migrated, __ATOMIC_ACQUIRE))
				continue;
			pl_enter();
			stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_PASS);
			pl_leave();
		}
	}
	errno = saved_errno;
}

/* A message's iovec on an accelerated socket (writev's count errors are
 * EINVAL, sendmsg's EMSGSIZE, as the kernel's). */
static ssize_t sendmsg_accel(struct stk_sock *sock, const struct msghdr *msg, int flags)
{
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	return stk_accel_sendv(sock, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

/* sendto/sendmsg/sendmmsg also decide udp_sender for undecided sockets. */
PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock) /* a connected stream ignores the address, as TCP does */
		return pl_send_ret(stk_send(sock->conn, buf, len, flags), flags);
	pl_decide_sender(fd, PL_SA(addr), alen);
	return PL_REAL(sendto)(fd, buf, len, flags, addr, alen);
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, flags, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(sendmsg_accel(sock, msg, flags), flags);
	if (msg)
		pl_decide_sender(fd, msg->msg_name, msg->msg_namelen);
	pass_rights(msg);
	return PL_REAL(sendmsg)(fd, msg, flags);
}

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(fd, flags, &gate);
	if (gate)
		return (int)pl_ret(gate);
	if (!sock) {
		if (vec && vlen > 0)
			pl_decide_sender(fd, vec[0].msg_hdr.msg_name, vec[0].msg_hdr.msg_namelen);
		for (unsigned int i = 0; vec && i < vlen; i++)
			pass_rights(&vec[i].msg_hdr);
		return PL_REAL(sendmmsg)(fd, vec, vlen, flags);
	}
	unsigned int done = 0;
	for (; done < vlen; done++) {
		ssize_t ret = sendmsg_accel(sock, &vec[done].msg_hdr, flags);
		if (ret < 0) {
			if (done == 0)
				return (int)pl_send_ret(ret, flags);
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
	}
	return (int)done;
}

PL_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(out_fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(stk_accel_sendfile(sock, in_fd, offset, count), 0);
	return PL_REAL(sendfile)(out_fd, in_fd, offset, count);
}

PL_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	ssize_t gate;
	struct stk_sock *sock = tx_sock(out_fd, 0, &gate);
	if (gate)
		return pl_ret(gate);
	if (sock)
		return pl_send_ret(stk_accel_sendfile(sock, in_fd, (off_t *)offset, count), 0);
	return PL_REAL(sendfile64)(out_fd, in_fd, offset, count);
}

PL_EXPORT int shutdown(int fd, int how)
{
	ssize_t gate; /* a failed settle leaves it to the kernel */
	struct stk_sock *sock = tx_sock(fd, 0, &gate);
	if (sock)
		return (int)pl_ret(stk_accel_shutdown(sock, how));
	return PL_REAL(shutdown)(fd, how);
}
