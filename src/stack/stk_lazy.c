/* The lazy negotiation's app-facing calls: creation, settling before a data
 * call, refusal, readiness. Contracts in stk_lazy.h, protocol in stk_nego.h. */
#include "config.h"
#include "stack/stk_lazy_int.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	/* A non-blocking connect to this host is done already: no wake-up of the
	 * thread for its end */
	struct pollfd done = { .fd = priv, .events = POLLOUT };
	if (connecting && stk_sys.poll(&done, 1, 0) == 1 && done.revents == POLLOUT)
		connecting = false;
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
	lazy_enlist(l);
	return 0;
}

static void destroy(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	conn->lazy = NULL;
	stk_conn_destroy(conn);
	lazy_free(l);
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
	if (!lazy_get_addrs(l)) {
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
	lazy_enlist(l);
	return 0;
}

/* ---- app side ---- */

/* How long a write waits for the peer's first record (P3). */
static uint64_t write_wait_ns(struct stk_lazy *l)
{
	unsigned ms = stk_cfg.nego_wait_ms;
	if (l->held)
		return (uint64_t)STK_NEGO_REPLY_WAIT_MS * 1000000ull;
	if (l->client && lazy_get_addrs(l)) {
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
		if (lazy_get_addrs(l)) {
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
		lazy_set_stage(l, STRIP_HELLO);
	} else if (l->stage == S_WAIT_REPLY) {
		struct stk_nego_msg cancel;
		stk_conn_make_decision(&cancel, STK_NEGO_CANCEL, STK_NEGO_CANCEL_APP_WROTE);
		lazy_send_or_fail(l, &cancel);
		stk_conn_fall_back(&info, STK_C_FALLBACK_TIMEOUT, l->app_fd,
				   "no REPLY from the client within %u ms before the app's first "
				   "write", stk_cfg.nego_wait_ms);
		lazy_set_stage(l, STRIP_REPLY);
	}
}

/* A blocking read's condition: the negotiation decided (advanced here too). */
static bool read_decided(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	pthread_mutex_lock(&l->lock);
	lazy_advance(l, BY_APP);
	lazy_after_steps(l);
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
	lazy_app_enter(l);
	int ret = settle(conn, for_write, nonblock);
	lazy_app_leave(l);
	return ret;
}

static int settle(struct stk_conn *conn, bool for_write, bool nonblock)
{
	/* The peer's next record is tens of microseconds away: spin for it (an
	 * app call, once per call) rather than sleep, which would cost a wake-up
	 * here and make the peer's send pay for it. */
	uint64_t spin_end = stk_now_ns() + NEGO_SPIN_NS;
	if (!for_write && !nonblock && conn->lazy) {
		while (!read_decided(conn)) {
			if (stk_now_ns() >= spin_end) {
				/* as long as a blocking read of the kernel would
				 * wait, with its timeout and signals */
				int w = stk_conn_block_until(conn, read_decided);
				if (w < 0)
					return w;
				break;
			}
			sched_yield(); /* a peer on this CPU runs meanwhile */
		}
		return __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
	}
	struct stk_lazy *l = conn->lazy;
	uint64_t start = 0, deadline = 0, decide_start = 0;
	for (;;) {
		int phase = __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
		if (!l || phase == STK_PHASE_FABRIC || phase == STK_PHASE_KERNEL)
			return phase;
		pthread_mutex_lock(&l->lock);
		lazy_advance(l, BY_APP);
		if (for_write && !start && (l->stage == C_WAIT_HELLO || l->stage == S_WAIT_REPLY))
			start = stk_now_ns();
		if (start)
			deadline = start + write_wait_ns(l); /* longer once the client said HOLD */
		if (for_write && deadline && stk_now_ns() >= deadline)
			give_up_for_write(l);
		enum stage st = l->stage;
		lazy_after_steps(l);
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
		if (now < spin_end && st != C_CONNECTING) {
			sched_yield();
			continue;
		}
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
	lazy_app_enter(l);
	refuse(l);
	lazy_app_leave(l);
}

static void refuse(struct stk_lazy *l)
{
	struct stk_conn *conn = l->conn;
	uint64_t start = 0, deadline = 0;
	for (;;) {
		pthread_mutex_lock(&l->lock);
		lazy_advance(l, BY_REFUSE);
		bool first = l->stage == C_WAIT_HELLO || l->stage == S_WAIT_REPLY;
		if (first && !start)
			start = stk_now_ns();
		if (start)
			deadline = start + write_wait_ns(l);
		if (first && stk_now_ns() >= deadline) {
			give_up_for_write(l);
			lazy_advance(l, BY_REFUSE); /* a late record already there goes now */
		}
		enum stage st = l->stage;
		bool done = settled(l);
		lazy_after_steps(l);
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
		/* a handshake the server finished (its message there, or the client's
		 * message here): the peer's bytes are readable now, as on the kernel
		 * once its write returned */
		if ((before == C_WAIT_HELLO && l->client) || before == HANDSHAKE)
			lazy_step(l, BY_APP);
		/* the thread tells the other waiters and releases what is done (not
		 * here: the caller may hold epoll locks) */
		if (l->stage != before && (l->stage == DONE || l->stage == HANDSHAKE))
			lazy_requeue(l);
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

short stk_poll_events(struct stk_conn *conn)
{
	if (__builtin_expect(__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC, 0))
		return stk_lazy_events(conn);
	return stk_stream_events(conn);
}
