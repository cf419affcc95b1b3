#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_counters.h"
#include "stack/stk_leftover.h"
#include "stack/stk_log.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

/* ---- data calls after the fabric ---- */

ssize_t stk_migrated_recv(struct stk_conn *conn, void *buf, size_t len, int flags)
{
	struct stk_leftover *left = __atomic_load_n(&conn->left, __ATOMIC_ACQUIRE);
	size_t n = stk_leftover_take(left, buf, len, flags & MSG_PEEK);
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE) && stk_leftover_count(left) == 0 &&
	    !__atomic_exchange_n(&conn->kernel_only, true, __ATOMIC_ACQ_REL))
		stk_conn_changed(conn); /* epoll sets hand it to their kernel set */
	if (n && (n == len || !(flags & MSG_WAITALL) || (flags & MSG_PEEK)))
		return (ssize_t)n;
	ssize_t k = stk_sys.recv(conn->fd, (uint8_t *)buf + n, len - n, flags);
	if (k < 0)
		return n ? (ssize_t)n : -errno;
	return (ssize_t)n + k;
}

ssize_t stk_migrated_send(struct stk_conn *conn, const void *buf, size_t len, int flags)
{
	ssize_t k = stk_sys.send(conn->fd, buf, len, flags | MSG_NOSIGNAL);
	return k < 0 ? -errno : k;
}

short stk_migrated_events(struct stk_conn *conn, size_t extra_in)
{
	struct pollfd p = { .fd = conn->fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	short ev = stk_sys.poll(&p, 1, 0) > 0 ? p.revents : 0;
	if (extra_in)
		ev |= POLLIN;
	return ev;
}

/* ---- accounting ---- */

static const char *const reason_text[] = {
	[STK_MIGRATE_REASON_FORK] = "the process forks (connections existing at fork "
				    "continue on the kernel; new ones are accelerated)",
	[STK_MIGRATE_REASON_EXEC] = "it survives an exec (not close-on-exec)",
	[STK_MIGRATE_REASON_PASS] = "it is sent to another socket (SCM_RIGHTS)",
	[STK_MIGRATE_REASON_PEER] = "the peer process moved it (fork, exec or fd passing)",
	[STK_MIGRATE_REASON_BYPASS] = "the app uses it through calls libfabsock never sees "
				      "(stdio after fdopen, POSIX aio)",
	[STK_MIGRATE_REASON_ZEROCOPY] = "the app turned SO_ZEROCOPY on (MSG_ZEROCOPY "
					"completions come from the kernel socket)",
	[STK_MIGRATE_REASON_SENDFILE] = "a large sendfile (the kernel sends file pages "
					"without copying them; FABSOCK_SENDFILE_KERNEL)",
};
static const enum stk_counter reason_counter[] = {
	[STK_MIGRATE_REASON_FORK] = STK_C_MIGRATE_FORK,
	[STK_MIGRATE_REASON_EXEC] = STK_C_MIGRATE_EXEC,
	[STK_MIGRATE_REASON_PASS] = STK_C_MIGRATE_PASS,
	[STK_MIGRATE_REASON_PEER] = STK_C_MIGRATE_PEER,
	[STK_MIGRATE_REASON_BYPASS] = STK_C_MIGRATE_BYPASS,
	[STK_MIGRATE_REASON_ZEROCOPY] = STK_C_MIGRATE_ZEROCOPY,
	[STK_MIGRATE_REASON_SENDFILE] = STK_C_MIGRATE_SENDFILE,
};

void stk_migrate_note(struct stk_conn *conn, enum stk_migrate_reason why)
{
	static int logged[STK_MIGRATE_REASON_SENDFILE + 1]; /* atomic flags */
	stk_count(STK_C_MIGRATED_TO_KERNEL);
	stk_count(reason_counter[why]);
	stk_stat_conn_migrated(conn, reason_text[why]);
	if (__atomic_exchange_n(&logged[why], 1, __ATOMIC_RELAXED) == 0)
		STK_INFO("fd %d: accelerated connection moved to the kernel: %s (logged once "
			 "per reason, counted in migrated_to_kernel)", conn->fd, reason_text[why]);
	else
		STK_DBG("fd %d: accelerated connection moved to the kernel: %s", conn->fd,
			reason_text[why]);
}

/* ---- the migration protocol (stk_migrate.h drives it) ---- */

#define BELL_SKIP_NS 100000000ull   /* counted doorbells still in flight at a MIGRATE */

int stream_replies_pending;

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
			STK_DBG("fd %d: migration: %zu doorbell bytes did not arrive", conn->fd,
				owed);
			conn->bells_rx = conn->bells_seen;
			break;
		}
		struct pollfd p = { .fd = conn->fd, .events = POLLIN };
		stk_sys.poll(&p, 1, 1);
	}
}

void stream_set_mig_rx_locked(struct stk_conn *conn)
{
	conn->mig_rx = true;
	/* Still negotiating (a client's MIGRATE that came before the server
	 * entered the fabric, or the server's before the client saw its first
	 * message): stk_conn_enter_fabric takes the doorbells. */
	if (stk_conn_on_fabric(conn))
		skip_bells_locked(conn);
}

void stream_enter_fabric_locked(struct stk_conn *conn)
{
	__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
	if (conn->mig_rx)
		skip_bells_locked(conn);
	__atomic_store_n(&conn->phase, STK_PHASE_FABRIC, __ATOMIC_RELEASE);
}

void stk_conn_enter_fabric(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	stream_enter_fabric_locked(conn);
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
		stream_migrated_locked(conn);
}

/* Post our MIGRATE (lock held). The peer may already be gone for good (reset,
 * or closed completely): then nothing is sent and its MIGRATE is not awaited:
 * its kernel socket says the rest. Returns 0 or -EAGAIN (provider full). */
static int send_migrate_locked(struct stk_conn *conn)
{
	if (conn->mig_tx)
		return 0;
	if (conn->reset || (conn->peer_closed && conn->fin_rcvd) || !conn->fab) {
		stream_set_mig_rx_locked(conn);
	} else {
		int ret = stream_post_locked(conn, STK_MSG_MIGRATE, 0, NULL, 0, false);
		if (ret == -EAGAIN)
			return ret;
		if (ret) { /* the fabric is broken: nothing more will come on it either */
			STK_WARN("fd %d: migration: cannot send MIGRATE: %s; the peer learns "
				 "it from its kernel socket", conn->fd, strerror(-ret));
			stream_set_mig_rx_locked(conn);
		}
	}
	mig_tx_done_locked(conn);
	return 0;
}

/* Both MIGRATEs passed (lock held): the unread bytes move to a leftover the
 * app reads before the kernel connection; no fabric state is used from now on. */
void stream_migrated_locked(struct stk_conn *conn)
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
		STK_WARN("fd %d: migration: out of memory: %zu unread bytes dropped", conn->fd,
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
	stream_changed(conn);
}

bool stk_conn_migrate_begin(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	if (!conn->mig_tx && (phase == STK_PHASE_KERNEL || phase == STK_PHASE_STRIP)) {
		/* settled on the kernel (both ends, by the negotiation): nothing
		 * went on the fabric and no answer would come from there */
		stream_set_mig_rx_locked(conn);
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
		state = STK_WATCH_SOON; /* mig_reply: stream_answer_pending posts it */
	} else {
		int avail = 0;
		size_t counted = (uint16_t)(conn->bells_seen - conn->bells_rx);
		if (stk_sys.ioctl(conn->fd, FIONREAD, &avail) == 0 && (size_t)avail > counted)
			state = STK_WATCH_SOON;
	}
	pthread_mutex_unlock(&conn->lock);
	return state;
}

int stk_conn_migrate_finish(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	int ret = 1;
	if (!conn->migrated) {
		/* reset without its MIGRATE: the peer died (the liveness check
		 * found its kernel connection closed) or a protocol error */
		if (conn->mig_tx && !conn->mig_rx && conn->reset)
			ret = -1;
		stream_peer_gone_answers_locked(conn);
		if (!conn->mig_tx || !conn->mig_rx) {
			pthread_mutex_unlock(&conn->lock);
			return 0;
		}
		stream_migrated_locked(conn);
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

/* The peer's MIGRATE arrived (lock held, inside the delivery): answer it now
 * when the provider has room, else from the next progress. */
void stream_peer_migrates_locked(struct stk_conn *conn)
{
	stream_set_mig_rx_locked(conn);
	if (conn->mig_tx) {
		stream_migrated_locked(conn); /* the answer to ours, or a simultaneous one */
		return;
	}
	if (send_migrate_locked(conn) == 0) {
		stk_migrate_note(conn, STK_MIGRATE_REASON_PEER);
	} else if (!conn->mig_reply) {
		__atomic_store_n(&conn->mig_reply, true, __ATOMIC_RELAXED);
		__atomic_fetch_add(&stream_replies_pending, 1, __ATOMIC_RELAXED);
	}
}

/* One thread scans for pending answers at a time. The scan holds no lock
 * while it looks at a connection (progress calls it outside the CQ lock), so
 * stk_conn_destroy, once the connection is out of the table, waits for a scan
 * in course to end before freeing it (Dekker: the scan sets the flag, then
 * reads the table; destroy clears the slot, then reads the flag). */
static int answering;

void stream_answer_pending(void)
{
	if (__atomic_exchange_n(&answering, 1, __ATOMIC_SEQ_CST))
		return;
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = __atomic_load_n(&stream_conn_table[slot], __ATOMIC_SEQ_CST);
		if (!conn || (!__atomic_load_n(&conn->mig_reply, __ATOMIC_RELAXED) &&
			      __atomic_load_n(&conn->bell_owed, __ATOMIC_RELAXED) != BELL_OWED_QUEUED))
			continue;
		pthread_mutex_lock(&conn->lock);
		if (conn->bell_owed == BELL_OWED_QUEUED) {
			if (conn->mig_tx || conn->reset)
				stream_bell_owed_clear(conn); /* nothing more goes on the fabric */
			else
				stream_post_locked(conn, STK_MSG_BELL, 0, NULL, 0, false); /* clears it */
		}
		if (conn->mig_reply && send_migrate_locked(conn) == 0) {
			__atomic_store_n(&conn->mig_reply, false, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&stream_replies_pending, 1, __ATOMIC_RELAXED);
			stk_migrate_note(conn, STK_MIGRATE_REASON_PEER);
		}
		pthread_mutex_unlock(&conn->lock);
	}
	__atomic_store_n(&answering, 0, __ATOMIC_RELEASE);
}

void stream_answer_pending_barrier(void)
{
	while (__atomic_load_n(&answering, __ATOMIC_SEQ_CST))
		sched_yield();
}

void stream_answers_atfork_child(void)
{
	stream_replies_pending = 0;
	answering = 0;
}
