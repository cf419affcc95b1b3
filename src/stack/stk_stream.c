/* The stream's core: readiness, the first fabric message of a connection, and
 * the hooks the layers below call. The module's other files are listed in
 * stk_stream_int.h. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_cork.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <poll.h>

#define STARVE_RETRY_NS 50000ull    /* provider had no room: say POLLOUT again after this */

/* ---- progress and change notices ---- */

void stk_conn_progress(struct stk_conn *conn)
{
	stream_progress(conn);
}

void stk_conn_changed(struct stk_conn *conn)
{
	stk_stat_conn_state(conn);
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

struct stk_watch *stk_conn_watch(struct stk_conn *conn)
{
	return &conn->watch;
}

/* ---- the first fabric message each way ---- */

int stk_conn_handshake_step(struct stk_conn *conn, bool *posted, bool answer_only)
{
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	bool heard = conn->rx_seq > 0;
	if (!*posted && (heard || !answer_only))
		*posted = stream_post_locked(conn, STK_MSG_CREDIT, 0, NULL, 0, false) == 0;
	bool dead = conn->reset;
	pthread_mutex_unlock(&conn->lock);
	/* heard: the fabric works; a reset right behind the first message is
	 * the app's business (it sees ECONNRESET on the fabric connection) */
	if (heard && (*posted || dead))
		return 1;
	return dead ? -ECONNRESET : 0;
}

int stk_conn_handshake_enter(struct stk_conn *conn, bool *posted)
{
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	bool heard = conn->rx_seq > 0;
	if (heard && !*posted)
		*posted = stream_post_locked(conn, STK_MSG_CREDIT, 0, NULL, 0, false) == 0;
	bool dead = conn->reset;
	/* under the lock that delivery takes: what the client sends once it saw
	 * our message is delivered to a conn on the fabric, readable at once as
	 * the kernel's bytes are once the write returned */
	bool entered = heard && (*posted || dead);
	if (entered)
		stream_enter_fabric_locked(conn);
	pthread_mutex_unlock(&conn->lock);
	if (entered)
		return 1;
	return dead ? -ECONNRESET : 0;
}

int stk_conn_handshake(struct stk_conn *conn, int timeout_ms)
{
	uint64_t deadline = stk_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	bool posted = false;
	for (;;) {
		int ret = stk_conn_handshake_enter(conn, &posted);
		if (ret)
			return ret > 0 ? 0 : ret;
		if (stk_now_ns() > deadline)
			return -ETIMEDOUT;
		stream_sleep_ns(posted ? SLEEP_MIN_NS : 1000);
	}
}

/* ---- readiness ---- */

short stk_stream_events(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return stk_migrated_events(conn, stk_leftover_count(conn->left));
	stream_progress(conn);
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
	stream_grant_credit(conn, false);
	size_t readable = conn->ring_count;
	if (__builtin_expect(conn->urg != 0, 0)) {
		if (conn->urg == STK_URG_VALID)
			ev |= POLLPRI;
		/* Linux: at the mark the urgent byte does not make the socket readable */
		if (conn->urg_seq == stream_rx_pos(conn) && !stream_oob_inline(conn))
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
			stream_changed(conn);
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

/* ---- hooks of the layers below ---- */

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
