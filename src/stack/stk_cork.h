/* stk_cork: small sends of a streaming sender coalesced into one fabric
 * message (autocork, as Linux TCP coalesces the segments of a sender whose
 * previous ones are still queued).
 *
 * Why: every fabric message costs both ends a provider operation (shm: the
 * receiver's region lock, taken by the sender's inject and the receiver's
 * progress alike); a sender of 64 B messages pays it per message and the
 * receiver consumes one posted buffer per message. Coalesced, one operation
 * carries up to STK_CORK_BYTES of small sends.
 *
 * When (stk_stream.c decides, the conn's lock held): a send of at most
 * STK_CORK_SMALL bytes, not urgent, that follows another such send on the same
 * connection by less than STK_CORK_BURST_NS with no receive on it in between
 * (a streaming sender; a request/response or ping-pong peer receives between
 * its sends and is never delayed), or one flagged MSG_MORE. The bytes are
 * staged in the connection (credit taken at once: send() returned them).
 *
 * Staged bytes leave, in order before any other message of the connection:
 *  - when the stage is full (the next small send starts a new one);
 *  - at any other message on the connection (credit, FIN, MIGRATE, ...) and
 *    at a receive on it;
 *  - before the process waits: poll/select/epoll, a blocking send or receive
 *    (stk_cork_before_wait, every connection of the process);
 *  - at close, exit, fork and exec (the MIGRATE, FIN or exit drain);
 *  - otherwise after at most STK_CORK_MAX_NS, by the flusher thread (an app
 *    that sends a burst and then computes, or sleeps in a call we do not
 *    see). The thread sleeps in the kernel (futex) while nothing is staged.
 *    While the app fills and sends its stages itself (a streaming sender on
 *    any connection: stages keep starting and the flusher finds none old), its ticks
 *    stretch to STK_CORK_STREAM_TICK_NS: a tick every 25 us woke it ~30,000
 *    times a second on the sender's CPU, each preempting the sender (a
 *    third of a 64 B sender's time). The last stage of a stream that then
 *    stops without any other socket call may wait that long; the next tick
 *    that has to send a stage itself goes back to STK_CORK_MAX_NS.
 *
 * Registry: a bitmap by connection slot of the connections with staged bytes
 * and their count; set and cleared under the conn's lock (atomics), read by
 * flushers under cork_lock, which stk_conn_destroy passes through after taking
 * the conn out of the table (so a flusher never sees a freed conn). */
#ifndef STK_CORK_H
#define STK_CORK_H

#include <stdbool.h>
#include <stdint.h>

#define STK_CORK_BYTES 4072          /* payload staged at most (+ 24 B header = shm's inject) */
#define STK_CORK_SMALL 1024          /* sends up to this size are coalesced */
#define STK_CORK_BURST_NS 5000ull    /* ... when they follow the previous one this closely */
#define STK_CORK_MAX_NS 50000ull     /* staged bytes leave after this at the latest */
#define STK_CORK_STREAM_TICK_NS 200000ull /* ... or this, after a stream (above) */

extern uint32_t stk_cork_count; /* connections with staged bytes (atomic) */

/* Sends the bytes staged on a slot's connection if they were staged before
 * older_than (0: whenever); returns whether it sent them. The stream layer
 * installs it (stk_stream.c, at load time) before the first mark. */
typedef bool stk_cork_flush_fn(uint32_t slot, uint64_t older_than);
void stk_cork_set_flush(stk_cork_flush_fn *fn);
/* The conn in slot got staged bytes / lost them (its lock held). */
void stk_cork_mark(uint32_t slot);
void stk_cork_unmark(uint32_t slot);

/* Send every staged byte of the process (or only those staged before
 * older_than, an absolute CLOCK_MONOTONIC time; 0: all). */
void stk_cork_flush(uint64_t older_than);

/* Before the process sleeps or polls: nothing of ours may wait meanwhile. */
static inline void stk_cork_before_wait(void)
{
	if (__builtin_expect(__atomic_load_n(&stk_cork_count, __ATOMIC_RELAXED) != 0, 0))
		stk_cork_flush(0);
}

/* The process ends (stk_conn_end_all): the flusher touches no connection or
 * provider from now on (their teardown at exit runs beside it); the caller
 * sends what is staged. */
void stk_cork_stop(void);

/* stk_conn_destroy: the conn is out of the table; wait out a flusher that may
 * hold it. */
void stk_cork_barrier(void);

/* fork: the child has no flusher thread and nothing staged (the parent's
 * connections migrated; their MIGRATE took the staged bytes first). */
void stk_cork_atfork_child(void);

#endif
