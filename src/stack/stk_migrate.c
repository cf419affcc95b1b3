/* Migration of accelerated connections to their kernel socket. Contracts in
 * stk_migrate.h; the per-connection protocol steps live in stk_stream.c (they
 * need its lock and wire), the process-wide orchestration and the kernel-side
 * data calls here. */
#include "config.h"
#include "stack/stk_migrate.h"
#include "stack/stk_counters.h"
#include "stack/stk_epoll.h"
#include "stack/stk_fab.h"
#include "stack/stk_lazy.h"
#include "stack/stk_log.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_wake.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

/* ---- orchestration ---- */

#define WAIT_PAUSE_MIN_NS 20000ull     /* between looks at the peers' answers ... */
#define WAIT_PAUSE_MAX_NS 1000000ull   /* ... backing off to this */
#define WAIT_NOTE_NS 1000000000ull     /* a wait this long is logged (once per call) */

/* One look at a connection that waits: its MIGRATE posted (retried while the
 * provider is full), the peer's answer taken, or its death seen (the kernel
 * connection ended: the liveness check resets it, after the grace a closing
 * peer's FIN needs). Returns 1 (migrated), -1 (migrated: the peer died) or 0. */
static int migrate_step(struct stk_conn *conn)
{
	stk_conn_progress(conn);
	int r = stk_conn_migrate_begin(conn) ? stk_conn_migrate_finish(conn) : 0;
	if (r == 0)
		stk_conn_check_liveness(conn); /* doorbells taken, or the peer is gone */
	return r;
}

unsigned stk_migrate_conns(struct stk_conn **conns, size_t n, enum stk_migrate_reason why)
{
	size_t waiting = 0;
	for (size_t i = 0; i < n; i++) {
		if (!conns[i])
			continue;
		if (__atomic_load_n(&conns[i]->migrated, __ATOMIC_ACQUIRE)) {
			conns[i] = NULL; /* done before (by the peer, or an earlier call) */
			continue;
		}
		stk_conn_migrate_begin(conns[i]);
		waiting++;
	}
	/* No deadline: a live peer always answers (its negotiation thread does
	 * when its app makes no call), and until it has, bytes it sends come on
	 * the fabric to this process: giving up would lose them. */
	uint64_t start = stk_now_ns(), pause = WAIT_PAUSE_MIN_NS;
	bool noted = false;
	unsigned gone = 0;
	while (waiting) {
		for (size_t i = 0; i < n; i++) {
			if (!conns[i])
				continue;
			int r = migrate_step(conns[i]);
			if (r == 0)
				continue;
			if (r < 0) {
				gone++;
				stk_count(STK_C_MIGRATE_PEER_GONE);
				STK_WARN("fd %d: the peer died before it answered the migration: "
					 "the bytes received before stay readable, then the kernel "
					 "socket tells the end", conns[i]->fd);
			}
			stk_migrate_note(conns[i], why);
			conns[i] = NULL;
			waiting--;
		}
		if (!waiting)
			break;
		if (!noted && stk_now_ns() - start > WAIT_NOTE_NS) {
			noted = true;
			STK_INFO("migration: %zu peer(s) have not answered after %llu ms; waiting "
				 "(their processes are alive)", waiting,
				 (unsigned long long)(WAIT_NOTE_NS / 1000000ull));
		}
		struct timespec ts = { 0, (long)pause };
		nanosleep(&ts, NULL);
		if (pause < WAIT_PAUSE_MAX_NS)
			pause *= 2;
	}
	return gone;
}

unsigned stk_migrate_all(enum stk_migrate_reason why)
{
	/* The table is held so that no connection is freed under us (a close in
	 * another thread waits for the end of the migration: the peers' answers,
	 * which their negotiation threads give within milliseconds). */
	stk_conn_table_hold();
	size_t cap = 64, n = 0;
	struct stk_conn **conns = malloc(cap * sizeof(*conns));
	for (uint32_t slot = 0; conns && slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = stk_conn_at(slot);
		if (!conn || !__atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
			continue;
		/* still negotiating (stk_lazy.h): nothing went over the fabric; a
		 * forked child refuses the negotiation it inherits */
		if (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC)
			continue;
		if (n == cap) {
			struct stk_conn **more = realloc(conns, 2 * cap * sizeof(*conns));
			if (!more)
				break;
			conns = more;
			cap *= 2;
		}
		conns[n++] = conn;
	}
	unsigned gone = 0;
	if (conns) {
		gone = stk_migrate_conns(conns, n, why);
		free(conns);
	} else {
		STK_WARN("migration: out of memory: connections inherited by the child are "
			 "abandoned");
	}
	stk_conn_table_release();
	return gone;
}

void stk_migrate_atfork_prepare(void)
{
	stk_lazy_atfork_prepare();
	stk_epoll_atfork_prepare();
	stk_conn_atfork_prepare();
	stk_fab_atfork_prepare();
	stk_log_atfork_prepare();
}

void stk_migrate_atfork_parent(void)
{
	stk_log_atfork_parent();
	stk_fab_atfork_parent();
	stk_conn_atfork_parent();
	stk_epoll_atfork_parent();
	stk_lazy_atfork_parent();
}

void stk_migrate_atfork_child(void)
{
	stk_log_atfork_child();
	stk_fab_atfork_child();
	stk_conn_atfork_child();
	stk_epoll_atfork_child();
	stk_lazy_atfork_child();
	stk_wake_atfork_child();
}
