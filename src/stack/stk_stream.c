#include "config.h"
#include "stack/stk_stream.h"
#include "stack/stk_config.h"
#include "stack/stk_cork.h"
#include "stack/stk_counters.h"
#include "stack/stk_fab.h"
#include "stack/stk_log.h"
#include "stack/stk_stream_proto.h"
#include "stack/stk_sys.h"
#include "stack/stk_wake.h"
#include "stack/stk_time.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <time.h>

#define CLOSE_DRAIN_NS 1000000000ull /* room for a control message: at most this */
#define LINGER_DEFAULT_NS 10000000000ull /* sends in flight at close: 10 s at most */
#define PEER_GONE_GRACE_NS 200000000ull  /* ... 0.2 s once the peer hung up */
#define HUP_GRACE_NS 500000000ull   /* kernel EOF before FIN: wait this for the FIN (a
				     * loaded machine may not run the progress that takes
				     * it for tens of ms; a dead peer is still seen < 1 s) */
#define SLEEP_MIN_NS 20000ull       /* no wait fd: back-off from 20 µs ... */
#define SLEEP_MAX_NS 1000000ull     /* ... to 1 ms */
#define STARVE_RETRY_NS 50000ull    /* provider had no room: say POLLOUT again after this */
#define MIGRATE_GRACE_NS 1000000000ull /* kernel bytes before the peer's MIGRATE */
#define BELL_SKIP_NS 100000000ull   /* counted doorbells still in flight at a MIGRATE */
#define QUICK_SPIN_NS 20000ull      /* a blocking call spins this before setting up its wait */
#define ANNOUNCE_NS 200000ull       /* idle this long (sleep back-off): announce the sleep */

/* Connections by slot. Readers (delivery) load without a lock; writers hold
 * table_lock; a slot is reused only after stk_fab_quiesce(). */
static struct stk_conn *conn_table[STK_CONN_MAX];

static void live_stats(uint64_t out[STK_C_COUNT]);

static void register_exit_drain(void)
{
	atexit(stk_conn_end_all);
	stk_counters_set_live(live_stats);
}
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t table_hint; /* protected by table_lock */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* MIGRATE answers the delivery could not post (provider full): connections
 * with mig_reply set, and BELL messages owed (bell_owed == BELL_OWED_QUEUED);
 * retried after every progress while non-zero. */
static int replies_pending;
static void answer_pending(void);
static void answer_pending_barrier(void);

enum { BELL_OWED_NONE, BELL_OWED, BELL_OWED_QUEUED }; /* stk_conn.bell_owed */

/* A message counting our doorbells left, or none ever will (lock held). */
static void bell_owed_clear(struct stk_conn *conn)
{
	if (conn->bell_owed == BELL_OWED_QUEUED)
		__atomic_fetch_sub(&replies_pending, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&conn->bell_owed, BELL_OWED_NONE, __ATOMIC_RELAXED);
}

static void progress(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return; /* the fabric is not ours to drive any more (maybe the parent's) */
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (fab)
		stk_fab_progress(fab);
	if (__builtin_expect(__atomic_load_n(&replies_pending, __ATOMIC_RELAXED) != 0, 0))
		answer_pending();
}

void stk_conn_progress(struct stk_conn *conn)
{
	progress(conn);
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
	pthread_mutex_lock(&table_lock);
	for (uint32_t i = 0; i < STK_CONN_MAX; i++) {
		uint32_t slot = (table_hint + i) % STK_CONN_MAX;
		if (!conn_table[slot]) {
			conn->slot = slot;
			table_hint = slot + 1;
			__atomic_store_n(&conn_table[slot], conn, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&table_lock);
			*out = conn;
			return 0;
		}
	}
	pthread_mutex_unlock(&table_lock);
	free(conn->ring);
	free(conn);
	FSK_WARN("connection table full (%u connections)", STK_CONN_MAX);
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
	pthread_mutex_lock(&table_lock);
	for (uint32_t i = 0; i < STK_CONN_MAX; i++) {
		struct stk_conn *conn = __atomic_load_n(&conn_table[i], __ATOMIC_ACQUIRE);
		if (conn)
			add_stats(conn, out);
	}
	pthread_mutex_unlock(&table_lock);
}

/* At close (conn->lock held): move the statistics into the process counters
 * under table_lock, so that a snapshot counts them live or folded, never twice
 * (lock order: conn->lock, then table_lock; live_stats takes no conn lock). */
static void fold_stats(struct stk_conn *conn)
{
	uint64_t add[STK_C_COUNT] = { 0 };
	pthread_mutex_lock(&table_lock);
	add_stats(conn, add);
	for (int i = 0; i < STK_C_COUNT; i++)
		if (add[i])
			stk_count_add((enum stk_counter)i, add[i]);
	conn->bytes_tx = conn->bytes_rx = conn->msgs_tx = conn->msgs_rx = 0;
	pthread_mutex_unlock(&table_lock);
}

static void free_conn(struct stk_conn *conn)
{
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
	pthread_mutex_lock(&table_lock);
	__atomic_store_n(&conn_table[conn->slot], NULL, __ATOMIC_SEQ_CST); /* answer_pending */
	pthread_mutex_unlock(&table_lock);
	/* A delivery may have loaded the pointer just before: wait it out on every
	 * endpoint (the connection may not have chosen one yet). */
	if (conn->fab) {
		stk_fab_quiesce(conn->fab);
		stk_fab_av_release(conn->fab, conn->peer_addr); /* taken for stk_conn_connect */
	} else {
		stk_fab_foreach_open(quiesce_one, NULL);
	}
	stk_cork_barrier(); /* a flusher may hold it */
	answer_pending_barrier();
	if (conn->cork_len)
		stk_cork_unmark(conn->slot); /* unsent: the conn was reset */
	free_conn(conn);
}

/* ---- receive side (delivery) ---- */

static void ring_put(struct stk_conn *conn, const uint8_t *src, size_t len)
{
	size_t tail = (conn->ring_head + conn->ring_count) % conn->ring_size;
	size_t first = conn->ring_size - tail;
	if (first > len)
		first = len;
	memcpy(conn->ring + tail, src, first);
	memcpy(conn->ring, src + first, len - first);
	conn->ring_count += len;
	conn->rx_total += len;
}

/* Copy len bytes from offset off of the buffered data (does not consume). */
static void ring_peek(const struct stk_conn *conn, size_t off, uint8_t *dst, size_t len)
{
	if (len == 0)
		return;
	size_t start = (conn->ring_head + off) % conn->ring_size;
	size_t first = conn->ring_size - start;
	if (first > len)
		first = len;
	memcpy(dst, conn->ring + start, first);
	memcpy(dst + first, conn->ring, len - first);
}

/* Stream offset of the next byte the app reads. */
static inline uint64_t rx_pos(const struct stk_conn *conn)
{
	return conn->rx_total - conn->ring_count;
}

/* The app consumed n bytes (lock held): credit to give back; a read past the
 * urgent mark ends it (Linux clears urg_data once copied_seq passes urg_seq,
 * whether or not the urgent byte was taken). */
static void ring_consume(struct stk_conn *conn, size_t n)
{
	conn->ring_head = (conn->ring_head + n) % conn->ring_size;
	conn->ring_count -= n;
	conn->credit_owed += n;
	if (__builtin_expect(conn->urg != 0, 0) && rx_pos(conn) > conn->urg_seq)
		conn->urg = 0;
}

/* ---- urgent data (only reached while a mark is pending or arrives) ---- */

/* SO_OOBINLINE lives on the kernel socket (the app sets it there): read it
 * when it matters, never on the data fast path. */
static bool oob_inline(const struct stk_conn *conn)
{
	int v = 0;
	socklen_t len = sizeof(v);
	return stk_sys.getsockopt(conn->fd, SOL_SOCKET, SO_OOBINLINE, &v, &len) == 0 && v;
}

/* A URG message: the last byte queued is urgent (lock held). As Linux's
 * tcp_check_urg: a new mark replaces the old one; the old urgent byte becomes
 * normal data, unless the read position is at it (not inline): then it is
 * dropped. A mark for a byte already read is ignored. */
static void mark_urgent(struct stk_conn *conn)
{
	if (conn->rx_total == 0)
		return;
	uint64_t seq = conn->rx_total - 1;
	if (seq < rx_pos(conn) || (conn->urg && seq <= conn->urg_seq))
		return;
	if (conn->urg && conn->urg_seq == rx_pos(conn) && !oob_inline(conn))
		ring_consume(conn, 1);
	uint8_t byte;
	ring_peek(conn, (size_t)(seq - rx_pos(conn)), &byte, 1);
	conn->urg = STK_URG_VALID;
	conn->urg_seq = seq;
	conn->urg_byte = byte;
}

/* How much of want bytes a read at the read position may take while a mark is
 * pending (lock held), as Linux's tcp_recvmsg: it stops before the mark, ends
 * at it when it already copied bytes (copied; even with MSG_WAITALL: *stop),
 * else skips the urgent byte (*skip = 1, unless SO_OOBINLINE) and reads on. */
static size_t urg_limit(struct stk_conn *conn, bool copied, size_t want, size_t *skip,
			bool *stop)
{
	uint64_t pos = rx_pos(conn);
	size_t n = conn->ring_count < want ? conn->ring_count : want;
	if (conn->urg_seq < pos)
		return n;
	uint64_t off = conn->urg_seq - pos;
	if (off == 0) {
		if (copied) {
			*stop = true;
			return 0;
		}
		if (oob_inline(conn))
			return n;
		*skip = 1;
		size_t left = conn->ring_count - 1;
		return left < want ? left : want;
	}
	if (off < n) {
		*stop = true;
		return (size_t)off;
	}
	return n;
}

/* recv(MSG_OOB): never waits (tcp_recv_urg). */
static ssize_t recv_oob(struct stk_conn *conn, void *buf, size_t len, int flags)
{
	progress(conn);
	pthread_mutex_lock(&conn->lock);
	ssize_t ret = -EINVAL;
	if (conn->urg == STK_URG_VALID && !oob_inline(conn)) {
		if (len)
			*(uint8_t *)buf = conn->urg_byte;
		if (!(flags & MSG_PEEK))
			conn->urg = STK_URG_READ;
		ret = len ? 1 : 0;
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

static int post_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
		       const void *payload, size_t plen, bool tracked);
static int post_raw_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
			   const void *payload, size_t plen, bool tracked);
static int cork_flush_locked(struct stk_conn *conn);
static void migrated_locked(struct stk_conn *conn);
static void changed(struct stk_conn *conn);

/* The fabric part of the peer's stream is over (lock held): the kernel
 * connection carries its stream from now on, after the doorbells its last
 * message counted (stk_stream.h, "Sleeping"), which are taken now so that
 * nobody reads them as data. They were written before that message was
 * posted, so they are here or about to be (loopback: shm peers share a host). */
static void skip_bells_locked(struct stk_conn *conn)
{
	uint64_t deadline = 0;
	while (conn->bells_rx != conn->bells_seen && conn->fd >= 0) {
		uint8_t buf[64];
		size_t owed = (uint16_t)(conn->bells_seen - conn->bells_rx);
		ssize_t k = stk_sys.recv(conn->fd, buf, owed < sizeof(buf) ? owed : sizeof(buf),
					 MSG_DONTWAIT);
		if (k > 0) {
			conn->bells_rx = (uint16_t)(conn->bells_rx + k);
			continue;
		}
		if (!deadline)
			deadline = stk_now_ns() + BELL_SKIP_NS;
		if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
		    stk_now_ns() > deadline) {
			FSK_DBG("fd %d: migration: %zu doorbell bytes did not arrive", conn->fd,
				owed);
			conn->bells_rx = conn->bells_seen;
			break;
		}
		struct pollfd p = { .fd = conn->fd, .events = POLLIN };
		stk_sys.poll(&p, 1, 1);
	}
}

static void set_mig_rx_locked(struct stk_conn *conn)
{
	conn->mig_rx = true;
	/* Still negotiating (a MIGRATE that came before the server's READY was
	 * read): the doorbells follow that record; stk_conn_enter_fabric takes them. */
	if (stk_conn_on_fabric(conn))
		skip_bells_locked(conn);
}

void stk_conn_enter_fabric(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	conn->generation++;
	if (conn->mig_rx)
		skip_bells_locked(conn);
	__atomic_store_n(&conn->phase, STK_PHASE_FABRIC, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&conn->lock);
}

/* Our MIGRATE is posted (lock held): what the app did to the stream before
 * must now be visible on the kernel connection too. */
static void mig_tx_done_locked(struct stk_conn *conn)
{
	conn->mig_tx = true;
	if (conn->fin_sent)
		stk_sys.shutdown(conn->fd, SHUT_WR); /* the peer reads EOF there */
	if (conn->rd_shut)
		stk_sys.shutdown(conn->fd, SHUT_RD);
	if (conn->mig_rx)
		migrated_locked(conn);
}

/* Post our MIGRATE (lock held). The peer may already be gone for good (reset,
 * or closed completely): then nothing is sent and its MIGRATE is not awaited:
 * its kernel socket says the rest. Returns 0 or -EAGAIN (provider full). */
static int send_migrate_locked(struct stk_conn *conn)
{
	if (conn->mig_tx)
		return 0;
	if (conn->reset || (conn->peer_closed && conn->fin_rcvd) || !conn->fab) {
		set_mig_rx_locked(conn);
	} else {
		int ret = post_locked(conn, STK_MSG_MIGRATE, 0, NULL, 0, false);
		if (ret == -EAGAIN)
			return ret;
		if (ret) { /* the fabric is broken: nothing more will come on it either */
			FSK_WARN("fd %d: migration: cannot send MIGRATE: %s; the peer learns "
				 "it from its kernel socket", conn->fd, strerror(-ret));
			set_mig_rx_locked(conn);
		}
	}
	mig_tx_done_locked(conn);
	return 0;
}

/* Both MIGRATEs passed (lock held): the unread bytes move to a leftover the
 * app reads before the kernel connection; no fabric state is used from now on. */
static void migrated_locked(struct stk_conn *conn)
{
	if (conn->migrated)
		return;
	int left_fd;
	struct stk_leftover *left = stk_leftover_new(conn->ring, conn->ring_size,
						     conn->ring_head, conn->ring_count, &left_fd);
	if (left || conn->ring_count == 0) {
		conn->ring_count = 0;
		conn->left_fd = left_fd;
		__atomic_store_n(&conn->left, left, __ATOMIC_RELEASE);
	} else {
		FSK_WARN("fd %d: migration: out of memory: %zu unread bytes dropped", conn->fd,
			 conn->ring_count);
		stk_count_add(STK_C_MIGRATE_LEFTOVER_LOST, conn->ring_count);
		conn->ring_count = 0;
	}
	__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
	__atomic_store_n(&conn->migrated, true, __ATOMIC_RELEASE);
	if (!left)
		__atomic_store_n(&conn->kernel_only, true, __ATOMIC_RELEASE);
	/* epoll sets re-evaluate it: the leftover, then the kernel socket (or,
	 * with nothing left, they hand it to their kernel set) */
	changed(conn);
}

bool stk_conn_migrate_begin(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	if (!conn->mig_tx && (phase == STK_PHASE_KERNEL || phase == STK_PHASE_STRIP)) {
		/* settled on the kernel (both ends, by the negotiation): nothing
		 * went on the fabric and no answer would come from there */
		set_mig_rx_locked(conn);
		mig_tx_done_locked(conn);
	}
	bool sent = send_migrate_locked(conn) == 0;
	pthread_mutex_unlock(&conn->lock);
	return sent;
}

int stk_conn_watch_state(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	int state = STK_WATCH_IDLE;
	if (conn->mig_tx || conn->fd < 0) {
		state = STK_WATCH_DONE;
	} else if (conn->mig_rx) {
		state = STK_WATCH_SOON; /* mig_reply: answer_pending posts it */
	} else {
		int avail = 0;
		size_t counted = (uint16_t)(conn->bells_seen - conn->bells_rx);
		if (stk_sys.ioctl(conn->fd, FIONREAD, &avail) == 0 && (size_t)avail > counted)
			state = STK_WATCH_SOON;
	}
	pthread_mutex_unlock(&conn->lock);
	return state;
}

static void peer_gone_answers_locked(struct stk_conn *conn);

int stk_conn_migrate_finish(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	int ret = 1;
	if (!conn->migrated) {
		/* reset without its MIGRATE: the peer died (the liveness check
		 * found its kernel connection closed) or a protocol error */
		if (conn->mig_tx && !conn->mig_rx && conn->reset)
			ret = -1;
		peer_gone_answers_locked(conn);
		if (!conn->mig_tx || !conn->mig_rx) {
			pthread_mutex_unlock(&conn->lock);
			return 0;
		}
		migrated_locked(conn);
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

/* A state change is complete (lock held): epoll sets watching us and the
 * threads sleeping on the conn (stk_wake.h) hear of it. The generation was
 * bumped before the change (ET readers read events first). */
static void changed(struct stk_conn *conn)
{
	stk_watch_notify(&conn->watch);
	for (struct stk_wake_node *n = conn->wakers; n; n = n->next)
		stk_wake_ring(n);
}

/* The peer's MIGRATE arrived (lock held, inside the delivery): answer it now
 * when the provider has room, else from the next progress. */
static void peer_migrates_locked(struct stk_conn *conn)
{
	set_mig_rx_locked(conn);
	if (conn->mig_tx) {
		migrated_locked(conn); /* the answer to ours, or a simultaneous one */
		return;
	}
	if (send_migrate_locked(conn) == 0) {
		stk_migrate_note(conn, STK_MIGRATE_REASON_PEER);
	} else if (!conn->mig_reply) {
		__atomic_store_n(&conn->mig_reply, true, __ATOMIC_RELAXED);
		__atomic_fetch_add(&replies_pending, 1, __ATOMIC_RELAXED);
	}
}

/* A peer gone for good (reset, or closed completely) never answers our
 * MIGRATE, and nothing more comes on the fabric: its end settles the
 * migration at once, as when it was gone before ours left (send_migrate_locked).
 * The case: a fork meets a peer that closes at the same moment. */
static void peer_gone_answers_locked(struct stk_conn *conn)
{
	if (conn->mig_tx && !conn->mig_rx &&
	    (conn->reset || (conn->peer_closed && conn->fin_rcvd))) {
		set_mig_rx_locked(conn);
		migrated_locked(conn);
	}
}

/* One thread scans for pending answers at a time. The scan holds no lock
 * while it looks at a connection (progress calls it outside the CQ lock), so
 * stk_conn_destroy, once the connection is out of the table, waits for a scan
 * in course to end before freeing it (Dekker: the scan sets the flag, then
 * reads the table; destroy clears the slot, then reads the flag). */
static int answering;

static void answer_pending(void)
{
	if (__atomic_exchange_n(&answering, 1, __ATOMIC_SEQ_CST))
		return;
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = __atomic_load_n(&conn_table[slot], __ATOMIC_SEQ_CST);
		if (!conn || (!__atomic_load_n(&conn->mig_reply, __ATOMIC_RELAXED) &&
			      __atomic_load_n(&conn->bell_owed, __ATOMIC_RELAXED) != BELL_OWED_QUEUED))
			continue;
		pthread_mutex_lock(&conn->lock);
		if (conn->bell_owed == BELL_OWED_QUEUED) {
			if (conn->mig_tx || conn->reset)
				bell_owed_clear(conn); /* nothing more goes on the fabric */
			else
				post_locked(conn, STK_MSG_BELL, 0, NULL, 0, false); /* clears it */
		}
		if (conn->mig_reply && send_migrate_locked(conn) == 0) {
			__atomic_store_n(&conn->mig_reply, false, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&replies_pending, 1, __ATOMIC_RELAXED);
			stk_migrate_note(conn, STK_MIGRATE_REASON_PEER);
		}
		pthread_mutex_unlock(&conn->lock);
	}
	__atomic_store_n(&answering, 0, __ATOMIC_RELEASE);
}

/* A connection just left the table: wait out a scan that may hold it. */
static void answer_pending_barrier(void)
{
	while (__atomic_load_n(&answering, __ATOMIC_SEQ_CST))
		sched_yield();
}

static void protocol_reset(struct stk_conn *conn, const char *why)
{
	__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
	if (!conn->reset) {
		FSK_WARN("fd %d: fabric connection reset: %s", conn->fd, why);
		stk_count(STK_C_CONN_RESETS);
	}
	/* as a kernel reset: the bytes received before stay readable (recv
	 * returns them, then ECONNRESET) */
	conn->reset = true;
	changed(conn);
}

/* Write one doorbell byte on the kernel connection (lock held); the next
 * message posted counts it. Only while our stream is on the fabric: after our
 * MIGRATE the kernel connection carries stream bytes (which wake the peer by
 * themselves). A full socket buffer means the peer has doorbells unread. */
static void ring_locked(struct stk_conn *conn)
{
	conn->peer_sleeping = false;
	/* after the peer's MIGRATE it reads no doorbell: it reads our stream there
	 * (also when it gave up waiting for our answer) */
	if (conn->mig_tx || conn->mig_rx || conn->fd < 0 || !stk_conn_on_fabric(conn))
		return;
	uint8_t bell = 0xdb;
	if (stk_sys.send(conn->fd, &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
		return;
	conn->bells_tx++;
	if (conn->bell_owed == BELL_OWED_NONE)
		__atomic_store_n(&conn->bell_owed, BELL_OWED, __ATOMIC_RELAXED);
	stk_count(STK_C_DOORBELLS);
}

/* The peer's SLEEP (lock held, inside the delivery): it had received len of
 * our messages. */
static void peer_sleeps_locked(struct stk_conn *conn, uint32_t len)
{
	if (conn->mig_tx)
		return; /* our MIGRATE rang (it always does): nothing after it matters */
	if ((int32_t)(conn->tx_wake_seq - len) > 0 && stk_conn_on_fabric(conn)) {
		/* something it had not seen may have arrived after its last look */
		ring_locked(conn);
		if (conn->bell_owed != BELL_OWED_NONE)
			post_locked(conn, STK_MSG_BELL, 0, NULL, 0, false);
	} else {
		conn->peer_sleeping = true;
	}
}

void stk_stream_deliver(struct stk_fab *fab, const void *msg, size_t len)
{
	(void)fab;
	struct stk_msg_in in;
	if (stk_msg_parse(msg, len, &in) != 0) {
		stk_count(STK_C_FAB_STRAY_MSGS);
		return;
	}
	struct stk_conn *conn = __atomic_load_n(&conn_table[in.slot], __ATOMIC_ACQUIRE);
	if (!conn || conn->local_id != in.conn_id) {
		stk_count(STK_C_FAB_STRAY_MSGS);
		return;
	}
	uint16_t flags = in.flags;
	uint32_t hlen = in.len;
	size_t payload = in.payload;
	pthread_mutex_lock(&conn->lock);
	if (conn->reset) {
		/* already dead: drop */
	} else if (conn->mig_rx) {
		/* nothing may follow the peer's MIGRATE: a stale duplicate */
		stk_count(STK_C_FAB_STRAY_MSGS);
	} else if (in.seq != conn->rx_seq) {
		protocol_reset(conn, "sequence gap");
	} else {
		conn->rx_seq++;
		conn->msgs_rx++;
		conn->bells_seen = in.bells;
		/* SLEEP and BELL change nothing the app sees (no EPOLLET edge) */
		bool quiet = (flags & ~(STK_MSG_SLEEP | STK_MSG_BELL)) == 0;
		if (!quiet) {
			__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
			conn->peer_sleeping = false; /* it is awake: it announces again */
		}
		if (flags & STK_MSG_SLEEP)
			peer_sleeps_locked(conn, hlen);
		if (quiet) {
			/* nothing changed */
		} else if (flags & STK_MSG_RST) {
			/* Linux keeps the receive queue on a reset: the data the peer
			 * sent before it is read first, then ECONNRESET */
			if (!conn->reset)
				stk_count(STK_C_CONN_RESETS);
			conn->reset = true;
		} else {
			if (flags & STK_MSG_DATA) {
				if (!in.data_ok || conn->fin_rcvd)
					protocol_reset(conn, "bad data message");
				else if (payload > conn->ring_size - conn->ring_count)
					protocol_reset(conn, "peer exceeded its credit");
				else {
					/* also after SHUT_RD: Linux queues what arrives
					 * then, and a read returns it */
					ring_put(conn, (const uint8_t *)msg + sizeof(struct stk_msg_hdr), payload);
					conn->bytes_rx += payload;
				}
			}
			if ((flags & STK_MSG_URG) && !conn->reset)
				mark_urgent(conn);
			if (flags & STK_MSG_CREDIT)
				conn->tx_credits += hlen;
			if (flags & STK_MSG_FIN)
				conn->fin_rcvd = true;
			if (flags & STK_MSG_CLOSE)
				conn->peer_closed = true;
			if (flags & STK_MSG_MIGRATE)
				peer_migrates_locked(conn);
		}
		if (!quiet) {
			peer_gone_answers_locked(conn);
			changed(conn);
		}
	}
	pthread_mutex_unlock(&conn->lock);
}

/* ---- transmit side ---- */

/* A message that matters went out while our sleep was announced (lock held):
 * the peer clears its mark on it. Threads of ours may still sleep on the
 * announcement (a reader while this one writes): announce again at once for
 * them (Dekker with stk_conn_sleepers_add: either they see the flag cleared
 * and announce themselves, or we see them); epoll sets re-evaluate the conn
 * (their sleepers announce again). */
static void announce_again_locked(struct stk_conn *conn)
{
	__atomic_store_n(&conn->sleep_announced, false, __ATOMIC_SEQ_CST);
	/* Raw: this runs inside the post of that message, which may be the
	 * staged bytes' own (cork_flush_locked has not cleared the stage yet);
	 * post_locked would send them a second time. Nothing staged can be
	 * owed before this SLEEP: the message just posted came after them. */
	if (__atomic_load_n(&conn->sleepers, __ATOMIC_SEQ_CST) > 0 &&
	    post_raw_locked(conn, STK_MSG_SLEEP, conn->rx_seq, NULL, 0, false) == 0)
		__atomic_store_n(&conn->sleep_announced, true, __ATOMIC_SEQ_CST);
	changed(conn);
}

void stk_conn_sleepers_add(struct stk_conn *conn, int n)
{
	__atomic_add_fetch(&conn->sleepers, n, __ATOMIC_SEQ_CST);
}

void stk_conn_wake_link(struct stk_conn *conn, struct stk_wake_node *node, bool on)
{
	pthread_mutex_lock(&conn->lock);
	struct stk_wake_node **pp = &conn->wakers;
	if (on) {
		node->next = *pp;
		*pp = node;
	} else {
		while (*pp && *pp != node)
			pp = &(*pp)->next;
		if (*pp)
			*pp = node->next;
	}
	pthread_mutex_unlock(&conn->lock);
}

/* Post one message as it is (lock held): post_locked without the staged
 * bytes' check. */
static int post_raw_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
			   const void *payload, size_t plen, bool tracked)
{
	struct stk_fab *fab = conn->fab;
	/* SLEEP and BELL never wake the peer (no ring ping-pong between two
	 * sleepers); MIGRATE always does, on every fabric: its peer must answer
	 * also when its app makes no call (the byte wakes the peer's negotiation
	 * thread, stk_lazy.h), and a SLEEP it sent before seeing it cannot be
	 * answered by a ring after it */
	bool wakes = !(flags & (STK_MSG_SLEEP | STK_MSG_BELL));
	if (__builtin_expect(wakes && (conn->peer_sleeping || (flags & STK_MSG_MIGRATE)), 0))
		ring_locked(conn);
	struct stk_msg_hdr hdr = {
		.conn_id = htole64(conn->peer_id),
		.slot = htole32(conn->peer_slot),
		.seq = htole32(conn->tx_seq),
		.len = htole32(len_field),
		.flags = htole16(flags),
		.bells = htole16(conn->bells_tx),
	};
	size_t total = sizeof(hdr) + plen;
	int ret;
	if (!tracked && total <= stk_fab_inject_size(fab) && total <= STK_FAB_STAGE_MAX) {
		ret = stk_fab_inject2(fab, &hdr, sizeof(hdr), payload, plen, conn->peer_addr);
	} else {
		struct stk_fab_buf *buf = stk_fab_buf_get(fab);
		if (!buf)
			return -EAGAIN;
		memcpy(buf->data, &hdr, sizeof(hdr));
		if (plen)
			memcpy((uint8_t *)buf->data + sizeof(hdr), payload, plen);
		buf->outstanding = &conn->tx_outstanding;
		__atomic_fetch_add(&conn->tx_outstanding, 1, __ATOMIC_RELAXED);
		ret = stk_fab_send(fab, buf, total, conn->peer_addr);
		if (ret) {
			__atomic_fetch_sub(&conn->tx_outstanding, 1, __ATOMIC_RELAXED);
			stk_fab_buf_put(fab, buf);
		}
	}
	if (ret) {
		if (__builtin_expect(conn->bell_owed == BELL_OWED, 0)) {
			/* the next progress posts a BELL */
			__atomic_store_n(&conn->bell_owed, BELL_OWED_QUEUED, __ATOMIC_RELAXED);
			__atomic_fetch_add(&replies_pending, 1, __ATOMIC_RELAXED);
		}
		return ret == -FI_EAGAIN ? -EAGAIN : ret;
	}
	conn->tx_seq++;
	conn->msgs_tx++;
	if (__builtin_expect(conn->bell_owed != BELL_OWED_NONE, 0))
		bell_owed_clear(conn);
	if (wakes) {
		/* atomic: catch_up reads it without the lock */
		__atomic_store_n(&conn->tx_wake_seq, conn->tx_seq, __ATOMIC_RELAXED);
		/* the peer clears its mark on this message: announce again */
		if (__builtin_expect(conn->sleep_announced, 0))
			announce_again_locked(conn);
	}
	return 0;
}

/* How many batches catch_up takes at most: every receive buffer (and as many
 * send completions) several times over. */
#define CATCH_UP_BATCHES 16

/* After an app call that posted a message that matters (tx_wake_seq moved
 * from wake_seq; no lock held): take what has arrived for us, a SLEEP of the
 * peer among it, so that a peer asleep since before that post is rung now
 * (peer_sleeps_locked) and not at our next call, which an app busy elsewhere
 * may not make for seconds (stk_stream.h, "Sleeping"). Every completion
 * pending is taken: the SLEEP may sit behind a window of unread data. Only
 * without a wait fd: there the peer sleeps on its own CQ's. */
static void catch_up(struct stk_conn *conn, uint32_t wake_seq)
{
	if (__atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED) == wake_seq ||
	    __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return;
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (!fab || stk_fab_wait_fd(fab) >= 0)
		return;
	stk_fab_progress_all(fab, CATCH_UP_BATCHES);
	if (__builtin_expect(__atomic_load_n(&replies_pending, __ATOMIC_RELAXED) != 0, 0))
		answer_pending();
}

/* Post one message (lock held), after the staged bytes (stk_cork.h: they
 * were sent before it). payload may be NULL when plen is 0. With tracked, a
 * registered buffer is always used and counted in tx_outstanding so close can
 * wait for it to leave. Returns 0 or -EAGAIN/-errno. */
static int post_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
		       const void *payload, size_t plen, bool tracked)
{
	if (__builtin_expect(conn->cork_len != 0, 0)) {
		int ret = cork_flush_locked(conn);
		if (ret)
			return ret;
	}
	return post_raw_locked(conn, flags, len_field, payload, plen, tracked);
}

/* ---- coalesced small sends (stk_cork.h) ---- */

/* The staged bytes leave as one DATA message (lock held); a reset conn has
 * nothing more to send. */
static int cork_flush_locked(struct stk_conn *conn)
{
	if (!conn->reset) {
		int ret = post_raw_locked(conn, STK_MSG_DATA, conn->cork_len, conn->cork,
					  conn->cork_len, false);
		if (ret)
			return ret;
	}
	conn->cork_len = 0;
	stk_cork_unmark(conn->slot);
	return 0;
}

bool stk_conn_cork_flush(struct stk_conn *conn, uint64_t older_than)
{
	/* a young stage is left alone without taking the lock the streaming
	 * sender holds on every send (a stale read only costs the lock) */
	if (older_than && __atomic_load_n(&conn->cork_since, __ATOMIC_RELAXED) > older_than)
		return false;
	pthread_mutex_lock(&conn->lock);
	uint32_t wake_seq = conn->tx_wake_seq;
	bool posted = conn->cork_len && (!older_than || conn->cork_since <= older_than) &&
		      cork_flush_locked(conn) == 0;
	pthread_mutex_unlock(&conn->lock);
	/* the app may be idle outside the library: its peer's SLEEP is ours to see */
	catch_up(conn, wake_seq);
	/* A provider with manual progress (tcp) moves the message only when driven,
	 * and the app may be asleep on the wait fd, which a posted send does not
	 * wake: drive it once (its completions then wake the app as usual). */
	if (posted)
		progress(conn);
	return posted;
}

/* Whether a send of len bytes is staged (lock held; stk_cork.h, "When"); *now
 * is set when it is. Every send call comes here once: it times the run of
 * sends. The first send after a receive reads no clock (a ping-pong pays
 * nothing): a run is timed from its second send on. */
static bool cork_wanted_locked(struct stk_conn *conn, size_t len, int flags, uint64_t *now)
{
	bool burst = false;
	*now = 0;
	if (len > STK_CORK_SMALL) {
		/* never staged: no clock (a bulk sender pays none per call); the
		 * run is timed again from the next send */
		conn->tx_run = true;
		conn->last_send_ns = 0;
		return false;
	}
	if (conn->tx_run) {
		*now = stk_now_ns();
		burst = conn->last_send_ns && *now - conn->last_send_ns < STK_CORK_BURST_NS;
	}
	conn->tx_run = true;
	conn->last_send_ns = *now;
	bool cork = (burst || (flags & MSG_MORE)) && len > 0 && len <= STK_CORK_SMALL &&
		    !(flags & MSG_OOB) && len <= conn->tx_credits;
	if (cork && !*now)
		*now = stk_now_ns();
	return cork;
}

/* Stage len bytes (lock held; cork_wanted_locked said so): a full stage leaves
 * first. Returns 0, -EAGAIN (provider full) or -ENOMEM (not staged: post). */
static int cork_append_locked(struct stk_conn *conn, const void *src, size_t len, uint64_t now)
{
	if (__builtin_expect(!conn->cork, 0) && !(conn->cork = malloc(STK_CORK_BYTES)))
		return -ENOMEM;
	if (conn->cork_len + len > STK_CORK_BYTES) {
		int ret = cork_flush_locked(conn);
		if (ret)
			return ret;
	}
	if (conn->cork_len == 0) {
		__atomic_store_n(&conn->cork_since, now, __ATOMIC_RELAXED);
		stk_cork_mark(conn->slot);
	}
	memcpy(conn->cork + conn->cork_len, src, len);
	conn->cork_len += (uint32_t)len;
	conn->tx_credits -= len;
	conn->bytes_tx += len;
	conn->tx_starved = false;
	return 0;
}

/* Give consumed bytes back to the sender, batched (lock held). */
static void grant_credit(struct stk_conn *conn, bool force)
{
	if (!conn->fab || conn->reset || conn->peer_closed || conn->credit_owed == 0 ||
	    conn->mig_tx || conn->mig_rx)
		return; /* nothing on the fabric after our MIGRATE; none needed after theirs */
	if (!force && conn->credit_owed < conn->ring_size / 4)
		return;
	uint64_t grant = conn->credit_owed;
	if (grant > UINT32_MAX)
		grant = UINT32_MAX;
	if (post_locked(conn, STK_MSG_CREDIT, (uint32_t)grant, NULL, 0, false) == 0)
		conn->credit_owed -= grant;
	/* else: retried by the next recv, poll or wait */
}

/* Send a control message, waiting (bounded) for provider room. */
static int post_control(struct stk_conn *conn, uint16_t flags, bool tracked)
{
	uint64_t deadline = stk_now_ns() + CLOSE_DRAIN_NS;
	for (;;) {
		pthread_mutex_lock(&conn->lock);
		/* after our MIGRATE the kernel connection says it (shutdown, close) */
		int ret = conn->mig_tx ? 0 : post_locked(conn, flags, 0, NULL, 0, tracked);
		pthread_mutex_unlock(&conn->lock);
		if (ret != -EAGAIN)
			return ret;
		if (stk_now_ns() > deadline)
			return -ETIMEDOUT;
		progress(conn);
		cpu_relax();
	}
}

/* A non-blocking send returns short while the peer still grants credit: the
 * provider's queue was full. Tell epoll (its items then poll us until a retry
 * is due: see stk_poll_events). */
static void starve(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	bool starved = conn->tx_credits > 0 && !conn->reset;
	if (starved) {
		conn->tx_starved = true;
		conn->starved_at = stk_now_ns();
	}
	pthread_mutex_unlock(&conn->lock);
	if (starved)
		stk_watch_notify(&conn->watch);
}

/* ---- blocking waits of data calls: SO_RCVTIMEO/SO_SNDTIMEO and signals ---- */

/* The state of one blocking send or recv, set up at its first wait. Signals are
 * blocked from then on (as in stk_ready.h) and the thread's signalfd watches
 * those the caller's mask lets through, so a signal that arrives at any time is
 * seen, its handler's SA_RESTART known, and the handler run by unblocking it:
 * the call then behaves as the kernel's (signal(7), "Interruption of system
 * calls"): EINTR, or restart when every handler that ran has SA_RESTART and the
 * socket has no timeout. */
struct block_wait {
	bool ready;               /* set up */
	uint64_t deadline;        /* SO_*TIMEO, absolute; STK_WAIT_NEVER: none */
	int sigfd;                /* -1: none (sleep with the caller's mask instead) */
	struct stk_wait_sigs sigs;
};

static pthread_key_t sigfd_key;
static pthread_once_t sigfd_once = PTHREAD_ONCE_INIT;
static __thread int tls_sigfd = -1;

static void sigfd_close(void *arg)
{
	stk_sys.close((int)(intptr_t)arg - 1);
}

static void sigfd_init(void)
{
	pthread_key_create(&sigfd_key, sigfd_close);
}

static bool sig_never_watched(int sig)
{
	return sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
	       sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

/* The thread's signalfd, watching the signals the caller's mask lets through. */
static int sigfd_watch(const sigset_t *caller_mask)
{
	sigset_t watch;
	sigemptyset(&watch);
	for (int sig = 1; sig < NSIG; sig++)
		if (!sig_never_watched(sig) && sigismember(caller_mask, sig) == 0)
			sigaddset(&watch, sig);
	int fd = signalfd(tls_sigfd, &watch, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (tls_sigfd < 0) {
		/* It lives as long as the thread: keep it out of the low numbers the
		 * app expects to get back (the lowest free one is POSIX's promise). */
		int high = stk_sys_dup_high(fd);
		if (high >= 0) {
			stk_sys.close(fd);
			fd = high;
		}
		tls_sigfd = fd;
		pthread_once(&sigfd_once, sigfd_init);
		pthread_setspecific(sigfd_key, (void *)(intptr_t)(fd + 1));
	}
	return fd;
}

/* Read SO_RCVTIMEO / SO_SNDTIMEO of the kernel socket (shared with the app's
 * fd): a deadline, or STK_WAIT_NEVER. */
static uint64_t sock_deadline(int fd, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	if (stk_sys.getsockopt(fd, SOL_SOCKET, opt, &tv, &len) != 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return STK_WAIT_NEVER;
	return stk_now_ns() + (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

/* Signals are pending for us: run their handlers (unblock, re-block). Returns
 * -EINTR when a handler ran and the call must end, 1 when every handler that
 * ran asked for SA_RESTART (and no timeout is set), 0 when no handler ran. */
static int deliver_signals(struct block_wait *bw)
{
	sigset_t pending;
	if (sigpending(&pending) != 0)
		return -EINTR;
	bool handled = false, restart = true;
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig_never_watched(sig) || sigismember(&pending, sig) != 1 ||
		    sigismember(&bw->sigs.saved, sig) == 1)
			continue;
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue; /* ignored, or ends/stops the process: no EINTR */
		handled = true;
		if (!(sa.sa_flags & SA_RESTART))
			restart = false;
	}
	pthread_sigmask(SIG_SETMASK, &bw->sigs.saved, NULL); /* handlers run here */
	bw->sigs.blocked = false;
	stk_wait_block_signals(&bw->sigs);
	if (!handled)
		return 0;
	return restart && bw->deadline == STK_WAIT_NEVER ? 1 : -EINTR;
}

static int wait_core(struct stk_conn *conn, short events, uint64_t deadline, int sigfd,
		     const sigset_t *sleep_mask, bool (*until)(struct stk_conn *));

/* Before a call's first wait is set up (signals blocked, the thread's
 * signalfd, the socket's timeout read: four system calls, a large part of a
 * bulk transfer's cost when paid per message), spin a moment without it: the
 * credit a streaming sender waits for, or the next message of a reader, is
 * usually microseconds away. A handler that runs meanwhile runs as if its
 * signal came just before the call: the kernel interrupts only a call that
 * sleeps. True when events are ready. */
static bool quick_spin(struct stk_conn *conn, short events)
{
	uint64_t budget = (uint64_t)stk_cfg.spin_us * 1000ull;
	if (budget > QUICK_SPIN_NS)
		budget = QUICK_SPIN_NS;
	if (!budget)
		return false;
	events |= POLLERR | POLLHUP;
	stk_cork_before_wait();
	uint64_t end = stk_now_ns() + budget;
	for (unsigned i = 1;; i++) {
		if (stk_stream_events(conn) & events)
			return true;
		if (i % 16 == 0 && stk_now_ns() >= end)
			return false;
		cpu_relax();
	}
}

/* Wait for events. 0: ready (or restarted after a signal: re-check), 1: a
 * handler with SA_RESTART ran (the caller returns what it already moved, else
 * re-checks), -EAGAIN: the socket's timeout expired, -EINTR. */
static int block_wait(struct stk_conn *conn, short events, int timeo_opt,
		      struct block_wait *bw, bool (*until)(struct stk_conn *))
{
	if (!bw->ready) {
		if (!until && quick_spin(conn, events))
			return 0;
		bw->ready = true;
		bw->deadline = sock_deadline(conn->fd, timeo_opt);
		stk_wait_block_signals(&bw->sigs);
		bw->sigfd = bw->sigs.blocked ? sigfd_watch(&bw->sigs.saved) : -1;
	}
	for (;;) {
		const sigset_t *mask = bw->sigfd >= 0 ? NULL : stk_wait_sleep_mask(&bw->sigs, NULL);
		int ev = wait_core(conn, events, bw->deadline, bw->sigfd, mask, until);
		if (ev > 0)
			return 0;
		if (ev == 0)
			return -EAGAIN;
		if (bw->sigfd < 0) /* a handler ran during the sleep; which one is unknown */
			return -EINTR;
		int r = deliver_signals(bw);
		if (r != 0)
			return r;
	}
}

static void check_liveness(struct stk_conn *conn);

/* A blocking send whose provider has no room while the peer still grants
 * credit looks at the kernel connection at most this often: a peer that died
 * never frees its queue, and POLLOUT (credit and local buffers) says nothing
 * of it, so without the look the send would retry forever. */
#define FULL_LIVENESS_NS 1000000ull

/* Sets *to_kernel when our MIGRATE is out: the rest goes on the kernel. */
static ssize_t send_loop(struct stk_conn *conn, const void *buf, size_t len, int flags,
			 struct block_wait *bw, bool *to_kernel)
{
	bool nonblock = conn->nonblock || (flags & MSG_DONTWAIT);
	uint16_t urg = (flags & MSG_OOB) ? STK_MSG_URG : 0;
	unsigned retried = 0;
	uint64_t live_checked = 0;
	const uint8_t *src = buf;
	size_t sent = 0;
	if (!conn->fab)
		return -ENOTCONN;
	size_t seg_payload = stk_fab_stream_seg(conn->fab) - sizeof(struct stk_msg_hdr);
	for (;;) {
		int err = 0;
		bool full = false; /* credit left, no provider room */
		pthread_mutex_lock(&conn->lock);
		if (conn->mig_tx) {
			pthread_mutex_unlock(&conn->lock);
			*to_kernel = true;
			return (ssize_t)sent;
		}
		if (conn->reset) {
			/* as the kernel: ECONNRESET once, EPIPE afterwards; a call that
			 * sent bytes before the reset returns their count and leaves
			 * the ECONNRESET to the next call (Linux's sk_err) */
			err = conn->reset_reported ? -EPIPE : -ECONNRESET;
			if (!sent)
				conn->reset_reported = true;
		} else if (conn->fin_sent || conn->peer_closed) {
			err = -EPIPE;
		} else {
			uint64_t now;
			if (sent == 0 && cork_wanted_locked(conn, len, flags, &now)) {
				int ret = cork_append_locked(conn, src, len, now);
				if (ret == 0)
					sent = len;
				else if (ret != -EAGAIN && ret != -ENOMEM)
					err = ret;
			}
			while (sent < len && conn->tx_credits > 0 && !err) {
				size_t chunk = len - sent;
				if (chunk > conn->tx_credits)
					chunk = (size_t)conn->tx_credits;
				if (chunk > seg_payload)
					chunk = seg_payload;
				uint16_t f = STK_MSG_DATA | (sent + chunk == len ? urg : 0);
				int ret = post_locked(conn, f, (uint32_t)chunk, src + sent, chunk,
						      false);
				if (ret == -EAGAIN) {
					full = true;
					break;
				}
				if (ret) {
					err = ret;
					break;
				}
				conn->tx_credits -= chunk;
				conn->bytes_tx += chunk;
				conn->tx_starved = false;
				sent += chunk;
			}
		}
		pthread_mutex_unlock(&conn->lock);
		if (sent == len)
			return (ssize_t)sent;
		if (err)
			return sent ? (ssize_t)sent : err;
		if (nonblock && sent) {
			starve(conn);
			return (ssize_t)sent;
		}
		progress(conn);
		if (nonblock) {
			/* Credit is ours to give; a provider's -EAGAIN (queue full, peer
			 * mapping in progress) is transient: retry a bounded number of
			 * times before reporting EAGAIN. */
			pthread_mutex_lock(&conn->lock);
			bool credit = conn->tx_credits > 0;
			pthread_mutex_unlock(&conn->lock);
			if (!credit)
				return -EAGAIN;
			if (retried++ >= 200) {
				starve(conn);
				return -EAGAIN;
			}
			cpu_relax();
			continue;
		}
		if (full) {
			uint64_t now = stk_now_ns();
			if (now - live_checked >= FULL_LIVENESS_NS) {
				live_checked = now;
				check_liveness(conn); /* a dead peer: reset, after its grace */
			}
		}
		int w = block_wait(conn, POLLOUT, SO_SNDTIMEO, bw, NULL);
		if (w < 0 || (w > 0 && sent))
			return sent ? (ssize_t)sent : w;
	}
}

ssize_t stk_send(struct stk_conn *conn, const void *buf, size_t len, int flags)
{
	if (stk_wait_bad_user_range(buf, len))
		return -EFAULT; /* as the kernel, instead of a SIGSEGV it never raises */
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return stk_migrated_send(conn, buf, len, flags);
	struct block_wait bw = { .ready = false };
	bool to_kernel = false;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	ssize_t ret = send_loop(conn, buf, len, flags, &bw, &to_kernel);
	stk_wait_restore_signals(&bw.sigs);
	catch_up(conn, wake_seq);
	if (to_kernel && (size_t)ret < len &&
	    !(ret > 0 && (conn->nonblock || (flags & MSG_DONTWAIT)))) {
		ssize_t k = stk_migrated_send(conn, (const uint8_t *)buf + ret, len - (size_t)ret,
					      flags);
		if (k < 0)
			return ret ? ret : k;
		ret += k;
	} else if ((flags & MSG_OOB) && ret > 0 && (size_t)ret < len) {
		/* A partial urgent send: as Linux, the last byte that went is urgent. */
		post_control(conn, STK_MSG_URG, false);
	}
	return ret;
}

/* Sets *to_kernel when the ring is empty after the peer's MIGRATE: the rest
 * comes from the kernel connection. */
static ssize_t recv_loop(struct stk_conn *conn, void *buf, size_t len, int flags,
			 struct block_wait *bw, bool *to_kernel)
{
	bool nonblock = conn->nonblock || (flags & MSG_DONTWAIT);
	bool peek = flags & MSG_PEEK;
	bool waitall = flags & MSG_WAITALL;
	uint8_t *dst = buf;
	size_t got = 0;
	for (;;) {
		progress(conn);
		pthread_mutex_lock(&conn->lock);
		conn->tx_run = false; /* a receive between sends: not a streaming sender */
		if (__builtin_expect(conn->cork_len != 0, 0))
			cork_flush_locked(conn); /* the peer may wait for them to answer */
		if (conn->reset && conn->ring_count == 0) {
			bool first = !conn->reset_reported;
			if (!got) /* else the next call reports it, as Linux's sk_err */
				conn->reset_reported = true;
			pthread_mutex_unlock(&conn->lock);
			/* as the kernel: the bytes received before, then ECONNRESET
			 * once, then EOF */
			return got ? (ssize_t)got : first ? -ECONNRESET : 0;
		}
		if (conn->mig_rx && conn->ring_count == 0) {
			pthread_mutex_unlock(&conn->lock);
			*to_kernel = true;
			return (ssize_t)got;
		}
		size_t want = peek ? len : len - got, skip = 0;
		size_t n = conn->ring_count < want ? conn->ring_count : want;
		bool stop = false; /* at the urgent mark */
		if (__builtin_expect(conn->urg != 0, 0))
			n = urg_limit(conn, got > 0 && !peek, want, &skip, &stop);
		if (peek) {
			ring_peek(conn, skip, dst, n);
			got = n;
		} else {
			if (skip)
				ring_consume(conn, skip);
			ring_peek(conn, 0, dst + got, n);
			ring_consume(conn, n);
			got += n;
			grant_credit(conn, false);
		}
		/* a reset ends the call with what it has (nothing more comes) */
		bool eof = ((conn->fin_rcvd || conn->rd_shut) && conn->ring_count == 0) ||
			   conn->reset;
		/* len 0: as the kernel, 0 once something is readable (or EOF), else
		 * EAGAIN or wait */
		bool done = len == 0 ? conn->ring_count > 0 || eof
				     : got == len || (got > 0 && (!waitall || stop)) || eof;
		pthread_mutex_unlock(&conn->lock);
		if (done)
			return (ssize_t)got;
		if (nonblock)
			return got ? (ssize_t)got : -EAGAIN;
		int w = block_wait(conn, POLLIN, SO_RCVTIMEO, bw, NULL);
		if (w < 0 || (w > 0 && got && !peek))
			return got ? (ssize_t)got : w;
	}
}

/* MSG_TRUNC on TCP: the bytes are taken (or, with MSG_PEEK, counted) without
 * being copied, so buf may be NULL (tcp_recvmsg). Through a bounce buffer,
 * never on the ordinary path. */
static ssize_t recv_discard(struct stk_conn *conn, size_t len, int flags)
{
	uint8_t sink[16384];
	flags &= ~MSG_TRUNC;
	if (flags & MSG_PEEK) {
		ssize_t n = stk_recv(conn, sink, len < sizeof(sink) ? len : sizeof(sink), flags);
		if (n == (ssize_t)sizeof(sink)) { /* count the rest without copying it */
			size_t ready = stk_conn_readable(conn);
			n = (ssize_t)(ready < len ? ready : len);
		}
		return n;
	}
	size_t done = 0;
	while (done < len) {
		size_t chunk = len - done < sizeof(sink) ? len - done : sizeof(sink);
		/* after the first bytes, only what is there (unless MSG_WAITALL) */
		int f = done && !(flags & MSG_WAITALL) ? flags | MSG_DONTWAIT : flags;
		ssize_t n = stk_recv(conn, sink, chunk, f);
		if (n <= 0)
			return done ? (ssize_t)done : n;
		done += (size_t)n;
		if ((size_t)n < chunk)
			break;
	}
	return (ssize_t)done;
}

ssize_t stk_recv(struct stk_conn *conn, void *buf, size_t len, int flags)
{
	if (__builtin_expect(flags & MSG_TRUNC, 0))
		return recv_discard(conn, len, flags);
	if (stk_wait_bad_user_range(buf, len))
		return -EFAULT;
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return stk_migrated_recv(conn, buf, len, flags);
	if (flags & MSG_OOB)
		return recv_oob(conn, buf, len, flags);
	struct block_wait bw = { .ready = false };
	bool to_kernel = false;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	ssize_t ret = recv_loop(conn, buf, len, flags, &bw, &to_kernel);
	stk_wait_restore_signals(&bw.sigs);
	catch_up(conn, wake_seq); /* a credit (or staged bytes) went out */
	if (to_kernel && (ret == 0 || ((flags & MSG_WAITALL) && !(flags & MSG_PEEK) &&
				       (size_t)ret < len))) {
		ssize_t k = stk_migrated_recv(conn, (uint8_t *)buf + ret, len - (size_t)ret,
					      flags);
		if (k < 0)
			return ret ? ret : k;
		ret += k;
	}
	return ret;
}

int stk_conn_block_until(struct stk_conn *conn, bool (*until)(struct stk_conn *conn))
{
	struct block_wait bw = { .ready = false };
	int w;
	do
		w = block_wait(conn, POLLIN, SO_RCVTIMEO, &bw, until);
	while (w == 1);
	stk_wait_restore_signals(&bw.sigs);
	return w;
}

void stk_conn_changed(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->kernel_only, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_KERNEL)
		stk_watch_kernel(&conn->watch);
	else
		stk_watch_notify(&conn->watch);
}

uint64_t stk_conn_generation(struct stk_conn *conn)
{
	return __atomic_load_n(&conn->generation, __ATOMIC_ACQUIRE);
}

size_t stk_conn_readable(struct stk_conn *conn)
{
	progress(conn);
	pthread_mutex_lock(&conn->lock);
	size_t n = conn->ring_count;
	if (conn->urg && conn->urg_seq >= rx_pos(conn) && !oob_inline(conn))
		n = (size_t)(conn->urg_seq - rx_pos(conn)); /* Linux's tcp_inq */
	n += stk_leftover_count(conn->left);
	bool kernel = conn->mig_rx;
	pthread_mutex_unlock(&conn->lock);
	int k = 0;
	if (kernel && stk_sys.ioctl(conn->fd, FIONREAD, &k) == 0 && k > 0)
		n += (size_t)k;
	return n;
}

struct stk_watch *stk_conn_watch(struct stk_conn *conn)
{
	return &conn->watch;
}

bool stk_conn_tx_blocked(struct stk_conn *conn)
{
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&conn->lock);
	bool blocked = fab && conn->tx_credits > 0 && !conn->reset && !conn->fin_sent &&
		       !conn->peer_closed && (conn->tx_starved || !stk_fab_tx_available(fab));
	pthread_mutex_unlock(&conn->lock);
	return blocked;
}

int stk_conn_atmark(struct stk_conn *conn)
{
	progress(conn);
	pthread_mutex_lock(&conn->lock);
	int at = conn->urg && conn->urg_seq == rx_pos(conn);
	pthread_mutex_unlock(&conn->lock);
	return at;
}

int stk_conn_take_error(struct stk_conn *conn)
{
	progress(conn);
	pthread_mutex_lock(&conn->lock);
	int err = 0;
	if (conn->reset && !conn->reset_reported) {
		conn->reset_reported = true;
		err = ECONNRESET;
	}
	pthread_mutex_unlock(&conn->lock);
	return err;
}

int stk_shutdown(struct stk_conn *conn, int how)
{
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	pthread_mutex_lock(&conn->lock);
	bool kernel = conn->mig_tx;
	if (kernel) { /* the kernel carries the stream now (both ways soon) */
		if (how != SHUT_WR)
			conn->rd_shut = true; /* what is queued stays readable */
		if (how != SHUT_RD)
			conn->fin_sent = true;
	}
	pthread_mutex_unlock(&conn->lock);
	if (kernel)
		return stk_sys.shutdown(conn->fd, how) == 0 ? 0 : -errno;
	if (how != SHUT_WR) {
		pthread_mutex_lock(&conn->lock);
		/* As Linux: queued and later data stay readable; a read of an
		 * empty queue returns 0 (EOF) instead of waiting. */
		__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
		conn->rd_shut = true;
		changed(conn);
		pthread_mutex_unlock(&conn->lock);
	}
	if (how == SHUT_RD)
		return 0;
	pthread_mutex_lock(&conn->lock);
	bool need = !conn->fin_sent && !conn->reset && conn->fab && !conn->mig_tx;
	__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
	conn->fin_sent = true;
	if (conn->mig_tx) /* migrated meanwhile */
		stk_sys.shutdown(conn->fd, SHUT_WR);
	changed(conn);
	pthread_mutex_unlock(&conn->lock);
	if (!need)
		return 0;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	int ret = post_control(conn, STK_MSG_FIN, false);
	catch_up(conn, wake_seq);
	return ret;
}

int stk_conn_handshake_step(struct stk_conn *conn, bool *posted, bool answer_only)
{
	progress(conn);
	pthread_mutex_lock(&conn->lock);
	bool heard = conn->rx_seq > 0;
	if (!*posted && (heard || !answer_only))
		*posted = post_locked(conn, STK_MSG_CREDIT, 0, NULL, 0, false) == 0;
	bool dead = conn->reset;
	pthread_mutex_unlock(&conn->lock);
	/* heard: the fabric works; a reset right behind the first message is
	 * the app's business (it sees ECONNRESET on the fabric connection) */
	if (heard && (*posted || dead))
		return 1;
	return dead ? -ECONNRESET : 0;
}

int stk_conn_handshake(struct stk_conn *conn, int timeout_ms)
{
	uint64_t deadline = stk_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	bool posted = false;
	for (;;) {
		int ret = stk_conn_handshake_step(conn, &posted, true);
		if (ret)
			return ret > 0 ? 0 : ret;
		if (stk_now_ns() > deadline)
			return -ETIMEDOUT;
		sleep_ns(posted ? SLEEP_MIN_NS : 1000);
	}
}

/* ---- liveness, readiness, waiting ---- */

/* The kernel connection said something (readable/hup). Before the peer's
 * MIGRATE it carries only doorbells (stk_stream.h, "Sleeping"): they are taken
 * as far as the peer's messages counted them (a byte not counted yet is a
 * doorbell whose message follows, or the stream of a peer that migrated: its
 * MIGRATE left before and is near; either way progress tells). EOF or an error
 * means the peer closed its socket or died: a graceful close sends FIN|CLOSE on
 * the fabric first; give it a short grace to arrive, else the peer died: reset. */
static void check_liveness(struct stk_conn *conn)
{
	/* While negotiating the kernel stream carries the negotiation (stk_lazy.c). */
	if (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC)
		return;
	if (__atomic_load_n(&conn->mig_rx, __ATOMIC_ACQUIRE)) {
		/* the kernel connection carries the data now: a new edge (EPOLLET) */
		__atomic_fetch_add(&conn->generation, 1, __ATOMIC_RELEASE);
		return;
	}
	uint64_t deadline = 0;
	for (unsigned round = 0;; round++) {
		progress(conn); /* the messages counting the doorbells come first */
		pthread_mutex_lock(&conn->lock);
		if (conn->mig_rx) { /* its doorbells were taken then */
			pthread_mutex_unlock(&conn->lock);
			return;
		}
		uint8_t buf[64];
		ssize_t n = stk_sys.recv(conn->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
			pthread_mutex_unlock(&conn->lock);
			return;
		}
		if (n > 0) {
			size_t owed = (uint16_t)(conn->bells_seen - conn->bells_rx);
			size_t take = (size_t)n < owed ? (size_t)n : owed;
			ssize_t k = take ? stk_sys.recv(conn->fd, buf, take, MSG_DONTWAIT) : 0;
			if (k > 0) {
				conn->bells_rx = (uint16_t)(conn->bells_rx + k);
				/* the peer cleared its mark when it rang: announce again */
				__atomic_store_n(&conn->sleep_announced, false, __ATOMIC_RELAXED);
			}
			if (k == n) {
				pthread_mutex_unlock(&conn->lock);
				return; /* only doorbells */
			}
		}
		/* Bytes: a doorbell whose message follows, or the peer migrated;
		 * EOF: it closed (FIN|CLOSE left before) or migrated and closed. */
		if (!deadline)
			deadline = stk_now_ns() + (n > 0 ? MIGRATE_GRACE_NS : HUP_GRACE_NS);
		bool settled = conn->reset || (conn->fin_rcvd && conn->peer_closed);
		if (settled || stk_now_ns() > deadline) {
			if (!settled)
				protocol_reset(conn, n > 0 ? "bytes on the liveness channel"
							   : "peer closed its kernel socket without FIN (peer died)");
			conn->peer_closed = true;
			pthread_mutex_unlock(&conn->lock);
			return;
		}
		pthread_mutex_unlock(&conn->lock);
		if (n > 0 && round < 64)
			cpu_relax(); /* a doorbell's message is posted right after the byte */
		else
			sleep_ns(round < 64 ? SLEEP_MIN_NS : 1000000ull);
	}
}

void stk_conn_check_liveness(struct stk_conn *conn)
{
	check_liveness(conn);
}

short stk_stream_events(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return stk_migrated_events(conn, stk_leftover_count(conn->left));
	progress(conn);
	return stk_conn_events(conn);
}

short stk_conn_events(struct stk_conn *conn)
{
	short ev = 0;
	pthread_mutex_lock(&conn->lock);
	if (conn->mig_rx || conn->mig_tx) {
		/* half-way (waiting for the peer's MIGRATE or the provider): the
		 * ring, then the kernel; or migrated (epoll's events_now comes here
		 * too): the leftover, then the kernel */
		size_t buffered = conn->ring_count + stk_leftover_count(conn->left);
		pthread_mutex_unlock(&conn->lock);
		return stk_migrated_events(conn, buffered);
	}
	grant_credit(conn, false);
	size_t readable = conn->ring_count;
	if (__builtin_expect(conn->urg != 0, 0)) {
		if (conn->urg == STK_URG_VALID)
			ev |= POLLPRI;
		/* Linux: at the mark the urgent byte does not make the socket readable */
		if (conn->urg_seq == rx_pos(conn) && !oob_inline(conn))
			readable--;
	}
	if (readable || conn->fin_rcvd || conn->reset || conn->rd_shut)
		ev |= POLLIN;
	/* Linux's tcp_poll: RDHUP once reading is over from either side, HUP once
	 * both directions are (the peer's FIN or our SHUT_RD, and our FIN) */
	bool rd_over = conn->fin_rcvd || conn->rd_shut;
	if (rd_over)
		ev |= POLLRDHUP;
	bool room = conn->fab && conn->tx_credits > 0 && stk_fab_tx_available(conn->fab);
	if (room && __builtin_expect(conn->tx_starved, 0)) {
		if (stk_now_ns() - conn->starved_at < STARVE_RETRY_NS)
			room = false;
		else { /* worth a retry: a change (an EPOLLET edge), as room coming back */
			conn->tx_starved = false;
			__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
			changed(conn);
		}
	}
	if (conn->reset || conn->peer_closed || conn->fin_sent || room)
		ev |= POLLOUT;
	if (conn->reset || (rd_over && conn->fin_sent))
		ev |= POLLHUP;
	if (conn->reset)
		ev |= POLLERR;
	pthread_mutex_unlock(&conn->lock);
	return ev;
}

int stk_conn_sleep_announce(struct stk_conn *conn, bool send)
{
	if (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC)
		return STK_SLEEP_NO;
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return STK_SLEEP_COVERED; /* a kernel socket now */
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (!fab)
		return STK_SLEEP_NO;
	if (stk_fab_wait_fd(fab) >= 0)
		return STK_SLEEP_COVERED; /* the fabric's wait fd serves (the caller sleeps on it) */
	if (__atomic_load_n(&conn->sleep_announced, __ATOMIC_SEQ_CST))
		return STK_SLEEP_COVERED;
	if (!send)
		return STK_SLEEP_NO;
	int ret = STK_SLEEP_NO;
	pthread_mutex_lock(&conn->lock);
	if (conn->sleep_announced || conn->reset || conn->peer_closed || conn->mig_rx ||
	    conn->mig_tx) {
		/* nothing more comes on the fabric, or it comes on the kernel
		 * connection (after the peer's MIGRATE), or the peer's MIGRATE rings */
		ret = STK_SLEEP_COVERED;
	} else if (post_locked(conn, STK_MSG_SLEEP, conn->rx_seq, NULL, 0, false) == 0) {
		__atomic_store_n(&conn->sleep_announced, true, __ATOMIC_RELAXED);
		ret = STK_SLEEP_SENT;
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

/* Sleeping: with a CQ wait fd (tcp) we ppoll it together with the kernel
 * connection after fi_trywait; without one (shm) we ppoll the kernel
 * connection, in slices growing from 20 µs until the doorbell is announced
 * (stk_conn_sleep_announce), then without slices. Either way with the thread's
 * wake-up (stk_wake.h) and at most stk_sleep_cap() (stk_stream.h). */
/* Returns the events, 0 at the deadline, -EINTR when the sleep was interrupted
 * by a signal (sleep_mask given) or sigfd (>= 0, also polled) became readable. */
static int wait_core(struct stk_conn *conn, short events, uint64_t deadline, int sigfd,
		     const sigset_t *sleep_mask, bool (*until)(struct stk_conn *))
{
	events |= POLLERR | POLLHUP;
	stk_cork_before_wait();
	uint64_t start = stk_now_ns();
	uint64_t spin_end = start + (uint64_t)stk_cfg.spin_us * 1000ull;
	uint64_t backoff = SLEEP_MIN_NS;
	for (;;) {
		short ev = until ? (until(conn) ? events : 0) : stk_stream_events(conn) & events;
		if (ev)
			return ev;
		uint64_t now = stk_now_ns();
		if (now >= deadline)
			return 0;
		if (now < spin_end) {
			cpu_relax();
			continue;
		}
		struct pollfd pfd[4] = { { .fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE),
					   .events = POLLIN | POLLRDHUP } };
		nfds_t nfds = 1;
		uint64_t sleep = deadline - now;
		if (until && sleep > SLEEP_MAX_NS)
			sleep = SLEEP_MAX_NS; /* the condition may change without an fd event */
		struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
		int wfd = fab ? stk_fab_wait_fd(fab) : -1;
		stk_conn_sleepers_add(conn, 1);
		int bell = until ? STK_SLEEP_NO : stk_conn_sleep_announce(conn, backoff >= ANNOUNCE_NS);
		if (bell == STK_SLEEP_SENT) {
			stk_conn_sleepers_add(conn, -1);
			continue; /* look once more before sleeping */
		}
		if (wfd >= 0) {
			if (!stk_fab_trywait(fab)) {
				stk_conn_sleepers_add(conn, -1);
				continue; /* completions pending: progress again */
			}
			pfd[nfds].fd = wfd;
			pfd[nfds++].events = POLLIN;
		}
		/* from here on any change of the conn, by any thread, wakes us */
		struct stk_wake_node wake;
		int wake_idx = -1;
		if (!until && stk_wake_prepare(&wake)) {
			stk_conn_wake_link(conn, &wake, true);
			if (stk_stream_events(conn) & events) {
				stk_conn_wake_link(conn, &wake, false);
				stk_conn_sleepers_add(conn, -1);
				continue; /* delivered by another thread meanwhile */
			}
			wake_idx = (int)nfds;
			pfd[nfds].fd = stk_wake_fd(&wake);
			pfd[nfds++].events = POLLIN;
		}
		bool capped = false;
		if (wfd >= 0 || bell == STK_SLEEP_COVERED) {
			uint64_t cap = stk_sleep_cap(wake_idx >= 0, events & POLLOUT);
			capped = sleep > cap;
			if (capped)
				sleep = cap;
		} else {
			if (sleep > backoff)
				sleep = backoff;
			if (backoff < SLEEP_MAX_NS)
				backoff *= 2;
		}
		int sig_idx = -1;
		if (sigfd >= 0) {
			sig_idx = (int)nfds;
			pfd[nfds].fd = sigfd;
			pfd[nfds++].events = POLLIN;
		}
		struct timespec ts = { .tv_sec = (time_t)(sleep / 1000000000ull),
				       .tv_nsec = (long)(sleep % 1000000000ull) };
		int n = stk_wait_sys_ppoll(pfd, nfds, &ts, sleep_mask);
		if (wake_idx >= 0) {
			stk_conn_wake_link(conn, &wake, false);
			if (n > 0 && pfd[wake_idx].revents)
				stk_wake_drain(&wake);
		}
		stk_conn_sleepers_add(conn, -1);
		/* a wake-up was missed when the conn is ready: with a wait fd, as
		 * delivered so far (what progress would receive now was on its
		 * way: a provider polling for its wait fd, dpdk, signals a frame
		 * up to its idle pause after it came); covered by doorbells, with
		 * what the provider holds (a message there was owed a ring) */
		if (n == 0 && capped &&
		    __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_FABRIC &&
		    ((wfd >= 0 ? stk_conn_events(conn) : stk_stream_events(conn)) & events))
			stk_count(STK_C_SLEEP_LATE_WAKES);
		if (n == -EINTR)
			return -EINTR;
		if (n > 0 && pfd[0].revents && !until)
			check_liveness(conn);
		if (n > 0 && pfd[0].revents && until)
			backoff = SLEEP_MIN_NS; /* the negotiation moves: watch it closely */
		if (n > 0 && sig_idx >= 0 && pfd[sig_idx].revents)
			return -EINTR;
	}
}

short stk_conn_wait(struct stk_conn *conn, short events, int timeout_ms)
{
	struct stk_wait_sigs sigs = { .blocked = false };
	stk_wait_block_signals(&sigs);
	int ret = wait_core(conn, events, stk_wait_deadline_ms(timeout_ms), -1,
			    stk_wait_sleep_mask(&sigs, NULL), NULL);
	stk_wait_restore_signals(&sigs);
	return (short)ret;
}

/* ---- close ---- */

/* The peer's library has closed the kernel connection (or its process died):
 * nothing it still holds will be completed. */
static bool peer_gone(const struct stk_conn *conn)
{
	struct pollfd pfd = { .fd = conn->fd, .events = POLLRDHUP };
	return stk_sys.poll(&pfd, 1, 0) > 0 &&
	       (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Wait until every send of conn has completed. The kernel delivers data after
 * close() and even after the process exits; we cannot outlive the process, and
 * some providers (shm) let the receiver pull large messages from the sender's
 * memory: so the close (or the exit) waits for the peer to take the data — until
 * it has, or its library hung up the kernel connection, or the linger time
 * (SO_LINGER when the app set one, else LINGER_DEFAULT_NS) ran out. */
static bool drain_sends(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) == 0)
		return false;
	uint64_t linger_ns = LINGER_DEFAULT_NS;
	struct linger lg;
	socklen_t len = sizeof(lg);
	if (stk_sys.getsockopt(conn->fd, SOL_SOCKET, SO_LINGER, &lg, &len) == 0 && lg.l_onoff &&
	    lg.l_linger > 0)
		linger_ns = (uint64_t)lg.l_linger * 1000000000ull;
	uint64_t deadline = stk_now_ns() + linger_ns;
	uint64_t pause = SLEEP_MIN_NS;
	bool gone = false;
	/* the endpoint itself, also after a migration (progress() stops then; the
	 * sends made before it still complete here; a forked child has none) */
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	while (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) > 0) {
		if (fab) {
			stk_fab_progress(fab); /* usually completes them: no sleep */
			if (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) == 0)
				break;
		}
		uint64_t now = stk_now_ns();
		if (now >= deadline)
			break;
		/* The peer's app closed, or its process ended. Its provider may
		 * still owe us the acknowledgements that complete our sends (dpdk
		 * completes a send on the peer's ack; a live or cleanly exiting
		 * peer sends it within milliseconds): a short grace, then give up
		 * (a killed peer never answers). */
		if (!gone && peer_gone(conn)) {
			gone = true;
			if (deadline - now > PEER_GONE_GRACE_NS)
				deadline = now + PEER_GONE_GRACE_NS;
		}
		sleep_ns(pause);
		if (pause < 1000000ull)
			pause *= 2;
	}
	return gone;
}

/* At exit, connections the app never closed still deliver what it wrote. */

/* Bytes the peer sent that the provider holds and nobody processed yet are in
 * our receive queue as far as the kernel's semantics go (a close with them
 * unread resets the connection): deliver them before the close decides. Bounded:
 * a few batches of completions (another thread progressing meanwhile delivers
 * them itself). */
static void take_arrived(struct stk_conn *conn)
{
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	if (!fab || __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return;
	for (int i = 0; i < 64 && stk_fab_progress(fab) > 0; i++)
		;
}

/* What the kernel's close says, said on the fabric (the kernel socket is not
 * closed here): FIN|CLOSE, or RST when abortive or with unread data (and the
 * kernel told to reset too), after every byte sent before; unread doorbells
 * are taken (they would turn the kernel's FIN into an RST). Returns whether the
 * peer went away meanwhile. */
static bool goodbye(struct stk_conn *conn, bool abortive)
{
	take_arrived(conn);
	pthread_mutex_lock(&conn->lock);
	/* Nothing to say to a peer that reset or already closed completely (it reads
	 * nothing more, and its process may be gone: rxm would retry a dead peer). */
	bool can_send = conn->fab && !conn->reset && !(conn->peer_closed && conn->fin_rcvd) &&
			!conn->mig_tx;
	/* after a migration the kernel decides (another process may hold it) */
	bool rst = abortive || (conn->ring_count > 0 && !conn->mig_tx);
	uint16_t flags = rst ? STK_MSG_RST : (conn->fin_sent ? 0 : STK_MSG_FIN) | STK_MSG_CLOSE;
	conn->fin_sent = true;
	pthread_mutex_unlock(&conn->lock);
	if (can_send) {
		int ret = post_control(conn, flags, true);
		if (ret)
			FSK_DBG("fd %d: close: could not send %s: %s", conn->fd,
				rst ? "RST" : "FIN", strerror(-ret));
	}
	/* Data written before close is delivered, like the kernel does. Also
	 * when nothing more is said: a connection that migrated still has the
	 * sends it made on the fabric before, and nobody reads their
	 * completions any more (its progress stopped then), so they are taken
	 * here rather than left owning its memory. */
	bool peer_left = conn->fab ? drain_sends(conn) : false;
	if (rst && !conn->mig_tx) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };
		stk_sys.setsockopt(conn->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	pthread_mutex_lock(&conn->lock);
	/* unread doorbells would turn the kernel's FIN into an RST */
	while (!rst && !conn->mig_rx && conn->bells_rx != conn->bells_seen) {
		uint8_t buf[64];
		size_t owed = (uint16_t)(conn->bells_seen - conn->bells_rx);
		ssize_t k = stk_sys.recv(conn->fd, buf, owed < sizeof(buf) ? owed : sizeof(buf),
					 MSG_DONTWAIT);
		if (k <= 0)
			break;
		conn->bells_rx = (uint16_t)(conn->bells_rx + k);
	}
	pthread_mutex_unlock(&conn->lock);
	return peer_left;
}

void stk_conn_end_all(void)
{
	stk_cork_stop();
	for (unsigned slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = __atomic_load_n(&conn_table[slot], __ATOMIC_ACQUIRE);
		if (!conn || !conn->fab)
			continue;
		if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
			drain_sends(conn); /* those made before it; the kernel says the rest */
		else if (stk_conn_on_fabric(conn))
			goodbye(conn, false);
	}
	stk_log_flush(); /* lines of our threads still waiting for the log file */
}

int stk_close(struct stk_conn *conn, bool abortive)
{
	bool peer_left = goodbye(conn, abortive);
	stk_sys.close(conn->fd);
	pthread_mutex_lock(&conn->lock);
	fold_stats(conn);
	pthread_mutex_unlock(&conn->lock);
	if (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) > 0) {
		/* A provider still owns a buffer that points at this connection: keep
		 * the memory (a bounded leak) rather than let a completion write freed
		 * memory. */
		if (peer_left) /* a killed peer: expected, and bounded */
			FSK_INFO("fd %d: close: the peer process went away with sends of ours "
				 "in flight; their buffers are kept", conn->fd);
		else
			FSK_WARN("fd %d: close: sends still in flight at the linger bound; "
				 "connection leaked", conn->fd);
		pthread_mutex_lock(&table_lock);
		__atomic_store_n(&conn_table[conn->slot], NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&table_lock);
		return 0;
	}
	stk_conn_destroy(conn);
	return 0;
}

/* ---- table access and fork ---- */

void stk_conn_table_hold(void)
{
	pthread_mutex_lock(&table_lock);
}

void stk_conn_table_release(void)
{
	pthread_mutex_unlock(&table_lock);
}

struct stk_conn *stk_conn_at(uint32_t slot)
{
	return slot < STK_CONN_MAX ? __atomic_load_n(&conn_table[slot], __ATOMIC_ACQUIRE) : NULL;
}

void stk_conn_atfork_prepare(void)
{
	pthread_mutex_lock(&table_lock);
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++)
		if (conn_table[slot])
			pthread_mutex_lock(&conn_table[slot]->lock);
}

void stk_conn_atfork_parent(void)
{
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++)
		if (conn_table[slot])
			pthread_mutex_unlock(&conn_table[slot]->lock);
	pthread_mutex_unlock(&table_lock);
}

void stk_conn_atfork_child(void)
{
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = conn_table[slot];
		if (!conn)
			continue;
		pthread_mutex_init(&conn->lock, NULL);
		if (!conn->migrated && conn->fab) {
			/* Created while the parent prepared the fork (another thread):
			 * the parent keeps it on the fabric; the child cannot. */
			stk_count(STK_C_MIGRATE_UNPREPARED);
			FSK_WARN("fd %d: connection inherited without migration (created "
				 "during fork): the child uses its kernel socket; bytes in "
				 "flight on the fabric go to the parent", conn->fd);
			conn->mig_tx = conn->mig_rx = true;
			migrated_locked(conn);
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
	replies_pending = 0;
	answering = 0;
	pthread_mutex_init(&table_lock, NULL);
}

static bool cork_flush_slot(uint32_t slot, uint64_t older_than)
{
	struct stk_conn *conn = stk_conn_at(slot);
	return conn && stk_conn_cork_flush(conn, older_than);
}

/* The layers below reach the stream only through these (stk_fab.h, stk_cork.h). */
__attribute__((constructor)) static void stream_install(void)
{
	stk_fab_set_deliver(stk_stream_deliver);
	stk_cork_set_flush(cork_flush_slot);
}
