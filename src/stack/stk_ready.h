/* stk_ready: readiness over any mix of accelerated sockets and kernel fds — the
 * machinery shared by stk_poll (poll/ppoll/select/pselect) and stk_epoll.
 *
 * What is "accelerated" is decided by the preload, which installs the lookup
 * hook once at start-up (the stack never includes preload headers):
 *     stk_ready_lookup = <fd → struct stk_conn *, NULL for a kernel fd>;
 * The default returns NULL for every fd (unit tests, the stk_ API as a library).
 * The hook must be cheap, lock-free and safe from any thread; it is called once
 * per fd per call. A conn it returns must stay valid until the readiness call
 * that found it returns (the preload's rule for every wrapper: close() of an fd
 * another thread is still waiting on is the application's race, as with the
 * kernel, but must not free the conn under us — see stk_epoll_conn_closed()).
 *
 * The core touches a connection only through stk_ready_ops (so a test double can
 * stand in for stk_stream and stk_fab): its readiness (stk_poll_events), its
 * liveness channel (conn->fd + stk_conn_check_liveness), an edge generation, and
 * the fabric it uses (progress, wait fd, trywait). The defaults call the real
 * stack. The table is written once before use (or by a test between cases).
 *
 * Waiting, for every blocking call (poll family and epoll):
 *  1. check once; ready or timeout 0 → return (no signal-mask change, no sleep);
 *  2. spin up to stk_cfg.spin_us re-checking (accelerated readiness drives
 *     stk_fab_progress; kernel fds are polled with a zero timeout);
 *  3. sleep in the kernel (ppoll) on the kernel fds, the liveness channel of each
 *     accelerated socket (POLLIN|POLLRDHUP; activity → stk_conn_check_liveness)
 *     and the wait fd of each fabric in use after stk_fab_trywait() said yes.
 *     A fabric without a wait fd (shm has one: its bell) is covered by sleeping in slices of
 *     STK_READY_SLICE_MIN_NS doubling (the first slices after activity are
 *     50 µs, so a busy conversation stays fast) until STK_READY_ANNOUNCE_NS:
 *     then each socket announces the sleep to its peer, which rings a doorbell
 *     on the kernel connection (stk_stream.h, "Sleeping"), and the sleep has
 *     no slices: an idle waiter does not wake at all. Slices up to
 *     STK_READY_SLICE_MAX_NS remain while a socket cannot announce (still
 *     negotiating, provider full).
 * Signals: from step 2 on, every signal but the synchronous fault signals
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) is blocked in the calling
 * thread and the kernel sleeps run with the caller's mask (poll, epoll_wait) or with sigmask
 * (ppoll, pselect, epoll_pwait) atomically, so a signal that arrives at any time
 * during the call is delivered inside a kernel sleep and the call returns -EINTR,
 * exactly as the kernel's calls do (never restarted, whatever SA_RESTART says);
 * a signal the call's mask blocks stays pending until the call returns. The
 * caller's mask is restored before returning. Sets above 32 fds use a
 * thread-local scratch buffer: a signal handler that calls poll/select with more
 * than 32 fds while the same thread is inside one of them is not supported.
 * Timeouts are absolute (CLOCK_MONOTONIC) deadlines; every slice recomputes the
 * remaining time. */
/* Callers: stk_api_ready.c (stk.h's poll family) passes the preload's calls
 * here; it installs stk_ready_lookup and stk_ready_lookup_set from the preload's
 * fd table (stk_set_fd_table). When no fd of a set is accelerated, a call costs
 * one lookup per fd plus the real call. */
#ifndef STK_READY_H
#define STK_READY_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/select.h>
#include <sys/time.h>

struct stk_conn;
struct stk_fab;
struct stk_wake_node;

#define STK_READY_SLICE_MIN_NS 50000ull    /* 50 µs */
#define STK_READY_SLICE_MAX_NS 1000000ull  /* 1 ms */
#define STK_READY_FAB_MAX 8                /* distinct fabrics in one wait */

/* fd → accelerated connection or NULL (kernel fd). Installed by the preload. */
extern struct stk_conn *(*stk_ready_lookup)(int fd);

/* fd → the stk_epoll attached to the epoll fd fd (stk_epoll.h), or NULL.
 * Installed by the preload (NULL: none); called by the poll family for the
 * kernel fds of a set while epoll objects exist (stk_epoll_live). Same rules as
 * stk_ready_lookup. Such an fd is a kernel fd whose readiness the kernel
 * learns from the object's exposure eventfd: each evaluation refreshes it
 * (stk_epoll_refresh, which drives the object's fabrics). A sleep is cut into
 * slices of STK_READY_SLICE_MIN_NS doubling (nothing else drives those
 * fabrics while the caller sleeps; a delivery by another thread raises the
 * exposure and ends the sleep at once) until STK_READY_ANNOUNCE_NS: then the
 * objects announce the sleep (stk_epoll_prepare_sleep) and, when every one is
 * covered, the call sleeps on their sleep sets too, without slices (bounded
 * by stk_sleep_cap). At most STK_READY_SET_MAX such fds of one call are
 * refreshed; the others are seen as of their last refresh. */
struct stk_epoll;
extern struct stk_epoll *(*stk_ready_lookup_set)(int fd);
#define STK_READY_SET_MAX 8

struct stk_ready_ops {
	/* POLLIN/POLLOUT/POLLRDHUP/POLLHUP/POLLERR now (drives progress). */
	short (*events)(struct stk_conn *conn);
	/* The liveness channel fd (conn->fd), or -1 when it need not be watched any
	 * more (the peer closed or the connection was reset: nothing it could say
	 * would change the state, and an fd at EOF would wake every sleep). */
	int (*liveness_fd)(struct stk_conn *conn);
	/* The liveness channel is readable or hung up. */
	void (*liveness)(struct stk_conn *conn);
	/* A number that changes whenever something arrives for the connection
	 * (data, credit, FIN, reset): EPOLLET reports a new edge when it moved. */
	uint64_t (*generation)(struct stk_conn *conn);
	/* The fabric the connection uses, or NULL (not connected yet). */
	struct stk_fab *(*fab)(struct stk_conn *conn);
	int (*progress)(struct stk_fab *fab);
	int (*wait_fd)(struct stk_fab *fab);       /* -1: none (sleep in slices) */
	bool (*trywait)(struct stk_fab *fab);      /* true: safe to sleep on wait_fd */
	/* Returns once no thread is inside a delivery that began before the call. */
	void (*quiesce)(struct stk_fab *fab);
	/* The connection's watcher list: its owner calls stk_watch_notify(watch)
	 * after every change that can raise a readiness bit. */
	struct stk_watch *(*watch)(struct stk_conn *conn);
	/* Optional (NULL: events): events without driving progress, for a caller
	 * that has just progressed every fabric involved (an epoll scan). */
	short (*events_now)(struct stk_conn *conn);
	/* Optional (NULL: never): the connection may send (credit) but the provider
	 * has no room; room comes back without any message for this connection, so
	 * an epoll item waiting for EPOLLOUT stays on the ready list meanwhile. */
	bool (*tx_blocked)(struct stk_conn *conn);
	/* enum stk_phase of the connection (stk_stream.h); NULL: always FABRIC. */
	int (*phase)(struct stk_conn *conn);
	/* Optional (NULL: never covered): before a sleep on a fabric without a
	 * wait fd, stk_conn_sleep_announce (doorbells, stk_stream.h). */
	int (*announce)(struct stk_conn *conn, bool send);
	/* Optional: stk_conn_sleepers_add (poll's sleeps on the conn). */
	void (*sleepers)(struct stk_conn *conn, int n);
	/* Optional (NULL: sleeps stay bounded by STK_SLEEP_CAP_NS alone):
	 * stk_conn_wake_link, a sleeping thread's wake-up (stk_wake.h). */
	void (*wake_link)(struct stk_conn *conn, struct stk_wake_node *node, bool on);
};

extern struct stk_ready_ops stk_ready_ops;

/* A datagram socket (stk_udp.h) stands where a connection does: a pointer
 * to its object with bit 1 set (objects are aligned; bit 0 is stk_epoll's
 * tag of an inner set in its sleep set), and so does its fabric. The defaults below hand such a pointer to stk_ready_dgram_ops,
 * which the socket layer installs before the first such socket exists; its
 * optional slots may be NULL as above. */
#define STK_READY_DGRAM_TAG ((uintptr_t)2)
static inline bool stk_ready_is_dgram(const void *p)
{
	return ((uintptr_t)p & STK_READY_DGRAM_TAG) != 0;
}
extern const struct stk_ready_ops *stk_ready_dgram_ops;

/* The connection's phase through the ops (0 = STK_PHASE_FABRIC without the op). */
static inline int stk_ready_phase(struct stk_conn *conn)
{
	return stk_ready_ops.phase ? stk_ready_ops.phase(conn) : 0;
}
/* The defaults (real stack), e.g. to restore after a test. */
extern const struct stk_ready_ops stk_ready_ops_default;

/* ---- the poll family (called by the preload's wrappers) ----
 *
 * stk_poll: ppoll(2) semantics over fds (any mix; fd < 0 ignored), timeout NULL =
 * forever, sigmask NULL = keep the caller's. Returns the number of entries with
 * revents, 0 on timeout, or -errno (-EINTR, -EINVAL for a bad timeout or nfds
 * above 2^20, -ENOMEM). revents of kernel fds are the kernel's (POLLNVAL for bad
 * fds included); those of accelerated sockets are stk_poll_events' mapped as the
 * kernel does for TCP. poll(fds, n, ms) is stk_poll with a timeout of ms (NULL
 * when ms < 0) and no mask. When no fd of the set is accelerated this is one
 * lookup per fd plus the real ppoll: nothing else.
 *
 * stk_select / stk_pselect: select(2) / pselect(2) semantics through the same
 * core (nfds capped at FD_SETSIZE). -EBADF when a set holds a bad fd, -EINVAL for
 * nfds < 0 or a bad timeout. stk_select writes the time not slept back into
 * timeout (as Linux does, also on -EINTR); stk_pselect never modifies it. The
 * sets are rewritten only on success. */
int stk_poll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *sigmask);
int stk_select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *timeout);
int stk_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		const struct timespec *timeout, const sigset_t *sigmask);

/* ---- helpers shared by stk_poll.c and stk_epoll.c (internal to the stack) ---- */

/* The fabrics of a wait: collected from the accelerated sockets, deduplicated. */
struct stk_ready_fabs {
	struct stk_fab *fab[STK_READY_FAB_MAX];
	unsigned n;
	uint64_t slice_ns;   /* current back-off slice when one has no wait fd */
};
void stk_ready_fabs_add(struct stk_ready_fabs *f, struct stk_conn *conn);
/* Before sleeping: for each fabric, trywait. Writes the wait fds (POLLIN) to out
 * (room for STK_READY_FAB_MAX) and returns how many, or -EAGAIN when a fabric has
 * completions pending (progress and re-check instead of sleeping). *slice_ns is
 * set to the bounded slice to sleep when some fabric has no wait fd, else 0.
 * Lost wake-ups: a completion that another thread read before our trywait is
 * not signalled on the wait fd, so after a successful trywait this waits for
 * deliveries in progress (quiesce) and the caller must check readiness once
 * more before sleeping when the result is > 0. */
int stk_ready_fabs_prepare(struct stk_ready_fabs *f, struct pollfd *out, uint64_t *slice_ns);
/* Doorbells instead of slices (stk_stream.h, "Sleeping"): when prepare asked
 * for slices, each accelerated socket of the wait is offered to
 * stk_ready_bells_add (send: announce the sleep, done once the slice reached
 * STK_READY_ANNOUNCE_NS: never on a busy path), then stk_ready_bells_result
 * says STK_READY_BELLS_RECHECK (a SLEEP went out: evaluate once more before
 * sleeping), STK_READY_BELLS_SLEEP (every socket rings its kernel connection:
 * sleep without slices) or STK_READY_BELLS_SLICES. */
#define STK_READY_ANNOUNCE_NS 200000ull
struct stk_ready_bells {
	bool send, uncovered, sent;
};
void stk_ready_bells_add(struct stk_ready_bells *b, struct stk_conn *conn);
enum { STK_READY_BELLS_SLICES, STK_READY_BELLS_SLEEP, STK_READY_BELLS_RECHECK };
int stk_ready_bells_result(const struct stk_ready_bells *b);
/* After a sleep that saw nothing: grow the back-off. After activity: reset it. */
void stk_ready_fabs_backoff(struct stk_ready_fabs *f, bool activity);

/* poll(2) revents of an accelerated socket for the requested events: the
 * readable/writable normal-data bits the kernel adds for TCP (POLLRDNORM,
 * POLLWRNORM), filtered to events | POLLERR | POLLHUP. */
short stk_ready_revents(short stk_events, short requested);

#endif
