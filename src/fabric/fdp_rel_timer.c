/*
 * fdp_rel_timer.c - the reliability protocol's timers: delayed and
 * immediate acks, tail loss probes, retransmission timeouts, unreachable
 * peers.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_rel_int.h"

static void send_pure_ack(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	if (p->peer_session == 0) {
		p->ack_deadline_ns = 0;
		return;
	}
	if (fdp_rel_send_frame(rel, p, FDP_REL_T_ACK, p->snd_nxt, 0, 0, NULL, 0, NULL, 0, now_ns) == 0)
		rel->stats.tx_acks++;
}

void fdp_rel_ack_now(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	if (p->ack_deadline_ns || p->ack_pending || p->rnr_pending)
		send_pure_ack(rel, p, now_ns);
}

static void declare_unreachable(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	uint32_t first = p->snd_una, end = p->snd_nxt;

	rel->stats.peers_unreachable++;
	/* Empty the window first so that the peer, if it ever answers again,
	 * is told (una) to skip these frames. Reservations stay blocked while
	 * the cookies complete: a callback must not reuse a slot not yet read. */
	p->unreachable = true;
	p->rto_deadline_ns = 0;
	p->tlp_deadline_ns = 0;
	p->stall_since_ns = 0;
	p->dupacks = 0;
	p->rto_ns = p->rto_base_ns;
	p->abandoning = true;
	for (uint32_t seq = first; seq != end; seq++) {
		struct fdp_rel_txslot *s = &p->tx[seq & rel->mask];
		uint64_t cookie = s->cookie;
		s->cookie = 0;
		if (cookie)
			rel->ops->complete(rel, p, cookie, -FI_EHOSTUNREACH);
	}
	p->abandoning = false;
	p->snd_una = p->snd_unsent = p->snd_nxt = end;
	if (rel->ops->unreachable)
		rel->ops->unreachable(rel, p);
}

static void on_rto(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	if (p->snd_una == p->snd_nxt) {
		p->rto_deadline_ns = 0;
		return;
	}
	if (p->stall_since_ns == 0) {
		p->stall_since_ns = now_ns;
	} else if (now_ns - p->stall_since_ns >= rel->cfg.unreach_ns) {
		declare_unreachable(rel, p);
		return;
	}
	rel->stats.tx_rto++;
	if (p->snd_unsent != p->snd_una)
		fdp_rel_xmit_slot(rel, p, p->snd_una, true, now_ns);
	for (uint32_t seq = p->snd_una; seq != p->snd_unsent; seq++)
		p->tx[seq & rel->mask].state &= (uint8_t)~FDP_REL_TX_FR;
	p->dupacks = 0;
	p->rto_ns = p->rto_ns * 2 > rel->cfg.rto_max_ns ? rel->cfg.rto_max_ns : p->rto_ns * 2;
	p->rto_deadline_ns = now_ns + p->rto_ns;
}

/* Run p's due timers; returns its next deadline, UINT64_MAX when idle. */
static uint64_t peer_timers(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	uint64_t next = UINT64_MAX;

	while (p->snd_unsent != p->snd_nxt) {
		if (fdp_rel_xmit_slot(rel, p, p->snd_unsent, false, now_ns) < 0) {
			next = now_ns; /* device full: try again at the next call */
			break;
		}
		p->snd_unsent++;
	}
	if (p->tlp_deadline_ns && now_ns >= p->tlp_deadline_ns) {
		uint32_t last = p->snd_unsent - 1;

		p->tlp_deadline_ns = 0;
		if (!p->tlp_done && p->snd_una != p->snd_unsent &&
		    !(p->tx[last & rel->mask].state & FDP_REL_TX_SACKED) &&
		    fdp_rel_xmit_slot(rel, p, last, true, now_ns) == 0) {
			p->tlp_done = true;
			rel->stats.tx_tlp++;
		}
	}
	if (p->tlp_deadline_ns && p->tlp_deadline_ns < next)
		next = p->tlp_deadline_ns;
	if (p->rto_deadline_ns && now_ns >= p->rto_deadline_ns)
		on_rto(rel, p, now_ns);
	if (p->rto_deadline_ns && p->rto_deadline_ns < next)
		next = p->rto_deadline_ns;
	if (p->ack_deadline_ns && now_ns >= p->ack_deadline_ns)
		send_pure_ack(rel, p, now_ns);
	if (p->ack_deadline_ns && p->ack_deadline_ns < next)
		next = p->ack_deadline_ns;
	return next;
}

uint64_t fdp_rel_progress(struct fdp_rel *rel, uint64_t now_ns)
{
	struct fdp_rel_peer *list, *p;
	uint64_t next = UINT64_MAX;

	if (now_ns < rel->next_deadline_ns)
		return rel->next_deadline_ns;
	/* Detach the list: callbacks may arm peers while we walk it. */
	list = rel->active;
	rel->active = NULL;
	rel->next_deadline_ns = UINT64_MAX;
	while ((p = list) != NULL) {
		uint64_t d;

		list = p->active_next;
		d = peer_timers(rel, p, now_ns);
		if (d == UINT64_MAX) {
			p->active = false;
			continue;
		}
		p->active_next = rel->active;
		rel->active = p;
		if (d < next)
			next = d;
	}
	if (next < rel->next_deadline_ns)
		rel->next_deadline_ns = next;
	return rel->next_deadline_ns;
}

