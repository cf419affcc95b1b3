/*
 * fdp_msg.h - messages over the reliable channel: segmentation, reassembly,
 * FI_MSG / FI_TAGGED matching, the unexpected-message queue.
 *
 * Pure C (libfabric headers for types and error codes only, no DPDK), driven
 * by the RDM endpoint (fdp_rdm.c) and by the unit tests.
 *
 * Sending: a message (up to cfg.max_msg_size, default 4 MiB) is cut into
 * frames of cfg.rel.frame_payload bytes; the first carries a struct
 * fdp_msg_hdr (op, length, tag, remote CQ data). Send operations wait in a
 * per-peer FIFO until the peer's send window has room, so messages to one
 * peer go out (and are delivered) in the order they were posted: FI_ORDER_SAS.
 * Completion: by default (transmit complete) ops->send_done comes when the
 * peer acknowledged the last frame, and an unreachable peer fails it with
 * -FI_EHOSTUNREACH. With FI_INJECT_COMPLETE alone in the operation's flags it
 * comes as soon as the last byte is copied into the send window: the buffer
 * may be reused, delivery is the window's job, and a peer that dies
 * afterwards loses the message silently (libfabric allows it). Transmit
 * complete is the default because progress is manual: a sender that thinks
 * it is done may stop calling the provider while its last frame still
 * needs a retransmission (fi_pingpong does, between sizes). Until send_done
 * the user's buffers are read; inject copies at once.
 *
 * Receiving: the reliable layer delivers each peer's frames in order, so
 * reassembly appends. When a message starts it is matched against posted
 * receives (in posting order; FI_TAGGED: (tag | ignore) == (rx_tag | ignore);
 * directed receives: src fi_addr must equal the peer's). Without a match it
 * goes to the unexpected queue, which a later receive searches first (in
 * arrival order). Bytes past the receive buffer are dropped and the receive
 * completes with -FI_ETRUNC and olen = the bytes lost.
 *
 * Unexpected-queue bound: at most cfg.ux_max_entries messages and
 * cfg.ux_max_bytes bytes. A message that would exceed it is refused frame by
 * frame: the reliable layer does not acknowledge it and answers RNR, so the
 * sender keeps it and retransmits at its (backed-off) RTO until a receive is
 * posted; the sender never declares a peer that answers RNR unreachable.
 * Memory therefore stays bounded and nothing is lost; the cost is latency
 * (up to rto_max) for the refused message.
 *
 * Memory: pools of cfg.tx_ops send and cfg.rx_ops receive descriptors and
 * cfg.ux_max_entries unexpected entries (small messages inline, larger ones
 * one allocation per message, never per frame) are allocated at init; per
 * peer, the reliable layer's rings (fdp_rel.h).
 *
 * Thread-safety: none; the caller serialises (ep->lock).
 */
#ifndef FDP_MSG_H
#define FDP_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>

#include "fdp_rel.h"

#define FDP_MSG_IOV_MAX 4        /* iov entries per operation */
#define FDP_MSG_UX_INLINE 256    /* unexpected messages up to this size need no allocation */
#define FDP_MSG_HDR_LEN sizeof(struct fdp_msg_hdr)

/* Intrusive circular doubly-linked list. */
struct fdp_dlist {
	struct fdp_dlist *prev, *next;
};

struct fdp_msg_cfg {
	size_t max_msg_size;     /* largest message (default 4 MiB, at most 2^31) */
	size_t ux_max_bytes;     /* unexpected-queue bound in payload bytes (64 MiB) */
	uint32_t ux_max_entries; /* unexpected-queue bound in messages (1024) */
	uint32_t tx_ops;         /* send descriptors (1024): sends beyond get -FI_EAGAIN */
	uint32_t rx_ops;         /* posted-receive descriptors (1024) */
	size_t inject_max;       /* largest inject (4096); may span frames */
	struct fdp_rel_cfg rel;  /* reliability parameters */
};

void fdp_msg_cfg_default(struct fdp_msg_cfg *cfg);

struct fdp_msg_stats {
	uint64_t tx_msgs;        /* messages whose last frame was acknowledged */
	uint64_t tx_errors;      /* sends completed with an error */
	uint64_t rx_msgs;        /* messages completed to a receive */
	uint64_t rx_truncated;   /* receives completed with -FI_ETRUNC */
	uint64_t rx_unexpected;  /* messages that went to the unexpected queue */
	uint64_t rx_ux_refused;  /* frames refused at the unexpected-queue bound */
	uint64_t rx_malformed;   /* bad message headers / stray segments dropped */
	uint64_t rx_aborted;     /* partial messages dropped by a stream reset */
};

struct fdp_msg_ep;
struct fdp_msg_peer;

/* A send in progress. Fields are private; context/flags are the caller's. */
struct fdp_msg_tx {
	void *context;           /* fi_context of the operation */
	uint64_t flags;          /* the caller's op flags, returned untouched */
	struct fdp_msg_peer *peer;
	struct fdp_msg_tx *next; /* peer's send FIFO, or the free list */
	struct iovec iov[FDP_MSG_IOV_MAX];
	size_t iov_count;
	size_t len;              /* message bytes */
	size_t off;              /* bytes already framed */
	size_t iov_idx, iov_off; /* cursor of off in iov */
	uint64_t tag, data;
	uint8_t op;              /* enum fdp_msg_op */
	uint8_t hflags;          /* enum fdp_msg_hflags */
	bool hdr_sent;
	bool inject_complete;    /* complete once copied (FI_INJECT_COMPLETE) */
};

/* A posted receive. */
struct fdp_msg_rx {
	void *context;
	uint64_t flags;
	struct fdp_dlist link;   /* posted list, or the free list */
	struct iovec iov[FDP_MSG_IOV_MAX];
	size_t iov_count;
	size_t cap;              /* sum of iov lengths */
	fi_addr_t src;           /* FI_ADDR_UNSPEC: any source */
	uint64_t tag, ignore;
	bool tagged;
};

/* What a completed receive got. */
struct fdp_msg_rx_info {
	int err;                 /* 0, -FI_ETRUNC, -FI_ECANCELED */
	size_t len;              /* bytes placed in the buffer */
	size_t olen;             /* bytes dropped (truncation) */
	bool tagged;
	bool has_data;           /* data is valid (FI_REMOTE_CQ_DATA) */
	uint64_t tag, data;
	struct fdp_msg_peer *peer; /* source (NULL for a cancel) */
};

/* An unexpected message (private). */
struct fdp_msg_ux {
	struct fdp_dlist link;
	struct fdp_msg_peer *peer;
	struct fdp_msg_rx *claimed; /* receive waiting for the rest of it */
	void *claim_ctx;            /* claimed by FI_PEEK|FI_CLAIM with this context */
	size_t len, got;
	uint8_t *buf;
	uint64_t tag, data;
	uint8_t op, hflags;
	uint8_t inline_buf[FDP_MSG_UX_INLINE];
};

struct fdp_msg_peer {
	struct fdp_rel_peer rel;
	fi_addr_t addr;          /* the caller's name for it (FI_ADDR_NOTAVAIL: none) */
	void *user;              /* the caller's */
	struct fdp_msg_tx *txq_head, *txq_tail; /* sends waiting for window space */
	/* message being received */
	struct fdp_msg_rx *rx_cur;   /* ...into a posted receive */
	struct fdp_msg_ux *ux_cur;   /* ...into the unexpected queue */
	size_t rx_len, rx_got;
	size_t rx_iov_idx, rx_iov_off;
	uint64_t rx_tag, rx_data;
	uint8_t rx_hflags;
	bool rx_active;
};

struct fdp_msg_ops {
	/* Send one frame (see fdp_rel_ops.tx): hdr, payload, then ext. */
	int (*tx)(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const void *hdr,
		  size_t hdr_len, const void *payload, size_t len, const void *ext,
		  size_t ext_len);
	/* A send finished: err 0 (acknowledged) or -FI_EHOSTUNREACH. The
	 * descriptor returns to the pool when this returns. */
	void (*send_done)(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err);
	/* An inject reached the peer (err 0) or was abandoned. Optional. */
	void (*inject_done)(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, int err);
	/* A receive finished; the descriptor returns to the pool after. */
	void (*recv_done)(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			  const struct fdp_msg_rx_info *info);
};

struct fdp_msg_ep {
	struct fdp_rel rel;
	struct fdp_msg_cfg cfg;
	const struct fdp_msg_ops *ops;
	void *ctx;                     /* the caller's */
	uint64_t now_ns;               /* time of the current call */
	struct fdp_msg_tx *tx_pool, *tx_free;
	struct fdp_msg_rx *rx_pool;
	struct fdp_dlist rx_free;
	struct fdp_msg_ux *ux_pool;
	struct fdp_dlist ux_free;
	struct fdp_dlist posted[2];    /* [0] FI_MSG, [1] FI_TAGGED receives */
	struct fdp_dlist unexpected[2];
	size_t ux_bytes;
	uint32_t ux_count, tx_in_use, rx_in_use;
	struct fdp_msg_stats stats;
};

int fdp_msg_init(struct fdp_msg_ep *m, const struct fdp_msg_cfg *cfg,
		 const struct fdp_msg_ops *ops, void *ctx);
/* Free pools and unexpected messages. Posted receives and sends still
 * queued are dropped without completions (the endpoint is closing). Peers
 * must have been finalised first. */
void fdp_msg_fini(struct fdp_msg_ep *m);

int fdp_msg_peer_init(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, fi_addr_t addr);
void fdp_msg_peer_fini(struct fdp_msg_ep *m, struct fdp_msg_peer *peer);

/* Largest inject payload. */
static inline size_t fdp_msg_inject_max(const struct fdp_msg_ep *m)
{
	return m->cfg.inject_max;
}

/* Post a send of iov to peer. op: FDP_MSG_OP_MSG or _TAGGED; flags are the
 * libfabric op flags (FI_INJECT_COMPLETE selects the completion level, see
 * above; the rest is returned untouched). send_done may run
 * before this returns. 0, -FI_EAGAIN
 * (no descriptor free: progress and retry), -FI_EMSGSIZE, -FI_EINVAL. */
int fdp_msg_send(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const struct iovec *iov,
		 size_t count, uint8_t op, uint64_t tag, bool has_data, uint64_t data,
		 void *context, uint64_t flags, uint64_t now_ns);

/* Send a copy of iov (at most fdp_msg_inject_max bytes, copied straight
 * into the send window, several frames if needed) with no send_done; the
 * buffer is reusable on return. -FI_EAGAIN when it cannot leave at once
 * (window too full, earlier sends to the peer still queued: order is kept). */
int fdp_msg_inject(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const struct iovec *iov,
		   size_t count, uint8_t op, uint64_t tag, bool has_data, uint64_t data,
		   uint64_t now_ns);

/* Post a receive. src FI_ADDR_UNSPEC matches any peer. A matching
 * unexpected message completes it (or feeds it) at once. 0 or -FI_EAGAIN.
 *
 * FI_PEEK / FI_CLAIM / FI_DISCARD in flags (fi_tagged(3)) act on the
 * unexpected queue only and never leave a receive posted:
 * - FI_PEEK: the first fully arrived, unclaimed message that matches
 *   completes the operation at once with its length (the message's, not
 *   the bytes copied), tag, data and source, and a copy of its first bytes
 *   when a buffer is given (up to the buffer's size); the message stays
 *   queued. No match: a completion with -FI_ENOMSG. A message still
 *   arriving is not found (it has not arrived yet).
 * - FI_PEEK|FI_CLAIM: as FI_PEEK, and a found message is reserved for
 *   context: only a later FI_CLAIM receive with the same context gets it.
 * - FI_PEEK|FI_DISCARD: a found message is dropped (completion with len 0,
 *   no data).
 * - FI_CLAIM (no FI_PEEK): receives the message claimed with context like
 *   an ordinary receive (truncation included); with FI_DISCARD it is
 *   dropped instead (len 0). No message claimed with context: -FI_EINVAL,
 *   no completion. */
int fdp_msg_recv(struct fdp_msg_ep *m, const struct iovec *iov, size_t count, fi_addr_t src,
		 bool tagged, uint64_t tag, uint64_t ignore, void *context, uint64_t flags,
		 uint64_t now_ns);

/* Cancel the posted receive with this context: recv_done with
 * -FI_ECANCELED and return 0, or -FI_ENOENT. */
int fdp_msg_cancel(struct fdp_msg_ep *m, void *context);

/* A frame from peer (starting at struct fdp_rel_hdr). */
void fdp_msg_rx_frame(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const void *frame,
		      size_t len, uint64_t now_ns);

/* Timers; returns the next deadline (see fdp_rel_progress). */
uint64_t fdp_msg_progress(struct fdp_msg_ep *m, uint64_t now_ns);

/* Free descriptors (for fi_tx_size_left / fi_rx_size_left). */
static inline size_t fdp_msg_tx_left(const struct fdp_msg_ep *m)
{
	return m->cfg.tx_ops - m->tx_in_use;
}
static inline size_t fdp_msg_rx_left(const struct fdp_msg_ep *m)
{
	return m->cfg.rx_ops - m->rx_in_use;
}

#endif /* FDP_MSG_H */
