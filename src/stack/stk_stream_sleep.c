/* Doorbells, sleep announcements and the liveness check of the kernel
 * connection (stk_stream.h, "Sleeping"). */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_counters.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <sys/socket.h>

#define HUP_GRACE_NS 500000000ull   /* kernel EOF before FIN: wait this for the FIN (a
				     * loaded machine may not run the progress that takes
				     * it for tens of ms; a dead peer is still seen < 1 s) */
#define MIGRATE_GRACE_NS 1000000000ull /* kernel bytes before the peer's MIGRATE */

/* ---- doorbells and sleep announcements (stk_stream.h, "Sleeping") ---- */

/* Write one doorbell byte on the kernel connection (lock held); the next
 * message posted counts it. Only while our stream is on the fabric: after our
 * MIGRATE the kernel connection carries stream bytes (which wake the peer by
 * themselves). A full socket buffer means the peer has doorbells unread. */
void stream_ring_locked(struct stk_conn *conn)
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
void stream_peer_sleeps_locked(struct stk_conn *conn, uint32_t len)
{
	if (conn->mig_tx)
		return; /* our MIGRATE rang (it always does): nothing after it matters */
	if ((int32_t)(conn->tx_wake_seq - len) > 0 && stk_conn_on_fabric(conn)) {
		/* something it had not seen may have arrived after its last look */
		stream_ring_locked(conn);
		if (conn->bell_owed != BELL_OWED_NONE)
			stream_post_locked(conn, STK_MSG_BELL, 0, NULL, 0, false);
	} else {
		conn->peer_sleeping = true;
	}
}

/* A message that matters went out while our sleep was announced (lock held):
 * the peer clears its mark on it. Threads of ours may still sleep on the
 * announcement (a reader while this one writes): announce again at once for
 * them (Dekker with stk_conn_sleepers_add: either they see the flag cleared
 * and announce themselves, or we see them); epoll sets re-evaluate the conn
 * (their sleepers announce again). */
void stream_announce_again_locked(struct stk_conn *conn)
{
	__atomic_store_n(&conn->sleep_announced, false, __ATOMIC_SEQ_CST);
	/* Raw: this runs inside the post of that message, which may be the
	 * staged bytes' own (stream_cork_flush_locked has not cleared the stage yet);
	 * stream_post_locked would send them a second time. Nothing staged can be
	 * owed before this SLEEP: the message just posted came after them. */
	if (__atomic_load_n(&conn->sleepers, __ATOMIC_SEQ_CST) > 0 &&
	    stream_post_raw_locked(conn, STK_MSG_SLEEP, conn->rx_seq, NULL, 0, false) == 0)
		__atomic_store_n(&conn->sleep_announced, true, __ATOMIC_SEQ_CST);
	stream_changed(conn);
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

/* ---- liveness ---- */

/* The kernel connection said something (readable/hup). Before the peer's
 * MIGRATE it carries only doorbells (stk_stream.h, "Sleeping"): they are taken
 * as far as the peer's messages counted them (a byte not counted yet is a
 * doorbell whose message follows, or the stream of a peer that migrated: its
 * MIGRATE left before and is near; either way progress tells). EOF or an error
 * means the peer closed its socket or died: a graceful close sends FIN|CLOSE on
 * the fabric first; give it a short grace to arrive, else the peer died: reset. */
void stk_conn_check_liveness(struct stk_conn *conn)
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
		stream_progress(conn); /* the messages counting the doorbells come first */
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
				stream_protocol_reset(conn, n > 0 ? "bytes on the liveness channel"
							   : "peer closed its kernel socket without FIN (peer died)");
			conn->peer_closed = true;
			pthread_mutex_unlock(&conn->lock);
			return;
		}
		pthread_mutex_unlock(&conn->lock);
		if (n > 0 && round < 64)
			stream_cpu_relax(); /* a doorbell's message is posted right after the byte */
		else
			stream_sleep_ns(round < 64 ? SLEEP_MIN_NS : 1000000ull);
	}
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
	} else if (stream_post_locked(conn, STK_MSG_SLEEP, conn->rx_seq, NULL, 0, false) == 0) {
		__atomic_store_n(&conn->sleep_announced, true, __ATOMIC_RELAXED);
		ret = STK_SLEEP_SENT;
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

