/* The lazy negotiation: state machine, app-side settling, negotiation thread.
 * Contracts in stk_lazy.h, protocol in stk_nego.h. */
#include "config.h"
#include "stack/stk_lazy.h"
#include "stack/stk_config.h"
#include "stack/stk_conn.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_wait.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_thread.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HS_SPIN_NS 200000ull     /* handshake: spin this long for the peer's message */
#define HS_POLL_NS 100000ull     /* handshake in progress: look again after 100 µs */
#define BUSY_POLL_NS 1000000ull  /* a conn another thread drives: look again in 1 ms */
#define SETTLE_SLICE_NS 1000000ull

enum stage {
	C_CONNECTING,   /* client: kernel connect in progress */
	C_WAIT_HELLO,   /* client: connected, the server's first record decides */
	HANDSHAKE,      /* client: fabric message and REPLY sent, the server decides;
			 * server: usable REPLY, waits for the client's fabric message */
	S_WAIT_REPLY,   /* server: HELLO sent, the client's first record decides */
	STRIP_HELLO,    /* client fell back by writing: remove a late HELLO (then CANCEL) */
	STRIP_CANCEL,   /* client fell back after a HELLO: remove a CANCEL */
	STRIP_REPLY,    /* server cancelled: remove a REPLY that crossed the CANCEL */
	DONE,
};

struct stk_lazy {
	pthread_mutex_t lock;     /* the driver's: held while advancing (never blocks) */
	/* A leaf lock (nothing is taken under it): release_priv closes conn->fd
	 * under it, and stk_lazy_events, which may hold no lock of this file,
	 * uses conn->fd under it, so that it never asks the kernel about a number
	 * closed meanwhile (POLLNVAL for the app's valid fd) or reused (another
	 * socket's readiness). */
	pthread_mutex_t fd_lock;
	struct stk_conn *conn;
	int app_fd;               /* the log; readiness once priv is released */
	pid_t pid;                /* the process that created it */
	bool client;
	/* protected by lock */
	enum stage stage;
	bool addrs;               /* peer/local known */
	struct sockaddr_storage peer, local;
	struct stk_nego_msg hello;            /* server: what we offered */
	struct stk_fab *fabs[STK_NEGO_PROV_MAX];
	bool hs_posted;
	uint64_t deadline;        /* server in HANDSHAKE: CANCEL after */
	bool changed;             /* phase changed: tell the epoll layer (once) */
	bool priv_lost;           /* the app closed our fd number behind our back */
	ino_t priv_ino;           /* the socket our private fd is (immutable) */
	bool held;                /* server: the client sent HOLD */
	uint64_t cut_deadline;    /* a record begun must be whole by then (0: none begun) */
	unsigned watch_soon;      /* fabric watch: looks again in a row (bounded) */
	int app_waiting;          /* atomic: an app thread drives it now (the thread
				   * keeps off: taking the records it waits for
				   * would leave it asleep) */
	/* protected by reg_lock */
	bool listed;              /* in the registry and the thread's epoll set */
	bool watching;            /* registered for the fabric watch (below) */
	struct stk_lazy *prev, *next;   /* registry */
	int queue;                /* Q_NONE, Q_TODO, Q_AGAIN or Q_TIMER */
	uint64_t timer_ns;        /* Q_TIMER: visit then (a copy of cut_deadline) */
	struct stk_lazy *qprev, *qnext; /* that queue; qnext: the graveyard once forgotten */
};

static int providers_ready; /* atomic: this process opened its providers once */
static int warm_started;    /* atomic: the warm-up below was started (once) */
static int warm_running;    /* atomic: a warm-up thread is inside libfabric */
static __thread bool thread_idle; /* the negotiation thread has no other conn to visit */

static int phase_of(enum stage st)
{
	switch (st) {
	case STRIP_HELLO:
	case STRIP_CANCEL:
	case STRIP_REPLY:
		return STK_PHASE_STRIP;
	case DONE:
		return STK_PHASE_KERNEL; /* FABRIC is set explicitly */
	default:
		return STK_PHASE_PENDING;
	}
}

/* The warm-up: the first HELLO this process sees (a libfabsock peer, so the
 * fabric is about to be wanted) opens the providers on a thread of ours while
 * the app has not answered yet: a client that connects, pauses, then writes
 * (sockperf sleeps 2 s) no longer pays libfabric's and DPDK's start-up (~0.4 s,
 * seconds on a loaded machine) inside its first write. Only the open moves:
 * the client still answers in a call of its own app, and a process that meets
 * only plain peers never loads libfabric. An app call that needs the providers
 * meanwhile waits for the same open (stk_fab_get serialises). */
#define WARM_EXIT_WAIT_NS 10000000000ull /* exit waits for a warm-up this long at most */

static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER; /* warm_done's */
static pthread_cond_t warm_done = PTHREAD_COND_INITIALIZER; /* warm_running fell to 0 */

static void *warm_main(void *arg)
{
	(void)arg;
	stk_conn_open_providers();
	__atomic_store_n(&providers_ready, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&warm_lock);
	__atomic_store_n(&warm_running, 0, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&warm_done);
	pthread_mutex_unlock(&warm_lock);
	return NULL;
}

/* atexit: libfabric's destructors must not run while the warm-up is inside
 * it (registered after the stack's own handlers: runs before them). The
 * condition uses the realtime clock (the default): the bound is a safety net,
 * not a measurement. */
static void warm_wait(void)
{
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += (time_t)(WARM_EXIT_WAIT_NS / 1000000000ull);
	pthread_mutex_lock(&warm_lock);
	while (__atomic_load_n(&warm_running, __ATOMIC_ACQUIRE) &&
	       pthread_cond_timedwait(&warm_done, &warm_lock, &end) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&warm_lock);
}

static void warm_up(void)
{
	if (__atomic_load_n(&providers_ready, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&warm_started, 1, __ATOMIC_ACQ_REL))
		return;
	__atomic_store_n(&warm_running, 1, __ATOMIC_RELEASE);
	if (atexit(warm_wait) != 0 || stk_thread_start(warm_main, NULL, 8u << 20) != 0) {
		__atomic_store_n(&warm_running, 0, __ATOMIC_RELEASE);
		return; /* the app's answer opens them, as without a warm-up */
	}
	FSK_DBG("a libfabsock peer: opening the providers in the background");
}

static void set_stage(struct stk_lazy *l, enum stage st)
{
	int old = __atomic_load_n(&l->conn->phase, __ATOMIC_RELAXED);
	l->stage = st;
	int phase = phase_of(st);
	if (phase != old) {
		__atomic_store_n(&l->conn->phase, phase, __ATOMIC_RELEASE);
		l->changed = true;
	}
}

static void to_fabric(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	l->stage = DONE;
	stk_conn_count_accel(stk_fab_name(conn->fab));
	stk_conn_enter_fabric(conn);
	l->changed = true;
	FSK_DBG("fd %d: accelerated over %s (slot %u)", l->app_fd, stk_fab_name(conn->fab),
		conn->slot);
}

static void to_kernel(struct stk_lazy *l)
{
	set_stage(l, DONE);
}

/* Is the private fd still the socket it was? An app that closed it behind our
 * back (closefrom, close_range) may have the number again for a socket or file
 * of its own: never read, register or close that one. Sockets have inodes of
 * their own. No lock needed (an fstat). */
static bool priv_same(const struct stk_lazy *l)
{
	int fd = __atomic_load_n(&l->conn->fd, __ATOMIC_ACQUIRE);
	return !l->priv_lost && stk_sys_fd_is(fd, l->priv_ino);
}

static bool get_addrs(struct stk_lazy *l)
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

static void send_or_fail(struct stk_lazy *l, const struct stk_nego_msg *msg)
{
	int ret = stk_nego_send_now(l->conn->fd, msg);
	if (ret)
		FSK_DBG("fd %d: negotiation record not sent: %s", l->app_fd, strerror(-ret));
}

static void begin_handshake(struct stk_lazy *l)
{
	l->hs_posted = false;
	l->deadline = stk_now_ns() + (uint64_t)STK_NEGO_HANDSHAKE_MS * 1000000ull;
	set_stage(l, HANDSHAKE);
}

/* Who drives a step. The thread never answers a HELLO: a client commits to the
 * fabric only in a call of its app (a data call, poll/epoll, see stk_lazy.h), so
 * that an app that never touches its socket through us (stdio's internal reads)
 * is left on the kernel by the server's CANCEL. REFUSE: the app is about to use
 * the socket through a path we cannot follow: answer with a REJECT. */
enum driver { BY_THREAD, BY_APP, BY_REFUSE };

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
	if (get_addrs(l))
		stk_nego_cache_put((struct sockaddr *)&l->peer, STK_PEER_CAPABLE);
	struct stk_attach_info info;
	stk_conn_fall_back(&info, STK_C_FALLBACK_TIMEOUT, l->app_fd,
			   "the server's app wrote before our app touched the connection "
			   "(server cancelled)");
	to_kernel(l);
	return true;
}

/* Client waiting for the server's verdict on the kernel stream (READY or
 * CANCEL; stk_nego.h rules 4 and 5): no timeout of ours, the server decides.
 * 1: the record is want; 0: the connection went to the kernel (CANCEL, a
 * failed kernel connection, garbage: logged and counted); -1: nothing yet. */
static int client_verdict(struct stk_lazy *l, uint8_t want, const char *what,
			  const char *cancel_why)
{
	struct stk_attach_info info;
	struct stk_nego_msg msg;
	size_t len = 0;
	int r = stk_nego_peek(l->conn->fd, &msg, &len);
	if (r == -EAGAIN)
		return record_cut(l) ? 0 : -1;
	consume(l, r, len);
	if (r == 0 && msg.type == want)
		return 1;
	if (r == 0 && msg.type == STK_NEGO_CANCEL) {
		stk_conn_fall_back(&info, STK_C_FALLBACK_PROV_INIT, l->app_fd, "%s (status %u)",
				   cancel_why, msg.status);
	} else if (kernel_failed(r)) {
		io_fallback(l, r);
		return 0;
	} else {
		stk_conn_fall_back(&info, STK_C_FALLBACK_GARBAGE, l->app_fd,
				   "malformed %s from the server", what);
	}
	to_kernel(l);
	return 0;
}

/* Client after its REPLY: our fabric message out (already, unless the post
 * failed), progress driven, and the server's READY or CANCEL decides. */
static bool client_handshake(struct stk_lazy *l)
{
	stk_conn_handshake_step(l->conn, &l->hs_posted, false);
	char why[128];
	snprintf(why, sizeof(why), "%s: the server cancelled (it cannot use it, or saw no "
		 "fabric message from us)", stk_fab_name(l->conn->fab));
	int v = client_verdict(l, STK_NEGO_READY, "READY", why);
	if (v < 0)
		return false;
	if (v > 0)
		to_fabric(l);
	return true;
}

/* Server after a usable REPLY: it alone decides whether the fabric works and says so
 * on the kernel stream before any app byte (READY, or CANCEL after
 * STK_NEGO_HANDSHAKE_MS without the client's message). */
static bool server_handshake(struct stk_lazy *l, enum driver by)
{
	/* the client's message is microseconds away: a short spin saves a sleep
	 * per connection, when the thread has nothing else to do (a spin per conn
	 * of a burst would delay the others' steps, their clients' messages
	 * among them); app threads wait in slices instead */
	uint64_t spin_end = by == BY_THREAD && thread_idle ? stk_now_ns() + HS_SPIN_NS : 0;
	int r;
	while ((r = stk_conn_handshake_step(l->conn, &l->hs_posted, true)) == 0 &&
	       stk_now_ns() < spin_end)
		stk_wait_cpu_relax();
	if (r == 0 && stk_now_ns() < l->deadline)
		return false;
	struct stk_nego_msg verdict;
	stk_conn_make_decision(&verdict, r > 0 ? STK_NEGO_READY : STK_NEGO_CANCEL,
			       r > 0 ? STK_NEGO_ACCEPT : STK_NEGO_CANCEL_HANDSHAKE);
	/* On the fabric BEFORE the READY goes: the client may write the moment it
	 * reads it, and its bytes must be readable here at once, as the kernel's
	 * are once the write returned (our bytes sent meanwhile wait in the
	 * client's buffer until it reads the READY). */
	if (r > 0)
		to_fabric(l);
	int ret = stk_nego_send_now(l->conn->fd, &verdict);
	if (r > 0 && ret == 0)
		return true;
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

/* One step; returns true when the stage changed (call again). */
static bool step(struct stk_lazy *l, enum driver by)
{
	struct stk_conn *conn = l->conn;
	struct stk_attach_info info;
	struct stk_nego_msg msg;
	size_t len = 0;
	int r;
	switch (l->stage) {
	case C_CONNECTING: {
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
		set_stage(l, C_WAIT_HELLO);
		return true;
	}
	case C_WAIT_HELLO: {
		r = stk_nego_peek(conn->fd, &msg, &len);
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
					warm_up();
				return false;
			}
		}
		if (!get_addrs(l)) {
			io_fallback(l, -errno);
			return true;
		}
		if (r == 0 && msg.type == STK_NEGO_HELLO && by == BY_APP &&
		    !__atomic_load_n(&providers_ready, __ATOMIC_ACQUIRE)) {
			/* The first libfabsock peer of this process: opening the
			 * providers loads libfabric and starts DPDK (~0.4 s), here or in
			 * the warm-up the thread may have begun (then this waits for it).
			 * Tell the server first, so that a server that writes first waits
			 * for our REPLY. */
			struct stk_nego_msg hold;
			stk_conn_make_decision(&hold, STK_NEGO_REPLY, STK_NEGO_HOLD);
			send_or_fail(l, &hold);
			stk_conn_open_providers();
			__atomic_store_n(&providers_ready, 1, __ATOMIC_RELEASE);
		}
		consume(l, r, len);
		if (by == BY_REFUSE && r != -EPROTO) {
			struct stk_nego_msg reject;
			stk_conn_make_decision(&reject, STK_NEGO_REPLY, STK_NEGO_REJECT_LATE);
			send_or_fail(l, &reject);
			stk_nego_cache_put((struct sockaddr *)&l->peer, STK_PEER_CAPABLE);
			stk_conn_fall_back(&info, STK_C_FALLBACK_STDIO, l->app_fd,
					   "the app uses the socket where libfabsock cannot "
					   "follow (stdio, aio, exec, fd passing, SO_ZEROCOPY)");
			set_stage(l, STRIP_CANCEL);
			return true;
		}
		struct stk_nego_msg reply;
		int ret = stk_conn_answer_hello(conn, r, &msg, (struct sockaddr *)&l->peer,
						(struct sockaddr *)&l->local, &reply, &info);
		if (ret == 0) {
			/* our fabric message first: the server finds it when the
			 * REPLY arrives and answers READY at once (stk_nego.h rule 5) */
			begin_handshake(l);
			stk_conn_handshake_step(conn, &l->hs_posted, false);
			send_or_fail(l, &reply);
			return true;
		}
		if (reply.type)
			send_or_fail(l, &reply);
		/* our record: the server may still CANCEL (its app wrote first) */
		set_stage(l, r == -EPROTO ? DONE : STRIP_CANCEL);
		return true;
	}
	case HANDSHAKE:
		return l->client ? client_handshake(l) : server_handshake(l, by);
	case S_WAIT_REPLY: {
		r = stk_nego_peek(conn->fd, &msg, &len);
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
				send_or_fail(l, &cancel_msg);
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
			send_or_fail(l, &decision);
		to_kernel(l);
		return true;
	}
	case STRIP_HELLO:
	case STRIP_CANCEL:
	case STRIP_REPLY: {
		/* The app's bytes flow on the kernel now: a reset is the app's (its
		 * POLLERR, SO_ERROR, next call), a peek must not take it. (Before
		 * that, a reset may come from the peer closing with our records
		 * unread, where the kernel alone would have sent a FIN: a peek
		 * taking it leaves the app the end of stream.) */
		if (stk_nego_error_pending(conn->fd)) {
			to_kernel(l);
			return true;
		}
		r = stk_nego_peek(conn->fd, &msg, &len);
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
				FSK_INFO("fd %d: removed a HELLO that arrived after the client "
					 "fell back", l->app_fd);
				if (get_addrs(l))
					stk_nego_cache_put((struct sockaddr *)&l->peer,
							   STK_PEER_CAPABLE);
				set_stage(l, STRIP_CANCEL);
				return true;
			}
		}
		to_kernel(l);
		return true;
	}
	case DONE:
		return false;
	}
	return false;
}

static void advance(struct stk_lazy *l, enum driver by)
{
	if (l->stage != DONE && !priv_same(l)) {
		io_fallback(l, -EBADF); /* its negotiation cannot go on: the kernel */
		return;
	}
	/* A forked child cannot take a connection onto its parent's fabric
	 * endpoint: what it inherited while negotiating goes to the kernel. */
	if (by == BY_APP && getpid() != l->pid)
		by = BY_REFUSE;
	for (int i = 0; i < 16 && step(l, by); i++)
		;
}

/* ---- registry and negotiation thread ----
 * Every listed conn's private fd is in the thread's epoll set with the stk_lazy
 * as its data: a wake-up visits only the conns that have news, O(1) each, plus
 * the AGAIN queue (a handshake under way makes no kernel event; a conn an app
 * thread held when its news came must be looked at later). An stk_lazy that was
 * forgotten may still be named by an event the thread is taking: the thread
 * frees it (the graveyard) once it took the events of its epoll_wait. */

enum { Q_NONE, Q_TODO, Q_AGAIN, Q_TIMER, Q_COUNT };

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* all protected by reg_lock */
static struct stk_lazy *reg_head;                  /* listed conns */
static struct stk_lazy *q_head[Q_COUNT], *q_tail[Q_COUNT]; /* Q_TODO, Q_AGAIN, Q_TIMER:
								* a record begun, due at
								* its timer_ns */
static struct stk_lazy *graveyard;                 /* forgotten, freed by the thread */
static int thread_epfd = -1;
static int thread_wakefd = -1;      /* eventfd: work was queued for a sleeping thread */
static pid_t thread_pid;            /* the process that owns the thread */
static unsigned thread_gen;         /* which thread is the current one (an fd number
				     * may come back, as a new epoll fd of ours) */
static __thread bool in_thread;     /* the calling thread is the negotiation thread */
/* Held by the negotiation thread while it works (not while it sleeps), and by
 * a forking thread across fork(): the child never inherits a lock or a heap
 * the thread held half-way (an allocator's lock under ASan, the log's lock). */
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;

/* reg_lock held: the thread's fds are still ours. An app that closes every fd
 * above stderr (closefrom in a daemon) reuses the numbers at once, for a file, a
 * socket or an epoll set of its own, so the number being open proves nothing:
 * our epoll set holds our eventfd, which nobody else's does (EINVAL: not an
 * epoll fd, ENOENT: another set, EBADF: closed). A thread whose epoll fd was
 * closed sleeps on forever and is replaced; its fds are never touched again. */
static bool thread_fds_ours(void)
{
	if (thread_epfd < 0 || thread_wakefd < 0 || thread_pid != getpid())
		return false;
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = NULL };
	if (stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_MOD, thread_wakefd, &wev) == 0)
		return true;
	thread_epfd = thread_wakefd = -1; /* maybe the app's numbers by now */
	thread_pid = 0;
	return false;
}

static void q_remove(struct stk_lazy *l)
{
	int q = l->queue;
	if (q == Q_NONE)
		return;
	if (l->qprev)
		l->qprev->qnext = l->qnext;
	else
		q_head[q] = l->qnext;
	if (l->qnext)
		l->qnext->qprev = l->qprev;
	else
		q_tail[q] = l->qprev;
	l->qprev = l->qnext = NULL;
	l->queue = Q_NONE;
}

static void q_push(struct stk_lazy *l, int q)
{
	if (l->queue == q)
		return;
	q_remove(l);
	l->queue = q;
	l->qnext = NULL;
	l->qprev = q_tail[q];
	if (q_tail[q])
		q_tail[q]->qnext = l;
	else
		q_head[q] = l;
	q_tail[q] = l;
}

static struct stk_lazy *q_pop(int q)
{
	struct stk_lazy *l = q_head[q];
	if (l)
		q_remove(l);
	return l;
}

/* Tell the epoll layer about a phase change (the conn's lock held). */
static void notify(struct stk_lazy *l)
{
	if (!l->changed)
		return;
	l->changed = false;
	stk_conn_changed(l->conn);
}

static bool settled(const struct stk_lazy *l)
{
	return l->stage == DONE;
}

/* Settled on the kernel and out of every epoll set of ours and of the thread's:
 * the private duplicate would only keep the socket open behind the app's back
 * (a close we do not see, such as stdio's fclose, must reach the peer). */
static void release_priv(struct stk_lazy *l)
{
	if (__atomic_load_n(&l->conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_KERNEL)
		return;
	bool ours = priv_same(l);
	pthread_mutex_lock(&l->fd_lock);
	int fd = __atomic_exchange_n(&l->conn->fd, -1, __ATOMIC_ACQ_REL);
	if (fd >= 0 && ours)
		stk_sys.close(fd);
	pthread_mutex_unlock(&l->fd_lock);
}

static void unlist_locked(struct stk_lazy *l)
{
	if (!l->listed)
		return;
	if (l->prev)
		l->prev->next = l->next;
	else
		reg_head = l->next;
	if (l->next)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
	q_remove(l);
	l->listed = false;
	l->watching = false;
	if (priv_same(l) && thread_fds_ours())
		stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_DEL, l->conn->fd, NULL);
}

static void unlist(struct stk_lazy *l)
{
	pthread_mutex_lock(&reg_lock);
	unlist_locked(l);
	pthread_mutex_unlock(&reg_lock);
}

/* The thread must look at l again soon although no kernel event may come (a
 * handshake under way, a step some app call made). */
static void requeue(struct stk_lazy *l)
{
	pthread_mutex_lock(&reg_lock);
	if (l->listed && l->queue == Q_NONE) {
		bool idle = !q_head[Q_TODO] && !q_head[Q_AGAIN];
		q_push(l, Q_AGAIN);
		uint64_t one = 1;
		if (idle && !in_thread && thread_fds_ours() &&
		    stk_sys.write(thread_wakefd, &one, sizeof(one)) < 0)
			FSK_DBG("negotiation thread not woken: %s", strerror(errno));
	}
	pthread_mutex_unlock(&reg_lock);
}

/* A record begun and not whole (record_cut): the thread looks again at its
 * deadline although no kernel event may come. */
static void timer(struct stk_lazy *l)
{
	pthread_mutex_lock(&reg_lock);
	if (l->listed && l->queue == Q_NONE) {
		l->timer_ns = l->cut_deadline;
		q_push(l, Q_TIMER);
		uint64_t one = 1;
		if (!in_thread && thread_fds_ours() &&
		    stk_sys.write(thread_wakefd, &one, sizeof(one)) < 0)
			FSK_DBG("negotiation thread not woken: %s", strerror(errno));
	}
	pthread_mutex_unlock(&reg_lock);
}

/* The fabric watch: a conn settled on the fabric stays in the thread's epoll
 * set until our MIGRATE is out, so that the peer's MIGRATE is answered while
 * our app makes no call (stk_migrate.h): the doorbell byte that precedes every
 * MIGRATE wakes the thread, whose progress delivers and answers it (the byte
 * comes first: until its message arrived, the thread looks again every
 * BUSY_POLL_NS, at most WATCH_SOON_MAX times in a row). Other doorbells wake
 * it too (only a peer that announced its sleep is rung: never on the busy
 * path); once migrated, the next event (the stream's bytes on the kernel
 * connection) ends the watch. l's lock held (the conn's is taken after it, as
 * in stk_conn_enter_fabric). Returns STK_WATCH_*. */
#define WATCH_SOON_MAX 1000
static int fabric_watch(const struct stk_lazy *l)
{
	if (l->stage != DONE || !stk_conn_on_fabric(l->conn) || l->pid != getpid())
		return STK_WATCH_DONE;
	return stk_conn_watch_state(l->conn);
}

/* l's lock held: register the private fd for the watch (once): incoming
 * bytes only (a writability event would come with every ACK of our own
 * doorbells). */
static void watch(struct stk_lazy *l)
{
	pthread_mutex_lock(&reg_lock);
	if (l->listed && !l->watching && priv_same(l) && thread_fds_ours()) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = l };
		if (stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_MOD, l->conn->fd, &ev) == 0)
			l->watching = true;
		else
			FSK_DBG("fd %d: no fabric watch: %s", l->app_fd, strerror(errno));
	}
	pthread_mutex_unlock(&reg_lock);
}

/* reg_lock held: the timers that are due go to the TODO queue; returns the
 * time to the next one (0: none). O(timers): only records cut short wait
 * there. */
static uint64_t timers_due(void)
{
	uint64_t now = stk_now_ns(), next = 0;
	struct stk_lazy *l = q_head[Q_TIMER];
	while (l) {
		struct stk_lazy *n = l->qnext;
		if (l->timer_ns <= now)
			q_push(l, Q_TODO);
		else if (!next || l->timer_ns - now < next)
			next = l->timer_ns - now;
		l = n;
	}
	return next;
}

/* After steps, l's lock held (reg_lock is taken after it: the registry side
 * only ever try-locks a conn): tell the epoll layer, and either leave the
 * registry or stay in view of the thread. */
static void after_steps(struct stk_lazy *l)
{
	notify(l);
	if (settled(l)) {
		if (fabric_watch(l) != STK_WATCH_DONE) {
			watch(l);
		} else {
			unlist(l);
			release_priv(l);
		}
	} else if (l->stage == HANDSHAKE) {
		requeue(l);
	} else if (l->cut_deadline) {
		timer(l);
	}
}

static void free_lazy(struct stk_lazy *l)
{
	pthread_mutex_destroy(&l->fd_lock);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* reg_lock held: take the events of one epoll_wait (and the AGAIN queue, when
 * its time came) into the TODO queue; false when this thread was replaced. */
static bool take_events(int epfd, unsigned gen, const struct epoll_event *evs, int n,
			bool again, struct stk_lazy **dead)
{
	if (thread_epfd != epfd || thread_gen != gen)
		return false; /* replaced (our epoll fd was closed): touch nothing */
	for (int i = 0; i < n; i++) {
		struct stk_lazy *l = evs[i].data.ptr;
		if (!l) {
			uint64_t v;
			if (stk_sys.read(thread_wakefd, &v, sizeof(v)) < 0)
				FSK_DBG("negotiation wake-up not read: %s", strerror(errno));
			again = true;
		} else if (l->listed) {
			q_push(l, Q_TODO);
		}
	}
	struct stk_lazy *l;
	while (again && (l = q_pop(Q_AGAIN)))
		q_push(l, Q_TODO);
	timers_due();
	/* every event naming them was just taken: nothing refers to them any more */
	*dead = graveyard;
	graveyard = NULL;
	return true;
}

/* Visit the TODO queue; returns how long to wait before the AGAIN queue is due
 * (0: nothing waits). */
static uint64_t visit_todo(void)
{
	bool hs = false;
	for (;;) {
		pthread_mutex_lock(&reg_lock);
		struct stk_lazy *l = q_pop(Q_TODO);
		if (!l) {
			bool again = q_head[Q_AGAIN] != NULL;
			uint64_t timer_wait = timers_due();
			if (q_head[Q_TODO]) {
				pthread_mutex_unlock(&reg_lock);
				continue; /* a timer came due */
			}
			pthread_mutex_unlock(&reg_lock);
			if (!again)
				return timer_wait;
			return hs ? HS_POLL_NS : BUSY_POLL_NS;
		}
		if (__atomic_load_n(&l->app_waiting, __ATOMIC_ACQUIRE) ||
		    pthread_mutex_trylock(&l->lock) != 0) {
			q_push(l, Q_AGAIN); /* an app thread drives it; look again soon */
			pthread_mutex_unlock(&reg_lock);
			continue;
		}
		thread_idle = !q_head[Q_TODO] && !q_head[Q_AGAIN];
		pthread_mutex_unlock(&reg_lock);
		/* l's lock held: its close waits for this step */
		advance(l, BY_THREAD);
		bool soon = false;
		if (fabric_watch(l) != STK_WATCH_DONE) {
			stk_conn_progress(l->conn); /* maybe the peer's MIGRATE: answered */
			soon = fabric_watch(l) == STK_WATCH_SOON && ++l->watch_soon < WATCH_SOON_MAX;
			if (!soon)
				l->watch_soon = 0;
		}
		hs |= l->stage == HANDSHAKE;
		after_steps(l);
		if (soon)
			requeue(l);
		pthread_mutex_unlock(&l->lock);
	}
}

static void *thread_main(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	int epfd = (int)(id & 0xffffffffu);
	unsigned gen = (unsigned)(id >> 32);
	in_thread = true;
	struct epoll_event evs[256];
	uint64_t wait_ns = 0;
	for (;;) {
		int timeout_ms = -1;
		if (wait_ns == HS_POLL_NS) {
			/* a handshake under way: finer than epoll_wait's milliseconds */
			struct timespec ts = { 0, (long)wait_ns };
			clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			timeout_ms = 0;
		} else if (wait_ns) {
			timeout_ms = (int)((wait_ns + 999999) / 1000000);
		}
		int n = stk_sys.epoll_wait(epfd, evs, 256, timeout_ms);
		if (n < 0 && errno != EINTR) {
			/* Our epoll fd was closed behind our back (closefrom in a daemon):
			 * the next negotiation starts a new thread. */
			pthread_mutex_lock(&reg_lock);
			if (thread_epfd == epfd && thread_gen == gen) {
				thread_epfd = -1;
				thread_pid = 0;
			}
			pthread_mutex_unlock(&reg_lock);
			return NULL;
		}
		struct stk_lazy *dead = NULL;
		pthread_mutex_lock(&work_lock);
		pthread_mutex_lock(&reg_lock);
		/* the AGAIN queue is due when we slept for it */
		bool ok = take_events(epfd, gen, evs, n < 0 ? 0 : n, wait_ns != 0 || n <= 0,
				      &dead);
		pthread_mutex_unlock(&reg_lock);
		if (!ok) {
			pthread_mutex_unlock(&work_lock);
			return NULL;
		}
		while (dead) {
			struct stk_lazy *l = dead;
			dead = l->qnext;
			free_lazy(l);
		}
		wait_ns = visit_todo();
		pthread_mutex_unlock(&work_lock);
	}
	return NULL;
}

/* What the thread watches: the peer's records and hang-ups, and the end of a
 * connect in progress. Not writability otherwise: an edge-triggered EPOLLOUT
 * fires at once for a connected socket and would wake the thread (and contend
 * for the conn's lock with the app) for nothing, once per connection. */
static uint32_t thread_events(const struct stk_lazy *l)
{
	return EPOLLIN | EPOLLRDHUP | EPOLLET | (l->stage == C_CONNECTING ? EPOLLOUT : 0);
}

/* reg_lock held. The thread of this process, created on first need (again in a
 * forked child: threads do not survive fork, and the parent's epoll set is
 * shared with it). Registering the listed conns anew is O(n), but only then. */
static int ensure_thread_locked(void)
{
	pid_t pid = getpid();
	if (thread_epfd >= 0 && thread_pid == pid && thread_fds_ours())
		return 0;
	if (thread_epfd >= 0)
		stk_sys.close(thread_epfd); /* the parent's, inherited */
	if (thread_wakefd >= 0 && thread_pid != pid)
		stk_sys.close(thread_wakefd);
	thread_wakefd = -1;
	thread_epfd = stk_sys.epoll_create1(EPOLL_CLOEXEC);
	if (thread_epfd < 0)
		return -errno;
	thread_wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = NULL };
	if (thread_wakefd < 0 ||
	    stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, thread_wakefd, &wev) != 0) {
		int err = errno;
		if (thread_wakefd >= 0)
			stk_sys.close(thread_wakefd);
		stk_sys.close(thread_epfd);
		thread_wakefd = thread_epfd = -1;
		return -err;
	}
	for (struct stk_lazy *l = reg_head; l; l = l->next) {
		if (!priv_same(l))
			continue; /* closed behind our back: its next step settles it */
		struct epoll_event ev = { .events = thread_events(l), .data.ptr = l };
		stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, l->conn->fd, &ev);
	}
	thread_gen++;
	uint64_t id = (uint64_t)thread_gen << 32 | (uint32_t)thread_epfd;
	int ret = stk_thread_start(thread_main, (void *)(uintptr_t)id, 256 * 1024);
	if (ret) {
		stk_sys.close(thread_wakefd);
		stk_sys.close(thread_epfd);
		thread_wakefd = thread_epfd = -1;
		return -ret;
	}
	thread_pid = pid;
	return 0;
}

static void enlist(struct stk_lazy *l)
{
	pthread_mutex_lock(&reg_lock);
	int ret = ensure_thread_locked();
	if (ret == 0) {
		struct epoll_event ev = { .events = thread_events(l), .data.ptr = l };
		ret = stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, l->conn->fd, &ev) ? -errno : 0;
	}
	if (ret == 0) {
		l->prev = NULL;
		l->next = reg_head;
		if (reg_head)
			reg_head->prev = l;
		reg_head = l;
		l->listed = true;
	} else {
		/* No background progress: app calls still complete the negotiation. */
		static int warned;
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			FSK_WARN("no negotiation thread (%s): negotiations progress only in "
				 "app calls", strerror(-ret));
	}
	pthread_mutex_unlock(&reg_lock);
}

/* ---- creation ---- */

static int create(int priv, int app_fd, bool client, enum stage st, struct stk_conn **out)
{
	struct stk_lazy *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	struct stk_conn *conn;
	int ret = stk_conn_create(priv, stk_conn_window(), &conn);
	if (ret) {
		free(l);
		return ret;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_init(&l->fd_lock, NULL);
	l->conn = conn;
	l->app_fd = app_fd;
	l->pid = getpid();
	l->client = client;
	l->stage = st;
	struct stat pst;
	l->priv_ino = fstat(priv, &pst) == 0 ? pst.st_ino : 0;
	conn->lazy = l;
	conn->phase = STK_PHASE_PENDING;
	*out = conn;
	return 0;
}

int stk_lazy_client(int priv, int app_fd, bool connecting, struct stk_conn **out)
{
	int ret = create(priv, app_fd, true, connecting ? C_CONNECTING : C_WAIT_HELLO, out);
	if (ret)
		return ret;
	struct stk_lazy *l = (*out)->lazy;
	if (!connecting) {
		struct sockaddr_storage sa;
		socklen_t salen = sizeof(sa);
		if (stk_sys.getsockname(priv, (struct sockaddr *)&sa, &salen) == 0)
			stk_nego_unmark(priv, sa.ss_family);
	}
	enlist(l);
	return 0;
}

static void destroy(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	conn->lazy = NULL;
	stk_conn_destroy(conn);
	free_lazy(l);
}

int stk_lazy_server(int priv, int app_fd, struct stk_conn **out)
{
	struct stk_attach_info info;
	int marked = stk_nego_syn_marked(priv);
	if (marked <= 0)
		return stk_conn_fall_back(&info, STK_C_FALLBACK_PLAIN_PEER, app_fd,
					  marked < 0 ? "cannot read the saved SYN: %s"
						     : "the client's SYN was not marked%s (plain client)",
					  marked < 0 ? strerror(-marked) : "");
	int ret = create(priv, app_fd, false, S_WAIT_REPLY, out);
	if (ret)
		return ret;
	struct stk_lazy *l = (*out)->lazy;
	if (!get_addrs(l)) {
		ret = -errno;
		destroy(*out);
		return ret;
	}
	stk_conn_build_hello(l->conn, (struct sockaddr *)&l->local, &l->hello, l->fabs);
	ret = stk_nego_send_now(priv, &l->hello);
	if (ret) {
		destroy(*out);
		return ret;
	}
	enlist(l);
	return 0;
}

void stk_lazy_forget(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	if (!l)
		return;
	pthread_mutex_lock(&reg_lock);
	unlist_locked(l);
	/* an event the thread has not taken yet may name l: the thread frees it */
	bool defer = thread_epfd >= 0 && thread_pid == getpid();
	pthread_mutex_unlock(&reg_lock);
	/* the thread or an app thread (settling on another fd of the same socket:
	 * the app's race, as with the kernel) may be in a step: wait for it */
	pthread_mutex_lock(&l->lock);
	pthread_mutex_unlock(&l->lock);
	if (!priv_same(l))
		conn->fd = -1; /* not ours any more: the close must not touch it */
	conn->lazy = NULL;
	if (!defer) {
		free_lazy(l);
		return;
	}
	pthread_mutex_lock(&reg_lock);
	l->qnext = graveyard;
	graveyard = l;
	pthread_mutex_unlock(&reg_lock);
}

/* ---- app side ---- */

/* How long a write waits for the peer's first record (P3). */
static uint64_t write_wait_ns(struct stk_lazy *l)
{
	unsigned ms = stk_cfg.nego_wait_ms;
	if (l->held)
		return (uint64_t)STK_NEGO_REPLY_WAIT_MS * 1000000ull;
	if (l->client && get_addrs(l)) {
		enum stk_nego_peer known = stk_nego_cache_get((struct sockaddr *)&l->peer);
		if (known == STK_PEER_PLAIN)
			ms = 0;
		else if (known == STK_PEER_CAPABLE)
			ms = STK_NEGO_WAIT_CAPABLE_MS;
	}
	return (uint64_t)ms * 1000000ull;
}

/* The write's wait is over and the peer's first record has not come. */
static void give_up_for_write(struct stk_lazy *l)
{
	struct stk_attach_info info;
	if (l->stage == C_WAIT_HELLO) {
		bool cached_plain = false;
		if (get_addrs(l)) {
			cached_plain = stk_nego_cache_get((struct sockaddr *)&l->peer) == STK_PEER_PLAIN;
			stk_nego_cache_put((struct sockaddr *)&l->peer, STK_PEER_PLAIN);
		}
		if (cached_plain)
			stk_conn_fall_back(&info, STK_C_FALLBACK_PLAIN_PEER, l->app_fd,
					   "destination cached as not libfabsock");
		else
			stk_conn_fall_back(&info, STK_C_FALLBACK_TIMEOUT, l->app_fd,
					   "no HELLO from the server within %u ms before the app's "
					   "first write (plain server?)", stk_cfg.nego_wait_ms);
		set_stage(l, STRIP_HELLO);
	} else if (l->stage == S_WAIT_REPLY) {
		struct stk_nego_msg cancel;
		stk_conn_make_decision(&cancel, STK_NEGO_CANCEL, STK_NEGO_CANCEL_APP_WROTE);
		send_or_fail(l, &cancel);
		stk_conn_fall_back(&info, STK_C_FALLBACK_TIMEOUT, l->app_fd,
				   "no REPLY from the client within %u ms before the app's first "
				   "write", stk_cfg.nego_wait_ms);
		set_stage(l, STRIP_REPLY);
	}
}

/* A blocking read's condition: the negotiation decided (advanced here too). */
static bool read_decided(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	pthread_mutex_lock(&l->lock);
	advance(l, BY_APP);
	after_steps(l);
	pthread_mutex_unlock(&l->lock);
	int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	return phase == STK_PHASE_FABRIC || phase == STK_PHASE_KERNEL;
}

static int settle(struct stk_conn *conn, bool for_write, bool nonblock);

int stk_lazy_settle(struct stk_conn *conn, bool for_write, bool nonblock)
{
	struct stk_lazy *l = conn->lazy;
	if (!l)
		return __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	__atomic_fetch_add(&l->app_waiting, 1, __ATOMIC_ACQ_REL);
	int ret = settle(conn, for_write, nonblock);
	__atomic_fetch_sub(&l->app_waiting, 1, __ATOMIC_ACQ_REL);
	return ret;
}

static int settle(struct stk_conn *conn, bool for_write, bool nonblock)
{
	if (!for_write && !nonblock && conn->lazy) {
		/* as long as a blocking read of the kernel would wait, with its
		 * timeout and signals */
		int w = stk_conn_block_until(conn, read_decided);
		return w < 0 ? w : __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	}
	struct stk_lazy *l = conn->lazy;
	uint64_t start = 0, deadline = 0, decide_start = 0;
	for (;;) {
		int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
		if (!l || phase == STK_PHASE_FABRIC || phase == STK_PHASE_KERNEL)
			return phase;
		pthread_mutex_lock(&l->lock);
		advance(l, BY_APP);
		if (for_write && !start && (l->stage == C_WAIT_HELLO || l->stage == S_WAIT_REPLY))
			start = stk_now_ns();
		if (start)
			deadline = start + write_wait_ns(l); /* longer once the client said HOLD */
		if (for_write && deadline && stk_now_ns() >= deadline)
			give_up_for_write(l);
		enum stage st = l->stage;
		after_steps(l);
		pthread_mutex_unlock(&l->lock);
		phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
		if (phase == STK_PHASE_FABRIC || phase == STK_PHASE_KERNEL)
			return phase;
		if (phase == STK_PHASE_STRIP && for_write)
			return phase;
		if (nonblock && !(for_write && st != C_CONNECTING))
			return -EAGAIN;
		/* Waiting for the server's decision has no deadline (stk_nego.h, rule
		 * 4); a non-blocking write waits for it at most this long per call. */
		if (nonblock && st == HANDSHAKE && l->client) {
			if (!decide_start)
				decide_start = stk_now_ns();
			else if (stk_now_ns() - decide_start > (uint64_t)STK_NEGO_REPLY_WAIT_MS * 1000000ull)
				return -EAGAIN;
		}
		/* Wait for the peer's bytes (or the connect), in slices: the thread may
		 * take them first, and a handshake makes no kernel event. */
		uint64_t slice = st == HANDSHAKE ? HS_POLL_NS : SETTLE_SLICE_NS;
		uint64_t now = stk_now_ns();
		if (deadline && deadline - now < slice && deadline > now)
			slice = deadline - now;
		/* the thread may release the private fd meanwhile (settled on the
		 * kernel): the sleep then ends early or at the slice, and the loop
		 * sees the phase */
		struct pollfd pfd = { .fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE),
				      .events = POLLIN | POLLRDHUP |
						(st == C_CONNECTING ? POLLOUT : 0) };
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)slice };
		stk_wait_sys_ppoll(&pfd, 1, &ts, NULL); /* EINTR: the handler ran; go on */
	}
}

static void refuse(struct stk_lazy *l);

void stk_lazy_refuse(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	if (!l)
		return;
	__atomic_fetch_add(&l->app_waiting, 1, __ATOMIC_ACQ_REL);
	refuse(l);
	__atomic_fetch_sub(&l->app_waiting, 1, __ATOMIC_ACQ_REL);
}

static void refuse(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	uint64_t start = 0, deadline = 0;
	for (;;) {
		pthread_mutex_lock(&l->lock);
		advance(l, BY_REFUSE);
		bool first = l->stage == C_WAIT_HELLO || l->stage == S_WAIT_REPLY;
		if (first && !start)
			start = stk_now_ns();
		if (start)
			deadline = start + write_wait_ns(l);
		if (first && stk_now_ns() >= deadline) {
			give_up_for_write(l);
			advance(l, BY_REFUSE); /* a late record already there goes now */
		}
		enum stage st = l->stage;
		bool done = settled(l);
		after_steps(l);
		pthread_mutex_unlock(&l->lock);
		/* Settled, or on the way to the kernel with nothing there yet (a late
		 * record is removed by the thread when it comes), or negotiating
		 * with a server that decides (it may still choose the fabric). */
		if (done || phase_of(st) == STK_PHASE_STRIP || st == C_CONNECTING)
			return;
		struct pollfd pfd = { .fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE),
				      .events = POLLIN | POLLRDHUP };
		struct timespec ts = { 0, (long)(st == HANDSHAKE ? HS_POLL_NS : SETTLE_SLICE_NS) };
		stk_wait_sys_ppoll(&pfd, 1, &ts, NULL);
	}
}

short stk_lazy_events(struct stk_conn *conn)
{
	/* An app waiting for its socket is an app touching it: a client answers the
	 * HELLO here (one step: the phase stays PENDING unless it settles on the
	 * kernel, which the readiness layers see by themselves), and a handshake
	 * the peer finished is finished here too (no sleep, no spin). */
	struct stk_lazy *l = conn->lazy;
	if (l && __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_PENDING &&
	    pthread_mutex_trylock(&l->lock) == 0) {
		enum stage before = l->stage;
		/* a handshake the server finished (READY there, or the client's
		 * message here): the peer's bytes are readable now, as on the kernel
		 * once its write returned */
		if ((before == C_WAIT_HELLO && l->client) || before == HANDSHAKE)
			step(l, BY_APP);
		/* the thread tells the other waiters and releases what is done (not
		 * here: the caller may hold epoll locks) */
		if (l->stage != before && (l->stage == DONE || l->stage == HANDSHAKE))
			requeue(l);
		pthread_mutex_unlock(&l->lock);
		if (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_FABRIC)
			return stk_stream_events(conn);
	}
	/* settled on the kernel, private fd released: a call that found the conn
	 * before that asks the kernel about the app's fd */
	if (l)
		pthread_mutex_lock(&l->fd_lock);
	int fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE);
	if (fd < 0)
		fd = l ? l->app_fd : -1;
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	int n = fd < 0 ? 0 : stk_sys.poll(&pfd, 1, 0);
	if (l)
		pthread_mutex_unlock(&l->fd_lock);
	if (n <= 0)
		return 0;
	short k = pfd.revents;
	int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	if (phase == STK_PHASE_KERNEL)
		return k;
	if (phase == STK_PHASE_FABRIC)
		return stk_stream_events(conn);
	/* Negotiation bytes are not readable; an end of stream or an error is (the
	 * read settles on the kernel and reports it). */
	short ev = (short)(k & (POLLOUT | POLLERR | POLLHUP | POLLRDHUP));
	if (k & (POLLERR | POLLHUP | POLLRDHUP))
		ev |= POLLIN;
	return ev;
}

void stk_lazy_atfork_prepare(void)
{
	pthread_mutex_lock(&work_lock);
}

void stk_lazy_atfork_parent(void)
{
	pthread_mutex_unlock(&work_lock);
}

void stk_lazy_atfork_child(void)
{
	pthread_mutex_init(&work_lock, NULL);
	pthread_mutex_init(&warm_lock, NULL);
	pthread_cond_init(&warm_done, NULL);
	/* a warm-up the parent had under way (between two providers: fork
	 * waits for the one being opened) did not follow: the child's exit
	 * must not wait for it, and the child may warm up on its own */
	if (__atomic_load_n(&warm_running, __ATOMIC_RELAXED)) {
		warm_running = 0;
		warm_started = 0;
	}
}

short stk_poll_events(struct stk_conn *conn)
{
	if (__builtin_expect(__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC, 0))
		return stk_lazy_events(conn);
	return stk_stream_events(conn);
}
