/*
 * fdp_msg_int.h - what the message layer's files share (fdp_msg.c: pools,
 * the reliable layer's callbacks, set-up; fdp_msg_send.c: framing sends;
 * fdp_msg_recv.c: reassembly and matching). The contract is fdp_msg.h.
 */
#ifndef FDP_MSG_INT_H
#define FDP_MSG_INT_H

#include "fdp_msg.h"

/* Cookie of an inject's frame (tx descriptors are pointers, never 1). */
#define FDP_MSG_COOKIE_INJECT ((uint64_t)1)

#ifndef container_of
#define container_of(ptr, type, field) ((type *)((char *)(ptr)-offsetof(type, field)))
#endif

/* Circular doubly linked lists with a head node. */
static inline void fdp_dl_init(struct fdp_dlist *h)
{
	h->prev = h->next = h;
}

static inline bool fdp_dl_empty(const struct fdp_dlist *h)
{
	return h->next == h;
}

static inline void fdp_dl_add_tail(struct fdp_dlist *h, struct fdp_dlist *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void fdp_dl_add_head(struct fdp_dlist *h, struct fdp_dlist *n)
{
	n->next = h->next;
	n->prev = h;
	h->next->prev = n;
	h->next = n;
}

static inline void fdp_dl_del(struct fdp_dlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

static inline size_t fdp_msg_iov_total(const struct iovec *iov, size_t count)
{
	size_t len = 0;

	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* Descriptor pools (fdp_msg.c): NULL when exhausted (ux_get: also when the
 * unexpected queue's bound would be exceeded, or out of memory). */
struct fdp_msg_tx *fdp_msg_tx_get(struct fdp_msg_ep *m);
void fdp_msg_tx_put(struct fdp_msg_ep *m, struct fdp_msg_tx *tx);
struct fdp_msg_rx *fdp_msg_rx_get(struct fdp_msg_ep *m);
void fdp_msg_rx_put(struct fdp_msg_ep *m, struct fdp_msg_rx *rx);
struct fdp_msg_ux *fdp_msg_ux_get(struct fdp_msg_ep *m, size_t len);
void fdp_msg_ux_put(struct fdp_msg_ep *m, struct fdp_msg_ux *ux);

/* Frame queued sends of peer while its window has room (fdp_msg_send.c). */
void fdp_msg_push(struct fdp_msg_ep *m, struct fdp_msg_peer *peer);

/* Receiving (fdp_msg_recv.c): one in-order frame's payload from the
 * reliable layer (0, or -FI_EAGAIN to refuse it: RNR); drop the message
 * being reassembled from peer. */
int fdp_msg_deliver(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, uint8_t uflags,
		    const uint8_t *payload, size_t len);
void fdp_msg_abort_rx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer);

#endif /* FDP_MSG_INT_H */
