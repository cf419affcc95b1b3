/* stk_stream_proto: the stream header on every fabric message (version 1).
 * Little-endian on the wire; 24 bytes, followed by len payload bytes (DATA). */
#ifndef STK_STREAM_PROTO_H
#define STK_STREAM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Connection slots per process: a header names the receiver's slot, below this. */
#define STK_CONN_MAX 65536

enum {
	STK_MSG_DATA = 1u << 0,   /* len payload bytes follow */
	STK_MSG_CREDIT = 1u << 1, /* the receiver grants len more bytes */
	STK_MSG_FIN = 1u << 2,    /* no more data from the sender (after this message) */
	STK_MSG_CLOSE = 1u << 3,  /* the sender closed: it will read nothing more */
	STK_MSG_RST = 1u << 4,    /* abortive close: discard everything, ECONNRESET */
	STK_MSG_URG = 1u << 5,    /* the last data byte sent so far is urgent (MSG_OOB);
				   * on a DATA message: its last payload byte */
	/* The sender's last fabric message on this connection: from now on it
	 * writes on the kernel connection, and reads it after our MIGRATE (see
	 * stk_migrate.h). Sent also when credit is zero (it carries no data). */
	STK_MSG_MIGRATE = 1u << 6,
	/* Doorbells (stk_stream.h, "Sleeping"); neither changes the stream. SLEEP:
	 * the sender is going to sleep in the kernel having received len messages
	 * of ours: ring its doorbell if one of ours is still unseen, else before
	 * our next message. BELL: a doorbell byte was just written; the header's
	 * bells count covers it. */
	STK_MSG_SLEEP = 1u << 7,
	STK_MSG_BELL = 1u << 8,
};

struct stk_msg_hdr {
	uint64_t conn_id;  /* receiver's connection id (from the negotiation) */
	uint32_t slot;     /* receiver's slot */
	uint32_t seq;      /* per direction, +1 per message, checked */
	uint32_t len;      /* DATA: payload bytes; CREDIT: bytes granted */
	uint16_t flags;    /* STK_MSG_* */
	uint16_t bells;    /* doorbell bytes the sender wrote on the kernel
			    * connection so far (mod 2^16), this message's included */
} __attribute__((packed));

/* A received message's header, checked, in host order. */
struct stk_msg_in {
	uint64_t conn_id;
	uint32_t slot, seq, len;
	uint16_t flags, bells;
	size_t payload;         /* bytes after the header */
	bool data_ok;           /* not DATA, or DATA with len equal to payload */
};

/* Parse the len bytes at msg (a peer's, unaligned): 0 with *in filled, or
 * -EBADMSG for a stray message (shorter than a header, slot out of range of
 * STK_CONN_MAX). Pure (no lock, no call): fuzzed by tests/stack/fuzz_stream.c.
 * What the connection it names does with it is stk_stream_deliver's. */
int stk_msg_parse(const void *msg, size_t len, struct stk_msg_in *in);

#endif
