/*
 * fdp_rel_rx.c - the reliability protocol's receive side: acks (RTT,
 * selective acks, fast retransmission) and data frames delivered in order.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_rel_int.h"

/* An ack is owed to the peer no later than `when`. */
static void ack_by(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t when)
{
	if (p->ack_deadline_ns == 0 || when < p->ack_deadline_ns)
		p->ack_deadline_ns = when;
	fdp_rel_peer_arm(rel, p, p->ack_deadline_ns);
}
static void rtt_sample(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t r)
{
	uint64_t rto, var4;

	rel->stats.rtt_samples++;
	if (p->min_rtt_ns == 0 || r < p->min_rtt_ns)
		p->min_rtt_ns = r ? r : 1;
	if (p->srtt_ns == 0) {
		p->srtt_ns = r ? r : 1;
		p->rttvar_ns = r / 2;
	} else {
		uint64_t delta = p->srtt_ns > r ? p->srtt_ns - r : r - p->srtt_ns;
		p->rttvar_ns = (3 * p->rttvar_ns + delta) / 4;
		p->srtt_ns = (7 * p->srtt_ns + r) / 8;
		if (p->srtt_ns == 0)
			p->srtt_ns = 1;
	}
	var4 = 4 * p->rttvar_ns;
	rto = p->srtt_ns + (var4 > FDP_REL_CLOCK_G_NS ? var4 : FDP_REL_CLOCK_G_NS);
	if (rto < rel->cfg.rto_min_ns)
		rto = rel->cfg.rto_min_ns;
	if (rto > rel->cfg.rto_max_ns)
		rto = rel->cfg.rto_max_ns;
	p->rto_base_ns = rto;
}

/* Retransmit the hole at seq unless it was fast-retransmitted less than an
 * RTO ago (then the copy may still be on its way). */
static void fast_retx(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t seq, uint64_t now_ns)
{
	struct fdp_rel_txslot *s = &p->tx[seq & rel->mask];

	if (s->state & FDP_REL_TX_SACKED || fdp_seq_le(p->snd_unsent, seq))
		return;
	/* again only once an RTO passed, or a frame sent after this copy
	 * (by more than a reordering window) was delivered: it is lost too */
	if ((s->state & FDP_REL_TX_FR) && now_ns - s->last_tx_ns < p->rto_base_ns &&
	    s->last_tx_ns + p->srtt_ns / 4 >= p->rack_xmit_ns)
		return;
	if (fdp_rel_xmit_slot(rel, p, seq, true, now_ns) == 0) {
		s->state |= FDP_REL_TX_FR;
		rel->stats.tx_fast_retx++;
	}
}

/* RACK (RFC 8985, simplified): remember the latest transmission known to
 * have been delivered. A retransmission counts only once an RTT could have
 * passed since it was sent (else the ack may be for the original). */
static void rack_note(struct fdp_rel_peer *p, const struct fdp_rel_txslot *s, uint64_t now_ns)
{
	if ((s->state & FDP_REL_TX_RETX) && (p->min_rtt_ns == 0 || now_ns - s->last_tx_ns < p->min_rtt_ns))
		return;
	if (s->last_tx_ns > p->rack_xmit_ns)
		p->rack_xmit_ns = s->last_tx_ns;
}

static void process_ack(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t ack, uint64_t sack,
			uint32_t sack_base, uint32_t tsecr, bool pure, uint64_t now_ns)
{
	bool progressed = false;

	if (fdp_seq_gt(ack, p->snd_unsent)) {
		rel->stats.rx_bad_ack++; /* acknowledges what we never sent */
		return;
	}
	if (fdp_seq_lt(ack, p->snd_una))
		return; /* older than what we know: a reordered ack, nothing new */
	rel->stats.rx_acks++;
	p->stall_since_ns = 0; /* the peer answers: it is reachable */
	if (tsecr) {
		/* our own clock echoed: an exact RTT (plus the peer's ack
		 * delay), whichever copy of whichever frame it answers */
		uint32_t rtt_us = fdp_rel_ts(now_ns) - tsecr;

		if (rtt_us < 10u * 1000 * 1000) {
			rtt_sample(rel, p, (uint64_t)rtt_us * 1000 + 500);
			p->rto_ns = p->rto_base_ns; /* no ambiguity: backoff ends */
		}
	}

	if (fdp_seq_gt(ack, p->snd_una)) {
		while (p->snd_una != ack) {
			struct fdp_rel_txslot *s = &p->tx[p->snd_una & rel->mask];
			uint64_t cookie = s->cookie;

			if (!(s->state & FDP_REL_TX_SACKED))
				rack_note(p, s, now_ns);
			s->cookie = 0;
			p->snd_una++;
			if (cookie)
				rel->ops->complete(rel, p, cookie, 0);
		}
		p->dupacks = 0;
		p->tlp_done = false;
		if (p->snd_una == p->snd_nxt) {
			p->rto_deadline_ns = 0;
			p->tlp_deadline_ns = 0;
		} else {
			p->rto_deadline_ns = now_ns + p->rto_ns;
			fdp_rel_peer_arm(rel, p, p->rto_deadline_ns);
			fdp_rel_tlp_arm(rel, p, now_ns);
		}
		progressed = true;
	} else if (pure && p->snd_una != p->snd_nxt) {
		if (++p->dupacks == rel->cfg.dupack_thresh)
			fast_retx(rel, p, p->snd_una, now_ns);
	}

	if (sack && p->snd_una != p->snd_nxt) {
		/* mark, then retransmit every hole with >= dupack_thresh
		 * SACKed frames above it (RFC 6675's loss rule, simplified) */
		uint32_t inflight = p->snd_unsent - p->snd_una;
		uint32_t top = 0, above = 0;
		uint32_t holes[FDP_REL_SACK_BITS + 1];
		uint32_t nholes = 0;

		for (uint32_t i = 0; i < FDP_REL_SACK_BITS; i++) {
			uint32_t off = sack_base + i + 1; /* offset from snd_una == ack */
			struct fdp_rel_txslot *s;

			if (!(sack & (1ull << i)))
				continue;
			if (off >= inflight)
				break;
			s = &p->tx[(p->snd_una + off) & rel->mask];
			if (!(s->state & FDP_REL_TX_SACKED))
				rack_note(p, s, now_ns);
			s->state |= FDP_REL_TX_SACKED;
			top = off + 1;
		}
		/* a frame this ack does not cover may have arrived and been
		 * reported by another ack: only offset 0 (the cumulative
		 * point) and the window this ack covers tell what is missing */
		for (uint32_t off = top; off-- > 0 && nholes < FDP_REL_SACK_BITS;) {
			struct fdp_rel_txslot *s = &p->tx[(p->snd_una + off) & rel->mask];
			if (s->state & FDP_REL_TX_SACKED)
				above++;
			else if (off != 0 && off <= sack_base)
				continue;
			else if (above >= rel->cfg.dupack_thresh ||
				 s->last_tx_ns + p->srtt_ns / 4 < p->rack_xmit_ns)
				holes[nholes++] = p->snd_una + off;
		}
		while (nholes > 0)
			fast_retx(rel, p, holes[--nholes], now_ns);
	}
	if (progressed && rel->ops->tx_ready)
		rel->ops->tx_ready(rel, p);
}

static int ensure_rx_ring(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	if (p->rx)
		return 0;
	if (rel->rx_rings >= rel->cfg.max_rx_rings)
		return -FI_ENOMEM; /* endpoint budget: the frame is dropped, the sender resends */
	p->rx = calloc(rel->cfg.window, sizeof(*p->rx));
	p->rx_data = malloc((size_t)rel->cfg.window * rel->cfg.frame_payload);
	if (!p->rx || !p->rx_data) {
		free(p->rx);
		free(p->rx_data);
		p->rx = NULL;
		p->rx_data = NULL;
		return -FI_ENOMEM;
	}
	rel->rx_rings++;
	return 0;
}

static void rx_ring_clear(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	if (p->rx)
		for (uint32_t i = 0; i < rel->cfg.window; i++)
			p->rx[i].present = 0;
	p->rx_ooo_count = 0;
}

/* The peer's stream restarts at una (new session or abandoned frames). */
static void rx_restart(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t una)
{
	rx_ring_clear(rel, p);
	p->rcv_nxt = una;
	p->ack_pending = 0;
	rel->stats.rx_resets++;
	if (rel->ops->rx_reset)
		rel->ops->rx_reset(rel, p);
}

/* Deliver buffered frames that became in order. Returns how many. */
static uint32_t deliver_buffered(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	uint32_t n = 0;

	while (p->rx_ooo_count) {
		uint32_t idx = p->rcv_nxt & rel->mask;
		struct fdp_rel_rxslot *s = &p->rx[idx];

		if (!s->present || s->seq != p->rcv_nxt)
			break;
		if (rel->ops->deliver(rel, p, s->uflags,
				      p->rx_data + (size_t)idx * rel->cfg.frame_payload, s->len) < 0) {
			rel->stats.rx_refused++;
			p->rnr_pending = true;
			break;
		}
		s->present = 0;
		p->rx_ooo_count--;
		p->rcv_nxt++;
		p->ack_pending++;
		rel->stats.rx_data++;
		n++;
	}
	return n;
}

static void rx_data(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t seq, uint8_t uflags,
		    const uint8_t *payload, size_t len, uint64_t now_ns)
{
	uint32_t off = seq - p->rcv_nxt;

	if (fdp_seq_lt(seq, p->rcv_nxt)) {
		rel->stats.rx_dup++;
		ack_by(rel, p, now_ns); /* our ack was probably lost */
		return;
	}
	if (off >= rel->cfg.window) {
		rel->stats.rx_out_of_window++;
		ack_by(rel, p, now_ns);
		return;
	}
	if (off == 0) {
		struct fdp_rel_rxslot *s = p->rx ? &p->rx[seq & rel->mask] : NULL;

		if (s && s->present && s->seq == seq) {
			s->present = 0; /* a refused copy: this fresh one replaces it */
			p->rx_ooo_count--;
		}
		if (rel->ops->deliver(rel, p, uflags, payload, len) < 0) {
			rel->stats.rx_refused++;
			p->rnr_pending = true;
			ack_by(rel, p, now_ns);
			return;
		}
		p->rcv_nxt++;
		p->ack_pending++;
		rel->stats.rx_data++;
		if (deliver_buffered(rel, p) || p->rx_ooo_count || p->rnr_pending ||
		    p->ack_pending >= rel->cfg.ack_every)
			ack_by(rel, p, now_ns); /* a hole filled or remains: tell the sender */
		else
			ack_by(rel, p, now_ns + rel->cfg.ack_delay_ns);
		return;
	}
	/* out of order, inside the window: keep it until the hole fills */
	if (ensure_rx_ring(rel, p) < 0) {
		rel->stats.rx_nomem++;
		return;
	}
	{
		uint32_t idx = seq & rel->mask;
		struct fdp_rel_rxslot *s = &p->rx[idx];

		if (s->present && s->seq == seq) {
			rel->stats.rx_dup++;
		} else {
			memcpy(p->rx_data + (size_t)idx * rel->cfg.frame_payload, payload, len);
			s->seq = seq;
			s->len = (uint16_t)len;
			s->uflags = uflags;
			s->present = 1;
			if (p->rx_ooo_count++ == 0 || fdp_seq_gt(seq, p->rx_high_seq))
				p->rx_high_seq = seq;
			rel->stats.rx_ooo++;
		}
	}
	ack_by(rel, p, now_ns);
}

int fdp_rel_rx_check(struct fdp_rel *rel, const void *frame, size_t len)
{
	struct fdp_rel_hdr h;
	size_t flen;

	if (len < sizeof(h)) {
		rel->stats.rx_malformed++;
		return -FI_EINVAL;
	}
	memcpy(&h, frame, sizeof(h));
	if (h.hdr.magic != FDP_MAGIC || h.hdr.version != FDP_PROTO_VERSION ||
	    h.version != FDP_REL_VERSION) {
		rel->stats.rx_bad_version++;
		return -FI_EINVAL;
	}
	flen = be16toh(h.hdr.len);
	if ((h.hdr.type != FDP_REL_T_DATA && h.hdr.type != FDP_REL_T_ACK) || flen > len ||
	    flen < sizeof(h) || flen - sizeof(h) > rel->cfg.frame_payload ||
	    (h.hdr.type == FDP_REL_T_ACK &&
	     (flen != sizeof(h) || !(h.hdr.flags & FDP_REL_F_ACK))) ||
	    h.session == 0) {
		rel->stats.rx_malformed++;
		return -FI_EINVAL;
	}
	return 0;
}

void fdp_rel_rx(struct fdp_rel *rel, struct fdp_rel_peer *p, const void *frame, size_t len,
		uint64_t now_ns)
{
	struct fdp_rel_hdr h;
	uint32_t session, una;

	if (fdp_rel_rx_check(rel, frame, len) < 0)
		return;
	memcpy(&h, frame, sizeof(h));
	session = be32toh(h.session);
	una = be32toh(h.una);

	if (session != p->peer_session) {
		/* first contact, or the peer restarted: its stream starts at una */
		bool restarted = p->peer_session != 0;
		p->peer_session = session;
		if (restarted) {
			rx_restart(rel, p, una);
		} else {
			p->rcv_nxt = una;
			p->ack_pending = 0;
		}
	} else if (fdp_seq_gt(una, p->rcv_nxt)) {
		/* the peer gave up on frames we never got (it declared us
		 * unreachable): skip them rather than wait forever */
		rx_restart(rel, p, una);
	}

	if (h.hdr.flags & FDP_REL_F_ACK) {
		if (be32toh(h.peer_session) == rel->cfg.session)
			process_ack(rel, p, be32toh(h.ack), be64toh(h.sack), be16toh(h.sack_base),
				    be32toh(h.tsecr), h.hdr.type == FDP_REL_T_ACK, now_ns);
		else
			rel->stats.rx_bad_ack++; /* meant for a previous instance of us */
	}
	if (h.hdr.type == FDP_REL_T_DATA) {
		p->ts_recent = be32toh(h.tsval);
		p->ts_recent_at_ns = now_ns;
		rx_data(rel, p, be32toh(h.seq), h.uflags, (const uint8_t *)frame + sizeof(h),
			be16toh(h.hdr.len) - sizeof(h), now_ns);
		if (h.hdr.flags & FDP_REL_F_ACKREQ)
			ack_by(rel, p, now_ns);
	}
	deliver_buffered(rel, p); /* after an rx_restart, buffered frames may be in order */
}

