/* stk_stream: a TCP-like byte stream over the process's shared RDM endpoint.
 *
 * Wire (stk_stream_proto.h): every fabric message starts with a header naming
 * the receiver's slot and the receiver's 64-bit connection id (both learnt in the
 * negotiation; a message whose id does not match the slot's is dropped and
 * counted), a per-direction sequence number (checked: a gap resets the
 * connection), flags DATA / CREDIT / FIN / CLOSE / RST and a length.
 *
 * Receive: delivered DATA is copied at once into the connection's receive ring
 * (window_bytes long) and the fabric buffer is reposted, so the shared pool never
 * starves and memory per connection is bounded by the ring. Flow control is in
 * bytes: the peer may send only what we granted (initially the ring size); we give
 * credit back as the application consumes, batched by a quarter of the window.
 *
 * Send: bytes are copied into registered segments (or injected when small) and
 * posted at once; a send never exceeds the peer's credit. Blocking sends wait for
 * credit; non-blocking ones return what fitted, or -EAGAIN.
 *
 * Close semantics (as kernel TCP): shutdown(SHUT_WR) sends FIN (peer reads EOF
 * after the data); close sends FIN|CLOSE (peer's later sends fail with EPIPE), or
 * RST when abortive or when unread data remains (peer sees ECONNRESET). Unread
 * data includes what the provider holds for us unprocessed: close delivers it
 * first. When the kernel connection (the liveness channel) reports EOF/error
 * without a FIN having arrived, the peer died: ECONNRESET. A reset, whatever its
 * cause, keeps the bytes received before it (as Linux keeps its receive queue):
 * reads return them, then ECONNRESET once, then EOF.
 *
 * Sleeping (doorbells), on a fabric without a CQ wait fd (shm has its bell,
 * stk_fab_bell.h, which is one): a waiter that
 * found nothing for a while announces its sleep to each peer with a SLEEP
 * message and sleeps in the kernel on the kernel connections; the peer rings a
 * doorbell byte there before its next message that matters. The protocol, its
 * counts and why every race is covered: docs/wire.md, "Doorbells".
 *
 * Threads: one mutex per connection (never held across progress or a sleep);
 * distinct connections never share a lock on the data path. Two threads on one
 * connection are safe (bytes of concurrent sends are not interleaved within one
 * message but whole calls may interleave, as with the kernel). */
#ifndef STK_STREAM_H
#define STK_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>

#include "stack/stk_leftover.h"
#include "stack/stk_stream_proto.h"
#include "stack/stk_wait.h"
#include "stack/stk_watch.h"

struct stk_fab;
struct stk_stat_rec;
struct stk_wake_node;


/* stk_conn.urg */
#define STK_URG_VALID 1     /* an urgent byte is pending, not taken by recv(MSG_OOB) */
#define STK_URG_READ 2      /* it was taken; the mark stays until read past */

/* Where a connection's bytes go (stk_lazy.h): FABRIC is 0 so that connections
 * made by the blocking stk_accel_attach are on the fabric from creation. */
enum stk_phase {
	STK_PHASE_FABRIC = 0,   /* negotiated: data over the fabric */
	STK_PHASE_PENDING = 1,  /* undecided: reads and writes settle first */
	STK_PHASE_STRIP = 2,    /* kernel for writes; reads first remove late records */
	STK_PHASE_KERNEL = 3,   /* kernel for everything: the conn is only a shell */
};

struct stk_lazy;

struct stk_conn {
	pthread_mutex_t lock;
	int phase;                /* atomic: enum stk_phase */
	struct stk_lazy *lazy;    /* negotiation state while not FABRIC (stk_lazy.c) */
	/* set once at creation / negotiation, read-only afterwards */
	int fd;                   /* the kernel connection: liveness channel (-1 once
				   * settled on the kernel, stk_lazy.c) */
	uint32_t slot;            /* ours: peers address us by it */
	uint64_t local_id;        /* id peers put on messages to us */
	struct stk_fab *fab;      /* NULL until the provider is chosen */
	fi_addr_t peer_addr;
	uint32_t peer_slot;
	uint64_t peer_id;
	bool nonblock;            /* default for stk_send/stk_recv without MSG_DONTWAIT */

	/* protected by lock: transmit side */
	uint32_t tx_seq;
	uint64_t tx_credits;      /* bytes the peer still accepts */
	bool fin_sent;            /* SHUT_WR done */
	bool close_sent;
	int tx_outstanding;       /* atomic: registered sends not completed yet */
	/* a non-blocking send stopped with credit left: the provider had no room.
	 * Room comes back without a message for us, so POLLOUT is withheld until a
	 * retry is due (STK_STARVE_RETRY_NS later) and epoll keeps polling it. */
	bool tx_starved;
	uint64_t starved_at;

	/* protected by lock: receive side */
	uint32_t rx_seq;
	uint8_t *ring;
	size_t ring_size;
	size_t ring_head;         /* next byte the app reads */
	size_t ring_count;        /* bytes buffered */
	uint64_t credit_owed;     /* consumed bytes not yet granted back */
	bool fin_rcvd;            /* EOF after the buffered data */
	bool peer_closed;         /* peer closed completely: sends get EPIPE */
	bool reset;               /* RST received / peer died / protocol error */
	bool rd_shut;             /* shutdown(SHUT_RD) */
	bool reset_reported;      /* ECONNRESET returned once already */
	uint64_t generation;      /* +1 per delivered message or state change (EPOLLET) */
	/* urgent data (tcp(7)): the urgent byte stays in the ring at stream offset
	 * urg_seq (offsets count every byte ever queued: rx_total is the end of the
	 * ring, rx_total - ring_count the read position); reads stop at it and skip
	 * it unless SO_OOBINLINE. urg is 0 when no mark is pending. */
	uint64_t rx_total;
	uint64_t urg_seq;
	uint8_t urg;              /* 0, STK_URG_VALID (byte not taken), STK_URG_READ */
	uint8_t urg_byte;

	/* epoll items watching the connection (stk_ready.h); notified after every
	 * change that bumps generation */
	struct stk_watch watch;

	/* migration to the kernel connection (stk_migrate.h); protected by lock */
	bool mig_tx;              /* our MIGRATE is sent: we write on the kernel */
	bool mig_rx;              /* the peer's MIGRATE arrived (or will never come):
				   * no more fabric data; after the ring, the kernel */
	bool mig_reply;           /* the peer asked: send our MIGRATE (pending);
				   * stored atomically: stream_answer_pending reads it first
				   * without the lock */
	bool migrated;            /* atomic: both done, ring moved to left; no
				   * fabric state is used any more */
	bool kernel_only;         /* atomic: migrated and left is empty: a plain
				   * kernel socket (the preload bypasses the stack) */
	struct stk_leftover *left; /* unread bytes at migration (shared at fork) */
	int left_fd;              /* its memfd (close-on-exec), or -1 */

	/* doorbells (see "Sleeping" above); protected by lock */
	uint32_t tx_wake_seq;     /* tx_seq after our last message that is not SLEEP/BELL */
	bool peer_sleeping;       /* its SLEEP came and it has seen all that matters */
	bool sleep_announced;     /* atomic: our SLEEP is out, not cleared since */
	int sleepers;             /* atomic: threads of ours in a poll or blocking
				   * wait on the conn (stk_conn_sleepers_add) */
	struct stk_wake_node *wakers; /* those threads' wake-ups (stk_wake.h), rung
				   * on every change (protected by lock) */
	uint8_t bell_owed;        /* a byte written, no message counted it yet:
				   * BELL_OWED (a post follows), BELL_OWED_QUEUED
				   * (that post failed: stream_answer_pending posts a BELL);
				   * stored atomically, as mig_reply */
	uint16_t bells_tx;        /* doorbell bytes we wrote on the kernel connection */
	uint16_t bells_seen;      /* the peer's count from its latest message */
	uint16_t bells_rx;        /* doorbell bytes we consumed */

	/* coalesced small sends (stk_cork.h); protected by lock */
	uint8_t *cork;            /* STK_CORK_BYTES, allocated at the first use */
	uint32_t cork_len;        /* bytes staged (credit already taken) */
	bool tx_run;              /* sent since our last receive on the conn */
	uint64_t last_send_ns;    /* time of the latest send call */
	uint64_t cork_since;      /* when the staged bytes began (atomic store: the
				   * flusher reads it without the lock) */

	/* statistics, folded into the process counters at close; protected by lock */
	uint64_t bytes_tx, bytes_rx, msgs_tx, msgs_rx;
	struct stk_stat_rec *stat; /* atomic: its record for fabsock-stat (stk_stat_conn.h) */
};

/* The data path's test: true when the conn carries the app's bytes. */
static inline bool stk_conn_on_fabric(const struct stk_conn *conn)
{
	return __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_FABRIC;
}

/* Create a connection in the table with a fresh random id and a receive ring of
 * window bytes. Messages for it are accepted from now on (before negotiation
 * ends). Returns 0 or -errno. */
int stk_conn_create(int fd, size_t window, struct stk_conn **out);
/* Bind a created connection to its peer (after the negotiation). */
void stk_conn_connect(struct stk_conn *conn, struct stk_fab *fab, fi_addr_t peer_addr,
		      uint32_t peer_slot, uint64_t peer_id, uint64_t peer_credits);
/* First fabric message each way, after both ends inserted each other's address:
 * it makes the provider set up its peer state (shm maps the peer's region, rxm
 * connects) while both ends are known to drive progress, and proves the fabric
 * path works. The server's side (stk_conn_handshake, stk_conn_handshake_enter,
 * and the step with answer_only): ours is sent only once the peer's first
 * message (our slot and connection id, which only the peer of the kernel
 * connection knows) arrived: a peer-supplied address gets nothing from us
 * before that proof. The server's message is its verdict (stk_nego.h, rule 5):
 * stk_conn_handshake and stk_conn_handshake_enter put the conn on the fabric
 * when they post it. 0, -ETIMEDOUT or -ECONNRESET. */
int stk_conn_handshake(struct stk_conn *conn, int timeout_ms);
/* One non-blocking step of it (*posted starts false): 1 done, 0 not yet,
 * -ECONNRESET. */
int stk_conn_handshake_step(struct stk_conn *conn, bool *posted, bool answer_only);
/* The server's non-blocking step: 1 once the client's message arrived and ours
 * is posted, the conn then on the fabric (phase FABRIC, set under the conn's
 * lock together with the post); 0 not yet; -ECONNRESET. */
int stk_conn_handshake_enter(struct stk_conn *conn, bool *posted);
/* A connection that is migrated from the start: fd (owned) is its kernel
 * socket, left/left_fd (owned; may be NULL/-1) the bytes to read before it. */
int stk_conn_create_migrated(int fd, struct stk_leftover *left, int left_fd,
			     struct stk_conn **out);
/* Remove from the table and free (no message sent; the kernel fd is not closed). */
void stk_conn_destroy(struct stk_conn *conn);
/* The negotiation put conn on the fabric (stk_lazy.c): bump the generation,
 * take the doorbells of a MIGRATE that came first (they follow the last
 * negotiation record), then publish the phase. */
void stk_conn_enter_fabric(struct stk_conn *conn);

/* Called by stk_fab_progress (cq lock held) for every received message. */
void stk_stream_deliver(struct stk_fab *fab, const void *msg, size_t len);

/* Data path, POSIX-shaped; return bytes or -errno. flags: MSG_PEEK, MSG_WAITALL,
 * MSG_DONTWAIT, MSG_OOB (urgent data as Linux TCP: send makes the last byte
 * sent urgent; recv(MSG_OOB) returns that byte once, never waits, -EINVAL when
 * there is none, it was taken, or SO_OOBINLINE is set) (send: MSG_DONTWAIT; MSG_NOSIGNAL is the caller's business: we
 * never raise SIGPIPE, the preload does when the app did not ask otherwise).
 * Blocking calls behave as the kernel's (signal(7)): the socket's SO_RCVTIMEO /
 * SO_SNDTIMEO (read from the kernel socket when the call first has to wait)
 * ends the wait with -EAGAIN, or the bytes already moved; a signal handler that
 * runs while the call waits ends it with -EINTR (or the bytes already moved),
 * unless every handler that ran has SA_RESTART and no timeout is set: then the
 * call goes on waiting. While waiting, signals are blocked in the calling thread
 * and watched with a thread-local signalfd (one fd per thread that ever blocked,
 * closed at thread exit); a signal is delivered by restoring the caller's mask
 * for a moment, so handlers run on this thread as with the kernel. */
ssize_t stk_send(struct stk_conn *conn, const void *buf, size_t len, int flags);
ssize_t stk_recv(struct stk_conn *conn, void *buf, size_t len, int flags);
/* Block as a blocking recv on conn would (SO_RCVTIMEO, signals, SA_RESTART)
 * until until(conn) is true (asked at least every millisecond). 0, -EAGAIN
 * (the socket's timeout), -EINTR. */
int stk_conn_block_until(struct stk_conn *conn, bool (*until)(struct stk_conn *conn));
/* how: SHUT_RD, SHUT_WR, SHUT_RDWR. */
int stk_shutdown(struct stk_conn *conn, int how);
/* Graceful (FIN|CLOSE after the data, waits ≤ 1 s for it to leave) or abortive
 * (RST). Closes the kernel fd too and frees conn. Returns 0: like the kernel's
 * close, a goodbye that could not be delivered is not the caller's error (it is
 * logged at debug level). */
int stk_close(struct stk_conn *conn, bool abortive);

/* Readiness now of a connection on the fabric (drives progress once): POLLIN,
 * POLLOUT, POLLRDHUP, POLLHUP, POLLERR as poll(2) would report them for a TCP
 * socket. Any phase: stk_poll_events (stk_lazy.h). */
short stk_stream_events(struct stk_conn *conn);
/* The same without driving progress (the caller just progressed the fabric). */
short stk_conn_events(struct stk_conn *conn);
/* Wait until stk_stream_events() & events or timeout_ms (-1: forever). Spins
 * stk_cfg.spin_us, then sleeps in the kernel (see stk_stream_wait.c for how).
 * Returns the events, 0 on timeout, -EINTR when a signal handler ran (signals
 * are blocked while it spins and delivered in the sleep, as in stk_ready.h). */
short stk_conn_wait(struct stk_conn *conn, short events, int timeout_ms);
/* The kernel connection is readable or hung up (the preload's epoll saw it):
 * consume doorbells, or decide whether the peer closed or died. Never blocks
 * more than 20 ms (1 s for bytes no header counted yet: a MIGRATE on its way). */
void stk_conn_check_liveness(struct stk_conn *conn);
/* Before a waiter sleeps in the kernel on conn->fd (see "Sleeping"): send
 * announces the sleep when needed (else only asks). STK_SLEEP_SENT: a SLEEP
 * went out now: check readiness once more before sleeping; STK_SLEEP_COVERED:
 * anything that arrives from now on makes conn->fd readable (announced before,
 * or nothing more can arrive on the fabric, or it is on the kernel now), or the
 * fabric's wait fd (which the caller sleeps on after stk_fab_trywait);
 * STK_SLEEP_NO: not announced (negotiating, provider full, or send false):
 * sleep in slices. */
enum { STK_SLEEP_NO = -1, STK_SLEEP_COVERED = 0, STK_SLEEP_SENT = 1 };
int stk_conn_sleep_announce(struct stk_conn *conn, bool send);
/* A covered poll or blocking wait sleeps at most this: 200 ms without a
 * thread wake-up (stk_wake.h) or when waiting for POLLOUT (provider room comes
 * back with completions any thread may take, no change of the connection);
 * else 1 s, a safety net only (sleep_late_wakes counts what it catches: a
 * connection ready at the cap; on a fabric with a wait fd, ready before the
 * waiter drives the provider again: what that progress receives was still on
 * its way, as a frame that dpdk's progress thread signals up to its idle
 * pause after it came). */
#define STK_SLEEP_CAP_NS 200000000ull
#define STK_SLEEP_SAFETY_NS 1000000000ull
static inline uint64_t stk_sleep_cap(bool woken, bool want_out)
{
	return woken && !want_out ? STK_SLEEP_SAFETY_NS : STK_SLEEP_CAP_NS;
}
/* A poll or blocking wait is about to sleep on conn (+1, before it asks
 * stk_conn_sleep_announce) or woke up (-1): a thread that sends on the conn
 * meanwhile announces again for it. */
void stk_conn_sleepers_add(struct stk_conn *conn, int n);
/* A thread sleeping on conn links its wake-up node (stk_wake.h) for the
 * sleep (on) and unlinks it after (off): every change of the connection from
 * then on, made by any thread, rings it. */
void stk_conn_wake_link(struct stk_conn *conn, struct stk_wake_node *node, bool on);
/* The connection's phase changed (negotiation settled, or it migrated with
 * nothing left to read): epoll sets watching it report a new edge (fabric) or
 * hand its socket to their kernel set (kernel). */
void stk_conn_changed(struct stk_conn *conn);
/* Changes whenever something arrived for the connection (data, credit, FIN,
 * RST, peer death): for edge-triggered readiness. */
uint64_t stk_conn_generation(struct stk_conn *conn);
/* Bytes readable now (FIONREAD / SIOCINQ): as Linux, only up to a pending
 * urgent mark unless SO_OOBINLINE. */
size_t stk_conn_readable(struct stk_conn *conn);
/* For stk_ready_ops: the watcher list; credit but no provider room. */
struct stk_watch *stk_conn_watch(struct stk_conn *conn);
bool stk_conn_tx_blocked(struct stk_conn *conn);
/* Bytes the peer accepts now (its credit): a hint, it changes at once. */
size_t stk_conn_tx_room(struct stk_conn *conn);
/* SIOCATMARK: 1 when the read position is at the urgent mark, else 0. */
int stk_conn_atmark(struct stk_conn *conn);
/* getsockopt(SO_ERROR): the pending error, taken (ECONNRESET once after a reset,
 * as the kernel: later reads then see EOF), or 0. */
int stk_conn_take_error(struct stk_conn *conn);

/* ---- data calls on a connection whose fabric part is over (stk_migrate.h) ---- */
/* Receive: leftover bytes first, then the kernel connection. Also used for the
 * rest of a call that found the ring empty after the peer's MIGRATE. */
ssize_t stk_migrated_recv(struct stk_conn *conn, void *buf, size_t len, int flags);
/* Send on the kernel connection (MSG_NOSIGNAL added: the preload raises SIGPIPE). */
ssize_t stk_migrated_send(struct stk_conn *conn, const void *buf, size_t len, int flags);
/* Kernel readiness of conn->fd, with POLLIN while extra_in bytes are buffered. */
short stk_migrated_events(struct stk_conn *conn, size_t extra_in);

/* Count and log (once per reason, info) a connection that finished migrating. */
void stk_migrate_note(struct stk_conn *conn, enum stk_migrate_reason why);

/* ---- migration hooks (stk_migrate.c drives them; contracts in stk_migrate.h) ---- */
/* Send our MIGRATE now if not sent yet (never waits). Returns false when the
 * provider had no room: call again after progress. */
bool stk_conn_migrate_begin(struct stk_conn *conn);
/* When mig_tx && mig_rx, or the peer is gone for good (it closed completely,
 * or reset: an RST, or its kernel connection ended, which
 * stk_conn_check_liveness turns into a reset): move the ring to a leftover and
 * mark migrated. Returns 1 when migrated (now or before), 0 when still waiting
 * for the peer's answer, -1 when migrated now because the peer reset without
 * answering (its death, seen on the liveness channel). */
int stk_conn_migrate_finish(struct stk_conn *conn);
/* For the negotiation thread's watch of a conn on the fabric (stk_lazy.c),
 * after it drove progress: STK_WATCH_DONE, our MIGRATE is out (nothing more
 * for the watch); STK_WATCH_IDLE, wait for the next byte on the kernel
 * connection; STK_WATCH_SOON, look again soon: a doorbell byte is there whose
 * message has not arrived yet (it is posted right after the byte), or the
 * answer to the peer's MIGRATE waits for provider room. */
enum { STK_WATCH_DONE, STK_WATCH_IDLE, STK_WATCH_SOON };
int stk_conn_watch_state(struct stk_conn *conn);
/* Drive progress on the connection's fabric (no-op once migrated). */
void stk_conn_progress(struct stk_conn *conn);
/* Hold the connection table: no connection is created or freed meanwhile
 * (bounded use: fork preparation). stk_conn_at(slot) reads a slot. */
void stk_conn_table_hold(void);
void stk_conn_table_release(void);
struct stk_conn *stk_conn_at(uint32_t slot);
/* The process ends (exit, _exit) without closing its connections: the kernel
 * will close their sockets; each peer is told on the fabric first what that
 * close means (FIN, or RST with unread data) after every byte sent (staged
 * ones included), so it reads the stream then EOF, as from the kernel. */
void stk_conn_end_all(void);
/* stk_cork.h: send conn's staged bytes if they were staged before older_than
 * (0: whenever); a full provider leaves them for the next trigger. Returns
 * whether they were sent. */
bool stk_conn_cork_flush(struct stk_conn *conn, uint64_t older_than);
/* fork support: lock the table and every connection (prepare), unlock (parent),
 * or re-initialise the locks and forget the parent's fabric state (child). */
void stk_conn_atfork_prepare(void);
void stk_conn_atfork_parent(void);
void stk_conn_atfork_child(void);

#endif
