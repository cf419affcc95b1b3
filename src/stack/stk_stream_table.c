/* The connection table: creation and destruction of connections, their
 * statistics, and the table around fork. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_cork.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

/* Taken by writers of stream_conn_table (readers load a slot without it), by
 * statistics snapshots (live_stats) and folds (stream_fold_stats), by fork
 * preparation and stk_migrate_all. Lock order: conn_table_lock, then a
 * conn->lock (docs/threads.md). */
static pthread_mutex_t conn_table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t table_hint; /* protected by conn_table_lock */
struct stk_conn *stream_conn_table[STK_CONN_MAX];

static void live_stats(uint64_t out[STK_C_COUNT]);

static void register_exit_drain(void)
{
	atexit(stk_conn_end_all);
	stk_counters_set_live(live_stats);
}

/* ---- table ---- */

int stk_conn_create(int fd, size_t window, struct stk_conn **out)
{
	if (window < 4096)
		window = 4096;
	struct stk_conn *conn = calloc(1, sizeof(*conn));
	if (!conn)
		return -ENOMEM;
	conn->ring = malloc(window);
	if (!conn->ring) {
		free(conn);
		return -ENOMEM;
	}
	conn->ring_size = window;
	conn->fd = fd;
	conn->left_fd = -1;
	pthread_mutex_init(&conn->lock, NULL);
	/* Ids are random so that a stale message (old slot owner) is never taken for
	 * a new connection's, and unguessable: the id is what proves that a fabric
	 * message comes from the peer of this kernel connection (stk_peer.h), so
	 * it comes from getrandom alone (no guessable fallback: without it the
	 * connection stays on the kernel); 0 is reserved for "none". */
	int rnd = 0;
	do {
		ssize_t got = getrandom(&conn->local_id, sizeof(conn->local_id), 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got != (ssize_t)sizeof(conn->local_id)) {
			rnd = got < 0 ? -errno : -EIO;
			break;
		}
	} while (conn->local_id == 0);
	if (rnd) {
		pthread_mutex_destroy(&conn->lock);
		free(conn->ring);
		free(conn);
		return rnd;
	}

	static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
	pthread_once(&exit_once, register_exit_drain);
	pthread_mutex_lock(&conn_table_lock);
	for (uint32_t i = 0; i < STK_CONN_MAX; i++) {
		uint32_t slot = (table_hint + i) % STK_CONN_MAX;
		if (!stream_conn_table[slot]) {
			conn->slot = slot;
			table_hint = slot + 1;
			__atomic_store_n(&stream_conn_table[slot], conn, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&conn_table_lock);
			*out = conn;
			return 0;
		}
	}
	pthread_mutex_unlock(&conn_table_lock);
	free(conn->ring);
	free(conn);
	STK_WARN("connection table full (%u connections)", STK_CONN_MAX);
	return -EMFILE;
}

int stk_conn_create_migrated(int fd, struct stk_leftover *left, int left_fd,
			     struct stk_conn **out)
{
	int ret = stk_conn_create(fd, 0, out);
	if (ret)
		return ret;
	struct stk_conn *conn = *out;
	conn->mig_tx = conn->mig_rx = true;
	conn->left = left;
	conn->left_fd = left_fd;
	__atomic_store_n(&conn->migrated, true, __ATOMIC_RELEASE);
	if (!left)
		__atomic_store_n(&conn->kernel_only, true, __ATOMIC_RELEASE);
	return 0;
}

void stk_conn_connect(struct stk_conn *conn, struct stk_fab *fab, fi_addr_t peer_addr,
		      uint32_t peer_slot, uint64_t peer_id, uint64_t peer_credits)
{
	pthread_mutex_lock(&conn->lock);
	conn->peer_addr = peer_addr;
	conn->peer_slot = peer_slot;
	conn->peer_id = peer_id;
	conn->tx_credits = peer_credits;
	__atomic_store_n(&conn->fab, fab, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&conn->lock);
}

/* Adds conn's statistics to out (the process counters, or a snapshot). */
static void add_stats(const struct stk_conn *conn, uint64_t out[STK_C_COUNT])
{
	const struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	const char *name = fab ? stk_fab_name(fab) : "";
	uint64_t tx = __atomic_load_n(&conn->bytes_tx, __ATOMIC_RELAXED);
	uint64_t rx = __atomic_load_n(&conn->bytes_rx, __ATOMIC_RELAXED);
	struct stk_prov_counters c;
	if (stk_counters_of_prov(name, &c)) {
		out[c.tx] += tx;
		out[c.rx] += rx;
	}
	out[STK_C_MSGS_TX] += __atomic_load_n(&conn->msgs_tx, __ATOMIC_RELAXED);
	out[STK_C_MSGS_RX] += __atomic_load_n(&conn->msgs_rx, __ATOMIC_RELAXED);
}

/* Connections still in the table have not folded their statistics yet. */
static void live_stats(uint64_t out[STK_C_COUNT])
{
	pthread_mutex_lock(&conn_table_lock);
	for (uint32_t i = 0; i < STK_CONN_MAX; i++) {
		struct stk_conn *conn = __atomic_load_n(&stream_conn_table[i], __ATOMIC_ACQUIRE);
		if (conn)
			add_stats(conn, out);
	}
	pthread_mutex_unlock(&conn_table_lock);
}

/* At close: move the statistics into the process counters under
 * conn_table_lock, so that a snapshot counts them live or folded, never twice
 * (live_stats takes no conn lock). conn->lock is taken inside the table's, in
 * the order fork preparation takes them. */
void stream_fold_stats(struct stk_conn *conn)
{
	uint64_t add[STK_C_COUNT] = { 0 };
	pthread_mutex_lock(&conn_table_lock);
	pthread_mutex_lock(&conn->lock);
	add_stats(conn, add);
	for (int i = 0; i < STK_C_COUNT; i++)
		if (add[i])
			stk_count_add((enum stk_counter)i, add[i]);
	conn->bytes_tx = conn->bytes_rx = conn->msgs_tx = conn->msgs_rx = 0;
	pthread_mutex_unlock(&conn->lock);
	pthread_mutex_unlock(&conn_table_lock);
}

static void free_conn(struct stk_conn *conn)
{
	stk_stat_conn_close(conn);
	stk_leftover_free(conn->left);
	if (conn->left_fd >= 0)
		stk_sys.close(conn->left_fd);
	pthread_mutex_destroy(&conn->lock);
	free(conn->cork);
	free(conn->ring);
	free(conn);
}

static void quiesce_one(struct stk_fab *fab, void *arg)
{
	(void)arg;
	stk_fab_quiesce(fab);
}

void stk_conn_destroy(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn_table_lock);
	/* sequentially consistent: stream_answer_pending's scan (stk_stream_mig.c) */
	__atomic_store_n(&stream_conn_table[conn->slot], NULL, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&conn_table_lock);
	/* A delivery may have loaded the pointer just before: wait it out on every
	 * endpoint (the connection may not have chosen one yet). */
	if (conn->fab) {
		stk_fab_quiesce(conn->fab);
		stk_fab_av_release(conn->fab, conn->peer_addr); /* taken for stk_conn_connect */
	} else {
		stk_fab_foreach_open(quiesce_one, NULL);
	}
	stk_cork_barrier(); /* a flusher may hold it */
	stream_answer_pending_barrier();
	if (conn->cork_len)
		stk_cork_unmark(conn->slot); /* unsent: the conn was reset */
	free_conn(conn);
}

void stream_table_unlist(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn_table_lock);
	__atomic_store_n(&stream_conn_table[conn->slot], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&conn_table_lock);
}

/* ---- table access and fork ---- */

void stk_conn_table_hold(void)
{
	pthread_mutex_lock(&conn_table_lock);
}

void stk_conn_table_release(void)
{
	pthread_mutex_unlock(&conn_table_lock);
}

struct stk_conn *stk_conn_at(uint32_t slot)
{
	return slot < STK_CONN_MAX ? __atomic_load_n(&stream_conn_table[slot], __ATOMIC_ACQUIRE)
				   : NULL;
}

void stk_conn_atfork_prepare(void)
{
	pthread_mutex_lock(&conn_table_lock);
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++)
		if (stream_conn_table[slot])
			pthread_mutex_lock(&stream_conn_table[slot]->lock);
}

void stk_conn_atfork_parent(void)
{
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++)
		if (stream_conn_table[slot])
			pthread_mutex_unlock(&stream_conn_table[slot]->lock);
	pthread_mutex_unlock(&conn_table_lock);
}

void stk_conn_atfork_child(void)
{
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = stream_conn_table[slot];
		if (!conn)
			continue;
		pthread_mutex_init(&conn->lock, NULL);
		if (!conn->migrated && conn->fab) {
			/* Created while the parent prepared the fork (another thread):
			 * the parent keeps it on the fabric; the child cannot. */
			stk_count(STK_C_MIGRATE_UNPREPARED);
			STK_WARN("fd %d: connection inherited without migration (created "
				 "during fork): the child uses its kernel socket; bytes in "
				 "flight on the fabric go to the parent", conn->fd);
			conn->mig_tx = conn->mig_rx = true;
			stream_migrated_locked(conn);
		}
		/* The parent's endpoint, buffers and statistics are not the child's. */
		conn->fab = NULL;
		conn->mig_reply = false;
		conn->bell_owed = BELL_OWED_NONE;
		conn->peer_sleeping = false;
		conn->tx_outstanding = 0;
		conn->cork_len = 0; /* the parent's to send */
		conn->bytes_tx = conn->bytes_rx = conn->msgs_tx = conn->msgs_rx = 0;
	}
	stk_cork_atfork_child();
	stream_answers_atfork_child();
	pthread_mutex_init(&conn_table_lock, NULL);
}
