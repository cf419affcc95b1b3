/* An accelerated UDP socket (stk_udp.h): attaching it to the dpdk port, its
 * peer, its close, and the send side of its operations. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"
#include "stack/stk_wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define UDP_DGRAM_MAX 65507u /* the largest IPv4 UDP payload */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stk_udp *registry; /* protected by registry_lock */

static void registry_add(struct stk_udp *udp)
{
	pthread_mutex_lock(&registry_lock);
	udp->next = registry;
	if (registry)
		registry->prev = udp;
	registry = udp;
	pthread_mutex_unlock(&registry_lock);
}

static void registry_del(struct stk_udp *udp)
{
	pthread_mutex_lock(&registry_lock);
	if (udp->prev)
		udp->prev->next = udp->next;
	else
		registry = udp->next;
	if (udp->next)
		udp->next->prev = udp->prev;
	pthread_mutex_unlock(&registry_lock);
}

/* "dpdk" is one of the configured providers and a port is configured
 * (FI_DPDK_DEVICE, or FI_DPDK_POOL through Open vSwitch): without one, UDP
 * sockets never load libfabric. */
static bool dpdk_listed(void)
{
	if (!getenv("FI_DPDK_DEVICE") && !getenv("FI_DPDK_POOL"))
		return false;
	const char *p = stk_cfg.providers;
	size_t n = strlen("dpdk");
	while (p && *p) {
		if (strncmp(p, "dpdk", n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return false;
}

/* The kernel socket's local address, bound to a port first when it has none
 * (as the kernel's own connect or sendto would). 0 or -errno. */
static int local_port(int fd, struct sockaddr_in *local)
{
	socklen_t len = sizeof(*local);
	if (stk_sys.getsockname(fd, (struct sockaddr *)local, &len) != 0)
		return -errno;
	if (local->sin_family != AF_INET)
		return -EAFNOSUPPORT;
	if (local->sin_port != 0)
		return 0;
	struct sockaddr_in any = { .sin_family = AF_INET };
	if (stk_sys.bind(fd, (struct sockaddr *)&any, sizeof(any)) != 0)
		return -errno;
	len = sizeof(*local);
	return stk_sys.getsockname(fd, (struct sockaddr *)local, &len) == 0 ? 0 : -errno;
}

void stk_udp_free(struct stk_udp *udp)
{
	if (udp->kfd >= 0)
		stk_sys.close(udp->kfd);
	pthread_mutex_destroy(&udp->rx_lock);
	free(udp->slots);
	free(udp->mem);
	free(udp);
}

/* One receive per KiB of the kernel socket's SO_RCVBUF (as the kernel
 * reports it, doubled), a power of 2 within the bounds and what the
 * endpoint can have posted (max). */
static unsigned slots_for(int fd, unsigned max)
{
	int rcvbuf = 0;
	socklen_t len = sizeof(rcvbuf);
	if (stk_sys.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) != 0)
		rcvbuf = 0;
	unsigned n = STK_UDP_SLOTS_MIN;
	while (n < STK_UDP_SLOTS_MAX && n * 2 <= max && n * 1024u < (unsigned)rcvbuf)
		n *= 2;
	return n;
}

struct stk_udp *stk_udp_alloc(size_t slot_size, unsigned nslots)
{
	struct stk_udp *udp = calloc(1, sizeof(*udp));
	if (!udp)
		return NULL;
	udp->kfd = -1;
	pthread_mutex_init(&udp->rx_lock, NULL);
	udp->slot_size = slot_size;
	udp->nslots = nslots;
	udp->slots = calloc(nslots, sizeof(*udp->slots));
	udp->mem = malloc(nslots * slot_size);
	if (!udp->slots || !udp->mem) {
		stk_udp_free(udp);
		return NULL;
	}
	for (unsigned i = 0; i < nslots; i++) {
		udp->slots[i].owner = udp;
		udp->slots[i].data = udp->mem + (size_t)i * slot_size;
	}
	return udp;
}

void stk_udp_carry(struct stk_sock *sock, struct stk_udp *udp, int fd)
{
	int fl = stk_sys.fcntl(fd, F_GETFL);
	udp->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	udp->sock = sock;
	registry_add(udp);
	sock->udp = udp;
	sock->ops = &stk_udp_ops;
	__atomic_fetch_add(&stk_accel_live, 1, __ATOMIC_RELAXED);
	stk_udp_ready_install();
}

/* NULL when attached, else why not. */
static const char *attach(struct stk_sock *sock, int fd)
{
	struct stk_udp_fab *fab;
	if (sock->domain != AF_INET)
		return "IPv6 UDP sockets are not accelerated";
	if (!dpdk_listed())
		return "UDP is accelerated on a dpdk port only (none configured)";
	if (stk_udp_fab_get(&fab) != 0)
		return "the dpdk port's raw UDP endpoint did not open";
	struct sockaddr_in local;
	int ret = local_port(fd, &local);
	if (ret)
		return "the kernel socket has no IPv4 port";
	uint32_t ip, mask;
	stk_udp_fab_subnet(fab, &ip, &mask);
	if (local.sin_addr.s_addr != INADDR_ANY && local.sin_addr.s_addr != ip &&
	    !IN_MULTICAST(ntohl(local.sin_addr.s_addr)))
		return "bound to an address that is not the dpdk port's";
	struct stk_udp *udp = stk_udp_alloc(stk_udp_fab_max_msg(fab), slots_for(fd, stk_udp_fab_rx_max(fab)));
	if (!udp)
		return "out of memory";
	udp->local = local;
	udp->local.sin_addr.s_addr = ip;
	stk_udp_opts_load(udp, fd);
	udp->kfd = stk_sys_dup_high(fd);
	if (udp->kfd < 0) {
		stk_udp_free(udp);
		return "no free fd for the kernel socket's duplicate";
	}
	ret = stk_udp_fab_open_ep(fab, udp);
	if (ret) {
		STK_INFO("fd %d: UDP port %u on the dpdk port: %s", fd, ntohs(local.sin_port),
			 strerror(ret < 0 ? -ret : ret));
		stk_udp_free(udp);
		return "the UDP port is taken on the dpdk port (one socket per port)";
	}
	stk_udp_carry(sock, udp, fd);
	stk_count(STK_C_ACCELERATED);
	stk_count(STK_C_UDP_ACCEL_DPDK);
	STK_DBG("fd %d: UDP port %u on the dpdk port", fd, ntohs(local.sin_port));
	return NULL;
}

int stk_udp_bind_port_ip(int fd, const struct sockaddr *addr, socklen_t len)
{
	const char *ip = getenv("FI_DPDK_IP");
	struct in_addr port_ip;
	char buf[INET_ADDRSTRLEN];
	size_t n = ip ? strcspn(ip, "/") : 0;
	if (!dpdk_listed() || !addr || len < sizeof(struct sockaddr_in) ||
	    addr->sa_family != AF_INET || n == 0 || n >= sizeof(buf))
		return -EADDRNOTAVAIL;
	memcpy(buf, ip, n);
	buf[n] = '\0';
	const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
	if (inet_pton(AF_INET, buf, &port_ip) != 1 || sin->sin_addr.s_addr != port_ip.s_addr)
		return -EADDRNOTAVAIL;
	int saved_errno = errno, on = 1, ret = 0;
	if (stk_sys.setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &on, sizeof(on)) != 0 ||
	    stk_sys.bind(fd, addr, len) != 0)
		ret = -errno;
	errno = saved_errno;
	return ret;
}

const char *stk_udp_accelerate(struct stk_sock *sock, int fd)
{
	int saved_errno = errno;
	const char *why = attach(sock, fd);
	errno = saved_errno;
	return why;
}

void stk_udp_connected(struct stk_sock *sock, int fd, int kernel_ret)
{
	struct stk_udp *udp = sock->udp;
	if (!udp || kernel_ret != 0)
		return;
	int saved_errno = errno;
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	uint64_t key = 0;
	if (stk_sys.getpeername(fd, (struct sockaddr *)&peer, &len) == 0 &&
	    peer.sin_family == AF_INET)
		key = stk_udp_key(&peer);
	__atomic_store_n(&udp->peer, key, __ATOMIC_RELEASE);
	errno = saved_errno;
}

void stk_udp_close(struct stk_sock *sock)
{
	struct stk_udp *udp = sock->udp;
	struct stk_udp_fab *fab = stk_udp_fab_current();
	if (!udp->orphan) {
		registry_del(udp);
		stk_udp_mc_leave_all(udp);
		if (fab)
			stk_udp_fab_close_ep(fab, udp);
		__atomic_fetch_sub(&stk_accel_live, 1, __ATOMIC_RELAXED);
	}
	stk_udp_ready_closed(udp);
	stk_udp_free(udp);
	sock->udp = NULL;
}

void stk_udp_atfork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
}

void stk_udp_atfork_parent(void)
{
	pthread_mutex_unlock(&registry_lock);
}

/* The parent's objects are the child's copies: each stays, orphaned, until
 * the child closes its socket (its endpoint and port are left alone). */
void stk_udp_atfork_child(void)
{
	pthread_mutex_init(&registry_lock, NULL);
	stk_udp_fab_atfork_child();
	struct stk_udp *next;
	for (struct stk_udp *udp = registry; udp; udp = next) {
		next = udp->next;
		udp->next = udp->prev = NULL;
		udp->orphan = true;
		udp->sock->ops = NULL;
		__atomic_store_n(&udp->head, udp->done, __ATOMIC_RELAXED); /* the parent's */
		udp->nmcs = 0;  /* the parent's memberships */
		__atomic_fetch_sub(&stk_accel_live, 1, __ATOMIC_RELAXED);
	}
	registry = NULL;
}

/* ---- sending ---- */

/* Through the port: an address on its subnet, or a group when the multicast
 * options allow (stk_udp_mc_via_port). */
static bool via_port(const struct stk_udp_fab *fab, struct stk_udp *udp,
		     const struct sockaddr_in *dest)
{
	uint32_t ip, mask;
	stk_udp_fab_subnet(fab, &ip, &mask);
	uint32_t host = ntohl(dest->sin_addr.s_addr);
	if (IN_MULTICAST(host))
		return dest->sin_port != 0 && stk_udp_mc_via_port(udp, ip);
	if (dest->sin_addr.s_addr == INADDR_BROADCAST ||
	    dest->sin_addr.s_addr == ip || dest->sin_port == 0)
		return false;
	if ((dest->sin_addr.s_addr & ~mask) == (~mask & 0xffffffffu))
		return false; /* the subnet's broadcast address */
	return (dest->sin_addr.s_addr & mask) == (ip & mask);
}

/* One datagram of iov to addr (NULL: the peer): through the port, or
 * STK_KERNEL when the kernel socket must carry it. */
static ssize_t udp_send(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags,
			const struct sockaddr *addr, socklen_t alen)
{
	struct stk_udp *udp = sock->udp;
	struct stk_udp_fab *fab = stk_udp_fab_current();
	struct sockaddr_in dest;
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EMSGSIZE;
	if (addr) {
		if (alen < sizeof(dest) || addr->sa_family != AF_INET)
			return STK_KERNEL; /* the kernel's errors for odd addresses */
		memcpy(&dest, addr, sizeof(dest));
	} else {
		uint64_t peer = __atomic_load_n(&udp->peer, __ATOMIC_ACQUIRE);
		if (!peer)
			return -EDESTADDRREQ;
		dest.sin_family = AF_INET;
		dest.sin_addr.s_addr = (uint32_t)(peer >> 16);
		dest.sin_port = (uint16_t)peer;
	}
	if (!fab || !udp->ep || !via_port(fab, udp, &dest) || (flags & MSG_CONFIRM))
		goto kernel;
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len && stk_wait_bad_user_range(iov[i].iov_base, iov[i].iov_len))
			return -EFAULT;
	bool dontwait = (flags & MSG_DONTWAIT) || __atomic_load_n(&udp->nonblock, __ATOMIC_RELAXED);
	stk_fi_enter();
	ssize_t ret = stk_udp_fab_send(fab, udp, &dest, iov, iovcnt, dontwait);
	stk_fi_leave();
	if (ret == -EMSGSIZE || ret == -ENOBUFS) {
		size_t len = 0;
		for (int i = 0; i < iovcnt; i++)
			len += iov[i].iov_len;
		if (len <= UDP_DGRAM_MAX)
			goto kernel; /* the kernel fragments it; or the AV is full */
	}
	return ret;
kernel:
	stk_count(STK_C_UDP_KERNEL_TX);
	return STK_KERNEL;
}

static ssize_t udp_sendto(struct stk_sock *sock, const void *buf, size_t len, int flags,
			  const struct sockaddr *addr, socklen_t alen)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	return udp_send(sock, &iov, 1, flags, addr, alen);
}

static ssize_t udp_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	return udp_send(sock, iov, iovcnt, flags, NULL, 0);
}

/* A message with ancillary data (IP_PKTINFO, IP_TOS...) goes to the kernel. */
static ssize_t udp_sendmsg(struct stk_sock *sock, const struct msghdr *msg, int flags)
{
	if (msg->msg_controllen || msg->msg_iovlen > IOV_MAX)
		return STK_KERNEL;
	return udp_send(sock, msg->msg_iov, (int)msg->msg_iovlen, flags, msg->msg_name,
			msg->msg_namelen);
}

/* Batched: each message through udp_sendmsg; a message the kernel must carry
 * is sent here on the kernel socket, so the batch keeps its order. */
static int udp_sendmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	unsigned int done = 0;
	if (vlen > UIO_MAXIOV)
		vlen = UIO_MAXIOV;
	for (; done < vlen; done++) {
		struct msghdr *m = &vec[done].msg_hdr;
		ssize_t ret = udp_sendmsg(sock, m, flags);
		if (ret == STK_KERNEL) {
			ret = stk_sys.sendmsg(sock->udp->kfd, m, flags);
			if (ret < 0)
				ret = -errno;
		}
		if (ret < 0) {
			if (done == 0)
				return (int)ret;
			break;
		}
		vec[done].msg_len = (unsigned int)ret;
	}
	return (int)done;
}

static ssize_t udp_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count)
{
	(void)sock;
	(void)in_fd;
	(void)offset;
	(void)count;
	return STK_KERNEL;
}

static int udp_shutdown(struct stk_sock *sock, int how)
{
	(void)sock;
	(void)how;
	return STK_KERNEL;
}

/* FIONREAD/SIOCINQ: the next datagram's length, as the kernel's UDP. */
static int udp_ioctl(struct stk_sock *sock, unsigned long request, void *arg)
{
	if (request == FIONREAD) {
		if (stk_wait_bad_user_range(arg, sizeof(int)))
			return -EFAULT;
		int saved_errno = errno;
		stk_fi_enter();
		*(int *)arg = stk_udp_next_len(sock->udp);
		stk_fi_leave();
		errno = saved_errno;
		return 0;
	}
	if (request == FIONBIO && arg)
		__atomic_store_n(&sock->udp->nonblock, *(const int *)arg != 0, __ATOMIC_RELAXED);
	return STK_KERNEL;
}

static int udp_so_error(struct stk_sock *sock, int kernel_err)
{
	(void)sock;
	return kernel_err;
}

static void udp_set_nonblock(struct stk_sock *sock, bool nonblock)
{
	__atomic_store_n(&sock->udp->nonblock, nonblock, __ATOMIC_RELAXED);
}

const struct stk_sock_ops stk_udp_ops = {
	.recvfrom = stk_udp_recvfrom,
	.sendto = udp_sendto,
	.recvv = stk_udp_recvv,
	.sendv = udp_sendv,
	.recvmsg = stk_udp_recvmsg,
	.sendmsg = udp_sendmsg,
	.recvmmsg = stk_udp_recvmmsg,
	.sendmmsg = udp_sendmmsg,
	.sendfile = udp_sendfile,
	.shutdown = udp_shutdown,
	.ioctl = udp_ioctl,
	.so_error = udp_so_error,
	.set_nonblock = udp_set_nonblock,
};
