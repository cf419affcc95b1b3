#include "config.h"
#include "stack/stk_ready.h"
#include "stack/stk_config.h"
#include "stack/stk_fab.h"
#include "stack/stk_lazy.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct stk_conn *lookup_none(int fd)
{
	(void)fd;
	return NULL;
}

struct stk_conn *(*stk_ready_lookup)(int fd) = lookup_none;
struct stk_epoll *(*stk_ready_lookup_set)(int fd);

/* ---- the real stack behind the ops table ---- */

static int conn_liveness_fd(struct stk_conn *conn)
{
	/* Unlocked reads: a stale answer costs one extra wake-up at most to a
	 * sleep (poll); a set registers the fd only while it cannot be closed
	 * (stk_epoll_conn_changed). After the peer's MIGRATE the kernel
	 * connection carries the data: watch it. */
	int fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&conn->mig_rx, __ATOMIC_RELAXED))
		return fd;
	if (__atomic_load_n(&conn->reset, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&conn->peer_closed, __ATOMIC_RELAXED))
		return -1;
	return fd;
}

static struct stk_fab *conn_fab(struct stk_conn *conn)
{
	return __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
}

/* As readiness sees it: a conn migrated to its kernel socket with no leftover
 * bytes (stk_migrate.h) is on the kernel as much as one that settled there. */
static int conn_phase(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->kernel_only, __ATOMIC_RELAXED))
		return STK_PHASE_KERNEL;
	return __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
}

/* ---- datagram sockets: the same slots, through stk_ready_dgram_ops ---- */

const struct stk_ready_ops *stk_ready_dgram_ops;

#define DGRAM(p) __builtin_expect(stk_ready_is_dgram(p), 0)

static short any_events(struct stk_conn *conn)
{
	return DGRAM(conn) ? stk_ready_dgram_ops->events(conn) : stk_poll_events(conn);
}

static int any_liveness_fd(struct stk_conn *conn)
{
	return DGRAM(conn) ? stk_ready_dgram_ops->liveness_fd(conn) : conn_liveness_fd(conn);
}

static void any_liveness(struct stk_conn *conn)
{
	if (DGRAM(conn))
		stk_ready_dgram_ops->liveness(conn);
	else
		stk_conn_check_liveness(conn);
}

static uint64_t any_generation(struct stk_conn *conn)
{
	return DGRAM(conn) ? stk_ready_dgram_ops->generation(conn) : stk_conn_generation(conn);
}

static struct stk_fab *any_fab(struct stk_conn *conn)
{
	return DGRAM(conn) ? stk_ready_dgram_ops->fab(conn) : conn_fab(conn);
}

static int any_progress(struct stk_fab *fab)
{
	return DGRAM(fab) ? stk_ready_dgram_ops->progress(fab) : stk_fab_progress(fab);
}

static int any_wait_fd(struct stk_fab *fab)
{
	return DGRAM(fab) ? stk_ready_dgram_ops->wait_fd(fab) : stk_fab_wait_fd(fab);
}

static bool any_trywait(struct stk_fab *fab)
{
	return DGRAM(fab) ? stk_ready_dgram_ops->trywait(fab) : stk_fab_trywait(fab);
}

static void any_quiesce(struct stk_fab *fab)
{
	if (DGRAM(fab))
		stk_ready_dgram_ops->quiesce(fab);
	else
		stk_fab_quiesce(fab);
}

static struct stk_watch *any_watch(struct stk_conn *conn)
{
	return DGRAM(conn) ? stk_ready_dgram_ops->watch(conn) : stk_conn_watch(conn);
}

static short any_events_now(struct stk_conn *conn)
{
	if (!DGRAM(conn))
		return stk_conn_events(conn);
	return stk_ready_dgram_ops->events_now ? stk_ready_dgram_ops->events_now(conn)
					       : stk_ready_dgram_ops->events(conn);
}

static bool any_tx_blocked(struct stk_conn *conn)
{
	if (!DGRAM(conn))
		return stk_conn_tx_blocked(conn);
	return stk_ready_dgram_ops->tx_blocked && stk_ready_dgram_ops->tx_blocked(conn);
}

static int any_phase(struct stk_conn *conn)
{
	if (!DGRAM(conn))
		return conn_phase(conn);
	return stk_ready_dgram_ops->phase ? stk_ready_dgram_ops->phase(conn) : STK_PHASE_FABRIC;
}

static int any_announce(struct stk_conn *conn, bool send)
{
	if (!DGRAM(conn))
		return stk_conn_sleep_announce(conn, send);
	return stk_ready_dgram_ops->announce ? stk_ready_dgram_ops->announce(conn, send)
					     : STK_SLEEP_NO;
}

static void any_sleepers(struct stk_conn *conn, int n)
{
	if (!DGRAM(conn))
		stk_conn_sleepers_add(conn, n);
	else if (stk_ready_dgram_ops->sleepers)
		stk_ready_dgram_ops->sleepers(conn, n);
}

static void any_wake_link(struct stk_conn *conn, struct stk_wake_node *node, bool on)
{
	if (!DGRAM(conn))
		stk_conn_wake_link(conn, node, on);
	else if (stk_ready_dgram_ops->wake_link)
		stk_ready_dgram_ops->wake_link(conn, node, on);
}

/* The real stack; tests swap stk_ready_ops for a double and restore it from
 * stk_ready_ops_default. */
#define READY_OPS_REAL { \
	.events = any_events, \
	.liveness_fd = any_liveness_fd, \
	.liveness = any_liveness, \
	.generation = any_generation, \
	.fab = any_fab, \
	.progress = any_progress, \
	.wait_fd = any_wait_fd, \
	.trywait = any_trywait, \
	.quiesce = any_quiesce, \
	.watch = any_watch, \
	.events_now = any_events_now, \
	.tx_blocked = any_tx_blocked, \
	.phase = any_phase, \
	.announce = any_announce, \
	.sleepers = any_sleepers, \
	.wake_link = any_wake_link, \
}

const struct stk_ready_ops stk_ready_ops_default = READY_OPS_REAL;
struct stk_ready_ops stk_ready_ops = READY_OPS_REAL;

/* ---- fabrics ---- */

void stk_ready_fabs_add(struct stk_ready_fabs *f, struct stk_conn *conn)
{
	struct stk_fab *fab = stk_ready_ops.fab(conn);
	if (!fab)
		return;
	for (unsigned i = 0; i < f->n; i++)
		if (f->fab[i] == fab)
			return;
	if (f->n < STK_READY_FAB_MAX)
		f->fab[f->n++] = fab;
}

int stk_ready_fabs_prepare(struct stk_ready_fabs *f, struct pollfd *out, uint64_t *slice_ns)
{
	int n = 0;
	*slice_ns = 0;
	for (unsigned i = 0; i < f->n; i++) {
		int wfd = stk_ready_ops.wait_fd(f->fab[i]);
		if (wfd < 0) {
			if (!f->slice_ns)
				f->slice_ns = STK_READY_SLICE_MIN_NS;
			*slice_ns = f->slice_ns;
			continue;
		}
		if (!stk_ready_ops.trywait(f->fab[i]))
			return -EAGAIN;
		stk_ready_ops.quiesce(f->fab[i]);
		out[n].fd = wfd;
		out[n].events = POLLIN;
		out[n].revents = 0;
		n++;
	}
	return n;
}

void stk_ready_bells_add(struct stk_ready_bells *b, struct stk_conn *conn)
{
	if (b->uncovered && !b->send)
		return; /* the answer is known: slices */
	int r = stk_ready_ops.announce ? stk_ready_ops.announce(conn, b->send) : STK_SLEEP_NO;
	if (r == STK_SLEEP_NO)
		b->uncovered = true;
	else if (r == STK_SLEEP_SENT)
		b->sent = true;
}

int stk_ready_bells_result(const struct stk_ready_bells *b)
{
	if (b->sent)
		return STK_READY_BELLS_RECHECK;
	return b->uncovered ? STK_READY_BELLS_SLICES : STK_READY_BELLS_SLEEP;
}

void stk_ready_fabs_backoff(struct stk_ready_fabs *f, bool activity)
{
	if (activity || !f->slice_ns)
		f->slice_ns = STK_READY_SLICE_MIN_NS;
	else if (f->slice_ns < STK_READY_SLICE_MAX_NS)
		f->slice_ns = f->slice_ns * 2 > STK_READY_SLICE_MAX_NS ? STK_READY_SLICE_MAX_NS
								   : f->slice_ns * 2;
}

short stk_ready_revents(short stk_events, short requested)
{
	short ev = stk_events;
	if (ev & POLLIN)
		ev |= POLLRDNORM;
	if (ev & POLLOUT)
		ev |= POLLWRNORM;
	return (short)(ev & (requested | POLLERR | POLLHUP));
}
