/* The stream's receive side: delivery of fabric messages into the ring, recv,
 * urgent data. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_counters.h"
#include "stack/stk_cork.h"
#include "stack/stk_log.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* ---- the receive ring ---- */

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

/* The app consumed n bytes (lock held): credit to give back; a read past the
 * urgent mark ends it (Linux clears urg_data once copied_seq passes urg_seq,
 * whether or not the urgent byte was taken). */
static void ring_consume(struct stk_conn *conn, size_t n)
{
	conn->ring_head = (conn->ring_head + n) % conn->ring_size;
	conn->ring_count -= n;
	conn->credit_owed += n;
	if (__builtin_expect(conn->urg != 0, 0) && stream_rx_pos(conn) > conn->urg_seq)
		conn->urg = 0;
}

/* ---- urgent data (only reached while a mark is pending or arrives) ---- */

/* SO_OOBINLINE lives on the kernel socket (the app sets it there): read it
 * when it matters, never on the data fast path. */
bool stream_oob_inline(const struct stk_conn *conn)
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
	if (seq < stream_rx_pos(conn) || (conn->urg && seq <= conn->urg_seq))
		return;
	if (conn->urg && conn->urg_seq == stream_rx_pos(conn) && !stream_oob_inline(conn))
		ring_consume(conn, 1);
	uint8_t byte;
	ring_peek(conn, (size_t)(seq - stream_rx_pos(conn)), &byte, 1);
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
	uint64_t pos = stream_rx_pos(conn);
	size_t n = conn->ring_count < want ? conn->ring_count : want;
	if (conn->urg_seq < pos)
		return n;
	uint64_t off = conn->urg_seq - pos;
	if (off == 0) {
		if (copied) {
			*stop = true;
			return 0;
		}
		if (stream_oob_inline(conn))
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
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	ssize_t ret = -EINVAL;
	if (conn->urg == STK_URG_VALID && !stream_oob_inline(conn)) {
		if (len)
			*(uint8_t *)buf = conn->urg_byte;
		if (!(flags & MSG_PEEK))
			conn->urg = STK_URG_READ;
		ret = len ? 1 : 0;
	}
	pthread_mutex_unlock(&conn->lock);
	return ret;
}

/* ---- delivery (stk_fab_progress, cq lock held) ---- */

void stream_protocol_reset(struct stk_conn *conn, const char *why)
{
	__atomic_store_n(&conn->generation, conn->generation + 1, __ATOMIC_RELEASE);
	if (!conn->reset) {
		STK_WARN("fd %d: fabric connection reset: %s", conn->fd, why);
		stk_count(STK_C_CONN_RESETS);
	}
	/* as a kernel reset: the bytes received before stay readable (recv
	 * returns them, then ECONNRESET) */
	conn->reset = true;
	stream_changed(conn);
}

void stk_stream_deliver(struct stk_fab *fab, const void *msg, size_t len)
{
	(void)fab;
	struct stk_msg_in in;
	if (stk_msg_parse(msg, len, &in) != 0) {
		stk_count(STK_C_FAB_STRAY_MSGS);
		return;
	}
	struct stk_conn *conn = __atomic_load_n(&stream_conn_table[in.slot], __ATOMIC_ACQUIRE);
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
		stream_protocol_reset(conn, "sequence gap");
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
			stream_peer_sleeps_locked(conn, hlen);
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
					stream_protocol_reset(conn, "bad data message");
				else if (payload > conn->ring_size - conn->ring_count)
					stream_protocol_reset(conn, "peer exceeded its credit");
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
				stream_peer_migrates_locked(conn);
		}
		if (!quiet) {
			stream_peer_gone_answers_locked(conn);
			stream_changed(conn);
		}
	}
	stk_stat_conn_io(conn);
	pthread_mutex_unlock(&conn->lock);
}

/* ---- recv ---- */

/* Sets *to_kernel when the ring is empty after the peer's MIGRATE: the rest
 * comes from the kernel connection. */
static ssize_t recv_loop(struct stk_conn *conn, void *buf, size_t len, int flags,
			 struct stream_block_wait *bw, bool *to_kernel)
{
	bool nonblock = conn->nonblock || (flags & MSG_DONTWAIT);
	bool peek = flags & MSG_PEEK;
	bool waitall = flags & MSG_WAITALL;
	uint8_t *dst = buf;
	size_t got = 0;
	for (;;) {
		stream_progress(conn);
		pthread_mutex_lock(&conn->lock);
		conn->tx_run = false; /* a receive between sends: not a streaming sender */
		if (__builtin_expect(conn->cork_len != 0, 0))
			stream_cork_flush_locked(conn); /* the peer may wait for them to answer */
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
			stream_grant_credit(conn, false);
		}
		/* a reset ends the call with what it has (nothing more comes) */
		bool eof = ((conn->fin_rcvd || conn->rd_shut) && conn->ring_count == 0) ||
			   conn->reset;
		/* len 0: as the kernel, 0 once something is readable (or EOF), else
		 * EAGAIN or wait */
		bool done = len == 0 ? conn->ring_count > 0 || eof
				     : got == len || (got > 0 && (!waitall || stop)) || eof;
		stk_stat_conn_io(conn);
		pthread_mutex_unlock(&conn->lock);
		if (done)
			return (ssize_t)got;
		if (nonblock)
			return got ? (ssize_t)got : -EAGAIN;
		int w = stream_block_wait(conn, POLLIN, SO_RCVTIMEO, bw, NULL);
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
	struct stream_block_wait bw = { .ready = false };
	bool to_kernel = false;
	uint32_t wake_seq = __atomic_load_n(&conn->tx_wake_seq, __ATOMIC_RELAXED);
	ssize_t ret = recv_loop(conn, buf, len, flags, &bw, &to_kernel);
	stk_wait_restore_signals(&bw.sigs);
	stream_catch_up(conn, wake_seq); /* a credit (or staged bytes) went out */
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

/* ---- receive-side state ---- */

size_t stk_conn_readable(struct stk_conn *conn)
{
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	size_t n = conn->ring_count;
	if (conn->urg && conn->urg_seq >= stream_rx_pos(conn) && !stream_oob_inline(conn))
		n = (size_t)(conn->urg_seq - stream_rx_pos(conn)); /* Linux's tcp_inq */
	n += stk_leftover_count(conn->left);
	bool kernel = conn->mig_rx;
	pthread_mutex_unlock(&conn->lock);
	int k = 0;
	if (kernel && stk_sys.ioctl(conn->fd, FIONREAD, &k) == 0 && k > 0)
		n += (size_t)k;
	return n;
}

int stk_conn_atmark(struct stk_conn *conn)
{
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	int at = conn->urg && conn->urg_seq == stream_rx_pos(conn);
	pthread_mutex_unlock(&conn->lock);
	return at;
}

int stk_conn_take_error(struct stk_conn *conn)
{
	stream_progress(conn);
	pthread_mutex_lock(&conn->lock);
	int err = 0;
	if (conn->reset && !conn->reset_reported) {
		conn->reset_reported = true;
		err = ECONNRESET;
	}
	pthread_mutex_unlock(&conn->lock);
	return err;
}
