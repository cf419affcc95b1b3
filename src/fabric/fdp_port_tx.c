/* fdp_port_tx.c - transmitting frames on the port: headers, checksums
 * (or the device's offload), fault injection (FI_DPDK_DROP/DUP/REORDER).
 * Under the port's tx_lock. */
#include "config.h"

#include "fabric/fdp_eal.h"
#include "fabric/fdp_port_dev.h"

#include <arpa/inet.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_ethdev.h>

#define REORDER_HOLD_NS (1000ull * 1000)

void fdp_port_tx_raw(struct fdp_port *p, const uint8_t *frame, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);

	if (!m)
		return;
	memcpy(rte_pktmbuf_mtod(m, uint8_t *), frame, len);
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	if (rte_eth_tx_burst(p->port_id, 0, &m, 1) != 1)
		rte_pktmbuf_free(m);
}


static uint64_t rng_next(struct fdp_port *p)
{
	uint64_t x = p->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	p->rng = x;
	return x;
}

static bool chance(struct fdp_port *p, double prob)
{
	if (prob <= 0)
		return false;
	return (double)(rng_next(p) >> 11) * (1.0 / 9007199254740992.0) < prob;
}

/* tx_lock held; consumes m. */
static int tx_mbuf(struct fdp_port *p, struct rte_mbuf *m)
{
	struct rte_mbuf *burst[3];
	uint16_t n = 0, sent;

	if (p->faults) {
		if (chance(p, fdp_params.drop)) {
			p->stats.inj_drop++;
			rte_pktmbuf_free(m);
			return 0;
		}
		if (!p->held && chance(p, fdp_params.reorder)) {
			p->stats.inj_reorder++;
			p->held = m;
			p->held_ns = fdp_now_ns();
			return 0;
		}
		burst[n++] = m;
		if (chance(p, fdp_params.dup)) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, p->pool, 0, UINT32_MAX);

			if (c) {
				p->stats.inj_dup++;
				burst[n++] = c;
			}
		}
		if (p->held) {
			burst[n++] = p->held;
			p->held = NULL;
		}
	} else {
		burst[n++] = m;
	}
	sent = rte_eth_tx_burst(p->port_id, 0, burst, n);
	p->stats.tx_frames += sent;
	p->last_tx_tsc = rte_rdtsc();
	if (sent == 0) {
		p->stats.tx_full++;
		rte_pktmbuf_free_bulk(burst, n);
		return -FI_EAGAIN;
	}
	/* The frame itself went (it is first); extra copies that did not fit
	 * are just lost, as on a real link. */
	if (sent < n)
		rte_pktmbuf_free_bulk(burst + sent, n - sent);
	return 0;
}

static int tx_frame(struct fdp_ep *ep, uint32_t dst_ip, uint16_t dst_port,
		    uint32_t arp_slot, const void *hdr, size_t hdr_len,
		    const struct iovec *payload, size_t iov_count)
{
	struct fdp_port *p = ep->domain->port;
	struct fdp_frame_addrs a;
	struct rte_mbuf *m;
	const uint8_t *mac;
	uint8_t *buf, group_mac[FDP_ETH_ALEN];
	bool mcast = fdp_ip_is_multicast(dst_ip);
	size_t plen = fdp_iov_len(payload, iov_count), udp_len = hdr_len + plen, off;
	uint16_t be_len;
	int ret, err = 0;

	/* hdr_len 0: a raw UDP datagram (FI_PROTO_UDP), no provider header */
	if (udp_len > ep->frame_payload_max || (hdr_len && hdr_len < sizeof(struct fdp_hdr)))
		return -FI_EINVAL;
	fdp_eal_thread();
	fdp_lock(&p->tx_lock);
	if (mcast) {
		fdp_mcast_mac(dst_ip, group_mac);
		mac = group_mac;
	} else if (dst_ip == fdp_params.addr.s_addr) {
		mac = p->mac.addr_bytes; /* to ourselves: the device may loop it */
	} else {
		if (arp_slot == UINT32_MAX)
			arp_slot = fdp_port_arp_find(p, dst_ip, true);
		mac = fdp_port_arp_resolve(p, arp_slot, &err);
		if (!mac) {
			fdp_unlock(&p->tx_lock);
			return err;
		}
	}
	m = rte_pktmbuf_alloc(p->pool);
	if (!m) {
		p->stats.tx_full++;
		fdp_unlock(&p->tx_lock);
		return -FI_EAGAIN;
	}
	buf = rte_pktmbuf_mtod(m, uint8_t *);
	memcpy(a.src_mac, p->mac.addr_bytes, 6);
	memcpy(a.dst_mac, mac, 6);
	a.src_ip = fdp_params.addr.s_addr;
	a.dst_ip = dst_ip;
	a.src_port = ep->addr.sin_port;
	a.dst_port = dst_port;
	fdp_frame_build_hdrs(buf, &a, udp_len, p->ip_id++);
	/* multicast stays on the link (as IP_MULTICAST_TTL's default, 1) */
	if (mcast)
		fdp_frame_set_ttl(buf, 1);
	off = FDP_L2L4_HLEN;
	if (hdr_len) {
		memcpy(buf + off, hdr, hdr_len);
		be_len = htons((uint16_t)udp_len);
		memcpy(buf + off + offsetof(struct fdp_hdr, len), &be_len, 2);
		off += hdr_len;
	}
	off += fdp_iov_to_buf(buf + off, plen, payload, iov_count);
	m->data_len = (uint16_t)off;
	m->pkt_len = (uint32_t)off;
	if (p->tx_udp_csum) {
		uint16_t phdr = htons(fdp_udp_phdr_sum(a.src_ip, a.dst_ip,
						       (uint16_t)(udp_len + FDP_UDP_HLEN)));

		m->l2_len = FDP_ETH_HLEN;
		m->l3_len = FDP_IPV4_HLEN;
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM |
			       RTE_MBUF_F_TX_UDP_CKSUM;
		memcpy(buf + FDP_ETH_HLEN + FDP_IPV4_HLEN + 6, &phdr, 2);
	} else {
		fdp_frame_csum(buf, true, !p->tx_udp_csum_none);
	}
	ret = tx_mbuf(p, m);
	fdp_unlock(&p->tx_lock);
	return ret;
}

int fdp_tx_frame(struct fdp_ep *ep, fi_addr_t dest, const void *hdr,
		 size_t hdr_len, const struct iovec *payload, size_t iov_count)
{
	struct fdp_av *av = ep->av;
	struct fdp_av_entry *e;

	if (!av || dest >= atomic_load_explicit(&av->count, memory_order_acquire))
		return -FI_EINVAL;
	e = &atomic_load_explicit(&av->entries, memory_order_acquire)[dest];
	if (e->addr.sin_family != AF_INET)
		return -FI_EINVAL;
	return tx_frame(ep, e->addr.sin_addr.s_addr, e->addr.sin_port,
			e->arp_slot, hdr, hdr_len, payload, iov_count);
}

int fdp_tx_frame_to(struct fdp_ep *ep, const struct sockaddr_in *dest,
		    const void *hdr, size_t hdr_len,
		    const struct iovec *payload, size_t iov_count)
{
	return tx_frame(ep, dest->sin_addr.s_addr, dest->sin_port, UINT32_MAX,
			hdr, hdr_len, payload, iov_count);
}

void fdp_port_tx_release_held(struct fdp_port *p)
{
	fdp_lock(&p->tx_lock);
	if (p->held && fdp_now_ns() - p->held_ns > REORDER_HOLD_NS) {
		struct rte_mbuf *m = p->held;

		p->held = NULL;
		if (rte_eth_tx_burst(p->port_id, 0, &m, 1) != 1)
			rte_pktmbuf_free(m);
	}
	fdp_unlock(&p->tx_lock);
}
