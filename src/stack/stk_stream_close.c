/* The end of a stream: shutdown, close, and the goodbye of connections the
 * process never closed. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_cork.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

#define LINGER_DEFAULT_NS 10000000000ull /* sends in flight at close: 10 s at most */
#define PEER_GONE_GRACE_NS 200000000ull  /* ... 0.2 s once the peer hung up */
#define DRAIN_SPIN_NS 300000ull          /* progress without sleeping this long first */

/* ---- shutdown ---- */

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
		stream_changed(conn);
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
	stream_changed(conn);
	pthread_mutex_unlock(&conn->lock);
	if (!need)
		return 0;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	int ret = stream_post_control(conn, STK_MSG_FIN, false);
	stream_catch_up(conn, wake_seq);
	return ret;
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
	uint64_t now = stk_now_ns();
	uint64_t deadline = now + linger_ns;
	/* the peer's acknowledgement is microseconds away (its provider answers
	 * at once when asked): look for it a while before sleeping, as a sleep
	 * costs its timer slack (tens of microseconds) on every close */
	uint64_t spin_end = now + DRAIN_SPIN_NS;
	uint64_t pause = SLEEP_MIN_NS;
	bool gone = false;
	/* the endpoint itself, also after a migration (stream_progress() stops then; the
	 * sends made before it still complete here; a forked child has none) */
	struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
	while (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) > 0) {
		if (fab) {
			stk_fab_progress(fab); /* usually completes them: no sleep */
			if (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) == 0)
				break;
		}
		now = stk_now_ns();
		if (now >= deadline)
			break;
		if (now < spin_end) {
			sched_yield(); /* a peer on this CPU runs meanwhile */
			continue;
		}
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
		stream_sleep_ns(pause);
		if (pause < 1000000ull)
			pause *= 2;
	}
	return gone;
}

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
		int ret = stream_post_control(conn, flags, true);
		if (ret)
			STK_DBG("fd %d: close: could not send %s: %s", conn->fd,
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

/* At exit, connections the app never closed still deliver what it wrote. */
void stk_conn_end_all(void)
{
	stk_cork_stop();
	for (unsigned slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = stk_conn_at(slot);
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
	stream_fold_stats(conn);
	if (__atomic_load_n(&conn->tx_outstanding, __ATOMIC_ACQUIRE) > 0) {
		/* A provider still owns a buffer that points at this connection: keep
		 * the memory (a bounded leak) rather than let a completion write freed
		 * memory. */
		if (peer_left) /* a killed peer: expected, and bounded */
			STK_INFO("fd %d: close: the peer process went away with sends of ours "
				 "in flight; their buffers are kept", conn->fd);
		else
			STK_WARN("fd %d: close: sends still in flight at the linger bound; "
				 "connection leaked", conn->fd);
		stream_table_unlist(conn);
		return 0;
	}
	stk_conn_destroy(conn);
	return 0;
}
