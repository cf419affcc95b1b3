/*
 * fdp_rel_int.h - what the reliability protocol's files share (fdp_rel.c:
 * set-up, peers and the send window; fdp_rel_rx.c: acks, RTT and
 * receiving; fdp_rel_timer.c: delayed acks, loss probes, timeouts). The
 * contract is fdp_rel.h.
 */
#ifndef FDP_REL_INT_H
#define FDP_REL_INT_H

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
	uint8_t state;        /* enum fdp_rel_txslot_state */
};

enum fdp_rel_txslot_state {
	FDP_REL_TX_SACKED = 1u << 0, /* selectively acked: never retransmit */
	FDP_REL_TX_RETX = 1u << 1,   /* retransmitted at least once (RACK: which copy arrived?) */
	FDP_REL_TX_FR = 1u << 2,     /* fast-retransmitted since the last timeout */
	FDP_REL_TX_ACKREQ = 1u << 3, /* ask for an immediate ack */
};

/* Out-of-order receive slot: payload in peer->rx_data at the same index. */
struct fdp_rel_rxslot {
	uint32_t seq;
	uint16_t len;
	uint8_t uflags;
	uint8_t present;
};

/* Clock granularity G of RFC 6298: our clock is nanoseconds, 1 us is ample. */
#define FDP_REL_CLOCK_G_NS 1000u


/* Timestamps: microseconds, never 0 (0 means "nothing to echo"). */
static inline uint32_t fdp_rel_ts(uint64_t now_ns)
{
	uint32_t ts = (uint32_t)(now_ns / 1000);

	return ts ? ts : 1;
}

/* Make sure progress looks at p no later than deadline (fdp_rel.c). */
void fdp_rel_peer_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t deadline);
/* Build the header (with our current ack state) and hand the frame to
 * ops->tx (fdp_rel.c). */
int fdp_rel_send_frame(struct fdp_rel *rel, struct fdp_rel_peer *p, uint8_t type, uint32_t seq,
		       uint8_t uflags, uint8_t flags, const void *payload, size_t len,
		       const void *ext, size_t ext_len, uint64_t now_ns);
/* (Re)transmit the frame of send slot seq (fdp_rel.c). */
int fdp_rel_xmit_slot(struct fdp_rel *rel, struct fdp_rel_peer *p, uint32_t seq, bool retx,
		      uint64_t now_ns);
/* Arm the tail loss probe (fdp_rel.c). */
void fdp_rel_tlp_arm(struct fdp_rel *rel, struct fdp_rel_peer *p, uint64_t now_ns);

#endif /* FDP_REL_INT_H */
