/*
 * fdp_msg_recv.c - receiving messages: reassembly of each peer's in-order
 * frames, matching against posted receives, the unexpected queue, cancel.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_msg_int.h"

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
	fdp_msg_rx_put(m, rx);
}

/* A complete unexpected message meets its receive. */
static void ux_deliver(struct fdp_msg_ep *m, struct fdp_msg_ux *ux, struct fdp_msg_rx *rx)
{
	size_t idx = 0, off = 0;

	/* unlinked before the callback: a receive posted from inside it must
	 * not find this message again */
	fdp_dl_del(&ux->link);
	ux->claimed = NULL;
	iov_write(rx->iov, rx->iov_count, &idx, &off, ux->buf, ux->len);
	complete_rx(m, rx, ux->peer, ux->len, ux->hflags & FDP_MSG_HF_DATA, ux->tag, ux->data);
	fdp_msg_ux_put(m, ux);
}

/* Drop the message peer was receiving (stream reset or protocol error). */
void fdp_msg_abort_rx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
{
	if (!peer->rx_active)
		return;
	m->stats.rx_aborted++;
	if (peer->rx_cur) /* still posted: back at the front, where it was */
		fdp_dl_add_head(&m->posted[peer->rx_cur->tagged], &peer->rx_cur->link);
	if (peer->ux_cur) {
		struct fdp_msg_rx *claimed = peer->ux_cur->claimed;
		fdp_msg_ux_put(m, peer->ux_cur);
		if (claimed)
			fdp_dl_add_head(&m->posted[claimed->tagged], &claimed->link);
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
			fdp_dl_del(&rx->link);
			peer->rx_cur = rx;
			peer->rx_iov_idx = 0;
			peer->rx_iov_off = 0;
			break;
		}
	}
	if (!peer->rx_cur) {
		struct fdp_msg_ux *ux = fdp_msg_ux_get(m, msg_len);
		if (!ux) {
			m->stats.rx_ux_refused++;
			return -FI_EAGAIN;
		}
		ux->peer = peer;
		ux->tag = peer->rx_tag;
		ux->data = peer->rx_data;
		ux->op = h.op;
		ux->hflags = h.flags;
		fdp_dl_add_tail(&m->unexpected[tagged], &ux->link);
		peer->ux_cur = ux;
		m->stats.rx_unexpected++;
	}
	peer->rx_active = true;
	peer->rx_len = msg_len;
	peer->rx_got = 0;
	return 0;
}

int fdp_msg_deliver(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, uint8_t uflags,
		    const uint8_t *payload, size_t len)
{
	if (uflags & FDP_REL_UF_FIRST) {
		int ret;

		if (peer->rx_active) { /* the previous message never ended */
			m->stats.rx_malformed++;
			fdp_msg_abort_rx(m, peer);
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
		fdp_msg_abort_rx(m, peer);
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
		fdp_msg_rx_put(m, rx);
		return -FI_EINVAL; /* nothing claimed with this context */
	}
	if (!ux) {
		info.err = -FI_ENOMSG;
		m->ops->recv_done(m, rx, &info);
		fdp_msg_rx_put(m, rx);
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
		fdp_msg_ux_put(m, ux);
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
	fdp_msg_rx_put(m, rx);
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
	rx = fdp_msg_rx_get(m);
	if (!rx)
		return -FI_EAGAIN;
	m->now_ns = now_ns;
	rx->context = context;
	rx->flags = flags;
	memcpy(rx->iov, iov, count * sizeof(*iov));
	rx->iov_count = count;
	rx->cap = fdp_msg_iov_total(iov, count);
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
	fdp_dl_add_tail(&m->posted[tagged], &rx->link);
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
			fdp_dl_del(&rx->link);
			info.tagged = rx->tagged;
			m->ops->recv_done(m, rx, &info);
			fdp_msg_rx_put(m, rx);
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
			fdp_msg_rx_put(m, rx);
			return 0;
		}
	}
	return -FI_ENOENT;
}

