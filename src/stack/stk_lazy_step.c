/* The lazy negotiation's state machine: one step of a conn's negotiation,
 * by stage, under its lock and never blocking. Contracts in stk_lazy.h,
 * protocol in stk_nego.h. */
#include "config.h"
#include "stack/stk_lazy_int.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void lazy_set_stage(struct stk_lazy *l, enum stage st)
{
	int old = __atomic_load_n(&l->conn->phase, __ATOMIC_RELAXED);
	l->stage = st;
	int phase = phase_of(st);
	if (phase != old) {
		__atomic_store_n(&l->conn->phase, phase, __ATOMIC_RELEASE);
		l->changed = true;
	}
}

/* The conn is on the fabric (phase FABRIC): the negotiation is over. */
static void accelerated(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	l->stage = DONE;
	stk_conn_count_accel(stk_fab_name(conn->fab));
	l->changed = true;
	STK_DBG("fd %d: accelerated over %s (slot %u)", l->app_fd, stk_fab_name(conn->fab),
		conn->slot);
}

static void to_fabric(struct stk_lazy *l)
{
	stk_conn_enter_fabric(l->conn);
	accelerated(l);
}

static void to_kernel(struct stk_lazy *l)
{
	lazy_set_stage(l, DONE);
}

bool lazy_get_addrs(struct stk_lazy *l)
{
	if (l->addrs)
		return true;
	socklen_t plen = sizeof(l->peer), llen = sizeof(l->local);
	if (stk_sys.getpeername(l->conn->fd, (struct sockaddr *)&l->peer, &plen) != 0 ||
	    stk_sys.getsockname(l->conn->fd, (struct sockaddr *)&l->local, &llen) != 0)
		return false;
	l->addrs = true;
	return true;
}

/* A whole record of ours was decoded (maybe of another version): take it off
 * the stream. A malformed one stays: its length field is the peer's word, and
 * the bytes it covers may be the app's (a record cut short, then data); the
 * connection goes to the kernel with every byte as the peer sent it. */
static void consume(struct stk_lazy *l, int decoded, size_t len)
{
	if ((decoded == 0 || decoded == -EPROTONOSUPPORT) && len)
		stk_nego_consume(l->conn->fd, len);
}

/* The first record is not whole yet (a peek said -EAGAIN): nothing there, or
 * a record begun. A libfabsock peer sends a record in one write: one begun must
 * be whole within STK_NEGO_RECORD_MS and before the peer's end of stream, else
 * it is a protocol violation and the connection goes to the kernel, nothing
 * consumed (stk_lazy.h). True when it went there. */
static bool record_cut(struct stk_lazy *l)
{
	int inq = 0;
	if (stk_sys.ioctl(l->conn->fd, SIOCINQ, &inq) != 0 || inq <= 0) {
		l->cut_deadline = 0;
		return false;
	}
	struct pollfd p = { .fd = l->conn->fd, .events = POLLRDHUP };
	bool ended = stk_sys.poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
	uint64_t now = stk_now_ns();
	if (!l->cut_deadline)
		l->cut_deadline = now + (uint64_t)STK_NEGO_RECORD_MS * 1000000ull;
	if (!ended && now < l->cut_deadline)
		return false;
	l->cut_deadline = 0;
	struct stk_attach_info info;
	stk_conn_fall_back(&info, STK_C_FALLBACK_GARBAGE, l->app_fd,
			   "a negotiation record from the peer cut short (%d bytes, %s)", inq,
			   ended ? "then end of stream" : "not completed in time");
	to_kernel(l);
	return true;
}

static void io_fallback(struct stk_lazy *l, int err)
{
	if (err == -EBADF || err == -ENOTSOCK)
		l->priv_lost = true; /* the number may be the app's by now: never close it */
	struct stk_attach_info info;
	stk_conn_fall_back(&info, STK_C_FALLBACK_IO, l->app_fd,
			   "kernel connection failed during the negotiation: %s",
			   err == -ECONNRESET ? "end of stream or reset" : strerror(-err));
	to_kernel(l);
}

/* A stk_nego_peek result that says the kernel connection failed (end of
 * stream, an error), as opposed to a record, a foreign or malformed one, or
 * nothing yet. */
static bool kernel_failed(int r)
{
	return r == -ECONNRESET ||
	       (r < 0 && r != -EAGAIN && r != -EPROTO && r != -EPROTONOSUPPORT && r != -EBADMSG);
}

void lazy_send_or_fail(struct stk_lazy *l, const struct stk_nego_msg *msg)
{
	int ret = stk_nego_send_now(l->conn->fd, msg);
	if (ret)
		STK_DBG("fd %d: negotiation record not sent: %s", l->app_fd, strerror(-ret));
}

static void begin_handshake(struct stk_lazy *l)
{
	l->hs_posted = false;
	l->deadline = stk_now_ns() + (uint64_t)STK_NEGO_HANDSHAKE_MS * 1000000ull;
	lazy_set_stage(l, HANDSHAKE);
}


/* C_WAIT_HELLO and our record (length len) is first: a CANCEL right behind it
 * means the server already gave up on us: remove both. */
static bool hello_cancelled(struct stk_lazy *l, size_t len)
{
	struct stk_nego_msg next;
	size_t next_len = 0;
	if (!len || stk_nego_peek_at(l->conn->fd, len, &next, &next_len) != 0 ||
	    next.type != STK_NEGO_CANCEL)
		return false;
	stk_nego_consume(l->conn->fd, len);
	stk_nego_consume(l->conn->fd, next_len);
	stk_count_add(STK_C_NEGO_RECORDS_STRIPPED, 2);
	if (lazy_get_addrs(l))
		stk_nego_cache_put((struct sockaddr *)&l->peer, STK_PEER_CAPABLE);
	struct stk_attach_info info;
	stk_conn_fall_back(&info, STK_C_FALLBACK_TIMEOUT, l->app_fd,
			   "the server's app wrote before our app touched the connection "
			   "(server cancelled)");
	to_kernel(l);
	return true;
}

/* Client after its REPLY: the server's verdict is its first fabric message
 * (the fabric) or a CANCEL on the kernel stream (stk_nego.h rules 4 and 5); no
 * timeout of ours, the server decides. 1: the fabric; 0: the connection went
 * to the kernel (CANCEL, a failed kernel connection, garbage: logged and
 * counted); -1: nothing yet. Bytes that are not a record are the doorbells of
 * a server on the fabric (it writes nothing else there before a CANCEL): its
 * message is on its way. */
static int client_verdict(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	if (stk_conn_handshake_step(conn, &l->hs_posted, false) > 0)
		return 1;
	struct stk_attach_info info;
	struct stk_nego_msg msg;
	size_t len = 0;
	int r = stk_nego_peek(conn->fd, &msg, &len);
	if (r == -EAGAIN)
		return record_cut(l) ? 0 : -1;
	if (r == -EPROTO)
		return -1;
	if (kernel_failed(r)) {
		/* a server on the fabric closes its kernel connection only after
		 * our provider took its messages: look once more */
		if (stk_conn_handshake_step(conn, &l->hs_posted, false) > 0)
			return 1;
		io_fallback(l, r);
		return 0;
	}
	consume(l, r, len);
	if (r == 0 && msg.type == STK_NEGO_CANCEL)
		stk_conn_fall_back(&info, STK_C_FALLBACK_PROV_INIT, l->app_fd,
				   "%s: the server cancelled (it cannot use it, or saw no fabric "
				   "message from us) (status %u)", stk_fab_name(conn->fab),
				   msg.status);
	else
		stk_conn_fall_back(&info, STK_C_FALLBACK_GARBAGE, l->app_fd,
				   "a record other than CANCEL from the server after our REPLY");
	to_kernel(l);
	return 0;
}

/* Client after its REPLY: our fabric message out (already, unless the post
 * failed), progress driven, and the server decides. */
static bool client_handshake(struct stk_lazy *l)
{
	int v = client_verdict(l);
	if (v < 0)
		return false;
	if (v > 0)
		to_fabric(l);
	return true;
}

/* Server after a usable REPLY: it alone decides whether the fabric works and says so
 * before any app byte: its first fabric message (posted as it enters the
 * fabric), or a CANCEL on the kernel stream after STK_NEGO_HANDSHAKE_MS without
 * the client's message. */
static bool server_handshake(struct stk_lazy *l, enum driver by)
{
	/* the client's message is microseconds away: a short spin saves a sleep
	 * per connection, when the thread has nothing else to do (a spin per conn
	 * of a burst would delay the others' steps, their clients' messages
	 * among them); app threads wait in slices instead */
	uint64_t spin_end = by == BY_THREAD && lazy_thread_idle ? stk_now_ns() + HS_SPIN_NS : 0;
	int r;
	while ((r = stk_conn_handshake_enter(l->conn, &l->hs_posted)) == 0 &&
	       stk_now_ns() < spin_end)
		stk_wait_cpu_relax();
	if (r == 0 && stk_now_ns() < l->deadline)
		return false;
	if (r > 0) {
		/* our bytes sent from now on wait in the client's buffer until it
		 * has seen our first message */
		accelerated(l);
		return true;
	}
	struct stk_nego_msg verdict;
	stk_conn_make_decision(&verdict, STK_NEGO_CANCEL, STK_NEGO_CANCEL_HANDSHAKE);
	int ret = stk_nego_send_now(l->conn->fd, &verdict);
	if (ret)
		io_fallback(l, ret); /* the client learns it from its kernel connection */
	else {
		struct stk_attach_info info;
		stk_conn_fall_back(&info, STK_C_FALLBACK_PROV_INIT, l->app_fd,
				   "%s: no fabric message from the client within %d ms",
				   stk_fab_name(l->conn->fab), STK_NEGO_HANDSHAKE_MS);
		to_kernel(l);
	}
	return true;
}

/* C_CONNECTING: the kernel connect ended (or not yet). */
static bool step_connecting(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	struct pollfd pfd = { .fd = conn->fd, .events = POLLOUT };
	if (stk_sys.poll(&pfd, 1, 0) <= 0)
		return false;
	if (pfd.revents & (POLLERR | POLLHUP)) {
		/* the app reads the error itself (SO_ERROR, its next call) */
		to_kernel(l);
		return true;
	}
	if (!(pfd.revents & POLLOUT))
		return false;
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	int domain = stk_sys.getsockname(conn->fd, (struct sockaddr *)&sa, &salen) == 0
			     ? sa.ss_family : AF_INET;
	stk_nego_unmark(conn->fd, domain);
	lazy_set_stage(l, C_WAIT_HELLO);
	return true;
}

/* C_WAIT_HELLO: the server's first record decides (answered in a call of the
 * app only). */
static bool step_wait_hello(struct stk_lazy *l, enum driver by)
{
	struct stk_conn *conn = l->conn;
	struct stk_attach_info info;
	struct stk_nego_msg msg;
	size_t len = 0;
	int r = stk_nego_peek(conn->fd, &msg, &len);
	if (r == -EAGAIN)
		return record_cut(l);
	if (kernel_failed(r)) {
		io_fallback(l, r);
		return true;
	}
	if (r != -EPROTO) {
		if (hello_cancelled(l, len))
			return true;
		if (by == BY_THREAD) {
			if (r == 0 && msg.type == STK_NEGO_HELLO)
				lazy_warm_up();
			return false;
		}
	}
	if (!lazy_get_addrs(l)) {
		io_fallback(l, -errno);
		return true;
	}
	if (r == 0 && msg.type == STK_NEGO_HELLO && by == BY_APP &&
	    !__atomic_load_n(&lazy_providers_ready, __ATOMIC_ACQUIRE)) {
		/* The first libfabsock peer of this process: opening the
		 * providers loads libfabric and starts DPDK (~0.4 s), here or in
		 * the warm-up the thread may have begun (then this waits for it).
		 * Tell the server first, so that a server that writes first waits
		 * for our REPLY. */
		struct stk_nego_msg hold;
		stk_conn_make_decision(&hold, STK_NEGO_REPLY, STK_NEGO_HOLD);
		lazy_send_or_fail(l, &hold);
		stk_conn_open_providers();
		__atomic_store_n(&lazy_providers_ready, 1, __ATOMIC_RELEASE);
	}
	consume(l, r, len);
	if (by == BY_REFUSE && r != -EPROTO) {
		struct stk_nego_msg reject;
		stk_conn_make_decision(&reject, STK_NEGO_REPLY, STK_NEGO_REJECT_LATE);
		lazy_send_or_fail(l, &reject);
		stk_nego_cache_put((struct sockaddr *)&l->peer, STK_PEER_CAPABLE);
		stk_conn_fall_back(&info, STK_C_FALLBACK_STDIO, l->app_fd,
				   "the app uses the socket where libfabsock cannot "
				   "follow (stdio, aio, exec, fd passing, SO_ZEROCOPY)");
		lazy_set_stage(l, STRIP_CANCEL);
		return true;
	}
	struct stk_nego_msg reply;
	int ret = stk_conn_answer_hello(conn, r, &msg, (struct sockaddr *)&l->peer,
					(struct sockaddr *)&l->local, &reply, &info);
	if (ret == 0) {
		/* our fabric message first: the server finds it when the
		 * REPLY arrives and answers with its own at once (stk_nego.h
		 * rule 5) */
		begin_handshake(l);
		stk_conn_handshake_step(conn, &l->hs_posted, false);
		lazy_send_or_fail(l, &reply);
		return true;
	}
	if (reply.type)
		lazy_send_or_fail(l, &reply);
	/* our record: the server may still CANCEL (its app wrote first) */
	lazy_set_stage(l, r == -EPROTO ? DONE : STRIP_CANCEL);
	return true;
}

/* S_WAIT_REPLY: the client's first record decides. */
static bool step_wait_reply(struct stk_lazy *l, enum driver by)
{
	struct stk_conn *conn = l->conn;
	struct stk_attach_info info;
	struct stk_nego_msg msg;
	size_t len = 0;
	int r = stk_nego_peek(conn->fd, &msg, &len);
	if (r == -EAGAIN)
		return record_cut(l);
	if (kernel_failed(r)) {
		io_fallback(l, r);
		return true;
	}
	consume(l, r, len);
	if (r == 0 && msg.type == STK_NEGO_REPLY && msg.status == STK_NEGO_HOLD) {
		l->held = true; /* a real REPLY follows: a write waits longer */
		return true;
	}
	if (by == BY_REFUSE && r != -EPROTO) {
		struct stk_nego_msg cancel_msg;
		stk_conn_make_decision(&cancel_msg, STK_NEGO_CANCEL, STK_NEGO_CANCEL_APP_WROTE);
		if (r == 0 && msg.status == STK_NEGO_ACCEPT)
			lazy_send_or_fail(l, &cancel_msg);
		stk_conn_fall_back(&info, STK_C_FALLBACK_STDIO, l->app_fd,
				   "the app uses the socket where libfabsock cannot "
				   "follow (stdio, aio, exec, fd passing, SO_ZEROCOPY)");
		to_kernel(l);
		return true;
	}
	bool cancel;
	int ret = stk_conn_take_reply(conn, r, &msg, &l->hello, l->fabs,
			      (struct sockaddr *)&l->peer, &cancel, &info);
	if (ret == 0) {
		begin_handshake(l); /* the client's fabric message is (nearly) here */
		return true;
	}
	struct stk_nego_msg decision;
	stk_conn_make_decision(&decision, STK_NEGO_CANCEL, STK_NEGO_CANCEL_UNUSABLE);
	if (cancel)
		lazy_send_or_fail(l, &decision);
	to_kernel(l);
	return true;
}

/* STRIP_HELLO, STRIP_CANCEL, STRIP_REPLY: remove a late record of ours. */
static bool step_strip(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	struct stk_nego_msg msg;
	size_t len = 0;
	/* The app's bytes flow on the kernel now: a reset is the app's (its
	 * POLLERR, SO_ERROR, next call), a peek must not take it. (Before
	 * that, a reset may come from the peer closing with our records
	 * unread, where the kernel alone would have sent a FIN: a peek
	 * taking it leaves the app the end of stream.) */
	if (stk_nego_error_pending(conn->fd)) {
		to_kernel(l);
		return true;
	}
	int r = stk_nego_peek(conn->fd, &msg, &len);
	if (r == -EAGAIN)
		return record_cut(l);
	uint16_t want = l->stage == STRIP_HELLO ? STK_NEGO_HELLO
		      : l->stage == STRIP_CANCEL ? STK_NEGO_CANCEL : STK_NEGO_REPLY;
	if ((r == 0 || r == -EPROTONOSUPPORT) && msg.type == want) {
		stk_nego_consume(conn->fd, len);
		stk_count(STK_C_NEGO_RECORDS_STRIPPED);
		if (want == STK_NEGO_HELLO) {
			/* the destination is libfabsock, only slow: wait longer next
			 * time (P2) */
			STK_INFO("fd %d: removed a HELLO that arrived after the client "
				 "fell back", l->app_fd);
			if (lazy_get_addrs(l))
				stk_nego_cache_put((struct sockaddr *)&l->peer,
						   STK_PEER_CAPABLE);
			lazy_set_stage(l, STRIP_CANCEL);
			return true;
		}
	}
	to_kernel(l);
	return true;
}

/* One step; returns true when the stage changed (call again). */
bool lazy_step(struct stk_lazy *l, enum driver by)
{
	switch (l->stage) {
	case C_CONNECTING:
		return step_connecting(l);
	case C_WAIT_HELLO:
		return step_wait_hello(l, by);
	case HANDSHAKE:
		return l->client ? client_handshake(l) : server_handshake(l, by);
	case S_WAIT_REPLY:
		return step_wait_reply(l, by);
	case STRIP_HELLO:
	case STRIP_CANCEL:
	case STRIP_REPLY:
		return step_strip(l);
	case DONE:
		return false;
	}
	return false;
}

void lazy_advance(struct stk_lazy *l, enum driver by)
{
	if (l->stage != DONE && !priv_same(l)) {
		io_fallback(l, -EBADF); /* its negotiation cannot go on: the kernel */
		return;
	}
	/* A forked child cannot take a connection onto its parent's fabric
	 * endpoint: what it inherited while negotiating goes to the kernel. */
	if (by == BY_APP && getpid() != l->pid)
		by = BY_REFUSE;
	for (int i = 0; i < 16 && lazy_step(l, by); i++)
		;
}
