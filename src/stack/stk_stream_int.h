/* stk_stream_int.h: what the stream's files share (stk_stream.h is the
 * module's contract; this header is for stk_stream*.c only).
 *
 * Naming: every function, variable and type declared here is prefixed
 * stream_ (constants keep plain upper-case names). Helpers on the data path
 * (send, recv, delivery, progress) are static inline here, so that a call
 * across the files costs nothing there; the rest are defined once, in the
 * file named above their declarations.
 *
 * The files:
 *   stk_stream.c        readiness, the handshake, the hooks the layers below call
 *   stk_stream_table.c  the connection table: create, destroy, statistics, fork
 *   stk_stream_tx.c     sending: messages, credit, staged (corked) bytes
 *   stk_stream_rx.c     receiving: delivery, the ring, recv, urgent data
 *   stk_stream_close.c  shutdown, close, the goodbye at exit
 *   stk_stream_sleep.c  doorbells, sleep announcements, the liveness check
 *   stk_stream_wait.c   blocking waits: spin, sleep, signals, SO_RCVTIMEO/SNDTIMEO
 *   stk_stream_mig.c    migration to the kernel connection */
#ifndef STK_STREAM_INT_H
#define STK_STREAM_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "stack/stk_fab.h"
#include "stack/stk_stream.h"
#include "stack/stk_stream_proto.h"
#include "stack/stk_wait.h"
#include "stack/stk_wake.h"
#include "stack/stk_watch.h"

#define SLEEP_MIN_NS 20000ull       /* no wait fd: back-off from 20 µs ... */
#define SLEEP_MAX_NS 1000000ull     /* ... to 1 ms */

static inline void stream_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* stk_stream_mig.c: the conn carries the app's bytes from now on (lock held). */
void stream_enter_fabric_locked(struct stk_conn *conn);

static inline void stream_sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* ---- stk_stream_table.c ---- */

/* Connections by slot. Readers (delivery) load without a lock; writers hold
 * conn_table_lock (stk_stream_table.c); a slot is reused only after
 * stk_fab_quiesce(). */
extern struct stk_conn *stream_conn_table[STK_CONN_MAX];
/* At close (no lock held): move the statistics into the process counters. */
void stream_fold_stats(struct stk_conn *conn);
/* Take conn out of the table without freeing it (its memory is kept). */
void stream_table_unlist(struct stk_conn *conn);

/* ---- stk_stream_mig.c ---- */

/* MIGRATE answers the delivery could not post (provider full): connections
 * with mig_reply set, and BELL messages owed (bell_owed == BELL_OWED_QUEUED);
 * retried after every progress while non-zero. */
extern int stream_replies_pending;
void stream_answer_pending(void);
/* A connection just left the table: wait out a scan that may hold it. */
void stream_answer_pending_barrier(void);
/* The fork's child: no scan runs, no answer is owed (the parent's). */
void stream_answers_atfork_child(void);
/* The peer's MIGRATE arrived, or will never come (lock held). */
void stream_set_mig_rx_locked(struct stk_conn *conn);
/* Both MIGRATEs passed (lock held): the ring moves to a leftover. */
void stream_migrated_locked(struct stk_conn *conn);
/* The peer's MIGRATE arrived (lock held, inside the delivery). */
void stream_peer_migrates_locked(struct stk_conn *conn);

enum { BELL_OWED_NONE, BELL_OWED, BELL_OWED_QUEUED }; /* stk_conn.bell_owed */

/* A message counting our doorbells left, or none ever will (lock held). */
static inline void stream_bell_owed_clear(struct stk_conn *conn)
{
	if (conn->bell_owed == BELL_OWED_QUEUED)
		__atomic_fetch_sub(&stream_replies_pending, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&conn->bell_owed, BELL_OWED_NONE, __ATOMIC_RELAXED);
}

static inline void stream_progress(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return; /* the fabric is not ours to drive any more (maybe the parent's) */
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (fab)
		stk_fab_progress(fab);
	if (__builtin_expect(__atomic_load_n(&stream_replies_pending, __ATOMIC_RELAXED) != 0, 0))
		stream_answer_pending();
}

/* A peer gone for good (reset, or closed completely) never answers our
 * MIGRATE, and nothing more comes on the fabric: its end settles the
 * migration at once, as when it was gone before ours left (send_migrate_locked).
 * The case: a fork meets a peer that closes at the same moment. */
static inline void stream_peer_gone_answers_locked(struct stk_conn *conn)
{
	if (conn->mig_tx && !conn->mig_rx &&
	    (conn->reset || (conn->peer_closed && conn->fin_rcvd))) {
		stream_set_mig_rx_locked(conn);
		stream_migrated_locked(conn);
	}
}

/* A state change is complete (lock held): epoll sets watching us and the
 * threads sleeping on the conn (stk_wake.h) hear of it. The generation was
 * bumped before the change (ET readers read events first). */
static inline void stream_changed(struct stk_conn *conn)
{
	stk_watch_notify(&conn->watch);
	for (struct stk_wake_node *n = conn->wakers; n; n = n->next)
		stk_wake_ring(n);
}

/* ---- stk_stream_rx.c ---- */

/* Stream offset of the next byte the app reads. */
static inline uint64_t stream_rx_pos(const struct stk_conn *conn)
{
	return conn->rx_total - conn->ring_count;
}

/* SO_OOBINLINE of the kernel socket. */
bool stream_oob_inline(const struct stk_conn *conn);
/* Reset conn for a protocol error (lock held); the bytes received stay readable. */
void stream_protocol_reset(struct stk_conn *conn, const char *why);

/* ---- stk_stream_sleep.c ---- */

/* Write one doorbell byte on the kernel connection (lock held). */
void stream_ring_locked(struct stk_conn *conn);
/* The peer's SLEEP (lock held, inside the delivery). */
void stream_peer_sleeps_locked(struct stk_conn *conn, uint32_t len);
/* A message that matters went out while our sleep was announced (lock held). */
void stream_announce_again_locked(struct stk_conn *conn);

/* ---- stk_stream_tx.c ---- */

/* Post one message as it is (lock held): stream_post_locked without the
 * staged bytes' check. */
int stream_post_raw_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
			   const void *payload, size_t plen, bool tracked);
/* The staged bytes leave as one DATA message (lock held). */
int stream_cork_flush_locked(struct stk_conn *conn);
/* Send a control message, waiting (bounded) for provider room. */
int stream_post_control(struct stk_conn *conn, uint16_t flags, bool tracked);

/* How many batches stream_catch_up takes at most: every receive buffer (and as many
 * send completions) several times over. */
#define CATCH_UP_BATCHES 16

/* After an app call that posted a message that matters (tx_wake_seq moved
 * from wake_seq; no lock held): take what has arrived for us, a SLEEP of the
 * peer among it, so that a peer asleep since before that post is rung now
 * (stream_peer_sleeps_locked) and not at our next call, which an app busy elsewhere
 * may not make for seconds (stk_stream.h, "Sleeping"). Every completion
 * pending is taken: the SLEEP may sit behind a window of unread data. Only
 * without a wait fd: there the peer sleeps on its own CQ's. */
static inline void stream_catch_up(struct stk_conn *conn, uint32_t wake_seq)
{
	if (__atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED) == wake_seq ||
	    __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return;
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (!fab || stk_fab_wait_fd(fab) >= 0)
		return;
	stk_fab_progress_all(fab, CATCH_UP_BATCHES);
	if (__builtin_expect(__atomic_load_n(&stream_replies_pending, __ATOMIC_RELAXED) != 0, 0))
		stream_answer_pending();
}

/* Post one message (lock held), after the staged bytes (stk_cork.h: they
 * were sent before it). payload may be NULL when plen is 0. With tracked, a
 * registered buffer is always used and counted in tx_outstanding so close can
 * wait for it to leave. Returns 0 or -EAGAIN/-errno. */
static inline int stream_post_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
				     const void *payload, size_t plen, bool tracked)
{
	if (__builtin_expect(conn->cork_len != 0, 0)) {
		int ret = stream_cork_flush_locked(conn);
		if (ret)
			return ret;
	}
	return stream_post_raw_locked(conn, flags, len_field, payload, plen, tracked);
}

/* Give consumed bytes back to the sender, batched (lock held). */
static inline void stream_grant_credit(struct stk_conn *conn, bool force)
{
	if (!conn->fab || conn->reset || conn->peer_closed || conn->credit_owed == 0 ||
	    conn->mig_tx || conn->mig_rx)
		return; /* nothing on the fabric after our MIGRATE; none needed after theirs */
	if (!force && conn->credit_owed < conn->ring_size / 4)
		return;
	uint64_t grant = conn->credit_owed;
	if (grant > UINT32_MAX)
		grant = UINT32_MAX;
	if (stream_post_locked(conn, STK_MSG_CREDIT, (uint32_t)grant, NULL, 0, false) == 0)
		conn->credit_owed -= grant;
	/* else: retried by the next recv, poll or wait */
}

/* ---- stk_stream_wait.c ---- */

/* The state of one blocking send or recv, set up at its first wait. Signals are
 * blocked from then on (as in stk_ready.h) and the thread's signalfd watches
 * those the caller's mask lets through, so a signal that arrives at any time is
 * seen, its handler's SA_RESTART known, and the handler run by unblocking it:
 * the call then behaves as the kernel's (signal(7), "Interruption of system
 * calls"): EINTR, or restart when every handler that ran has SA_RESTART and the
 * socket has no timeout. */
struct stream_block_wait {
	bool ready;               /* set up */
	uint64_t deadline;        /* SO_*TIMEO, absolute; STK_WAIT_NEVER: none */
	int sigfd;                /* -1: none (sleep with the caller's mask instead) */
	struct stk_wait_sigs sigs;
};

/* A blocking data call waits for events (0: ready, 1: a handler with
 * SA_RESTART ran, -EAGAIN: SO_RCVTIMEO / SO_SNDTIMEO expired, -EINTR). */
int stream_block_wait(struct stk_conn *conn, short events, int timeo_opt,
		      struct stream_block_wait *bw, bool (*until)(struct stk_conn *));

#endif
