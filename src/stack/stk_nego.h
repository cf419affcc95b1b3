/* stk_nego: the negotiation on the kernel TCP connection, and the marking that
 * keeps it invisible to plain (non-libfabsock) peers.
 *
 * THE PROTOCOL (version 5). Properties P1-P4 (docs/design.md, "The negotiation sequence") hold by these rules:
 *  1. Client side, before connect() (blocking or not): stk_nego_mark_syn() sets
 *     IP_TOS (IPv6: IPV6_TCLASS) to STK_NEGO_SYN_TOS, so the SYN carries the mark;
 *     once the connection is established stk_nego_unmark() restores 0.
 *  2. Server side, on the listener before the first SYN: stk_nego_listener_prepare()
 *     sets TCP_SAVE_SYN. On each accepted socket stk_nego_syn_marked() reads
 *     TCP_SAVED_SYN and checks the TOS / traffic class. Not marked (a plain client,
 *     a libfabsock client that could not mark, SYN cookies) → kernel, nothing sent:
 *     the server NEVER speaks first to an unmarked client (P1 for plain clients).
 *  3. Marked → the server sends a HELLO at once (version, host identity, every
 *     provider it opened with its fabric address, its slot, connection id and
 *     initial credits; possibly zero providers) and accept() returns: nobody waits.
 *  4. The kernel stream's first records decide, in each direction, and the SERVER
 *     decides the outcome (the client only offers: no two-generals ambiguity):
 *     - the client NEVER writes a byte before it has read a HELLO (P1 for plain
 *       servers). Its first incoming bytes: a HELLO → if its app has not written,
 *       it answers one REPLY (ACCEPT with the chosen provider — shm only on the
 *       same boot id and network namespace — and its address/slot/id/credits, or a
 *       REJECT status; an ACCEPT goes after the client's first fabric message, see
 *       rule 5) and waits for the server's verdict (rule 5); if its app already
 *       wrote (it gave up waiting), it removes the HELLO and stays on the kernel.
 *       Anything else (a plain server speaking first, EOF) → kernel, nothing
 *       consumed. The app's first write waits for the HELLO at most
 *       stk_cfg.nego_wait_ms for an unknown destination, 0 for one cached as plain
 *       (TTL STK_NEGO_CACHE_TTL_S), STK_NEGO_WAIT_CAPABLE_MS for one cached as
 *       capable (P3); reads wait for data anyway.
 *       A client that must first open its providers (loading libfabric takes
 *       ~0.2 s once per process) first sends a REPLY with status HOLD: it
 *       commits to a real REPLY that follows, and the server then waits up to
 *       STK_NEGO_REPLY_WAIT_MS instead of stk_cfg.nego_wait_ms.
 *     - the server's first incoming bytes: a REPLY ACCEPT it can use (every field
 *       checked, stk_peer.h) → rule 5;
 *       a REPLY it cannot use → CANCEL, kernel; a REJECT → kernel; anything else is
 *       the client app's data (the client fell back): kernel, nothing consumed. If
 *       the server app writes before the REPLY came, it waits at most
 *       stk_cfg.nego_wait_ms for it, then sends CANCEL (before the app's bytes)
 *       and removes a REPLY that crossed it.
 *     - a client that fell back removes a HELLO and a CANCEL at the start of its
 *       stream; a server that cancelled removes a REPLY at the start of its stream.
 *     - a client that sent a REPLY ACCEPT never decides alone: it waits for
 *       the verdict as long as its kernel connection lives (a live libfabsock
 *       server always decides; a timeout of its own could cross the server's
 *       message and split the connection between the two paths).
 *  5. The client sends its first fabric message (to the slot and id of the
 *     HELLO) BEFORE its REPLY ACCEPT, so that the server, reading the REPLY,
 *     normally finds it already (on shm it is there; no fabric wait, no round
 *     trip). The server alone decides whether the fabric works: once it has the
 *     client's message it moves to the fabric and sends its own fabric message,
 *     which is its verdict (no kernel record: the handshake rides on the
 *     messages that flow anyway); when the client's message does not come
 *     within STK_NEGO_HANDSHAKE_MS it sends CANCEL (status HANDSHAKE) on the
 *     kernel stream and stays on the kernel (a client message that arrives
 *     after the server cancelled, or for a connection it refused, fails the
 *     connection-id check and is dropped). The client moves to the fabric on
 *     the server's first fabric message, to the kernel on CANCEL, and waits for
 *     either as long as its kernel connection lives; bytes other than a record
 *     on the kernel stream meanwhile are the doorbells of a server on the fabric
 *     (the server writes nothing else there before it decided), left for the
 *     stream. No app byte moves on either path before the verdict. A server on
 *     the fabric closes its kernel connection only once its messages were taken
 *     (stk_close), so a client that sees that end of stream looks at the fabric
 *     once more first. Every record consumed is acknowledged at once
 *     (TCP_QUICKACK): the peer's next record would otherwise wait under Nagle
 *     for a delayed ACK (40 ms).
 *  The server sends nothing to the client's fabric address before that first
 *  message (right slot and connection id: proof it comes from the peer of
 *  this kernel connection) arrived. A record begun must be whole within
 *  STK_NEGO_RECORD_MS and before the end of stream, else the connection goes
 *  to the kernel with nothing consumed (stk_lazy.h).
 *  The records are consumed as soon as they arrive (a per-process negotiation
 *  thread, stk_lazy.h), so an app reading through a path we do not interpose
 *  (stdio inside libc) does not see them. Every outcome is counted, each distinct
 *  fallback reason logged once (P4).
 *
 * Wire (little-endian): a 16-byte header stable across versions
 *   magic[8] = 7f 'f' 's' 'k' 'N' 'E' 'G' 'O', version u16, type u16 (1 HELLO,
 *   2 REPLY, 3 ACK (version 3), 4 CANCEL, 5 READY (version 4)), length u32 (whole message, ≤ STK_NEGO_MSG_MAX)
 * and, for every type but HELLO of any version, the first body field status u16
 * (0 = ACCEPT). CANCEL and READY (and version 3's ACK) carry nothing else.
 * HELLO body: boot_id[16] netns u64 conn_id u64 slot u32 credits u32 nprov u8,
 *   nprov × (name_len u8, name, addr_len u16, addr).
 * REPLY body: status u16 boot_id[16] netns u64 conn_id u64 slot u32 credits u32
 *   name_len u8 name addr_len u16 addr. */
#ifndef STK_NEGO_H
#define STK_NEGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "stack/stk_fab.h"

#define STK_NEGO_VERSION 5          /* 5: no READY, the server's first fabric message is its verdict;
                                       shm peers wake each other through their bells (stk_fab_bell.h) */
#define STK_NEGO_SYN_TOS 0x2c          /* DSCP 11 (unassigned), ECN bits 0 */
#define STK_NEGO_HDR_LEN 16
#define STK_NEGO_MSG_MAX 2048
#define STK_NEGO_PROV_MAX 8
#define STK_NEGO_WAIT_CAPABLE_MS 1000
#define STK_NEGO_REPLY_WAIT_MS 2000
#define STK_NEGO_CACHE_TTL_S 60
#define STK_NEGO_HANDSHAKE_MS 2000     /* server: the client's first fabric message */
#define STK_NEGO_RECORD_MS 2000        /* a record begun is whole by then (stk_lazy.h) */

enum stk_nego_type {
	STK_NEGO_HELLO = 1, STK_NEGO_REPLY = 2, STK_NEGO_ACK = 3 /* version 3 only */,
	STK_NEGO_CANCEL = 4,
	STK_NEGO_READY = 5, /* version 4 only: the server's fabric verdict on the kernel stream */
};

enum stk_nego_status {
	STK_NEGO_ACCEPT = 0,
	STK_NEGO_REJECT_VERSION = 1,
	STK_NEGO_REJECT_NO_COMMON = 2,
	STK_NEGO_REJECT_PROV_INIT = 3,
	STK_NEGO_REJECT_BAD_HELLO = 4,
	STK_NEGO_REJECT_LATE = 5,
	STK_NEGO_CANCEL_APP_WROTE = 6,  /* CANCEL: the server app wrote first */
	STK_NEGO_CANCEL_UNUSABLE = 7,   /* CANCEL: the REPLY's provider is unusable */
	STK_NEGO_HOLD = 8,              /* REPLY: the real REPLY follows (providers loading) */
	STK_NEGO_CANCEL_HANDSHAKE = 9,  /* CANCEL: no fabric message came from the client */
};

struct stk_nego_prov {
	char name[STK_FAB_NAME_MAX];
	uint16_t addr_len;
	uint8_t addr[STK_FAB_ADDR_MAX];
};

struct stk_nego_msg {
	uint16_t version;
	uint16_t type;
	uint16_t status;        /* REPLY only */
	uint8_t boot_id[16];
	uint64_t netns;
	uint64_t conn_id;       /* the id the peer must put on messages to the sender */
	uint32_t slot;          /* the sender's slot */
	uint32_t credits;       /* bytes the sender accepts before granting more */
	unsigned nprov;         /* HELLO: offered; REPLY: 1 when ACCEPT */
	struct stk_nego_prov prov[STK_NEGO_PROV_MAX];
};

/* Encode into buf (cap bytes); returns the length or -ENOSPC. */
ssize_t stk_nego_encode(const struct stk_nego_msg *msg, uint8_t *buf, size_t cap);
/* Decode the len bytes at buf (possibly a prefix of the stream).
 * 0: a whole message of *msg_len bytes, *msg filled.
 * -EAGAIN: so far a valid prefix; more bytes needed (*msg_len set once known).
 * -EPROTO: not a negotiation message (first bytes differ from the magic).
 * -EPROTONOSUPPORT: a whole message of another version (*msg_len set; msg->version,
 *   msg->type, and for a REPLY msg->status filled).
 * -EBADMSG: our magic and version but malformed (bounds, lengths, counts). */
int stk_nego_decode(const uint8_t *buf, size_t len, struct stk_nego_msg *msg, size_t *msg_len);

/* This host's identity (boot id, network namespace inode), computed once. */
void stk_nego_host_identity(uint8_t boot_id[16], uint64_t *netns);
bool stk_nego_same_host(const struct stk_nego_msg *peer);

/* SYN marking. Return 0 or -errno. */
int stk_nego_listener_prepare(int listen_fd);
int stk_nego_mark_syn(int fd, int domain);
int stk_nego_unmark(int fd, int domain);
/* 1 when the accepted socket's SYN carried the mark, 0 when not or unknown (no
 * saved SYN), -errno on a failed call. Reads (and frees) the saved SYN. */
int stk_nego_syn_marked(int fd);

/* Per-destination outcome cache (IP and port of the server). */
enum stk_nego_peer { STK_PEER_UNKNOWN, STK_PEER_PLAIN, STK_PEER_CAPABLE };
enum stk_nego_peer stk_nego_cache_get(const struct sockaddr *dest);
void stk_nego_cache_put(const struct sockaddr *dest, enum stk_nego_peer state);

/* Non-blocking, on the kernel connection. stk_nego_peek: look at the first
 * record of the stream without consuming it: stk_nego_decode()'s codes (0 with
 * *msg and *msg_len for a whole message), -EAGAIN when no or too few bytes are
 * there, -ECONNRESET at EOF, -errno. stk_nego_consume: remove the first len bytes
 * (a record peek found). stk_nego_send_now: send one record now (a fresh
 * connection's send buffer always has room; a partial send is completed with a
 * bounded wait). All return 0 or -errno. */
int stk_nego_peek(int fd, struct stk_nego_msg *msg, size_t *msg_len);
/* The kernel connection has an error pending (a reset) with no byte before it:
 * a peek or send would take it (the kernel hands it to the first call that
 * finds it and clears it). Takes nothing. */
bool stk_nego_error_pending(int fd);
/* The same for the record that starts skip (≤ STK_NEGO_MSG_MAX) bytes in: what
 * follows a record peek found (-EAGAIN also when the stream ends before it). */
int stk_nego_peek_at(int fd, size_t skip, struct stk_nego_msg *msg, size_t *msg_len);
int stk_nego_consume(int fd, size_t len);
int stk_nego_send_now(int fd, const struct stk_nego_msg *msg);

/* Blocking helpers on the kernel connection, bounded by timeout_ms. */
int stk_nego_send_msg(int fd, const struct stk_nego_msg *msg, int timeout_ms);
/* Read one message: peek until a whole one is there, then consume exactly it.
 * Returns stk_nego_decode()'s codes (whole messages of another version are
 * consumed too), -ETIMEDOUT, -ECONNRESET (EOF) or -errno. On -EPROTO nothing is
 * consumed. */
int stk_nego_recv_msg(int fd, struct stk_nego_msg *msg, int timeout_ms);

#endif
