/*
 * fdp_msg_send.c - sending messages: a per-peer queue of sends framed into
 * the peer's send window, and injects copied into it at once.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "fdp_msg_int.h"

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
void fdp_msg_push(struct fdp_msg_ep *m, struct fdp_msg_peer *peer)
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
		fdp_rel_tx_commit(&m->rel, &peer->rel, hl + n, uflags, FDP_MSG_COOKIE_INJECT, false,
				  m->now_ns);
		m->stats.tx_msgs++;
		m->ops->send_done(m, tx, 0);
		fdp_msg_tx_put(m, tx);
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
	len = fdp_msg_iov_total(iov, count);
	if (len > m->cfg.max_msg_size)
		return -FI_EMSGSIZE;
	tx = fdp_msg_tx_get(m);
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
	fdp_msg_push(m, peer);
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
	len = fdp_msg_iov_total(iov, count);
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
				  f + 1 == nframes ? FDP_MSG_COOKIE_INJECT : 0, false, now_ns);
	}
	return 0;
}
