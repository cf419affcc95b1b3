/* stk_lazy: the negotiation of a TCP connection, completed lazily and in the
 * background, so that connect() and accept() return as the kernel's do and no app
 * call waits for a peer that is not coming (protocol: stk_nego.h).
 *
 * A connection that may become accelerated gets a stk_conn at once, in phase
 * STK_PHASE_PENDING (stk_stream.h), with a private duplicate of the kernel socket
 * (conn->fd). Its negotiation is a small state machine driven, under its own
 * lock and without ever blocking, by whichever comes first:
 *  - the process's negotiation thread (created lazily, re-created in a forked
 *    child or when the app closed its epoll fd behind our back): it sleeps in
 *    epoll_wait on the pending sockets' private fds (≈0 % CPU) and, as soon as
 *    they arrive, answers REPLYs (server: ACK or CANCEL), takes ACKs, finishes
 *    handshakes, and removes late records (a HELLO and CANCEL together, a REPLY
 *    that crossed our CANCEL) — so that no negotiation byte waits in a stream an
 *    app may read through a path we do not interpose. It leaves alone a conn an
 *    app thread is driving (stk_lazy_settle), and it never answers a HELLO: a
 *    client commits to the fabric only in a call of its own app;
 *  - an app thread's data call (stk_lazy_settle), which also applies the bounded
 *    waits of the protocol: a client's first write waits for the HELLO at most
 *    stk_cfg.nego_wait_ms (per the destination cache), a server's first write
 *    waits that long for the REPLY (up to STK_NEGO_REPLY_WAIT_MS after a HOLD)
 *    and then CANCELs; blocking reads wait for bytes anyway (with the socket's
 *    SO_RCVTIMEO and the kernel's signal semantics);
 *  - poll/select/epoll on the socket (stk_lazy_events): a client answers the
 *    HELLO there, and a handshake the peer finished ends there;
 *  - fdopen (stk_lazy_refuse): the app is about to use stdio, whose reads and
 *    writes we never see: the negotiation is steered to the kernel.
 * A client's first answer in a process opens the providers (libfabric loads in
 * ~0.2 s): it first sends HOLD so that the server waits for the real REPLY.
 * The outcome: STK_PHASE_FABRIC (the conn carries the data), STK_PHASE_KERNEL (the
 * conn is an empty shell: the preload uses the kernel socket), or on the way to
 * the kernel STK_PHASE_STRIP (writes go to the kernel, reads first let a late
 * record be removed).
 *
 * Readiness of a conn that is not on the fabric (stk_lazy_events) is the kernel
 * socket's, except that negotiation bytes are never readable. When the phase
 * changes, the thread or the settling app thread tells the epoll layer
 * (stk_epoll_conn_changed): sets holding the conn wake up (fabric) or hand the
 * socket back to the app's kernel epoll set (kernel).
 *
 * Bounds (stk_nego.h): every wait of the negotiation is bounded, and a
 * protocol violation never pins a connection. A record the peer began must be
 * whole within STK_NEGO_RECORD_MS (2 s) and before the peer's end of stream;
 * otherwise the connection goes to the kernel with nothing consumed (the cut
 * record and the app's bytes behind it are the app's to read). A malformed
 * whole record is not consumed either: its length is the peer's word. What
 * the peer says is checked in one place (stk_peer.h) before libfabric sees
 * it; a server in HANDSHAKE sends nothing on the fabric before the client's
 * first message came, and cancels after STK_NEGO_HANDSHAKE_MS (2 s). The
 * negotiation thread visits a conn with a record cut short at its deadline
 * (its timer queue), without polling. A peer that never answers costs what a
 * kernel connection costs plus our private fd, until it closes.
 *
 * Locks: the registry lock of this module, then a conn's negotiation lock (only
 * ever try-locked under the registry lock), then stk_epoll locks. Nothing that
 * holds an stk_epoll lock calls into this module except stk_lazy_events (which
 * only takes the conn's fd lock, a leaf: see struct stk_lazy in stk_lazy_int.h).
 *
 * The private fd: closed exactly once, by the conn's close, or when it
 * settled on the kernel (after stk_epoll_conn_changed returned, so that no
 * epoll set holds or registers it any more), never when the app may have its
 * number (priv_same).
 * Errors are -errno. */
#ifndef STK_LAZY_H
#define STK_LAZY_H

#include <stdbool.h>

struct stk_conn;

/* Client: the kernel connect of the app's fd returned 0 (connected) or
 * EINPROGRESS/EINTR (connecting); priv is a private duplicate of it (owned by
 * the conn from now on; the SYN mark is removed once connected). 0 and *out, or
 * -errno (priv untouched). */
int stk_lazy_client(int priv, int app_fd, bool connecting, struct stk_conn **out);
/* Server: a connection accepted on an accelerating listener. Sends the HELLO
 * when the client's SYN was marked. 0 and *out (priv owned by the conn), or
 * STK_ATTACH_KERNEL (plain client: nothing sent, counted) or -errno (priv
 * untouched in both cases). */
int stk_lazy_server(int priv, int app_fd, struct stk_conn **out);

/* Before an app data call on a conn whose phase is not FABRIC: advance the
 * negotiation, waiting as the protocol says for a write (for_write) or, for a
 * blocking read, until the first bytes decide. Returns the phase the call must
 * use (FABRIC, KERNEL, STRIP: kernel for a write) or -EAGAIN (non-blocking call,
 * not decided yet: the call reports EAGAIN). */
int stk_lazy_settle(struct stk_conn *conn, bool for_write, bool nonblock);

/* The app is about to use the socket through a path we cannot follow (stdio's
 * internal reads and writes): bring the negotiation to the kernel if it can
 * still go there (a client REJECTs the HELLO, a server CANCELs), waiting for
 * the peer's first record as a first write would. A conn already committed to
 * the fabric finishes there. */
void stk_lazy_refuse(struct stk_conn *conn);

/* poll(2) events of a conn that is not on the fabric: the kernel socket's, no
 * POLLIN for negotiation bytes. Never blocks, takes no lock of this module. */
short stk_lazy_events(struct stk_conn *conn);
/* Readiness now, in any phase (drives progress or the negotiation once):
 * POLLIN, POLLOUT, POLLRDHUP, POLLHUP, POLLERR as poll(2) would report them for
 * a TCP socket. */
short stk_poll_events(struct stk_conn *conn);

/* The conn is being closed: forget it (the thread never touches it again). */
void stk_lazy_forget(struct stk_conn *conn);

/* fork (from stk_migrate's handlers): the negotiation thread finishes what it
 * is doing and waits until the fork is over. */
void stk_lazy_atfork_prepare(void);
void stk_lazy_atfork_parent(void);
void stk_lazy_atfork_child(void);

#endif
