/*
 * fdp_rel.h - reliable, ordered frame delivery between two endpoints over a
 * lossy datagram path (the dpdk provider's RDM reliability protocol).
 *
 * Pure C, no DPDK, no clock, no allocation on the data path: time comes in as
 * `now_ns`, frames leave through ops->tx, in-order payloads come out through
 * ops->deliver. One `struct fdp_rel` serves one local endpoint; it tracks any
 * number of `struct fdp_rel_peer` (one per remote endpoint), which the upper
 * layer embeds in its own per-peer object.
 *
 * Protocol (wire format in fdp_rel_proto.h):
 *  - 32-bit per-peer sequence numbers, compared modulo 2^32 (wrap-safe).
 *  - Every frame carries a cumulative ack (next expected seq) and a 64-bit
 *    selective-ack bitmap of what was received past it (its base rotates
 *    over an out-of-order range wider than 64 frames); acks ride on data
 *    frames, and pure ACK frames go out after cfg.ack_every in-order frames,
 *    after cfg.ack_delay_ns, or at once on a hole/duplicate/ACKREQ.
 *  - Send window of cfg.window frames; every unacknowledged frame's payload is
 *    kept in a ring preallocated per peer for retransmission.
 *  - RTO per RFC 6298 (SRTT/RTTVAR), clamped to [rto_min, rto_max], doubled
 *    on every expiry. RTT samples come from echoed timestamps (RFC 7323
 *    style: every frame carries its send time, every ack echoes the latest
 *    one received), so they are unambiguous for retransmitted frames too
 *    (what Karn's rule protects against) and keep coming under steady loss,
 *    when ranges of fresh frames are rarely acked whole.
 *  - Fast retransmit on cfg.dupack_thresh duplicate acks, and of every SACK
 *    hole with at least dupack_thresh frames selectively acked above it; a
 *    retransmission is itself known lost (and resent without waiting for the
 *    RTO) once a frame sent after it is delivered (RACK, RFC 8985).
 *  - Tail loss probe (RFC 8985): 2 SRTT after the last ack progress, the
 *    newest frame in flight is sent once more, so a lost tail (or a lost
 *    one-frame message) is repaired in a few RTTs rather than at the RTO
 *    floor; the RTO stays the backstop.
 *  - Receiver buffers out-of-order frames inside its window, drops (and counts)
 *    duplicates and frames outside it.
 *  - A peer whose oldest unacknowledged frame has gone unanswered for
 *    cfg.unreach_ns after its first timeout is declared unreachable: every
 *    in-flight frame with a cookie completes with -FI_EHOSTUNREACH, then
 *    ops->unreachable runs. Any valid frame from the peer (even an RNR ack)
 *    proves it alive and restarts that clock.
 *  - Sessions: each engine has a random non-zero session id; a peer that
 *    restarts shows up with a new id and its receive state is reset.
 *
 * Memory (bounded; allocated once per peer, never per frame):
 *   per peer      ~200 bytes of state (struct fdp_rel_peer)
 *   send ring     cfg.window * (cfg.frame_payload + 32) bytes, allocated at
 *                 the first send to that peer
 *   receive ring  cfg.window * (cfg.frame_payload + 8) bytes, allocated at the
 *                 first out-of-order frame from that peer (a loss-free peer
 *                 never has one); at most cfg.max_rx_rings per fdp_rel, beyond
 *                 that out-of-order frames are dropped (rx_nomem) and resent
 * e.g. window 256, 1424-byte payload: 364 KiB + 358 KiB; an endpoint's
 * receive rings total at most 64 x 360 KiB = 23 MiB by default.
 *
 * Thread-safety: none; the caller serialises all calls on one fdp_rel (the
 * endpoint lock). Callbacks run inside the call that triggered them and may
 * call fdp_rel_tx_reserve/commit on any peer, but must not free peers.
 */
#ifndef FDP_REL_H
#define FDP_REL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fdp_rel_proto.h"

/* Wrap-safe sequence comparisons (valid while the distance is < 2^31). */
static inline bool fdp_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }
static inline bool fdp_seq_le(uint32_t a, uint32_t b) { return (int32_t)(a - b) <= 0; }
static inline bool fdp_seq_gt(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }

struct fdp_rel_cfg {
	uint32_t window;        /* frames in flight per peer and receive window; power of
	                         * two, 16..4096 (default 256) */
	uint32_t frame_payload; /* max payload bytes per frame, 64..65000 (default 1424:
	                         * MTU 1500 - IPv4 20 - UDP 8 - fdp_rel_hdr 48) */
	uint32_t ack_every;     /* pure ack after this many unacked in-order frames (16) */
	uint32_t dupack_thresh; /* duplicate acks / SACKed frames above a hole that mean
	                         * loss (3) */
	uint64_t ack_delay_ns;  /* delayed-ack timer (20 us) */
	uint64_t rto_init_ns;   /* RTO before the first RTT sample (1 ms) */
	uint64_t rto_min_ns;    /* RTO floor (250 us): well above memif RTT + delayed ack,
	                         * low enough that a loss costs well under a millisecond */
	uint64_t rto_max_ns;    /* cap of the exponential backoff (100 ms) */
	uint64_t unreach_ns;    /* peer unreachable after this long without any answer
	                         * to retransmissions (2 s) */
	uint32_t session;       /* our instance id, non-zero (caller draws it at random) */
	uint32_t isn;           /* first sequence number of every peer's send stream */
	uint32_t max_rx_rings;  /* out-of-order receive rings per fdp_rel (64) */
};

/* Fill *cfg with the defaults above (instance id 1 and isn 0: the caller sets both). */
void fdp_rel_cfg_default(struct fdp_rel_cfg *cfg);

/* Counters: monotonic, never reset; read them freely (same thread). */
struct fdp_rel_stats {
	uint64_t tx_data;          /* data frames sent for the first time */
	uint64_t tx_retx;          /* retransmissions (all causes) */
	uint64_t tx_rto;           /* retransmission timeouts */
	uint64_t tx_fast_retx;     /* retransmissions for dup acks / SACK holes */
	uint64_t tx_tlp;           /* tail loss probes */
	uint64_t tx_acks;          /* pure ACK frames sent */
	uint64_t tx_busy;          /* ops->tx returned an error (frame retried) */
	uint64_t rx_data;          /* data frames delivered in order */
	uint64_t rx_acks;          /* valid acks processed (pure or piggy-backed) */
	uint64_t rx_dup;           /* duplicate data frames dropped */
	uint64_t rx_ooo;           /* out-of-order frames buffered */
	uint64_t rx_out_of_window; /* data frames beyond the receive window dropped */
	uint64_t rx_bad_version;   /* unknown protocol version dropped */
	uint64_t rx_malformed;     /* short/inconsistent/unknown-type frames dropped */
	uint64_t rx_bad_ack;       /* acks for unsent data or a stale session ignored */
	uint64_t rx_refused;       /* frames the upper layer refused (no buffer, RNR) */
	uint64_t rx_nomem;         /* out-of-order frames dropped: receive ring alloc failed */
	uint64_t rx_resets;        /* receive stream resets (peer restart or skipped frames) */
	uint64_t rtt_samples;      /* RTT measurements taken */
	uint64_t peers_unreachable;/* peers declared unreachable */
};

struct fdp_rel;
struct fdp_rel_peer;

struct fdp_rel_ops {
	/* Send one frame: hdr_len header bytes, then len payload bytes, then
	 * ext_len bytes at ext (payload/ext may be NULL when their length is 0;
	 * ext is what fdp_rel_tx_commit_ext was given). Return 0 once the frame
	 * is handed off (a later loss is recovered by the protocol), or a
	 * negative value when it could not be queued: the engine keeps it and
	 * retries from fdp_rel_progress. */
	int (*tx)(struct fdp_rel *rel, struct fdp_rel_peer *peer, const void *hdr,
		  size_t hdr_len, const void *payload, size_t len, const void *ext,
		  size_t ext_len);
	/* Deliver the next in-order payload. Return 0 when consumed; a negative
	 * value refuses it (no buffer): the frame counts as not received, the peer
	 * gets an RNR ack and retransmits later. */
	int (*deliver)(struct fdp_rel *rel, struct fdp_rel_peer *peer, uint8_t uflags,
		       const void *payload, size_t len);
	/* A frame committed with a non-zero cookie was acknowledged (err 0) or
	 * abandoned (err -FI_EHOSTUNREACH). Called in send order per peer. */
	void (*complete)(struct fdp_rel *rel, struct fdp_rel_peer *peer, uint64_t cookie,
			 int err);
	/* Send-window space opened: the upper layer may push queued frames. Optional. */
	void (*tx_ready)(struct fdp_rel *rel, struct fdp_rel_peer *peer);
	/* The peer was declared unreachable; its in-flight frames have completed
	 * with -FI_EHOSTUNREACH. Later sends start a fresh attempt. Optional. */
	void (*unreachable)(struct fdp_rel *rel, struct fdp_rel_peer *peer);
	/* The peer's receive stream restarted (peer restart, or it abandoned
	 * frames): drop any partially received message. Optional. */
	void (*rx_reset)(struct fdp_rel *rel, struct fdp_rel_peer *peer);
};

/* Per-peer state. Embed it in the upper layer's peer object; fields are
 * private to fdp_rel*.c (read-only for tests and statistics). */
struct fdp_rel_txslot;
struct fdp_rel_rxslot;

struct fdp_rel_peer {
	/* send side */
	uint32_t snd_una;          /* oldest unacknowledged seq */
	uint32_t snd_nxt;          /* next seq to assign */
	uint32_t snd_unsent;       /* first seq ops->tx refused (== snd_nxt when none) */
	uint32_t dupacks;          /* consecutive duplicate pure acks */
	uint64_t srtt_ns;          /* smoothed RTT (0 = no sample yet) */
	uint64_t rttvar_ns;        /* RTT variation */
	uint64_t rto_base_ns;      /* RTO from SRTT/RTTVAR, before backoff */
	uint64_t rto_ns;           /* current RTO, with backoff */
	uint64_t rto_deadline_ns;  /* retransmission timer (0 = stopped) */
	uint64_t stall_since_ns;   /* first timeout without an answer (0 = none) */
	uint64_t tlp_deadline_ns;  /* tail loss probe timer (0 = stopped) */
	bool tlp_done;             /* probe sent since the last ack progress */
	uint64_t min_rtt_ns;       /* smallest RTT sample (0 = none) */
	uint64_t rack_xmit_ns;     /* latest send time of a frame known delivered */
	struct fdp_rel_txslot *tx; /* window slots */
	uint8_t *tx_data;          /* window * frame_payload bytes */
	/* receive side */
	uint32_t peer_session;     /* peer's session (0 = never heard from it) */
	uint32_t rcv_nxt;          /* next in-order seq expected */
	uint32_t rx_ooo_count;     /* frames buffered out of order */
	uint32_t rx_high_seq;      /* highest seq buffered (valid while rx_ooo_count) */
	uint32_t sack_rot;         /* rotates the SACK window over a wide range */
	uint32_t ts_recent;        /* tsval of the latest frame received, to echo */
	uint64_t ts_recent_at_ns;  /* when it arrived: an echo later than the ack
	                            * delay would count our think time as RTT */
	uint32_t ack_pending;      /* in-order frames received since our last ack */
	uint64_t ack_deadline_ns;  /* when a pure ack is due (0 = none) */
	bool rnr_pending;          /* next ack carries FDP_REL_F_RNR */
	struct fdp_rel_rxslot *rx; /* out-of-order slots (NULL until needed) */
	uint8_t *rx_data;
	/* engine bookkeeping */
	struct fdp_rel_peer *active_next; /* on rel->active while any timer may run */
	bool active;
	bool unreachable;          /* declared unreachable; cleared by the next send */
	bool abandoning;           /* completing abandoned frames: no reservations */
};

struct fdp_rel {
	struct fdp_rel_cfg cfg;
	const struct fdp_rel_ops *ops;
	void *ctx;                    /* upper layer's, untouched */
	uint32_t mask;                /* cfg.window - 1 */
	uint64_t next_deadline_ns;    /* lower bound of every peer's timers */
	uint32_t rx_rings;            /* receive rings allocated */
	struct fdp_rel_peer *active;  /* peers with a running timer or unsent frame */
	struct fdp_rel_stats stats;
};

/* Validate cfg (returns -FI_EINVAL naming nothing; callers log) and set up rel. */
int fdp_rel_init(struct fdp_rel *rel, const struct fdp_rel_cfg *cfg,
		 const struct fdp_rel_ops *ops, void *ctx);

/* Set up a peer (no allocation: rings come with the first use). Returns 0. */
int fdp_rel_peer_init(struct fdp_rel *rel, struct fdp_rel_peer *peer);
/* Free a peer's rings and unlink it; in-flight frames are dropped without
 * completions (the caller has its own teardown). */
void fdp_rel_peer_fini(struct fdp_rel *rel, struct fdp_rel_peer *peer);

/* Frames the peer's send window can still take. */
static inline uint32_t fdp_rel_tx_space(const struct fdp_rel *rel, const struct fdp_rel_peer *p)
{
	return p->abandoning ? 0 : rel->cfg.window - (p->snd_nxt - p->snd_una);
}

/* Payload area (cfg.frame_payload bytes) of the next frame to peer, or NULL
 * when the window is full (or its send ring cannot be allocated). Nothing is
 * sent until fdp_rel_tx_commit. */
void *fdp_rel_tx_reserve(struct fdp_rel *rel, struct fdp_rel_peer *peer);

/* Send the reserved frame with len payload bytes. cookie != 0 is reported
 * through ops->complete when the frame is acknowledged (or abandoned).
 * ack_req asks the receiver to acknowledge at once rather than after its
 * ack delay: set it when someone waits for this frame's completion (the
 * receiver may stop driving progress right after it got the frame). */
void fdp_rel_tx_commit(struct fdp_rel *rel, struct fdp_rel_peer *peer, size_t len,
		       uint8_t uflags, uint64_t cookie, bool ack_req, uint64_t now_ns);
/* The same, with ext_len more payload bytes that stay at ext instead of
 * being copied into the reserved area: the frame carries the len reserved
 * bytes then ext's. The caller keeps ext readable and unchanged until the
 * frame is acknowledged or abandoned, which the upper layer knows by a
 * cookie completing on this frame or a later one (acks are cumulative).
 * len + ext_len <= cfg.frame_payload. Saves the send ring's copy of the
 * payload (retransmissions read ext again). */
void fdp_rel_tx_commit_ext(struct fdp_rel *rel, struct fdp_rel_peer *peer, size_t len,
			   const void *ext, size_t ext_len, uint8_t uflags, uint64_t cookie,
			   bool ack_req, uint64_t now_ns);

/* Check a received frame's header without touching any peer: 0 when it is
 * well-formed (version, type, lengths), else a negative value and the
 * matching counter is bumped. Lets the endpoint refuse garbage before it
 * creates state for an unknown source. */
int fdp_rel_rx_check(struct fdp_rel *rel, const void *frame, size_t len);

/* Process one received frame (fdp_rel_hdr + payload; trailing bytes past
 * hdr.len are ignored) from peer. Never fails: bad frames are counted and
 * dropped. Immediate acks are sent from here or from fdp_rel_progress. */
void fdp_rel_rx(struct fdp_rel *rel, struct fdp_rel_peer *peer, const void *frame,
		size_t len, uint64_t now_ns);

/* Run due timers (retransmission, delayed acks, unreachability, refused tx)
 * of every peer. Cheap when nothing is due. Returns the next deadline in ns
 * (UINT64_MAX when idle) so the caller can sleep until then. */
uint64_t fdp_rel_progress(struct fdp_rel *rel, uint64_t now_ns);

/* Send any owed ack to peer now (e.g. before the caller goes idle). */
void fdp_rel_ack_now(struct fdp_rel *rel, struct fdp_rel_peer *peer, uint64_t now_ns);

#endif /* FDP_REL_H */
