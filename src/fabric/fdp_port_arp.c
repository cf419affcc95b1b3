/* fdp_port_arp.c - the port's ARP cache: resolve peers on the subnet,
 * learn from and answer ARP frames. Under the port's tx_lock. */
#include "config.h"

#include "fabric/fdp_port_dev.h"

#include <arpa/inet.h>
#include <string.h>

#include <rte_ethdev.h>

#define ARP_TRIES 10
/* Requests are retried after 1, 2, 4 ... 256 ms: a request lost while a
 * link comes up costs a millisecond, an absent peer about 0.5 s in all. */
#define ARP_RETRY_FIRST_NS (1000ull * 1000)
#define ARP_HOLDDOWN_NS (1000ull * 1000 * 1000)
/* While the port's link is down, requests are lost before anyone can
 * answer them, so they are not counted: a memif client's link comes up
 * only once the EAL interrupt thread has run the handshake, which a loaded
 * host delays past ARP's 0.5 s. The wait for the link is bounded. */
#define ARP_LINK_WAIT_NS (3000ull * 1000 * 1000)

static uint32_t arp_hash(uint32_t ip)
{
	return (uint32_t)((ip * 2654435761u) >> 24) & (FDP_ARP_SLOTS - 1);
}

uint32_t fdp_port_arp_find(struct fdp_port *p, uint32_t ip, bool create)
{
	uint32_t h = arp_hash(ip), i, s;

	for (i = 0; i < FDP_ARP_SLOTS; i++) {
		s = (h + i) & (FDP_ARP_SLOTS - 1);
		if (p->arp[s].state == FDP_ARP_FREE) {
			if (!create)
				return UINT32_MAX;
			p->arp[s].ip = ip;
			p->arp[s].state = FDP_ARP_PENDING;
			p->arp[s].tries = 0;
			p->arp[s].next_ns = 0;
			p->arp[s].link_wait_end_ns = 0;
			return s;
		}
		if (p->arp[s].ip == ip)
			return s;
	}
	return UINT32_MAX;
}

uint32_t fdp_port_arp_slot(struct fdp_port *port, uint32_t ip)
{
	uint32_t s;

	fdp_lock(&port->tx_lock);
	s = fdp_port_arp_find(port, ip, true);
	fdp_unlock(&port->tx_lock);
	return s;
}


/* tx_lock held */
static void arp_request(struct fdp_port *p, uint32_t ip)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t zero[6];
	uint8_t frame[FDP_ETH_MIN_FRAME];
	size_t n = fdp_arp_build(frame, FDP_ARP_REQUEST, bcast, p->mac.addr_bytes,
				 fdp_params.addr.s_addr, zero, ip);

	fdp_port_tx_raw(p, frame, n);
	p->stats.arp_req_tx++;
}

/* Only on ARP's slow path (an unresolved peer): the link state is a read of
 * the port's data for the drivers used here, no system call. */
static bool link_down(struct fdp_port *p)
{
	struct rte_eth_link link;

	return rte_eth_link_get_nowait(p->port_id, &link) == 0 &&
	       link.link_status == RTE_ETH_LINK_DOWN;
}

const uint8_t *fdp_port_arp_resolve(struct fdp_port *p, uint32_t slot, int *err)
{
	struct fdp_arp_entry *e;
	uint64_t now;

	if (slot >= FDP_ARP_SLOTS) {
		*err = -FI_EHOSTUNREACH;
		return NULL;
	}
	e = &p->arp[slot];
	if (e->state == FDP_ARP_RESOLVED)
		return e->mac;
	now = fdp_now_ns();
	if (e->state == FDP_ARP_FAILED) {
		if (now < e->next_ns) {
			*err = -FI_EHOSTUNREACH;
			return NULL;
		}
		e->state = FDP_ARP_PENDING;
		e->tries = 0;
		e->next_ns = 0;
		e->link_wait_end_ns = 0;
	}
	if (now >= e->next_ns && link_down(p)) {
		if (!e->link_wait_end_ns)
			e->link_wait_end_ns = now + ARP_LINK_WAIT_NS;
		if (now < e->link_wait_end_ns) {
			e->next_ns = now + ARP_RETRY_FIRST_NS;
			*err = -FI_EAGAIN;
			return NULL;
		}
	}
	if (now >= e->next_ns) {
		if (e->tries >= ARP_TRIES) {
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &e->ip, ip, sizeof(ip));
			FDP_WARN(FI_LOG_EP_DATA, "ARP: no answer from %s after %d requests\n",
				 ip, ARP_TRIES);
			e->state = FDP_ARP_FAILED;
			e->next_ns = now + ARP_HOLDDOWN_NS;
			*err = -FI_EHOSTUNREACH;
			return NULL;
		}
		arp_request(p, e->ip);
		e->next_ns = now + (ARP_RETRY_FIRST_NS << e->tries);
		e->tries++;
	}
	*err = -FI_EAGAIN;
	return NULL;
}

static bool in_subnet(uint32_t ip)
{
	return (ip & fdp_params.netmask) ==
	       (fdp_params.addr.s_addr & fdp_params.netmask);
}

void fdp_port_arp_input(struct fdp_port *p, const struct fdp_frame_view *v)
{
	uint8_t frame[FDP_ETH_MIN_FRAME];
	uint32_t s;
	size_t n;

	fdp_lock(&p->tx_lock);
	p->stats.arp_rx++;
	if (in_subnet(v->arp_spa) && v->arp_spa != fdp_params.addr.s_addr) {
		/* learn only for peers we talk to or that talk to us */
		s = fdp_port_arp_find(p, v->arp_spa, v->arp_tpa == fdp_params.addr.s_addr);
		if (s != UINT32_MAX) {
			memcpy(p->arp[s].mac, v->arp_sha, RTE_ETHER_ADDR_LEN);
			p->arp[s].state = FDP_ARP_RESOLVED;
		}
	}
	if (v->arp_op == FDP_ARP_REQUEST && v->arp_tpa == fdp_params.addr.s_addr) {
		n = fdp_arp_build(frame, FDP_ARP_REPLY, v->arp_sha, p->mac.addr_bytes,
				  fdp_params.addr.s_addr, v->arp_sha, v->arp_spa);
		fdp_port_tx_raw(p, frame, n);
		p->stats.arp_rep_tx++;
	}
	fdp_unlock(&p->tx_lock);
}
