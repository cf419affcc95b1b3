/* The TCP stream's socket operations (struct stk_sock_ops, stk_sock.h): every
 * call first finds out who carries it (tcp_gate: the stream on the fabric, a
 * negotiation settled now, or the kernel), then runs on the connection. */
#include "config.h"
#include "stack/stk_accel.h"
#include "stack/stk_hooks.h"
#include "stack/stk_ready.h"
#include "stack/stk_wait.h"
#include "stack/stk_sock.h"
#include "stack/stk_stream.h"

#include <errno.h>
#include <limits.h>
#include <sys/ioctl.h>

/* A negotiating connection settles for this call (stk_accel_settle), inside
 * the guard: its libfabric and kernel calls must not reach the wrappers. */
static int tcp_settle(struct stk_sock *sock, bool for_write, int flags)
{
	int saved_errno = errno;
	stk_fi_enter();
	int phase = stk_accel_settle(sock, for_write, flags);
	stk_fi_leave();
	errno = saved_errno;
	if (phase == STK_PHASE_FABRIC)
		return 0;
	return phase < 0 ? phase : STK_KERNEL;
}

/* 0 when the stream carries a receive or send (flags: the call's), STK_KERNEL
 * when the kernel does, -errno when the call must fail. */
static inline int tcp_gate(struct stk_sock *sock, bool for_write, int flags)
{
	struct stk_conn *conn = stk_accel_conn(sock);
	if (__builtin_expect(conn == NULL, 0))
		return STK_KERNEL;
	if (__builtin_expect(stk_conn_on_fabric(conn), 1))
		return 0;
	return tcp_settle(sock, for_write, flags);
}

/* A connected TCP socket reports no source address (length 0), as the kernel. */
static ssize_t tcp_recvfrom(struct stk_sock *sock, void *buf, size_t len, int flags,
			    struct sockaddr *addr, socklen_t *alen)
{
	int gate = tcp_gate(sock, false, flags);
	if (gate)
		return gate;
	ssize_t ret = stk_recv(sock->conn, buf, len, flags);
	if (ret >= 0 && addr && alen)
		*alen = 0;
	return ret;
}

/* A connected stream ignores the address, as TCP does. */
static ssize_t tcp_sendto(struct stk_sock *sock, const void *buf, size_t len, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	(void)addr;
	(void)alen;
	int gate = tcp_gate(sock, true, flags);
	if (gate)
		return gate;
	return stk_send(sock->conn, buf, len, flags);
}

static ssize_t tcp_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	int gate = tcp_gate(sock, false, flags);
	if (gate)
		return gate;
	return stk_accel_recvv(sock, iov, iovcnt, flags);
}

static ssize_t tcp_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	int gate = tcp_gate(sock, true, flags);
	if (gate)
		return gate;
	return stk_accel_sendv(sock, iov, iovcnt, flags);
}

static ssize_t recvmsg_stream(struct stk_sock *sock, struct msghdr *msg, int flags)
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

/* writev's count errors are EINVAL, sendmsg's EMSGSIZE, as the kernel's. */
static ssize_t sendmsg_stream(struct stk_sock *sock, const struct msghdr *msg, int flags)
{
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	return stk_accel_sendv(sock, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static ssize_t tcp_recvmsg(struct stk_sock *sock, struct msghdr *msg, int flags)
{
	if (__builtin_expect(flags & MSG_ERRQUEUE, 0)) /* always the kernel socket's */
		return STK_KERNEL;
	int gate = tcp_gate(sock, false, flags);
	if (gate)
		return gate;
	return recvmsg_stream(sock, msg, flags);
}

static ssize_t tcp_sendmsg(struct stk_sock *sock, const struct msghdr *msg, int flags)
{
	int gate = tcp_gate(sock, true, flags);
	if (gate)
		return gate;
	return sendmsg_stream(sock, msg, flags);
}

/* On a stream, each message takes what is there; only the first may wait. The
 * timeout argument is not applied. */
static int tcp_recvmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *timeout)
{
	(void)timeout;
	int gate = tcp_gate(sock, false, flags);
	if (gate)
		return gate;
	unsigned int done = 0;
	for (; done < vlen; done++) {
		int f = flags & ~MSG_WAITFORONE;
		if (done && (flags & MSG_WAITFORONE))
			f |= MSG_DONTWAIT;
		ssize_t ret = recvmsg_stream(sock, &vec[done].msg_hdr, f);
		if (ret <= 0) {
			if (done == 0 && ret < 0)
				return (int)ret;
			if (ret == 0 && done == 0)
				vec[done++].msg_len = 0;
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
	}
	return (int)done;
}

static int tcp_sendmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	int gate = tcp_gate(sock, true, flags);
	if (gate)
		return gate;
	unsigned int done = 0;
	for (; done < vlen; done++) {
		ssize_t ret = sendmsg_stream(sock, &vec[done].msg_hdr, flags);
		if (ret < 0) {
			if (done == 0)
				return (int)ret;
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
	}
	return (int)done;
}

static ssize_t tcp_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count)
{
	int gate = tcp_gate(sock, true, 0);
	if (gate)
		return gate;
	if (stk_accel_sendfile_to_kernel(sock, count))
		return STK_KERNEL; /* the kernel's sendfile, on the migrated socket */
	return stk_accel_sendfile(sock, in_fd, offset, count);
}

/* A failed settle leaves shutdown to the kernel. */
static int tcp_shutdown(struct stk_sock *sock, int how)
{
	if (tcp_gate(sock, true, 0) != 0)
		return STK_KERNEL;
	return stk_accel_shutdown(sock, how);
}

/* FIONREAD and SIOCATMARK: a connection still negotiating settles without
 * waiting; negotiation bytes are not the app's, nor a mark (0). */
static int tcp_ioctl(struct stk_sock *sock, unsigned long request, void *arg)
{
	if (!sock->conn)
		return STK_KERNEL;
	if (request == FIONREAD || request == SIOCATMARK) {
		if (stk_wait_bad_user_range(arg, sizeof(int)))
			return -EFAULT; /* as the kernel, not a SIGSEGV */
		int saved_errno = errno;
		stk_fi_enter();
		int phase = stk_conn_on_fabric(sock->conn)
				    ? STK_PHASE_FABRIC
				    : stk_accel_settle(sock, false, MSG_DONTWAIT);
		if (phase == STK_PHASE_FABRIC)
			*(int *)arg = request == FIONREAD ? stk_accel_readable(sock)
							  : stk_accel_atmark(sock);
		stk_fi_leave();
		errno = saved_errno;
		if (phase != STK_PHASE_KERNEL) {
			if (phase != STK_PHASE_FABRIC)
				*(int *)arg = 0;
			return 0;
		}
	}
	if (request == FIONBIO && arg) /* and the kernel fd's flag */
		stk_accel_set_nonblock(sock, *(const int *)arg != 0);
	return STK_KERNEL;
}

static int tcp_so_error(struct stk_sock *sock, int kernel_err)
{
	if (!sock->conn)
		return kernel_err;
	int saved_errno = errno;
	stk_fi_enter();
	int err = stk_accel_so_error(sock, kernel_err);
	stk_fi_leave();
	errno = saved_errno;
	return err;
}

static void tcp_set_nonblock(struct stk_sock *sock, bool nonblock)
{
	if (sock->conn)
		stk_accel_set_nonblock(sock, nonblock);
}

const struct stk_sock_ops stk_tcp_ops = {
	.recvfrom = tcp_recvfrom,
	.sendto = tcp_sendto,
	.recvv = tcp_recvv,
	.sendv = tcp_sendv,
	.recvmsg = tcp_recvmsg,
	.sendmsg = tcp_sendmsg,
	.recvmmsg = tcp_recvmmsg,
	.sendmmsg = tcp_sendmmsg,
	.sendfile = tcp_sendfile,
	.shutdown = tcp_shutdown,
	.ioctl = tcp_ioctl,
	.so_error = tcp_so_error,
	.set_nonblock = tcp_set_nonblock,
};
