/* The stream's transmit side: messages, credit, staged (corked) bytes, send. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_config.h"
#include "stack/stk_cork.h"
#include "stack/stk_counters.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_time.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define CLOSE_DRAIN_NS 1000000000ull /* room for a control message: at most this */

/* ---- messages ---- */

/* Post one message as it is (lock held): stream_post_locked without the staged
 * bytes' check. */
int stream_post_raw_locked(struct stk_conn *conn, uint16_t flags, uint32_t len_field,
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
		stream_ring_locked(conn);
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
			__atomic_fetch_add(&stream_replies_pending, 1, __ATOMIC_RELAXED);
		}
		return ret == -FI_EAGAIN ? -EAGAIN : ret;
	}
	conn->tx_seq++;
	conn->msgs_tx++;
	if (__builtin_expect(conn->bell_owed != BELL_OWED_NONE, 0))
		stream_bell_owed_clear(conn);
	if (wakes) {
		/* atomic: stream_catch_up reads it without the lock */
		__atomic_store_n(&conn->tx_wake_seq, conn->tx_seq, __ATOMIC_RELAXED);
		/* the peer clears its mark on this message: announce again */
		if (__builtin_expect(conn->sleep_announced, 0))
			stream_announce_again_locked(conn);
	}
	return 0;
}

/* ---- coalesced small sends (stk_cork.h) ---- */

/* The staged bytes leave as one DATA message (lock held); a reset conn has
 * nothing more to send. */
int stream_cork_flush_locked(struct stk_conn *conn)
{
	if (!conn->reset) {
		int ret = stream_post_raw_locked(conn, STK_MSG_DATA, conn->cork_len, conn->cork,
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
		      stream_cork_flush_locked(conn) == 0;
	pthread_mutex_unlock(&conn->lock);
	/* the app may be idle outside the library: its peer's SLEEP is ours to see */
	stream_catch_up(conn, wake_seq);
	/* A provider with manual progress (tcp) moves the message only when driven,
	 * and the app may be asleep on the wait fd, which a posted send does not
	 * wake: drive it once (its completions then wake the app as usual). */
	if (posted)
		stream_progress(conn);
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
		int ret = stream_cork_flush_locked(conn);
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

/* Send a control message, waiting (bounded) for provider room. */
int stream_post_control(struct stk_conn *conn, uint16_t flags, bool tracked)
{
	uint64_t deadline = stk_now_ns() + CLOSE_DRAIN_NS;
	for (;;) {
		pthread_mutex_lock(&conn->lock);
		/* after our MIGRATE the kernel connection says it (shutdown, close) */
		int ret = conn->mig_tx ? 0 : stream_post_locked(conn, flags, 0, NULL, 0, tracked);
		pthread_mutex_unlock(&conn->lock);
		if (ret != -EAGAIN)
			return ret;
		if (stk_now_ns() > deadline)
			return -ETIMEDOUT;
		stream_progress(conn);
		stream_cpu_relax();
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

/* ---- send ---- */

/* A blocking send whose provider has no room while the peer still grants
 * credit looks at the kernel connection at most this often: a peer that died
 * never frees its queue, and POLLOUT (credit and local buffers) says nothing
 * of it, so without the look the send would retry forever. */
#define FULL_LIVENESS_NS 1000000ull

/* Sets *to_kernel when our MIGRATE is out: the rest goes on the kernel. */
static ssize_t send_loop(struct stk_conn *conn, const void *buf, size_t len, int flags,
			 struct stream_block_wait *bw, bool *to_kernel)
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
			/* one ring for the messages of this pass (stk_fab_batch_begin) */
			stk_fab_batch_begin();
			while (sent < len && conn->tx_credits > 0 && !err) {
				size_t chunk = len - sent;
				if (chunk > conn->tx_credits)
					chunk = (size_t)conn->tx_credits;
				if (chunk > seg_payload)
					chunk = seg_payload;
				uint16_t f = STK_MSG_DATA | (sent + chunk == len ? urg : 0);
				int ret = stream_post_locked(conn, f, (uint32_t)chunk, src + sent, chunk,
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
			stk_fab_batch_end();
		}
		stk_stat_conn_io(conn);
		pthread_mutex_unlock(&conn->lock);
		if (sent == len)
			return (ssize_t)sent;
		if (err)
			return sent ? (ssize_t)sent : err;
		if (nonblock && sent) {
			starve(conn);
			return (ssize_t)sent;
		}
		stream_progress(conn);
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
			stream_cpu_relax();
			continue;
		}
		if (full) {
			uint64_t now = stk_now_ns();
			if (now - live_checked >= FULL_LIVENESS_NS) {
				live_checked = now;
				stk_conn_check_liveness(conn); /* a dead peer: reset, after its grace */
			}
		}
		int w = stream_block_wait(conn, POLLOUT, SO_SNDTIMEO, bw, NULL);
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
	struct stream_block_wait bw = { .ready = false };
	bool to_kernel = false;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	ssize_t ret = send_loop(conn, buf, len, flags, &bw, &to_kernel);
	stk_wait_restore_signals(&bw.sigs);
	stream_catch_up(conn, wake_seq);
	if (to_kernel && (size_t)ret < len &&
	    !(ret > 0 && (conn->nonblock || (flags & MSG_DONTWAIT)))) {
		ssize_t k = stk_migrated_send(conn, (const uint8_t *)buf + ret, len - (size_t)ret,
					      flags);
		if (k < 0)
			return ret ? ret : k;
		ret += k;
	} else if ((flags & MSG_OOB) && ret > 0 && (size_t)ret < len) {
		/* A partial urgent send: as Linux, the last byte that went is urgent. */
		stream_post_control(conn, STK_MSG_URG, false);
	}
	return ret;
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

size_t stk_conn_tx_room(struct stk_conn *conn)
{
	pthread_mutex_lock(&conn->lock);
	uint64_t credits = conn->tx_credits;
	pthread_mutex_unlock(&conn->lock);
	return credits > SIZE_MAX ? SIZE_MAX : (size_t)credits;
}
