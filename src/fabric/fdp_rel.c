/*
 * fdp_rel.c - the reliability protocol of the dpdk provider's RDM endpoint:
 * set-up, peers and the send window. Contract and protocol summary in
 * fdp_rel.h; wire format in fdp_rel_proto.h.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_rel_int.h"

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
void fdp_rel_peer_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t deadline)
{
	if (!p->active) {
		p->active = true;
		p->active_next = rel->active;
		rel->active = p;
	}
	if (deadline < rel->next_deadline_ns)
		rel->next_deadline_ns = deadline;
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
/* Build the header (with our current ack state) and hand the frame to ops->tx. */
int fdp_rel_send_frame(struct fdp_rel *rel, struct fdp_rel_peer *p, uint8_t type, uint32_t seq,
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
	h.tsval = htobe32(fdp_rel_ts(now_ns));
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

int fdp_rel_xmit_slot(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t seq, bool retx,
		      uint64_t now_ns)
{
	struct fdp_rel_txslot *s = &p->tx[seq & rel->mask];
	uint8_t flags = 0;
	int ret;

	/* A retransmission or a full window: the receiver's state is what we
	 * wait for, so ask for it at once instead of after its ack delay. */
	if (retx || (s->state & FDP_REL_TX_ACKREQ) || p->snd_nxt - p->snd_una >= rel->cfg.window)
		flags |= FDP_REL_F_ACKREQ;
	ret = fdp_rel_send_frame(rel, p, FDP_REL_T_DATA, seq, s->uflags, flags,
			 p->tx_data + (size_t)(seq & rel->mask) * rel->cfg.frame_payload, s->len,
			 s->ext, s->ext_len, now_ns);
	if (ret < 0)
		return ret;
	if (!s->first_tx_ns)
		s->first_tx_ns = now_ns ? now_ns : 1;
	s->last_tx_ns = now_ns;
	if (retx) {
		s->state |= FDP_REL_TX_RETX;
		rel->stats.tx_retx++;
	} else {
		rel->stats.tx_data++;
	}
	return 0;
}

/* Arm the tail loss probe: 2 SRTT (+ the peer's ack delay unless it was
 * asked to ack at once), only while it would fire before the RTO. */
void fdp_rel_tlp_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns)
{
	uint64_t pto;
	uint32_t last = p->snd_unsent - 1;

	p->tlp_deadline_ns = 0;
	if (p->tlp_done || p->srtt_ns == 0 || p->snd_una == p->snd_unsent)
		return;
	pto = 2 * p->srtt_ns + FDP_REL_CLOCK_G_NS;
	if (!(p->tx[last & rel->mask].state & FDP_REL_TX_ACKREQ))
		pto += rel->cfg.ack_delay_ns;
	if (p->rto_deadline_ns && now_ns + pto >= p->rto_deadline_ns)
		return;
	p->tlp_deadline_ns = now_ns + pto;
	fdp_rel_peer_arm(rel, p, p->tlp_deadline_ns);
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
	s->state = ack_req ? FDP_REL_TX_ACKREQ : 0;
	p->snd_nxt = seq + 1;
	p->unreachable = false;
	if (p->snd_una == seq) {
		/* first frame in flight after idle: a fresh liveness clock */
		p->stall_since_ns = 0;
		p->rto_deadline_ns = now_ns + p->rto_ns;
		fdp_rel_peer_arm(rel, p, p->rto_deadline_ns);
	}
	if (p->snd_unsent != seq)
		return; /* earlier frames still wait for the device: keep order */
	if (fdp_rel_xmit_slot(rel, p, seq, false, now_ns) == 0) {
		p->snd_unsent = seq + 1;
		fdp_rel_tlp_arm(rel, p, now_ns); /* the probe follows the newest frame */
	} else {
		fdp_rel_peer_arm(rel, p, now_ns);
	}
}

