/*
 * fdp_msg.c - segmentation, reassembly and matching over fdp_rel.
 * Contract in fdp_msg.h; wire header struct fdp_msg_hdr in fdp_rel_proto.h.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_msg.h"

/* Cookie of an inject's frame (tx descriptors are pointers, never 1). */
#define COOKIE_INJECT ((uint64_t)1)

#define MSG_OF(relp) container_of(relp, struct fdp_msg_ep, rel)
#define PEER_OF(relpeer) container_of(relpeer, struct fdp_msg_peer, rel)

#ifndef container_of
#define container_of(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))
#endif

/* ------------------------------------------------------------ lists */

static void dl_init(struct fdp_dlist *h)
{
	h->prev = h->next = h;
}

static bool dl_empty(const struct fdp_dlist *h)
{
	return h->next == h;
}

static void dl_add_tail(struct fdp_dlist *h, struct fdp_dlist *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static void dl_add_head(struct fdp_dlist *h, struct fdp_dlist *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

static void dl_del(struct fdp_dlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* ------------------------------------------------------------ iov cursors */

/* Copy n bytes out of iov from the cursor (the caller knows they exist). */
static void iov_read(const struct iovec *iov, size_t count, size_t *idx, size_t *off, uint8_t *dst,
		     size_t n)
{
	while (n > 0 && *idx < count) {
		size_t avail = iov[*idx].iov_len - *off;
		size_t chunk = n < avail ? n : avail;

		if (chunk)
			memcpy(dst, (const uint8_t *)iov[*idx].iov_base + *off, chunk);
		dst += chunk;
		n -= chunk;
		*off += chunk;
		if (*off == iov[*idx].iov_len) {
			(*idx)++;
			*off = 0;
		}
	}
}

/* Copy up to n bytes into iov at the cursor; bytes past its end are dropped. */
static void iov_write(const struct iovec *iov, size_t count, size_t *idx, size_t *off,
		      const uint8_t *src, size_t n)
{
	while (n > 0 && *idx < count) {
		size_t room = iov[*idx].iov_len - *off;
		size_t chunk = n < room ? n : room;

		if (chunk)
			memcpy((uint8_t *)iov[*idx].iov_base + *off, src, chunk);
		src += chunk;
		n -= chunk;
		*off += chunk;
		if (*off == iov[*idx].iov_len) {
			(*idx)++;
			*off = 0;
		}
	}
}

static size_t iov_total(const struct iovec *iov, size_t count)
{
	size_t len = 0;

	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* ------------------------------------------------------------ pools */

static struct fdp_msg_tx *tx_get(struct fdp_msg_ep *m)
{
	struct fdp_msg_tx *tx = m->tx_free;

	if (tx) {
		m->tx_free = tx->next;
		tx->next = NULL;
		m->tx_in_use++;
	}
	return tx;
}

static void tx_put(struct fdp_msg_ep *m, struct fdp_msg_tx *tx)
{
	tx->next = m->tx_free;
	m->tx_free = tx;
	m->tx_in_use--;
}

static struct fdp_msg_rx *rx_get(struct fdp_msg_ep *m)
{
	struct fdp_dlist *n;

	if (dl_empty(&m->rx_free))
		return NULL;
	n = m->rx_free.next;
	dl_del(n);
	m->rx_in_use++;
	return container_of(n, struct fdp_msg_rx, link);
}

static void rx_put(struct fdp_msg_ep *m, struct fdp_msg_rx *rx)
{
	dl_add_head(&m->rx_free, &rx->link);
	m->rx_in_use--;
}

static struct fdp_msg_ux *ux_get(struct fdp_msg_ep *m, size_t len)
{
	struct fdp_msg_ux *ux;

	if (m->ux_count >= m->cfg.ux_max_entries || len > m->cfg.ux_max_bytes - m->ux_bytes ||
	    dl_empty(&m->ux_free))
		return NULL;
	ux = container_of(m->ux_free.next, struct fdp_msg_ux, link);
	if (len <= FDP_MSG_UX_INLINE) {
		ux->buf = ux->inline_buf;
	} else {
		ux->buf = malloc(len); /* one per unexpected message, never per frame */
		if (!ux->buf)
			return NULL;
	}
	dl_del(&ux->link);
	m->ux_count++;
	m->ux_bytes += len;
	ux->len = len;
	ux->got = 0;
	ux->claimed = NULL;
	ux->claim_ctx = NULL;
	return ux;
}

static void ux_put(struct fdp_msg_ep *m, struct fdp_msg_ux *ux)
{
	dl_del(&ux->link);
	if (ux->buf != ux->inline_buf)
		free(ux->buf);
	ux->buf = NULL;
	m->ux_count--;
	m->ux_bytes -= ux->len;
	dl_add_head(&m->ux_free, &ux->link);
}

/* ------------------------------------------------------------ sending */

static void encode_hdr(uint8_t *buf, uint8_t op, uint8_t hflags, size_t len, uint64_t tag,
		       uint64_t data)
{
	struct fdp_msg_hdr h = {
		.op = op,
		.flags = hflags,
		.reserved = 0,
		.len = htobe32((uint32_t)len),
		.tag = htobe64(tag),
		.cq_data = htobe64(data),
	};
	memcpy(buf, &h, sizeof(h));
}

/* Frame queued sends of peer while its window has room. */
static void push(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
{
	struct fdp_msg_tx *tx;

	while ((tx = peer->txq_head) != NULL) {
		uint8_t *buf = fdp_rel_tx_reserve(&m->rel, &peer->rel);
		size_t hl = 0, n;
		uint8_t uflags = 0;
		uint64_t cookie = 0;
		const uint8_t *ext;

		if (!buf)
			return;
		if (!tx->hdr_sent) {
			encode_hdr(buf, tx->op, tx->hflags, tx->len, tx->tag, tx->data);
			hl = FDP_MSG_HDR_LEN;
			uflags = FDP_REL_UF_FIRST;
			tx->hdr_sent = true;
		}
		n = m->cfg.rel.frame_payload - hl;
		if (n > tx->len - tx->off)
			n = tx->len - tx->off;
		ext = NULL;
		if (!tx->inject_complete && n && tx->iov_idx < tx->iov_count &&
		    tx->iov[tx->iov_idx].iov_len - tx->iov_off >= n) {
			/* transmit complete: the caller's buffer is ours to
			 * read until the message's last frame is acked, which
			 * acks this one too; frames point into it rather
			 * than copy it into the send ring */
			ext = (const uint8_t *)tx->iov[tx->iov_idx].iov_base + tx->iov_off;
			tx->iov_off += n;
			if (tx->iov_off == tx->iov[tx->iov_idx].iov_len) {
				tx->iov_idx++;
				tx->iov_off = 0;
			}
		} else {
			iov_read(tx->iov, tx->iov_count, &tx->iov_idx, &tx->iov_off, buf + hl, n);
		}
		tx->off += n;
		if (tx->off != tx->len) {
			fdp_rel_tx_commit_ext(&m->rel, &peer->rel, ext ? hl : hl + n, ext,
					      ext ? n : 0, uflags, 0, false, m->now_ns);
			continue;
		}
		peer->txq_head = tx->next;
		if (!peer->txq_head)
			peer->txq_tail = NULL;
		tx->next = NULL;
		if (!tx->inject_complete) {
			/* transmit complete: the last frame carries the
			 * descriptor, which completes when that frame (hence
			 * every earlier one) is acked; the sender waits for
			 * that ack, so ask for it at once */
			cookie = (uint64_t)(uintptr_t)tx;
			fdp_rel_tx_commit_ext(&m->rel, &peer->rel, ext ? hl : hl + n, ext,
					      ext ? n : 0, uflags, cookie, true, m->now_ns);
			continue;
		}
		/* inject complete: every byte is in the send window, the
		 * buffer is the caller's again; delivery is the window's job */
		fdp_rel_tx_commit(&m->rel, &peer->rel, hl + n, uflags, COOKIE_INJECT, false,
				  m->now_ns);
		m->stats.tx_msgs++;
		m->ops->send_done(m, tx, 0);
		tx_put(m, tx);
	}
}

static int check_op(const struct iovec *iov, size_t count, uint8_t op)
{
	if (count > FDP_MSG_IOV_MAX || (count && !iov))
		return -FI_EINVAL;
	if (op != FDP_MSG_OP_MSG && op != FDP_MSG_OP_TAGGED)
		return -FI_EINVAL;
	return 0;
}

int fdp_msg_send(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const struct iovec *iov,
		 size_t count, uint8_t op, uint64_t tag, bool has_data, uint64_t data,
		 void *context, uint64_t flags, uint64_t now_ns)
{
	struct fdp_msg_tx *tx;
	size_t len;
	int ret = check_op(iov, count, op);

	if (ret)
		return ret;
	len = iov_total(iov, count);
	if (len > m->cfg.max_msg_size)
		return -FI_EMSGSIZE;
	tx = tx_get(m);
	if (!tx)
		return -FI_EAGAIN;
	tx->context = context;
	tx->flags = flags;
	tx->peer = peer;
	memcpy(tx->iov, iov, count * sizeof(*iov));
	tx->iov_count = count;
	tx->len = len;
	tx->off = 0;
	tx->iov_idx = 0;
	tx->iov_off = 0;
	tx->tag = tag;
	tx->data = has_data ? data : 0;
	tx->op = op;
	tx->hflags = has_data ? FDP_MSG_HF_DATA : 0;
	tx->hdr_sent = false;
	tx->inject_complete = (flags & FI_INJECT_COMPLETE) &&
			      !(flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE));
	tx->next = NULL;
	if (peer->txq_tail)
		peer->txq_tail->next = tx;
	else
		peer->txq_head = tx;
	peer->txq_tail = tx;
	m->now_ns = now_ns;
	push(m, peer);
	return 0;
}

int fdp_msg_inject(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const struct iovec *iov,
		   size_t count, uint8_t op, uint64_t tag, bool has_data, uint64_t data,
		   uint64_t now_ns)
{
	size_t len, idx = 0, off = 0, fp = m->cfg.rel.frame_payload, nframes, done = 0;
	int ret = check_op(iov, count, op);

	if (ret)
		return ret;
	len = iov_total(iov, count);
	if (len > fdp_msg_inject_max(m))
		return -FI_EMSGSIZE;
	nframes = (FDP_MSG_HDR_LEN + len + fp - 1) / fp;
	if (peer->txq_head || fdp_rel_tx_space(&m->rel, &peer->rel) < nframes)
		return -FI_EAGAIN; /* earlier sends first (send-after-send order), or no room */
	m->now_ns = now_ns;
	for (size_t f = 0; f < nframes; f++) {
		uint8_t *buf = fdp_rel_tx_reserve(&m->rel, &peer->rel);
		size_t hl = f == 0 ? FDP_MSG_HDR_LEN : 0;
		size_t n = fp - hl;

		if (!buf)
			return -FI_EAGAIN; /* only at f == 0: no send ring (out of memory) */

		if (n > len - done)
			n = len - done;
		if (f == 0)
			encode_hdr(buf, op, has_data ? FDP_MSG_HF_DATA : 0, len, tag,
				   has_data ? data : 0);
		iov_read(iov, count, &idx, &off, buf + hl, n);
		done += n;
		/* nobody waits for an inject: its ack may ride on later traffic */
		fdp_rel_tx_commit(&m->rel, &peer->rel, hl + n, f == 0 ? FDP_REL_UF_FIRST : 0,
				  f + 1 == nframes ? COOKIE_INJECT : 0, false, now_ns);
	}
	return 0;
}

/* ------------------------------------------------------------ receiving */

static bool rx_matches(const struct fdp_msg_rx *rx, const struct fdp_msg_peer *peer, uint64_t tag)
{
	if (rx->src != FI_ADDR_UNSPEC && rx->src != peer->addr)
		return false;
	return !rx->tagged || (rx->tag | rx->ignore) == (tag | rx->ignore);
}

static void complete_rx(struct fdp_msg_ep *m, struct fdp_msg_rx *rx, struct fdp_msg_peer *peer,
			size_t msg_len, bool has_data, uint64_t tag, uint64_t data)
{
	struct fdp_msg_rx_info info = {
		.len = msg_len < rx->cap ? msg_len : rx->cap,
		.tagged = rx->tagged,
		.has_data = has_data,
		.tag = tag,
		.data = data,
		.peer = peer,
	};

	info.olen = msg_len - info.len;
	info.err = info.olen ? -FI_ETRUNC : 0;
	if (info.olen)
		m->stats.rx_truncated++;
	m->stats.rx_msgs++;
	m->ops->recv_done(m, rx, &info);
	rx_put(m, rx);
}

/* A complete unexpected message meets its receive. */
static void ux_deliver(struct fdp_msg_ep *m, struct fdp_msg_ux *ux, struct fdp_msg_rx *rx)
{
	size_t idx = 0, off = 0;

	/* unlinked before the callback: a receive posted from inside it must
	 * not find this message again */
	dl_del(&ux->link);
	ux->claimed = NULL;
	iov_write(rx->iov, rx->iov_count, &idx, &off, ux->buf, ux->len);
	complete_rx(m, rx, ux->peer, ux->len, ux->hflags & FDP_MSG_HF_DATA, ux->tag, ux->data);
	ux_put(m, ux);
}

/* Drop the message peer was receiving (stream reset or protocol error). */
static void abort_rx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
{
	if (!peer->rx_active)
		return;
	m->stats.rx_aborted++;
	if (peer->rx_cur) /* still posted: back at the front, where it was */
		dl_add_head(&m->posted[peer->rx_cur->tagged], &peer->rx_cur->link);
	if (peer->ux_cur) {
		struct fdp_msg_rx *claimed = peer->ux_cur->claimed;
		ux_put(m, peer->ux_cur);
		if (claimed)
			dl_add_head(&m->posted[claimed->tagged], &claimed->link);
	}
	peer->rx_cur = NULL;
	peer->ux_cur = NULL;
	peer->rx_active = false;
}

static void finish_rx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
{
	struct fdp_msg_rx *rx = peer->rx_cur;
	struct fdp_msg_ux *ux = peer->ux_cur;

	peer->rx_cur = NULL;
	peer->ux_cur = NULL;
	peer->rx_active = false;
	if (rx)
		complete_rx(m, rx, peer, peer->rx_len, peer->rx_hflags & FDP_MSG_HF_DATA,
			    peer->rx_tag, peer->rx_data);
	else if (ux && ux->claimed)
		ux_deliver(m, ux, ux->claimed);
}

static int start_rx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const uint8_t *payload,
		    size_t len)
{
	struct fdp_msg_hdr h;
	struct fdp_dlist *n;
	size_t msg_len;
	bool tagged;

	if (len < sizeof(h)) {
		m->stats.rx_malformed++;
		return -FI_EINVAL;
	}
	memcpy(&h, payload, sizeof(h));
	msg_len = be32toh(h.len);
	if ((h.op != FDP_MSG_OP_MSG && h.op != FDP_MSG_OP_TAGGED) ||
	    msg_len > m->cfg.max_msg_size || len - sizeof(h) > msg_len) {
		m->stats.rx_malformed++;
		return -FI_EINVAL;
	}
	tagged = h.op == FDP_MSG_OP_TAGGED;
	peer->rx_tag = be64toh(h.tag);
	peer->rx_data = be64toh(h.cq_data);
	peer->rx_hflags = h.flags;
	for (n = m->posted[tagged].next; n != &m->posted[tagged]; n = n->next) {
		struct fdp_msg_rx *rx = container_of(n, struct fdp_msg_rx, link);
		if (rx_matches(rx, peer, peer->rx_tag)) {
			dl_del(&rx->link);
			peer->rx_cur = rx;
			peer->rx_iov_idx = 0;
			peer->rx_iov_off = 0;
			break;
		}
	}
	if (!peer->rx_cur) {
		struct fdp_msg_ux *ux = ux_get(m, msg_len);
		if (!ux) {
			m->stats.rx_ux_refused++;
			return -FI_EAGAIN;
		}
		ux->peer = peer;
		ux->tag = peer->rx_tag;
		ux->data = peer->rx_data;
		ux->op = h.op;
		ux->hflags = h.flags;
		dl_add_tail(&m->unexpected[tagged], &ux->link);
		peer->ux_cur = ux;
		m->stats.rx_unexpected++;
	}
	peer->rx_active = true;
	peer->rx_len = msg_len;
	peer->rx_got = 0;
	return 0;
}

static int msg_deliver(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, uint8_t uflags,
		       const uint8_t *payload, size_t len)
{
	if (uflags & FDP_REL_UF_FIRST) {
		int ret;

		if (peer->rx_active) { /* the previous message never ended */
			m->stats.rx_malformed++;
			abort_rx(m, peer);
		}
		ret = start_rx(m, peer, payload, len);
		if (ret == -FI_EAGAIN)
			return ret; /* refused: the sender keeps it */
		if (ret)
			return 0;   /* dropped: consumed */
		payload += FDP_MSG_HDR_LEN;
		len -= FDP_MSG_HDR_LEN;
	} else if (!peer->rx_active) {
		m->stats.rx_malformed++; /* a tail after a reset: drop */
		return 0;
	}
	if (len > peer->rx_len - peer->rx_got) {
		m->stats.rx_malformed++; /* more than announced */
		abort_rx(m, peer);
		return 0;
	}
	if (peer->rx_cur)
		iov_write(peer->rx_cur->iov, peer->rx_cur->iov_count, &peer->rx_iov_idx,
			  &peer->rx_iov_off, payload, len);
	else if (len)
		memcpy(peer->ux_cur->buf + peer->rx_got, payload, len);
	peer->rx_got += len;
	if (peer->ux_cur)
		peer->ux_cur->got = peer->rx_got;
	if (peer->rx_got == peer->rx_len)
		finish_rx(m, peer);
	return 0;
}

/* The unexpected message an FI_PEEK / FI_CLAIM receive is about, or NULL. */
static struct fdp_msg_ux *ux_find_special(struct fdp_msg_ep *m, const struct fdp_msg_rx *rx,
					  uint64_t flags)
{
	struct fdp_dlist *n;

	for (n = m->unexpected[rx->tagged].next; n != &m->unexpected[rx->tagged]; n = n->next) {
		struct fdp_msg_ux *ux = container_of(n, struct fdp_msg_ux, link);

		if (!(flags & FI_PEEK)) {
			if (ux->claim_ctx == rx->context)
				return ux;
		} else if (!ux->claimed && !ux->claim_ctx && ux->peer->ux_cur != ux &&
			   rx_matches(rx, ux->peer, ux->tag)) {
			return ux;
		}
	}
	return NULL;
}

/* FI_PEEK / FI_CLAIM / FI_DISCARD (see fdp_msg.h); rx is filled in and
 * taken from the pool, and goes back to it here. */
static int recv_special(struct fdp_msg_ep *m, struct fdp_msg_rx *rx, uint64_t flags)
{
	struct fdp_msg_ux *ux = ux_find_special(m, rx, flags);
	struct fdp_msg_rx_info info = { .tagged = rx->tagged };
	size_t idx = 0, off = 0;

	if (!ux && !(flags & FI_PEEK)) {
		rx_put(m, rx);
		return -FI_EINVAL; /* nothing claimed with this context */
	}
	if (!ux) {
		info.err = -FI_ENOMSG;
		m->ops->recv_done(m, rx, &info);
		rx_put(m, rx);
		return 0;
	}
	if (!(flags & FI_PEEK) && !(flags & FI_DISCARD)) {
		ux_deliver(m, ux, rx); /* the claimed message, as a receive */
		return 0;
	}
	info.peer = ux->peer;
	info.tag = ux->tag;
	info.data = ux->data;
	info.has_data = ux->hflags & FDP_MSG_HF_DATA;
	if (flags & FI_DISCARD) {
		rx->iov_count = 0; /* no data, and no buffer in the completion */
		ux_put(m, ux);
	} else {
		info.len = ux->len;
		iov_write(rx->iov, rx->iov_count, &idx, &off, ux->buf,
			  ux->len < rx->cap ? ux->len : rx->cap);
		if (!rx->cap)
			rx->iov_count = 0;
		if (flags & FI_CLAIM)
			ux->claim_ctx = rx->context;
	}
	m->ops->recv_done(m, rx, &info);
	rx_put(m, rx);
	return 0;
}

int fdp_msg_recv(struct fdp_msg_ep *m, const struct iovec *iov, size_t count, fi_addr_t src,
		 bool tagged, uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
		 uint64_t now_ns)
{
	struct fdp_msg_rx *rx;
	struct fdp_dlist *n;

	if (count > FDP_MSG_IOV_MAX || (count && !iov))
		return -FI_EINVAL;
	rx = rx_get(m);
	if (!rx)
		return -FI_EAGAIN;
	m->now_ns = now_ns;
	rx->context = context;
	rx->flags = flags;
	memcpy(rx->iov, iov, count * sizeof(*iov));
	rx->iov_count = count;
	rx->cap = iov_total(iov, count);
	rx->src = src;
	rx->tag = tag;
	rx->ignore = ignore;
	rx->tagged = tagged;
	if (flags & (FI_PEEK | FI_CLAIM))
		return recv_special(m, rx, flags);
	for (n = m->unexpected[tagged].next; n != &m->unexpected[tagged]; n = n->next) {
		struct fdp_msg_ux *ux = container_of(n, struct fdp_msg_ux, link);

		if (ux->claimed || ux->claim_ctx || !rx_matches(rx, ux->peer, ux->tag))
			continue;
		if (ux->peer->ux_cur == ux)
			ux->claimed = rx; /* still arriving: completes at its end */
		else
			ux_deliver(m, ux, rx);
		return 0;
	}
	dl_add_tail(&m->posted[tagged], &rx->link);
	return 0;
}

int fdp_msg_cancel(struct fdp_msg_ep *m, void *context)
{
	struct fdp_msg_rx_info info = { .err = -FI_ECANCELED };

	for (int t = 0; t < 2; t++) {
		struct fdp_dlist *n;

		for (n = m->posted[t].next; n != &m->posted[t]; n = n->next) {
			struct fdp_msg_rx *rx = container_of(n, struct fdp_msg_rx, link);
			if (rx->context != context)
				continue;
			dl_del(&rx->link);
			info.tagged = rx->tagged;
			m->ops->recv_done(m, rx, &info);
			rx_put(m, rx);
			return 0;
		}
		for (n = m->unexpected[t].next; n != &m->unexpected[t]; n = n->next) {
			struct fdp_msg_ux *ux = container_of(n, struct fdp_msg_ux, link);
			struct fdp_msg_rx *rx = ux->claimed;
			if (!rx || rx->context != context)
				continue;
			ux->claimed = NULL;
			info.tagged = rx->tagged;
			m->ops->recv_done(m, rx, &info);
			rx_put(m, rx);
			return 0;
		}
	}
	return -FI_ENOENT;
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
	return msg_deliver(MSG_OF(rel), PEER_OF(rp), uflags, payload, len);
}

static void rel_complete(struct fdp_rel *rel, struct fdp_rel_peer *rp, uint64_t cookie, int err)
{
	struct fdp_msg_ep *m = MSG_OF(rel);

	if (cookie == COOKIE_INJECT) {
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
	tx_put(m, tx);
}

static void rel_tx_ready(struct fdp_rel *rel, struct fdp_rel_peer *rp)
{
	push(MSG_OF(rel), PEER_OF(rp));
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
		tx_put(m, tx);
	}
}

static void rel_rx_reset(struct fdp_rel *rel, struct fdp_rel_peer *rp)
{
	abort_rx(MSG_OF(rel), PEER_OF(rp));
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
	dl_init(&m->rx_free);
	dl_init(&m->ux_free);
	for (int t = 0; t < 2; t++) {
		dl_init(&m->posted[t]);
		dl_init(&m->unexpected[t]);
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
		dl_add_tail(&m->rx_free, &m->rx_pool[i].link);
	for (uint32_t i = 0; i < cfg->ux_max_entries; i++)
		dl_add_tail(&m->ux_free, &m->ux_pool[i].link);
	return 0;
}

void fdp_msg_fini(struct fdp_msg_ep *m)
{
	for (int t = 0; t < 2 && m->ux_pool; t++) {
		while (!dl_empty(&m->unexpected[t]))
			ux_put(m, container_of(m->unexpected[t].next, struct fdp_msg_ux, link));
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
	abort_rx(m, peer);
	fdp_rel_peer_fini(&m->rel, &peer->rel);
}
