/*
 * fdp_rel.c - the reliability protocol of the dpdk provider's RDM endpoint.
 * Contract and protocol summary in fdp_rel.h; wire format in fdp_rel_proto.h.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_rel.h"

/* Send slot: payload lives in peer->tx_data at the same index. */
struct fdp_rel_txslot {
	uint64_t cookie;      /* upper layer's completion cookie (0 = none) */
	uint64_t first_tx_ns; /* first transmission (0 = not sent yet) */
	uint64_t last_tx_ns;  /* latest (re)transmission */
	const void *ext;      /* payload bytes after the slot's (not copied) */
	uint16_t len;         /* payload bytes in the slot */
	uint16_t ext_len;     /* ...and at ext */
	uint8_t uflags;       /* hdr.uflags to send */
	uint8_t state;        /* enum txslot_state */
};

enum txslot_state {
	TX_SACKED = 1u << 0, /* selectively acked: never retransmit */
	TX_RETX = 1u << 1,   /* retransmitted at least once (RACK: which copy arrived?) */
	TX_FR = 1u << 2,     /* fast-retransmitted since the last timeout */
	TX_ACKREQ = 1u << 3, /* ask for an immediate ack */
};

/* Out-of-order receive slot: payload in peer->rx_data at the same index. */
struct fdp_rel_rxslot {
	uint32_t seq;
	uint16_t len;
	uint8_t uflags;
	uint8_t present;
};

/* Clock granularity G of RFC 6298: our clock is nanoseconds, 1 us is ample. */
#define REL_CLOCK_G_NS 1000u

void fdp_rel_cfg_default(struct fdp_rel_cfg *cfg)
{
	*cfg = (struct fdp_rel_cfg){
		.window = 256,
		.frame_payload = 1424,
		.ack_every = 16,
		.dupack_thresh = 3,
		.ack_delay_ns = 20 * 1000,
		.rto_init_ns = 1000 * 1000,
		.rto_min_ns = 250 * 1000,
		.rto_max_ns = 100 * 1000 * 1000,
		.unreach_ns = 2000ull * 1000 * 1000,
		.session = 1,
		.isn = 0,
		.max_rx_rings = 64,
	};
}

int fdp_rel_init(struct fdp_rel *rel, const struct fdp_rel_cfg *cfg,
		 const struct fdp_rel_ops *ops, void *ctx)
{
	if (!cfg || !ops || !ops->tx || !ops->deliver || !ops->complete)
		return -FI_EINVAL;
	if (cfg->window < 16 || cfg->window > 4096 || (cfg->window & (cfg->window - 1)))
		return -FI_EINVAL;
	if (cfg->frame_payload < 64 || cfg->frame_payload > 65000)
		return -FI_EINVAL;
	if (cfg->session == 0 || cfg->ack_every == 0 || cfg->dupack_thresh == 0)
		return -FI_EINVAL;
	if (cfg->rto_min_ns == 0 || cfg->rto_min_ns > cfg->rto_max_ns || cfg->unreach_ns == 0 ||
	    cfg->max_rx_rings == 0)
		return -FI_EINVAL;
	memset(rel, 0, sizeof(*rel));
	rel->cfg = *cfg;
	rel->ops = ops;
	rel->ctx = ctx;
	rel->mask = cfg->window - 1;
	rel->next_deadline_ns = UINT64_MAX;
	return 0;
}

int fdp_rel_peer_init(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	memset(p, 0, sizeof(*p));
	p->snd_una = p->snd_nxt = p->snd_unsent = rel->cfg.isn;
	p->rto_base_ns = p->rto_ns = rel->cfg.rto_init_ns;
	return 0;
}

/* The send ring exists from the first send on: a peer we only hear from
 * (or that only sends us garbage) costs no ring. */
static int ensure_tx_ring(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	if (p->tx)
		return 0;
	p->tx = calloc(rel->cfg.window, sizeof(*p->tx));
	p->tx_data = malloc((size_t)rel->cfg.window * rel->cfg.frame_payload);
	if (!p->tx || !p->tx_data) {
		free(p->tx);
		free(p->tx_data);
		p->tx = NULL;
		p->tx_data = NULL;
		return -FI_ENOMEM;
	}
	return 0;
}

void fdp_rel_peer_fini(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	if (p->active) {
		struct fdp_rel_peer **pp = &rel->active;
		while (*pp && *pp != p)
			pp = &(*pp)->active_next;
		if (*pp)
			*pp = p->active_next;
		p->active = false;
	}
	if (p->rx)
		rel->rx_rings--;
	free(p->tx);
	free(p->tx_data);
	free(p->rx);
	free(p->rx_data);
	p->tx = NULL;
	p->tx_data = NULL;
	p->rx = NULL;
	p->rx_data = NULL;
}

/* Make sure progress looks at p no later than deadline. */
static void peer_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t deadline)
{
	if (!p->active) {
		p->active = true;
		p->active_next = rel->active;
		rel->active = p;
	}
	if (deadline < rel->next_deadline_ns)
		rel->next_deadline_ns = deadline;
}

/* An ack is owed to the peer no later than `when`. */
static void ack_by(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t when)
{
	if (p->ack_deadline_ns == 0 || when < p->ack_deadline_ns)
		p->ack_deadline_ns = when;
	peer_arm(rel, p, p->ack_deadline_ns);
}

/* SACK bitmap for the next ack, and its base offset. An out-of-order range
 * wider than the 64 bits is reported piecewise: every other ack shows the
 * first 64 frames past the hole (where recovery starts), the others rotate
 * over the rest, so the sender learns of holes far ahead within a few acks. */
static uint64_t build_sack(const struct fdp_rel *rel, struct fdp_rel_peer *p, uint16_t *base)
{
	uint64_t sack = 0;
	uint32_t extent, windows, b = 0;

	*base = 0;
	if (!p->rx || p->rx_ooo_count == 0)
		return 0;
	extent = fdp_seq_gt(p->rx_high_seq, p->rcv_nxt) ? p->rx_high_seq - p->rcv_nxt : 0;
	windows = (extent + FDP_REL_SACK_BITS - 1) / FDP_REL_SACK_BITS;
	if (windows > 1 && (p->sack_rot++ & 1))
		b = FDP_REL_SACK_BITS * (1 + (p->sack_rot >> 1) % (windows - 1));
	for (uint32_t i = 0; i < FDP_REL_SACK_BITS && b + i + 1 < rel->cfg.window; i++) {
		uint32_t seq = p->rcv_nxt + 1 + b + i;
		const struct fdp_rel_rxslot *s = &p->rx[seq & rel->mask];
		if (s->present && s->seq == seq)
			sack |= 1ull << i;
	}
	*base = (uint16_t)b;
	return sack;
}

/* Timestamps: microseconds, never 0 (0 means "nothing to echo"). */
static uint32_t ts_of(uint64_t now_ns)
{
	uint32_t ts = (uint32_t)(now_ns / 1000);

	return ts ? ts : 1;
}

/* Build the header (with our current ack state) and hand the frame to ops->tx. */
static int send_frame(struct fdp_rel *rel, struct fdp_rel_peer *p, uint8_t type, uint32_t seq,
		      uint8_t uflags, uint8_t flags, const void *payload, size_t len,
		      const void *ext, size_t ext_len, uint64_t now_ns)
{
	struct fdp_rel_hdr h;
	bool acking = p->peer_session != 0;
	int ret;

	h.hdr.magic = FDP_MAGIC;
	h.hdr.version = FDP_PROTO_VERSION;
	h.hdr.type = type;
	h.hdr.flags = flags;
	h.hdr.len = htobe16((uint16_t)(sizeof(h) + len + ext_len));
	h.hdr.reserved = 0;
	h.version = FDP_REL_VERSION;
	h.uflags = uflags;
	h.sack_base = 0;
	h.session = htobe32(rel->cfg.session);
	h.peer_session = htobe32(p->peer_session);
	h.seq = htobe32(seq);
	h.una = htobe32(p->snd_una);
	h.tsval = htobe32(ts_of(now_ns));
	h.tsecr = htobe32(now_ns - p->ts_recent_at_ns <= 2 * rel->cfg.ack_delay_ns ? p->ts_recent : 0);
	if (acking) {
		h.hdr.flags |= FDP_REL_F_ACK;
		if (p->rnr_pending)
			h.hdr.flags |= FDP_REL_F_RNR;
		uint16_t base;

		h.ack = htobe32(p->rcv_nxt);
		h.sack = htobe64(build_sack(rel, p, &base));
		h.sack_base = htobe16(base);
	} else {
		h.ack = 0;
		h.sack = 0;
	}
	ret = rel->ops->tx(rel, p, &h, sizeof(h), payload, len, ext, ext_len);
	if (ret < 0) {
		rel->stats.tx_busy++;
		return ret;
	}
	if (acking) {
		p->ack_pending = 0;
		p->ack_deadline_ns = 0;
		p->rnr_pending = false;
	}
	return 0;
}

static int xmit_slot(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t seq, bool retx,
		     uint64_t now_ns)
{
	struct fdp_rel_txslot *s = &p->tx[seq & rel->mask];
	uint8_t flags = 0;
	int ret;

	/* A retransmission or a full window: the receiver's state is what we
	 * wait for, so ask for it at once instead of after its ack delay. */
	if (retx || (s->state & TX_ACKREQ) || p->snd_nxt - p->snd_una >= rel->cfg.window)
		flags |= FDP_REL_F_ACKREQ;
	ret = send_frame(rel, p, FDP_REL_T_DATA, seq, s->uflags, flags,
			 p->tx_data + (size_t)(seq & rel->mask) * rel->cfg.frame_payload, s->len,
			 s->ext, s->ext_len, now_ns);
	if (ret < 0)
		return ret;
	if (!s->first_tx_ns)
		s->first_tx_ns = now_ns ? now_ns : 1;
	s->last_tx_ns = now_ns;
	if (retx) {
		s->state |= TX_RETX;
		rel->stats.tx_retx++;
	} else {
		rel->stats.tx_data++;
	}
	return 0;
}

/* Arm the tail loss probe: 2 SRTT (+ the peer's ack delay unless it was
 * asked to ack at once), only while it would fire before the RTO. */
static void tlp_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	uint64_t pto;
	uint32_t last = p->snd_unsent - 1;

	p->tlp_deadline_ns = 0;
	if (p->tlp_done || p->srtt_ns == 0 || p->snd_una == p->snd_unsent)
		return;
	pto = 2 * p->srtt_ns + REL_CLOCK_G_NS;
	if (!(p->tx[last & rel->mask].state & TX_ACKREQ))
		pto += rel->cfg.ack_delay_ns;
	if (p->rto_deadline_ns && now_ns + pto >= p->rto_deadline_ns)
		return;
	p->tlp_deadline_ns = now_ns + pto;
	peer_arm(rel, p, p->tlp_deadline_ns);
}

void *fdp_rel_tx_reserve(struct fdp_rel *rel, struct fdp_rel_peer *p)
{
	if (p->snd_nxt - p->snd_una >= rel->cfg.window || p->abandoning ||
	    ensure_tx_ring(rel, p) < 0)
		return NULL;
	return p->tx_data + (size_t)(p->snd_nxt & rel->mask) * rel->cfg.frame_payload;
}

void fdp_rel_tx_commit(struct fdp_rel *rel, struct fdp_rel_peer *p, size_t len, uint8_t uflags,
		       uint64_t cookie, bool ack_req, uint64_t now_ns)
{
	fdp_rel_tx_commit_ext(rel, p, len, NULL, 0, uflags, cookie, ack_req, now_ns);
}

void fdp_rel_tx_commit_ext(struct fdp_rel *rel, struct fdp_rel_peer *p, size_t len,
			   const void *ext, size_t ext_len, uint8_t uflags, uint64_t cookie,
			   bool ack_req, uint64_t now_ns)
{
	uint32_t seq = p->snd_nxt;
	struct fdp_rel_txslot *s = &p->tx[seq & rel->mask];

	s->cookie = cookie;
	s->first_tx_ns = 0;
	s->last_tx_ns = 0;
	s->len = (uint16_t)len;
	s->ext = ext_len ? ext : NULL;
	s->ext_len = (uint16_t)ext_len;
	s->uflags = uflags;
	s->state = ack_req ? TX_ACKREQ : 0;
	p->snd_nxt = seq + 1;
	p->unreachable = false;
	if (p->snd_una == seq) {
		/* first frame in flight after idle: a fresh liveness clock */
		p->stall_since_ns = 0;
		p->rto_deadline_ns = now_ns + p->rto_ns;
		peer_arm(rel, p, p->rto_deadline_ns);
	}
	if (p->snd_unsent != seq)
		return; /* earlier frames still wait for the device: keep order */
	if (xmit_slot(rel, p, seq, false, now_ns) == 0) {
		p->snd_unsent = seq + 1;
		tlp_arm(rel, p, now_ns); /* the probe follows the newest frame */
	} else {
		peer_arm(rel, p, now_ns);
	}
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
	rto = p->srtt_ns + (var4 > REL_CLOCK_G_NS ? var4 : REL_CLOCK_G_NS);
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

	if (s->state & TX_SACKED || fdp_seq_le(p->snd_unsent, seq))
		return;
	/* again only once an RTO passed, or a frame sent after this copy
	 * (by more than a reordering window) was delivered: it is lost too */
	if ((s->state & TX_FR) && now_ns - s->last_tx_ns < p->rto_base_ns &&
	    s->last_tx_ns + p->srtt_ns / 4 >= p->rack_xmit_ns)
		return;
	if (xmit_slot(rel, p, seq, true, now_ns) == 0) {
		s->state |= TX_FR;
		rel->stats.tx_fast_retx++;
	}
}

/* RACK (RFC 8985, simplified): remember the latest transmission known to
 * have been delivered. A retransmission counts only once an RTT could have
 * passed since it was sent (else the ack may be for the original). */
static void rack_note(struct fdp_rel_peer *p, const struct fdp_rel_txslot *s, uint64_t now_ns)
{
	if ((s->state & TX_RETX) && (p->min_rtt_ns == 0 || now_ns - s->last_tx_ns < p->min_rtt_ns))
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
		uint32_t rtt_us = ts_of(now_ns) - tsecr;

		if (rtt_us < 10u * 1000 * 1000) {
			rtt_sample(rel, p, (uint64_t)rtt_us * 1000 + 500);
			p->rto_ns = p->rto_base_ns; /* no ambiguity: backoff ends */
		}
	}

	if (fdp_seq_gt(ack, p->snd_una)) {
		while (p->snd_una != ack) {
			struct fdp_rel_txslot *s = &p->tx[p->snd_una & rel->mask];
			uint64_t cookie = s->cookie;

			if (!(s->state & TX_SACKED))
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
			peer_arm(rel, p, p->rto_deadline_ns);
			tlp_arm(rel, p, now_ns);
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
			if (!(s->state & TX_SACKED))
				rack_note(p, s, now_ns);
			s->state |= TX_SACKED;
			top = off + 1;
		}
		/* a frame this ack does not cover may have arrived and been
		 * reported by another ack: only offset 0 (the cumulative
		 * point) and the window this ack covers tell what is missing */
		for (uint32_t off = top; off-- > 0 && nholes < FDP_REL_SACK_BITS;) {
			struct fdp_rel_txslot *s = &p->tx[(p->snd_una + off) & rel->mask];
			if (s->state & TX_SACKED)
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

static void send_pure_ack(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	if (p->peer_session == 0) {
		p->ack_deadline_ns = 0;
		return;
	}
	if (send_frame(rel, p, FDP_REL_T_ACK, p->snd_nxt, 0, 0, NULL, 0, NULL, 0, now_ns) == 0)
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
		xmit_slot(rel, p, p->snd_una, true, now_ns);
	for (uint32_t seq = p->snd_una; seq != p->snd_unsent; seq++)
		p->tx[seq & rel->mask].state &= (uint8_t)~TX_FR;
	p->dupacks = 0;
	p->rto_ns = p->rto_ns * 2 > rel->cfg.rto_max_ns ? rel->cfg.rto_max_ns : p->rto_ns * 2;
	p->rto_deadline_ns = now_ns + p->rto_ns;
}

/* Run p's due timers; returns its next deadline, UINT64_MAX when idle. */
static uint64_t peer_timers(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	uint64_t next = UINT64_MAX;

	while (p->snd_unsent != p->snd_nxt) {
		if (xmit_slot(rel, p, p->snd_unsent, false, now_ns) < 0) {
			next = now_ns; /* device full: try again at the next call */
			break;
		}
		p->snd_unsent++;
	}
	if (p->tlp_deadline_ns && now_ns >= p->tlp_deadline_ns) {
		uint32_t last = p->snd_unsent - 1;

		p->tlp_deadline_ns = 0;
		if (!p->tlp_done && p->snd_una != p->snd_unsent &&
		    !(p->tx[last & rel->mask].state & TX_SACKED) &&
		    xmit_slot(rel, p, last, true, now_ns) == 0) {
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
