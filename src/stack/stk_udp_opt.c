/* Socket options of an accelerated UDP socket (stk_udp.h): the ones that
 * change what recvmsg returns for the port's datagrams (IP_PKTINFO,
 * SO_TIMESTAMP, SO_TIMESTAMPNS) and where a datagram to a group leaves
 * (IP_MULTICAST_TTL, IP_MULTICAST_IF) are set on the kernel socket as asked
 * and read back from it; IP_ADD_MEMBERSHIP/IP_DROP_MEMBERSHIP for the
 * wildcard interface or the port's IP join the group on the port (fi_join)
 * instead of the kernel's interfaces, whose copies would duplicate the
 * port's on a shared link. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <string.h>
#include <sys/time.h>

static bool opt_on(int fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return stk_sys.getsockopt(fd, level, name, &v, &len) == 0 && v != 0;
}

void stk_udp_opts_load(struct stk_udp *udp, int fd)
{
	int saved_errno = errno;
	unsigned cmsgs = 0;
	if (opt_on(fd, IPPROTO_IP, IP_PKTINFO))
		cmsgs |= STK_UDP_CMSG_PKTINFO;
	if (opt_on(fd, SOL_SOCKET, SO_TIMESTAMPNS))
		cmsgs |= STK_UDP_CMSG_TIMESTAMPNS;
	else if (opt_on(fd, SOL_SOCKET, SO_TIMESTAMP))
		cmsgs |= STK_UDP_CMSG_TIMESTAMP;
	__atomic_store_n(&udp->cmsgs, cmsgs, __ATOMIC_RELAXED);
	int ttl = 1;
	socklen_t len = sizeof(ttl);
	if (stk_sys.getsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, &len) != 0)
		ttl = 1;
	__atomic_store_n(&udp->mc_ttl, ttl, __ATOMIC_RELAXED);
	struct in_addr mc_if = { 0 };
	len = sizeof(mc_if);
	if (stk_sys.getsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mc_if, &len) != 0)
		mc_if.s_addr = 0;
	__atomic_store_n(&udp->mc_if, mc_if.s_addr, __ATOMIC_RELAXED);
	errno = saved_errno;
}

bool stk_udp_mc_via_port(struct stk_udp *udp, uint32_t port_ip)
{
	uint32_t mc_if = __atomic_load_n(&udp->mc_if, __ATOMIC_RELAXED);
	return __atomic_load_n(&udp->mc_ttl, __ATOMIC_RELAXED) == 1 &&
	       (mc_if == INADDR_ANY || mc_if == port_ip);
}

/* rx_lock held: the index of group in udp->mcs, or -1. */
static int mc_find(const struct stk_udp *udp, uint32_t group)
{
	for (unsigned i = 0; i < udp->nmcs; i++)
		if (udp->mcs[i].group == group)
			return (int)i;
	return -1;
}

/* IP_ADD_MEMBERSHIP / IP_DROP_MEMBERSHIP (struct ip_mreq or ip_mreqn): on
 * the port when the interface is the wildcard or the port's IP, else the
 * kernel's (STK_KERNEL). Errors as the kernel's. */
static int membership(struct stk_udp *udp, int fd, int name, const void *val, socklen_t len)
{
	struct ip_mreqn req = { 0 };
	if (!val || len < sizeof(struct ip_mreq))
		return STK_KERNEL;
	memcpy(&req, val, len < sizeof(req) ? len : sizeof(req));
	struct stk_udp_fab *fab = stk_udp_fab_current();
	uint32_t ip, mask;
	if (!fab || !udp->ep || !IN_MULTICAST(ntohl(req.imr_multiaddr.s_addr)))
		return STK_KERNEL;
	stk_udp_fab_subnet(fab, &ip, &mask);
	if ((len >= sizeof(req) && req.imr_ifindex != 0) ||
	    (req.imr_address.s_addr != INADDR_ANY && req.imr_address.s_addr != ip))
		return STK_KERNEL;
	uint32_t group = req.imr_multiaddr.s_addr;
	int ret = 0;
	pthread_mutex_lock(&udp->rx_lock);
	int i = mc_find(udp, group);
	if (name == IP_DROP_MEMBERSHIP) {
		if (i < 0) {
			/* perhaps the kernel's, joined before the socket was
			 * accelerated; else not a member of the port's */
			ret = stk_sys.setsockopt(fd, IPPROTO_IP, name, val, len) == 0 ? 0
										: -EADDRNOTAVAIL;
		} else {
			stk_udp_fab_leave(fab, udp->mcs[i].mc);
			udp->mcs[i] = udp->mcs[--udp->nmcs];
		}
	} else if (i >= 0) {
		ret = -EADDRINUSE;
	} else if (udp->nmcs == STK_UDP_MC_MAX) {
		ret = -ENOBUFS;
	} else {
		ret = stk_udp_fab_join(fab, udp, group, &udp->mcs[udp->nmcs].mc);
		if (ret == 0)
			udp->mcs[udp->nmcs++].group = group;
		else
			STK_INFO("dpdk UDP: joining a group: %s", strerror(ret < 0 ? -ret : ret));
	}
	pthread_mutex_unlock(&udp->rx_lock);
	return ret;
}

void stk_udp_mc_leave_all(struct stk_udp *udp)
{
	struct stk_udp_fab *fab = stk_udp_fab_current();
	for (unsigned i = 0; fab && i < udp->nmcs; i++)
		stk_udp_fab_leave(fab, udp->mcs[i].mc);
	udp->nmcs = 0;
}

static bool option_followed(int level, int name)
{
	if (level == SOL_SOCKET)
		return name == SO_TIMESTAMP || name == SO_TIMESTAMPNS;
	return level == IPPROTO_IP &&
	       (name == IP_PKTINFO || name == IP_MULTICAST_TTL || name == IP_MULTICAST_IF);
}

int stk_udp_setsockopt(struct stk_sock *sock, int fd, int level, int name, const void *val,
		       socklen_t len)
{
	struct stk_udp *udp = sock->udp;
	int saved_errno = errno;
	int ret = STK_KERNEL;
	if (level == IPPROTO_IP && (name == IP_ADD_MEMBERSHIP || name == IP_DROP_MEMBERSHIP)) {
		stk_fi_enter();
		ret = membership(udp, fd, name, val, len);
		stk_fi_leave();
	} else if (option_followed(level, name)) {
		ret = stk_sys.setsockopt(fd, level, name, val, len) == 0 ? 0 : -errno;
		if (ret == 0)
			stk_udp_opts_load(udp, fd);
	}
	errno = saved_errno;
	return ret;
}

/* One control message of dlen bytes at *used, when it fits. */
static void cmsg_put(struct msghdr *msg, size_t cap, size_t *used, int level, int type,
		     const void *data, size_t dlen)
{
	if (*used + CMSG_LEN(dlen) > cap) {
		msg->msg_flags |= MSG_CTRUNC;
		return;
	}
	struct cmsghdr c = { .cmsg_len = CMSG_LEN(dlen), .cmsg_level = level, .cmsg_type = type };
	uint8_t *at = (uint8_t *)msg->msg_control + *used;
	memcpy(at, &c, sizeof(c));
	memcpy(at + CMSG_LEN(0), data, dlen);
	*used += CMSG_SPACE(dlen) < cap - *used ? CMSG_SPACE(dlen) : cap - *used;
}

void stk_udp_cmsgs(struct stk_udp *udp, const struct stk_udp_slot *slot, struct msghdr *msg)
{
	unsigned want = __atomic_load_n(&udp->cmsgs, __ATOMIC_RELAXED);
	size_t cap = msg->msg_control ? msg->msg_controllen : 0;
	size_t used = 0;
	if (want & STK_UDP_CMSG_TIMESTAMPNS) {
		cmsg_put(msg, cap, &used, SOL_SOCKET, SCM_TIMESTAMPNS, &slot->stamp,
			 sizeof(slot->stamp));
	} else if (want & STK_UDP_CMSG_TIMESTAMP) {
		struct timeval tv = { .tv_sec = slot->stamp.tv_sec,
				      .tv_usec = slot->stamp.tv_nsec / 1000 };
		cmsg_put(msg, cap, &used, SOL_SOCKET, SCM_TIMESTAMP, &tv, sizeof(tv));
	}
	if (want & STK_UDP_CMSG_PKTINFO) {
		/* the port has no kernel interface: index 0 */
		struct in_pktinfo info = { .ipi_ifindex = 0, .ipi_spec_dst = udp->local.sin_addr,
					   .ipi_addr = udp->local.sin_addr };
		cmsg_put(msg, cap, &used, IPPROTO_IP, IP_PKTINFO, &info, sizeof(info));
	}
	msg->msg_controllen = used;
}
