/*
 * fdp_msg.c - the message layer's descriptor pools, its callbacks from the
 * reliable layer, and set-up. Contract in fdp_msg.h; wire header struct
 * fdp_msg_hdr in fdp_rel_proto.h.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_msg_int.h"

#define MSG_OF(relp) container_of(relp, struct fdp_msg_ep, rel)
#define PEER_OF(relpeer) container_of(relpeer, struct fdp_msg_peer, rel)

/* ------------------------------------------------------------ pools */

struct fdp_msg_tx *fdp_msg_tx_get(struct fdp_msg_ep *m)
{
	struct fdp_msg_tx *tx = m->tx_free;

	if (tx) {
		m->tx_free = tx->next;
		tx->next = NULL;
		m->tx_in_use++;
	}
	return tx;
}

void fdp_msg_tx_put(struct fdp_msg_ep *m, struct fdp_msg_tx *tx)
{
	tx->next = m->tx_free;
	m->tx_free = tx;
	m->tx_in_use--;
}

struct fdp_msg_rx *fdp_msg_rx_get(struct fdp_msg_ep *m)
{
	struct fdp_dlist *n;

	if (fdp_dl_empty(&m->rx_free))
		return NULL;
	n = m->rx_free.next;
	fdp_dl_del(n);
	m->rx_in_use++;
	return container_of(n, struct fdp_msg_rx, link);
}

void fdp_msg_rx_put(struct fdp_msg_ep *m, struct fdp_msg_rx *rx)
{
	fdp_dl_add_head(&m->rx_free, &rx->link);
	m->rx_in_use--;
}

struct fdp_msg_ux *fdp_msg_ux_get(struct fdp_msg_ep *m, size_t len)
{
	struct fdp_msg_ux *ux;

	if (m->ux_count >= m->cfg.ux_max_entries || len > m->cfg.ux_max_bytes - m->ux_bytes ||
	    fdp_dl_empty(&m->ux_free))
		return NULL;
	ux = container_of(m->ux_free.next, struct fdp_msg_ux, link);
	if (len <= FDP_MSG_UX_INLINE) {
		ux->buf = ux->inline_buf;
	} else {
		ux->buf = malloc(len); /* one per unexpected message, never per frame */
		if (!ux->buf)
			return NULL;
	}
	fdp_dl_del(&ux->link);
	m->ux_count++;
	m->ux_bytes += len;
	ux->len = len;
	ux->got = 0;
	ux->claimed = NULL;
	ux->claim_ctx = NULL;
	return ux;
}

void fdp_msg_ux_put(struct fdp_msg_ep *m, struct fdp_msg_ux *ux)
{
	fdp_dl_del(&ux->link);
	if (ux->buf != ux->inline_buf)
		free(ux->buf);
	ux->buf = NULL;
	m->ux_count--;
	m->ux_bytes -= ux->len;
	fdp_dl_add_head(&m->ux_free, &ux->link);
}


/* ------------------------------------------------------------ engine glue */

static int rel_tx(struct fdp_rel *rel, struct fdp_rel_peer *rp, const void *hdr, size_t hdr_len,
		  const void *payload, size_t len, const void *ext, size_t ext_len)
{
	struct fdp_msg_ep *m = MSG_OF(rel);

	return m->ops->tx(m, PEER_OF(rp), hdr, hdr_len, payload, len, ext, ext_len);
}

static int rel_deliver(struct fdp_rel *rel, struct fdp_rel_peer *rp, uint8_t uflags,
		       const void *payload, size_t len)
{
	return fdp_msg_deliver(MSG_OF(rel), PEER_OF(rp), uflags, payload, len);
}

static void rel_complete(struct fdp_rel *rel, struct fdp_rel_peer *rp, uint64_t cookie, int err)
{
	struct fdp_msg_ep *m = MSG_OF(rel);

	if (cookie == FDP_MSG_COOKIE_INJECT) {
		if (m->ops->inject_done)
			m->ops->inject_done(m, PEER_OF(rp), err);
		return;
	}
	struct fdp_msg_tx *tx = (struct fdp_msg_tx *)(uintptr_t)cookie;
	if (err)
		m->stats.tx_errors++;
	else
		m->stats.tx_msgs++;
	m->ops->send_done(m, tx, err);
	fdp_msg_tx_put(m, tx);
}

static void rel_tx_ready(struct fdp_rel *rel, struct fdp_rel_peer *rp)
{
	fdp_msg_push(MSG_OF(rel), PEER_OF(rp));
}

static void rel_unreachable(struct fdp_rel *rel, struct fdp_rel_peer *rp)
{
	struct fdp_msg_ep *m = MSG_OF(rel);
	struct fdp_msg_peer *peer = PEER_OF(rp);
	struct fdp_msg_tx *tx;

	/* sends still queued (the head may be partly framed; its frames were
	 * abandoned with the window) fail too: no send is left hanging */
	while ((tx = peer->txq_head) != NULL) {
		peer->txq_head = tx->next;
		if (!peer->txq_head)
			peer->txq_tail = NULL;
		m->stats.tx_errors++;
		m->ops->send_done(m, tx, -FI_EHOSTUNREACH);
		fdp_msg_tx_put(m, tx);
	}
}

static void rel_rx_reset(struct fdp_rel *rel, struct fdp_rel_peer *rp)
{
	fdp_msg_abort_rx(MSG_OF(rel), PEER_OF(rp));
}

static const struct fdp_rel_ops msg_rel_ops = {
	.tx = rel_tx,
	.deliver = rel_deliver,
	.complete = rel_complete,
	.tx_ready = rel_tx_ready,
	.unreachable = rel_unreachable,
	.rx_reset = rel_rx_reset,
};

void fdp_msg_rx_frame(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const void *frame,
		      size_t len, uint64_t now_ns)
{
	m->now_ns = now_ns;
	fdp_rel_rx(&m->rel, &peer->rel, frame, len, now_ns);
}

uint64_t fdp_msg_progress(struct fdp_msg_ep *m, uint64_t now_ns)
{
	m->now_ns = now_ns;
	return fdp_rel_progress(&m->rel, now_ns);
}

/* ------------------------------------------------------------ setup */

void fdp_msg_cfg_default(struct fdp_msg_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->max_msg_size = 4u << 20;
	cfg->ux_max_bytes = 64u << 20;
	cfg->ux_max_entries = 1024;
	cfg->tx_ops = 1024;
	cfg->rx_ops = 1024;
	cfg->inject_max = 4096;
	fdp_rel_cfg_default(&cfg->rel);
}

int fdp_msg_init(struct fdp_msg_ep *m, const struct fdp_msg_cfg *cfg,
		 const struct fdp_msg_ops *ops, void *ctx)
{
	int ret;

	if (!cfg || !ops || !ops->tx || !ops->send_done || !ops->recv_done)
		return -FI_EINVAL;
	if (cfg->max_msg_size == 0 || cfg->max_msg_size > (1u << 31) || cfg->tx_ops == 0 ||
	    cfg->rx_ops == 0 || cfg->ux_max_entries == 0 || cfg->ux_max_bytes < cfg->max_msg_size ||
	    cfg->rel.frame_payload <= FDP_MSG_HDR_LEN || cfg->inject_max > cfg->max_msg_size ||
	    (FDP_MSG_HDR_LEN + cfg->inject_max) / cfg->rel.frame_payload + 1 > cfg->rel.window)
		return -FI_EINVAL;
	memset(m, 0, sizeof(*m));
	ret = fdp_rel_init(&m->rel, &cfg->rel, &msg_rel_ops, m);
	if (ret)
		return ret;
	m->cfg = *cfg;
	m->ops = ops;
	m->ctx = ctx;
	fdp_dl_init(&m->rx_free);
	fdp_dl_init(&m->ux_free);
	for (int t = 0; t < 2; t++) {
		fdp_dl_init(&m->posted[t]);
		fdp_dl_init(&m->unexpected[t]);
	}
	m->tx_pool = calloc(cfg->tx_ops, sizeof(*m->tx_pool));
	m->rx_pool = calloc(cfg->rx_ops, sizeof(*m->rx_pool));
	m->ux_pool = calloc(cfg->ux_max_entries, sizeof(*m->ux_pool));
	if (!m->tx_pool || !m->rx_pool || !m->ux_pool) {
		fdp_msg_fini(m);
		return -FI_ENOMEM;
	}
	for (uint32_t i = cfg->tx_ops; i-- > 0;) {
		m->tx_pool[i].next = m->tx_free;
		m->tx_free = &m->tx_pool[i];
	}
	for (uint32_t i = 0; i < cfg->rx_ops; i++)
		fdp_dl_add_tail(&m->rx_free, &m->rx_pool[i].link);
	for (uint32_t i = 0; i < cfg->ux_max_entries; i++)
		fdp_dl_add_tail(&m->ux_free, &m->ux_pool[i].link);
	return 0;
}

void fdp_msg_fini(struct fdp_msg_ep *m)
{
	for (int t = 0; t < 2 && m->ux_pool; t++) {
		while (!fdp_dl_empty(&m->unexpected[t]))
			fdp_msg_ux_put(m, container_of(m->unexpected[t].next, struct fdp_msg_ux, link));
	}
	free(m->tx_pool);
	free(m->rx_pool);
	free(m->ux_pool);
	m->tx_pool = NULL;
	m->rx_pool = NULL;
	m->ux_pool = NULL;
}

int fdp_msg_peer_init(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, fi_addr_t addr)
{
	memset(peer, 0, sizeof(*peer));
	peer->addr = addr;
	return fdp_rel_peer_init(&m->rel, &peer->rel);
}

void fdp_msg_peer_fini(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
{
	fdp_msg_abort_rx(m, peer);
	fdp_rel_peer_fini(&m->rel, &peer->rel);
}
