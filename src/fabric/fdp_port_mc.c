/* fdp_port_mc.c - the port's multicast memberships: which endpoints get a
 * group's datagrams, the device's multicast MAC filter, and IGMPv2 reports
 * (RFC 2236) so that a switch that snoops IGMP forwards the group to us. */
#include "config.h"

#include "fabric/fdp_eal.h"
#include "fabric/fdp_port_dev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <rte_ethdev.h>

/* rx_lock held */
static size_t group_members(const struct fdp_port *p, uint32_t group)
{
	size_t i, n = 0;

	for (i = 0; i < p->mc_count; i++)
		n += p->mc[i].group == group;
	return n;
}

/* rx_lock held. The device accepts the MACs of the joined groups: its
 * multicast address list, or all multicast where the driver has no list
 * (net_af_packet, net_af_xdp, net_memif: they pass every frame anyway;
 * the receive path filters by group). */
static void mc_filter_update(struct fdp_port *p)
{
	struct rte_ether_addr list[FDP_MC_MEMBERS];
	uint32_t n = 0, j;
	size_t i;
	int ret;

	for (i = 0; i < p->mc_count; i++) {
		struct rte_ether_addr mac;

		fdp_mcast_mac(p->mc[i].group, mac.addr_bytes);
		for (j = 0; j < n && !rte_is_same_ether_addr(&list[j], &mac); j++)
			;
		if (j == n)
			list[n++] = mac;
	}
	ret = rte_eth_dev_set_mc_addr_list(p->port_id, n ? list : NULL, n);
	if (ret == 0 || (n == 0 && !p->mc_allmulti))
		return;
	if (ret != -ENOTSUP && ret != -ENOSYS)
		FDP_WARN(FI_LOG_EP_CTRL, "multicast address list (%u groups): %s; "
			 "accepting all multicast\n", n, rte_strerror(-ret));
	if (n && !p->mc_allmulti) {
		ret = rte_eth_allmulticast_enable(p->port_id);
		FDP_INFO(FI_LOG_EP_CTRL, "no multicast filter list on %s: all-multicast %s\n",
			 fdp_params.device, ret == 0 ? "on" : "not supported (frames filtered here)");
		p->mc_allmulti = true;
	} else if (n == 0 && p->mc_allmulti) {
		rte_eth_allmulticast_disable(p->port_id);
		p->mc_allmulti = false;
	}
}

/* Takes tx_lock (after rx_lock when the caller holds that). */
static void igmp_send(struct fdp_port *p, uint8_t type, uint32_t group)
{
	uint8_t frame[FDP_ETH_MIN_FRAME];
	uint32_t dst = type == FDP_IGMP_V2_LEAVE ? htonl(FDP_IGMP_ALL_ROUTERS) : group;
	size_t n = fdp_igmp_build(frame, p->mac.addr_bytes, fdp_params.addr.s_addr, dst,
				  type, group);

	fdp_lock(&p->tx_lock);
	fdp_port_tx_raw(p, frame, n);
	p->stats.igmp_tx++;
	fdp_unlock(&p->tx_lock);
}

/* rx_lock held: the index of ep's membership of group on udp_port, or -1. */
static long member_index(const struct fdp_port *p, const struct fdp_ep *ep, uint32_t group,
			 uint16_t udp_port)
{
	for (size_t i = 0; i < p->mc_count; i++)
		if (p->mc[i].ep == ep && p->mc[i].group == group && p->mc[i].udp_port == udp_port)
			return (long)i;
	return -1;
}

int fdp_port_mc_join(struct fdp_port *p, struct fdp_ep *ep, uint32_t group,
		     uint16_t udp_port)
{
	bool first;

	fdp_eal_thread();
	fdp_lock(&p->rx_lock);
	if (member_index(p, ep, group, udp_port) >= 0) {
		fdp_unlock(&p->rx_lock);
		return -FI_EALREADY;
	}
	if (p->mc_count == FDP_MC_MEMBERS) {
		fdp_unlock(&p->rx_lock);
		return -FI_ENOSPC;
	}
	first = group_members(p, group) == 0;
	p->mc[p->mc_count].group = group;
	p->mc[p->mc_count].udp_port = udp_port;
	p->mc[p->mc_count].ep = ep;
	p->mc_count++;
	if (first)
		mc_filter_update(p);
	fdp_unlock(&p->rx_lock);
	if (first)
		igmp_send(p, FDP_IGMP_V2_REPORT, group);
	return 0;
}

void fdp_port_mc_leave(struct fdp_port *p, struct fdp_ep *ep, uint32_t group,
		       uint16_t udp_port)
{
	bool last = false;
	long i;

	fdp_eal_thread();
	fdp_lock(&p->rx_lock);
	i = member_index(p, ep, group, udp_port);
	if (i >= 0) {
		p->mc[i] = p->mc[--p->mc_count];
		last = group_members(p, group) == 0;
	}
	if (last)
		mc_filter_update(p);
	fdp_unlock(&p->rx_lock);
	if (last)
		igmp_send(p, FDP_IGMP_V2_LEAVE, group);
}

int fdp_port_mc_rx(struct fdp_port *p, const struct fdp_frame_view *v,
		   struct fdp_ep **held)
{
	bool joined = false;
	int delivered = 0;
	size_t i;

	for (i = 0; i < p->mc_count; i++) {
		struct fdp_ep *ep = p->mc[i].ep;

		if (p->mc[i].group != v->dst_ip)
			continue;
		joined = true;
		if (p->mc[i].udp_port != v->dst_port)
			continue;
		if (ep != *held) {
			if (*held)
				fdp_unlock(&(*held)->lock);
			fdp_lock(&ep->lock);
			*held = ep;
		}
		if (ep->enabled && ep->cls == &fdp_udp_class) {
			fdp_udp_rx(ep, v);
			delivered++;
		}
	}
	p->stats.rx_mc_delivered += (uint64_t)delivered;
	return joined ? delivered : -1;
}

void fdp_port_igmp_input(struct fdp_port *p, const struct fdp_frame_view *v)
{
	size_t i, j;

	if (v->igmp_type != FDP_IGMP_QUERY)
		return; /* other hosts' reports and leaves */
	p->stats.igmp_query_rx++;
	/* a general query (group 0) asks for every group, a specific one for
	 * its own; one report per group we belong to */
	for (i = 0; i < p->mc_count; i++) {
		uint32_t g = p->mc[i].group;

		if (v->igmp_group != 0 && v->igmp_group != g)
			continue;
		for (j = 0; j < i && p->mc[j].group != g; j++)
			;
		if (j == i)
			igmp_send(p, FDP_IGMP_V2_REPORT, g);
	}
}
