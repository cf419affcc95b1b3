/* fdp_port_rx.c - the port's endpoints (UDP port table, the list whose
 * hooks run), receiving and dispatching bursts, and progress. */
#include "config.h"

#include "fabric/fdp_eal.h"
#include "fabric/fdp_port_dev.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#define RX_BURST 32
#define RX_BURSTS_PER_CALL 4

int fdp_port_bind(struct fdp_port *port, struct fdp_ep *ep, uint16_t *udp_port)
{
	uint16_t want = ntohs(*udp_port);
	int i, ret = 0;

	fdp_lock(&port->rx_lock);
	if (want) {
		if (port->ep_by_port[want])
			ret = -FI_EADDRINUSE;
		else
			port->ep_by_port[want] = ep;
		goto out;
	}
	for (i = 0; i < 65536 - FDP_EPHEMERAL_FIRST; i++) {
		want = port->next_ephemeral++;
		if (port->next_ephemeral == 0)
			port->next_ephemeral = FDP_EPHEMERAL_FIRST;
		if (want >= FDP_EPHEMERAL_FIRST && !port->ep_by_port[want]) {
			port->ep_by_port[want] = ep;
			*udp_port = htons(want);
			goto out;
		}
	}
	ret = -FI_EADDRINUSE;
out:
	fdp_unlock(&port->rx_lock);
	return ret;
}

void fdp_port_unbind(struct fdp_port *port, uint16_t udp_port)
{
	fdp_lock(&port->rx_lock);
	port->ep_by_port[ntohs(udp_port)] = NULL;
	fdp_unlock(&port->rx_lock);
}

void fdp_port_attach(struct fdp_port *port, struct fdp_ep *ep)
{
	struct fdp_ep **n;

	if (!ep->hooks || !ep->hooks->progress)
		return;
	fdp_lock(&port->ep_lock);
	if (port->hook_count == port->hook_cap) {
		size_t cap = port->hook_cap ? port->hook_cap * 2 : 8;

		n = realloc(port->hook_eps, cap * sizeof(*n));
		if (!n) {
			fdp_unlock(&port->ep_lock);
			FDP_WARN(FI_LOG_EP_CTRL, "out of memory: endpoint timers will not run\n");
			return;
		}
		port->hook_eps = n;
		port->hook_cap = cap;
	}
	port->hook_eps[port->hook_count++] = ep;
	atomic_store(&port->hook_count_hint, port->hook_count);
	fdp_unlock(&port->ep_lock);
}

void fdp_port_detach(struct fdp_port *port, struct fdp_ep *ep)
{
	size_t i;

	fdp_lock(&port->ep_lock);
	for (i = 0; i < port->hook_count; i++) {
		if (port->hook_eps[i] == ep) {
			port->hook_eps[i] = port->hook_eps[--port->hook_count];
			break;
		}
	}
	atomic_store(&port->hook_count_hint, port->hook_count);
	fdp_unlock(&port->ep_lock);
}


void fdp_port_each_hook_ep(struct fdp_port *p, bool flush, uint64_t now)
{
	size_t i;

	fdp_lock(&p->ep_lock);
	for (i = 0; i < p->hook_count; i++) {
		struct fdp_ep *ep = p->hook_eps[i];

		fdp_lock(&ep->lock);
		if (ep->enabled && ep->hooks) {
			void (*fn)(struct fdp_ep *, uint64_t) =
				flush ? ep->hooks->flush : ep->hooks->progress;

			if (fn)
				fn(ep, now);
		}
		fdp_unlock(&ep->lock);
	}
	fdp_unlock(&p->ep_lock);
}

/* rx_lock held. Lock ep for the burst (*held: see rx_one). */
static void hold_ep(struct fdp_ep *ep, struct fdp_ep **held)
{
	if (ep != *held) {
		if (*held)
			fdp_unlock(&(*held)->lock);
		fdp_lock(&ep->lock);
		*held = ep;
	}
}

/* rx_lock held, ep locked: a UDP frame for ep's port. A raw UDP endpoint
 * takes the payload as it is; the others want a provider header. */
static void rx_ep(struct fdp_port *p, struct fdp_ep *ep, struct fdp_frame_view *v,
		  uint64_t now_ns)
{
	struct sockaddr_in src;
	fi_addr_t src_addr;
	int reason;

	if (!ep->enabled) {
		p->stats.rx_no_ep++;
		return;
	}
	if (ep->cls == &fdp_udp_class) {
		fdp_udp_rx(ep, v);
		return;
	}
	reason = fdp_frame_parse_fdp(v);
	if (reason != FDP_DROP_NONE) {
		p->stats.rx_drop[reason]++;
	} else if (v->type == FDP_TYPE_DGRAM) {
		if (ep->cls == &fdp_dgram_class)
			fdp_dgram_rx(ep, v);
		else
			p->stats.rx_drop[FDP_DROP_TYPE]++;
	} else if (ep->hooks && ep->hooks->rx_rdm) {
		memset(&src, 0, sizeof(src));
		src.sin_family = AF_INET;
		src.sin_addr.s_addr = v->src_ip;
		src.sin_port = v->src_port;
		src_addr = ep->av ? fdp_av_reverse(ep->av, &src) : FI_ADDR_NOTAVAIL;
		ep->hooks->rx_rdm(ep, src_addr, &src, v->fdp, v->fdp_len, now_ns);
	} else {
		p->stats.rx_drop[FDP_DROP_TYPE]++;
	}
}

/* rx_lock held. A datagram to a multicast group: its members, if any. */
static void rx_mcast(struct fdp_port *p, const struct fdp_frame_view *v, struct fdp_ep **held)
{
	int n = p->mc_count ? fdp_port_mc_rx(p, v, held) : -1;

	if (n < 0)
		p->stats.rx_not_ours++;
	else if (n == 0)
		p->stats.rx_no_ep++;
}

/* rx_lock held. *held is the endpoint whose lock this burst holds (NULL:
 * none): consecutive frames for one endpoint, the common case, take its
 * lock once per burst instead of once per frame. */
static void rx_one(struct fdp_port *p, struct rte_mbuf *m, uint64_t now_ns, struct fdp_ep **held)
{
	struct fdp_frame_view v;
	const uint8_t *data;
	struct fdp_ep *ep;
	unsigned int flags = 0;
	int reason;

	if (m->nb_segs > 1) {
		if (m->pkt_len > 65536) {
			p->stats.rx_drop[FDP_DROP_LEN]++;
			return;
		}
		data = rte_pktmbuf_read(m, 0, m->pkt_len, p->scratch);
	} else {
		data = rte_pktmbuf_mtod(m, const uint8_t *);
	}
	if (p->rx_csum) {
		if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
			flags |= FDP_PARSE_IP_CSUM_OK;
		if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
			flags |= FDP_PARSE_UDP_CSUM_OK;
	}
	reason = fdp_frame_parse_udp(data, m->pkt_len, flags, &v);
	if (reason != FDP_DROP_NONE) {
		p->stats.rx_drop[reason]++;
		return;
	}
	if (v.kind == FDP_FRAME_ARP) {
		fdp_port_arp_input(p, &v);
		return;
	}
	if (v.kind == FDP_FRAME_IGMP) {
		fdp_port_igmp_input(p, &v);
		return;
	}
	if (fdp_ip_is_multicast(v.dst_ip)) {
		rx_mcast(p, &v, held);
		return;
	}
	if (v.dst_ip != fdp_params.addr.s_addr ||
	    (memcmp(v.dst_mac, p->mac.addr_bytes, 6) != 0 && !(v.dst_mac[0] & 1))) {
		p->stats.rx_not_ours++;
		return;
	}
	ep = p->ep_by_port[ntohs(v.dst_port)];
	if (!ep) {
		p->stats.rx_no_ep++;
		return;
	}
	hold_ep(ep, held);
	rx_ep(p, ep, &v, now_ns);
}

/* Endpoint timers. After frames arrived they run at once (acks may open a
 * window); on an idle poll at most every HOOK_IDLE_GAP_NS, so a thread
 * spinning on fi_cq_read does not pay clock_gettime and the endpoint locks
 * on every empty poll. */
static void run_hooks(struct fdp_port *p, bool received)
{
	uint64_t tsc;

	if (atomic_load_explicit(&p->hook_count_hint, memory_order_relaxed) == 0)
		return;
	tsc = rte_rdtsc();
	if (!received &&
	    tsc - atomic_load_explicit(&p->hook_last_tsc, memory_order_relaxed) < p->hook_gap_tsc)
		return;
	atomic_store_explicit(&p->hook_last_tsc, tsc, memory_order_relaxed);
	fdp_port_each_hook_ep(p, false, fdp_now_ns());
}

int fdp_port_progress(struct fdp_port *p)
{
	struct rte_mbuf *pkts[RX_BURST];
	uint16_t n, i;
	uint64_t now = 0;
	struct fdp_ep *held = NULL;
	int total = 0, b;

	fdp_eal_thread();
	if (fdp_trylock(&p->rx_lock)) {
		for (b = 0; b < RX_BURSTS_PER_CALL; b++) {
			n = rte_eth_rx_burst(p->port_id, 0, pkts, RX_BURST);
			if (n)
				now = fdp_now_ns();
			for (i = 0; i < n; i++)
				rx_one(p, pkts[i], now, &held);
			if (held) {
				fdp_unlock(&held->lock);
				held = NULL;
			}
			if (n)
				rte_pktmbuf_free_bulk(pkts, n);
			p->stats.rx_frames += n;
			total += n;
			if (n < RX_BURST)
				break;
		}
		fdp_unlock(&p->rx_lock);
	}
	if (p->held)
		fdp_port_tx_release_held(p);
	run_hooks(p, total > 0);
	return total;
}

int fdp_domain_progress(struct fdp_domain *domain)
{
	return fdp_port_progress(domain->port);
}
