/* The receive side of an accelerated UDP socket (stk_udp.h): datagrams of the
 * dpdk port and of the kernel socket, in turn, and the blocking wait on both. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_hooks.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/ioctl.h>

#define UDP_SLEEP_SLICE_NS 1000000ull /* a sleep without the CQ's wait fd looks again this often */

unsigned stk_udp_rx_pending(struct stk_udp *udp, bool progress)
{
	unsigned n = __atomic_load_n(&udp->done, __ATOMIC_ACQUIRE) -
		     __atomic_load_n(&udp->head, __ATOMIC_RELAXED);
	struct stk_udp_fab *fab;
	if (n == 0 && progress && (fab = stk_udp_fab_current())) {
		stk_udp_fab_progress(fab);
		n = __atomic_load_n(&udp->done, __ATOMIC_ACQUIRE) -
		    __atomic_load_n(&udp->head, __ATOMIC_RELAXED);
	}
	return n;
}

/* rx_lock held: the slot at head is read (or dropped): post it again. */
static void slot_consumed(struct stk_udp *udp, struct stk_udp_slot *slot)
{
	__atomic_store_n(&udp->head, udp->head + 1, __ATOMIC_RELAXED);
	if (udp->ep) /* none: datagrams an exec handed down */
		stk_udp_fab_repost(udp, slot);
}

/* rx_lock held: the next datagram of the fabric that the socket accepts (a
 * connected socket takes its peer's only, as the kernel filters), or NULL. */
static struct stk_udp_slot *next_slot(struct stk_udp *udp)
{
	while (stk_udp_rx_pending(udp, true)) {
		struct stk_udp_slot *slot = &udp->slots[udp->head & (udp->nslots - 1)];
		uint64_t peer = __atomic_load_n(&udp->peer, __ATOMIC_ACQUIRE);
		if (slot->len != UINT32_MAX && (!peer || stk_udp_key(&slot->src) == peer))
			return slot;
		slot_consumed(udp, slot);
	}
	return NULL;
}

static size_t copy_out(const struct msghdr *msg, const uint8_t *data, size_t len)
{
	size_t done = 0;
	for (size_t i = 0; i < msg->msg_iovlen && done < len; i++) {
		size_t n = msg->msg_iov[i].iov_len < len - done ? msg->msg_iov[i].iov_len : len - done;
		memcpy(msg->msg_iov[i].iov_base, data + done, n);
		done += n;
	}
	return done;
}

/* rx_lock held: one datagram of the fabric into msg, as the kernel's recvmsg
 * fills it; -EAGAIN when none. */
static ssize_t take_fabric(struct stk_udp *udp, struct msghdr *msg, int flags)
{
	struct stk_udp_slot *slot = next_slot(udp);
	if (!slot)
		return -EAGAIN;
	size_t copied = copy_out(msg, slot->data, slot->len);
	if (msg->msg_name) {
		socklen_t n = msg->msg_namelen < sizeof(slot->src) ? msg->msg_namelen
								     : sizeof(slot->src);
		memcpy(msg->msg_name, &slot->src, n);
	}
	msg->msg_namelen = sizeof(slot->src);
	msg->msg_flags = copied < slot->len ? MSG_TRUNC : 0;
	stk_udp_cmsgs(udp, slot, msg);
	ssize_t ret = (flags & MSG_TRUNC) ? (ssize_t)slot->len : (ssize_t)copied;
	if (!(flags & MSG_PEEK))
		slot_consumed(udp, slot);
	return ret;
}

/* One datagram of the kernel socket, without waiting; -EAGAIN when none. */
static ssize_t take_kernel(struct stk_udp *udp, struct msghdr *msg, int flags)
{
	ssize_t ret = stk_sys.recvmsg(udp->kfd, msg, flags | MSG_DONTWAIT);
	if (ret < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (!(flags & MSG_PEEK))
		stk_count(STK_C_UDP_KERNEL_RX);
	return ret;
}

/* rx_lock held: does the next receive look at the kernel socket first? The
 * side a MSG_PEEK or FIONREAD looked at, so that the next receive takes the
 * datagram they saw; else the kernel's turn, every STK_UDP_KERNEL_EVERY-th. */
static bool kernel_first(const struct stk_udp *udp)
{
	if (udp->seen != STK_UDP_SEEN_NONE)
		return udp->seen == STK_UDP_SEEN_KERNEL;
	return (udp->rx_turn + 1) % STK_UDP_KERNEL_EVERY == 0;
}

/* One datagram from either side, without waiting (kernel_first). */
static ssize_t take_one(struct stk_udp *udp, struct msghdr *msg, int flags)
{
	pthread_mutex_lock(&udp->rx_lock);
	bool kfirst = kernel_first(udp), from_kernel = kfirst;
	ssize_t ret = kfirst ? take_kernel(udp, msg, flags) : -EAGAIN;
	if (ret == -EAGAIN) {
		ret = take_fabric(udp, msg, flags);
		from_kernel = false;
	}
	if (ret == -EAGAIN && !kfirst) {
		ret = take_kernel(udp, msg, flags);
		from_kernel = true;
	}
	if (ret >= 0 && (flags & MSG_PEEK)) {
		udp->seen = from_kernel ? STK_UDP_SEEN_KERNEL : STK_UDP_SEEN_FABRIC;
	} else if (ret >= 0) {
		udp->seen = STK_UDP_SEEN_NONE;
		udp->rx_turn++;
	}
	pthread_mutex_unlock(&udp->rx_lock);
	return ret;
}

/* SO_RCVTIMEO of the kernel socket as a deadline. */
static uint64_t rcv_deadline(struct stk_udp *udp)
{
	struct timeval tv = { 0 };
	socklen_t len = sizeof(tv);
	if (stk_sys.getsockopt(udp->kfd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) != 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return STK_WAIT_NEVER;
	return stk_now_ns() + (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000u;
}

/* Wait until the fabric or the kernel socket may have a datagram: 0 (look
 * again), -EAGAIN (deadline passed), -EINTR (a signal). Spins stk_cfg.spin_us
 * first, then sleeps on the kernel socket and the completion queue's wait fd. */
static int rx_wait(struct stk_udp *udp, uint64_t deadline)
{
	uint64_t now = stk_now_ns();
	uint64_t spin_end = now + (uint64_t)stk_cfg.spin_us * 1000u;
	while (now < spin_end && now < deadline) {
		if (stk_udp_rx_pending(udp, true))
			return 0;
		stk_wait_cpu_relax();
		now = stk_now_ns();
	}
	if (now >= deadline)
		return -EAGAIN;
	struct pollfd pfd[2] = { { .fd = udp->kfd, .events = POLLIN } };
	nfds_t n = 1;
	uint64_t slice = deadline - now;
	struct stk_udp_fab *fab = stk_udp_fab_current();
	if (fab && stk_udp_fab_wait_fd(fab) >= 0) {
		if (!stk_udp_fab_trywait(fab))
			return 0;
		stk_udp_fab_quiesce(fab);
		if (stk_udp_rx_pending(udp, false))
			return 0;
		pfd[n++] = (struct pollfd){ .fd = stk_udp_fab_wait_fd(fab), .events = POLLIN };
	} else if (slice > UDP_SLEEP_SLICE_NS) {
		slice = UDP_SLEEP_SLICE_NS; /* no wait fd: look again after a while */
	}
	struct timespec ts = { .tv_sec = (time_t)(slice / 1000000000ull),
			       .tv_nsec = (long)(slice % 1000000000ull) };
	int ret = stk_wait_sys_ppoll(pfd, n, deadline == STK_WAIT_NEVER && n == 2 ? NULL : &ts,
				     NULL);
	return ret == -EINTR ? -EINTR : 0;
}

ssize_t stk_udp_recvmsg(struct stk_sock *sock, struct msghdr *msg, int flags)
{
	struct stk_udp *udp = sock->udp;
	if (flags & (MSG_ERRQUEUE | MSG_OOB))
		return STK_KERNEL;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	bool dontwait = (flags & MSG_DONTWAIT) || __atomic_load_n(&udp->nonblock, __ATOMIC_RELAXED);
	int saved_errno = errno;
	uint64_t deadline = 0;
	ssize_t ret;
	stk_fi_enter();
	for (;;) {
		ret = take_one(udp, msg, flags & ~MSG_DONTWAIT);
		if (ret != -EAGAIN || dontwait)
			break;
		if (!deadline) {
			/* a close of the fd by another thread must not free the
			 * socket under this wait (the kernel's stays alive too) */
			stk_sock_ref(sock);
			deadline = rcv_deadline(udp);
		}
		ret = rx_wait(udp, deadline);
		if (ret)
			break;
	}
	if (deadline)
		stk_sock_unref(sock);
	stk_fi_leave();
	errno = saved_errno;
	return ret;
}

ssize_t stk_udp_recvfrom(struct stk_sock *sock, void *buf, size_t len, int flags,
			 struct sockaddr *addr, socklen_t *alen)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (addr && alen) {
		msg.msg_name = addr;
		msg.msg_namelen = *alen;
	}
	ssize_t ret = stk_udp_recvmsg(sock, &msg, flags);
	if (ret >= 0 && addr && alen)
		*alen = msg.msg_namelen;
	return ret;
}

ssize_t stk_udp_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	return stk_udp_recvmsg(sock, &msg, flags);
}

/* As the kernel: the first datagram may wait (not with MSG_DONTWAIT), the
 * next ones wait too unless MSG_WAITFORONE; the timeout is looked at after
 * each datagram. */
int stk_udp_recvmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
		     struct timespec *timeout)
{
	uint64_t deadline = timeout ? stk_wait_deadline_ts(timeout) : STK_WAIT_NEVER;
	if (vlen > UIO_MAXIOV)
		vlen = UIO_MAXIOV;
	unsigned int done = 0;
	int f = flags & ~MSG_WAITFORONE;
	for (; done < vlen; done++) {
		ssize_t ret = stk_udp_recvmsg(sock, &vec[done].msg_hdr, f);
		if (ret < 0) {
			if (done == 0)
				return (int)ret;
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
		if (flags & MSG_WAITFORONE)
			f |= MSG_DONTWAIT;
		if (timeout && stk_now_ns() >= deadline) {
			done++;
			break;
		}
	}
	return (int)done;
}

/* rx_lock held: the length of the kernel socket's next datagram, or -1. */
static int kernel_next_len(struct stk_udp *udp)
{
	char byte;
	ssize_t n = stk_sys.recv(udp->kfd, &byte, 1, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	return n < 0 ? -1 : (int)n;
}

int stk_udp_next_len(struct stk_udp *udp)
{
	pthread_mutex_lock(&udp->rx_lock);
	bool kfirst = kernel_first(udp);
	int len = kfirst ? kernel_next_len(udp) : -1;
	enum stk_udp_seen seen = STK_UDP_SEEN_KERNEL;
	if (len < 0) {
		struct stk_udp_slot *slot = next_slot(udp);
		len = slot ? (int)slot->len : -1;
		seen = STK_UDP_SEEN_FABRIC;
	}
	if (len < 0 && !kfirst) {
		len = kernel_next_len(udp);
		seen = STK_UDP_SEEN_KERNEL;
	}
	if (len >= 0)
		udp->seen = seen;
	pthread_mutex_unlock(&udp->rx_lock);
	return len < 0 ? 0 : len;
}
