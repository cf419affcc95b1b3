/*
 * fdp_rel_proto.h - wire format of the dpdk provider's reliable (RDM) frames.
 *
 * An RDM frame is the UDP payload of an Ethernet/IPv4/UDP datagram
 * (fdp_proto.h):
 *
 *   struct fdp_rel_hdr  (48 bytes: the provider's struct fdp_hdr, then ours)
 *   payload             (fdp_hdr.len - 48 bytes; DATA frames only)
 *
 * The payload of a DATA frame that starts a message (FDP_REL_UF_FIRST) begins
 * with a struct fdp_msg_hdr; later segments of that message carry only
 * message bytes, because the reliable layer delivers them in order.
 *
 * All multi-byte fields are big-endian (network order). The structs are packed
 * and decoded with memcpy + byte swaps, so frames at any alignment are safe.
 *
 * Frame types: fdp_proto.h reserves FDP_TYPE_RDM_FIRST..LAST (0x10..0x3f) for
 * the RDM engine; we use 0x10 and 0x11 and drop any other type (counted).
 */
#ifndef FDP_REL_PROTO_H
#define FDP_REL_PROTO_H

#include <stdint.h>

#include "fdp_proto.h"

/* Version of the reliable-frame format (after the provider-wide
 * FDP_PROTO_VERSION); a frame with another version is dropped and counted. */
#define FDP_REL_VERSION 1

enum fdp_rel_type {
	FDP_REL_T_DATA = FDP_TYPE_RDM_FIRST,     /* sequenced payload, piggy-backs an ack */
	FDP_REL_T_ACK = FDP_TYPE_RDM_FIRST + 1,  /* pure acknowledgement, no payload */
};

/* fdp_hdr.flags bits of RDM frames */
enum fdp_rel_flags {
	FDP_REL_F_ACK = 1u << 0,    /* ack/sack/peer_session fields are valid */
	FDP_REL_F_ACKREQ = 1u << 1, /* sender asks for an immediate ack */
	FDP_REL_F_RNR = 1u << 2,    /* receiver is alive but refused a frame (no buffer) */
};

/* uflags bits: opaque to the reliable layer, owned by the message layer */
enum fdp_rel_uflags {
	FDP_REL_UF_FIRST = 1u << 0, /* payload starts with a struct fdp_msg_hdr */
};

/* Number of sequence numbers past the cumulative ack covered by sack. */
#define FDP_REL_SACK_BITS 64

struct fdp_rel_hdr {
	struct fdp_hdr hdr;    /* magic, FDP_PROTO_VERSION, type (enum fdp_rel_type),
	                        * flags (enum fdp_rel_flags), len = 40 + payload */
	uint8_t version;       /* FDP_REL_VERSION */
	uint8_t uflags;        /* enum fdp_rel_uflags (DATA only) */
	uint16_t sack_base;    /* sack bit i stands for seq ack+1+sack_base+i: the
	                        * receiver rotates it over its out-of-order range
	                        * when that is wider than 64 frames */
	uint32_t session;      /* sender's instance id (random, non-zero); a new
	                        * value means the peer restarted */
	uint32_t peer_session; /* receiver's session as the sender knows it (0 =
	                        * unknown); acks for another session are ignored */
	uint32_t seq;          /* DATA: sequence number of this frame; ACK: sender's
	                        * next sequence number (informational) */
	uint32_t una;          /* sender's oldest unacknowledged sequence: the
	                        * receiver never waits for anything below it */
	uint32_t ack;          /* cumulative ack: every seq < ack was received */
	uint64_t sack;         /* bit i set: seq ack+1+sack_base+i was received
	                        * (out of order) */
	uint32_t tsval;        /* sender's clock when it sent this frame (us, wraps) */
	uint32_t tsecr;        /* tsval of the latest frame the sender received from
	                        * the receiver (0 = none): one RTT sample per ack,
	                        * unambiguous even for retransmissions */
} __attribute__((packed));

_Static_assert(sizeof(struct fdp_rel_hdr) == 48, "fdp_rel_hdr is 48 bytes on the wire");

/* Message-layer header, first bytes of the payload of a FIRST segment. */
enum fdp_msg_op {
	FDP_MSG_OP_MSG = 1,    /* FI_MSG send */
	FDP_MSG_OP_TAGGED = 2, /* FI_TAGGED send */
};

enum fdp_msg_hflags {
	FDP_MSG_HF_DATA = 1u << 0, /* cq_data is valid (FI_REMOTE_CQ_DATA) */
};

struct fdp_msg_hdr {
	uint8_t op;       /* enum fdp_msg_op */
	uint8_t flags;    /* enum fdp_msg_hflags */
	uint16_t reserved;/* zero on send, ignored on receive */
	uint32_t len;     /* total message bytes (all segments, excluding this header) */
	uint64_t tag;     /* FI_TAGGED tag (0 for FI_MSG) */
	uint64_t cq_data; /* remote CQ data when FDP_MSG_HF_DATA */
} __attribute__((packed));

_Static_assert(sizeof(struct fdp_msg_hdr) == 24, "fdp_msg_hdr is 24 bytes on the wire");

#endif /* FDP_REL_PROTO_H */
