/* The readiness core (stk_poll, stk_select, stk_pselect, stk_epoll) against a
 * test double of the connection and fabric (stk_ready_ops), mixed with real
 * kernel fds: pipes, eventfds, timerfds, sockets. Every wait is bounded. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_lazy.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "../lib/check_main.h"

/* ---- the test double ---- */

struct fake_fab {
	int wait_fd; /* eventfd, or -1 (like shm) */
};

struct fake_conn {
	int fd;            /* the app's fd and the liveness channel (socketpair end) */
	int peer;          /* the other end: closing it = peer died */
	short ev;          /* atomic: what stk_poll_events would say */
	uint64_t gen;      /* atomic */
	int liveness_calls;
	bool settled;      /* atomic: the liveness channel said EOF (peer gone) */
	int phase;         /* atomic: enum stk_phase, for tests that install fake_phase */
	struct fake_fab *fab;
	struct stk_watch watch; /* epoll items watching it */
};

#define FAKE_MAX 8
static struct fake_conn fakes[FAKE_MAX];
static int nfakes;
static struct fake_fab fab_nofd = { .wait_fd = -1 };
static struct fake_fab fab_fd = { .wait_fd = -1 };

static struct stk_conn *fake_lookup(int fd)
{
	for (int i = 0; i < nfakes; i++)
		if (fakes[i].fd == fd)
			return (struct stk_conn *)&fakes[i];
	return NULL;
}

static struct fake_conn *F(struct stk_conn *c)
{
	return (struct fake_conn *)c;
}

static int events_calls; /* evaluations of any fake: epoll must not scan idle ones */
static short fake_events(struct stk_conn *c)
{
	__atomic_fetch_add(&events_calls, 1, __ATOMIC_RELAXED);
	struct fake_fab *fab = F(c)->fab;
	if (fab->wait_fd >= 0) { /* "progress": consume the wake-up */
		uint64_t v;
		ssize_t r = read(fab->wait_fd, &v, sizeof(v));
		(void)r;
	}
	return __atomic_load_n(&F(c)->ev, __ATOMIC_ACQUIRE);
}

static int fake_liveness_fd(struct stk_conn *c)
{
	return __atomic_load_n(&F(c)->settled, __ATOMIC_ACQUIRE) ? -1 : F(c)->fd;
}

static void fake_liveness(struct stk_conn *c)
{
	__atomic_fetch_add(&F(c)->liveness_calls, 1, __ATOMIC_RELAXED);
	char b;
	if (recv(F(c)->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
		__atomic_store_n(&F(c)->settled, true, __ATOMIC_RELEASE);
		__atomic_fetch_add(&F(c)->gen, 1, __ATOMIC_RELEASE);
		__atomic_fetch_or(&F(c)->ev, POLLIN | POLLOUT | POLLHUP | POLLERR, __ATOMIC_RELEASE);
		stk_watch_notify(&F(c)->watch);
	}
}

static uint64_t fake_generation(struct stk_conn *c)
{
	return __atomic_load_n(&F(c)->gen, __ATOMIC_ACQUIRE);
}

static struct stk_fab *fake_fab_of(struct stk_conn *c)
{
	return (struct stk_fab *)F(c)->fab;
}

static int progress_calls;
static int fake_progress(struct stk_fab *f)
{
	(void)f;
	__atomic_fetch_add(&progress_calls, 1, __ATOMIC_RELAXED);
	return 0;
}

static int fake_wait_fd(struct stk_fab *f)
{
	return ((struct fake_fab *)f)->wait_fd;
}

static bool fake_trywait(struct stk_fab *f)
{
	(void)f;
	return true;
}

static void fake_quiesce(struct stk_fab *f)
{
	(void)f;
}

static struct stk_watch *fake_watch(struct stk_conn *c)
{
	return &F(c)->watch;
}

static int fake_phase(struct stk_conn *c)
{
	return __atomic_load_n(&F(c)->phase, __ATOMIC_ACQUIRE);
}

static const struct stk_ready_ops fake_ops = {
	.events = fake_events,
	.liveness_fd = fake_liveness_fd,
	.liveness = fake_liveness,
	.generation = fake_generation,
	.fab = fake_fab_of,
	.progress = fake_progress,
	.wait_fd = fake_wait_fd,
	.trywait = fake_trywait,
	.quiesce = fake_quiesce,
	.watch = fake_watch,
};

/* "Data arrives": set events, bump the generation, ring the fabric's wait fd. */
static void fake_set(struct fake_conn *c, short ev)
{
	/* the stream changes both under its lock; generation first keeps an
	 * unlocked reader (events, then generation) from seeing new events with
	 * an old generation */
	__atomic_fetch_add(&c->gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&c->ev, ev, __ATOMIC_RELEASE);
	stk_watch_notify(&c->watch);
	if (c->fab->wait_fd >= 0) {
		uint64_t v = 1;
		ck_assert_int_eq(write(c->fab->wait_fd, &v, sizeof(v)), sizeof(v));
	}
}

static struct fake_conn *fake_new(bool with_wait_fd)
{
	ck_assert_int_lt(nfakes, FAKE_MAX);
	struct fake_conn *c = &fakes[nfakes];
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	memset(c, 0, sizeof(*c));
	c->fd = sv[0];
	c->peer = sv[1];
	c->fab = with_wait_fd ? &fab_fd : &fab_nofd;
	__atomic_store_n(&nfakes, nfakes + 1, __ATOMIC_RELEASE);
	return c;
}

static void setup(void)
{
	stk_cfg.spin_us = 20;
	stk_ready_ops = fake_ops;
	stk_ready_lookup = fake_lookup;
	nfakes = 0;
	fab_fd.wait_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_assert_int_ge(fab_fd.wait_fd, 0);
}

static void teardown(void)
{
	for (int i = 0; i < nfakes; i++) {
		close(fakes[i].fd);
		if (fakes[i].peer >= 0)
			close(fakes[i].peer);
	}
	nfakes = 0;
	close(fab_fd.wait_fd);
	stk_ready_ops = stk_ready_ops_default;
}

static uint64_t now_ms(void)
{
	return stk_now_ns() / 1000000ull;
}

static const struct timespec *ms_ts(struct timespec *ts, int ms)
{
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
	return ts;
}

/* A thread that, after delay_ms, runs an action. */
struct later {
	pthread_t thr;
	int delay_ms;
	void (*fn)(void *);
	void *arg;
};

static void *later_main(void *p)
{
	struct later *l = p;
	usleep((useconds_t)l->delay_ms * 1000);
	l->fn(l->arg);
	return NULL;
}

static void later_start(struct later *l, int delay_ms, void (*fn)(void *), void *arg)
{
	l->delay_ms = delay_ms;
	l->fn = fn;
	l->arg = arg;
	ck_assert_int_eq(pthread_create(&l->thr, NULL, later_main, l), 0);
}

static void later_join(struct later *l)
{
	pthread_join(l->thr, NULL);
}

static void act_readable(void *arg)
{
	fake_set(arg, POLLIN | POLLOUT);
}

static void act_write_fd(void *arg)
{
	uint64_t v = 1;
	ck_assert_int_eq(write(*(int *)arg, &v, sizeof(v)), sizeof(v));
}

static void act_close_peer(void *arg)
{
	struct fake_conn *c = arg;
	close(c->peer);
	c->peer = -1;
}

/* ---- poll ---- */

START_TEST(poll_all_kernel)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	int efd = eventfd(1, EFD_CLOEXEC);
	struct pollfd fds[] = { { .fd = p[0], .events = POLLIN }, { .fd = efd, .events = POLLIN },
				{ .fd = p[1], .events = POLLOUT } };
	ck_assert_int_eq(stk_poll(fds, 3, &(struct timespec){ 0, 0 }, NULL), 2);
	ck_assert_int_eq(fds[0].revents, 0);
	ck_assert_int_eq(fds[1].revents, POLLIN);
	ck_assert_int_eq(fds[2].revents, POLLOUT);
	close(p[0]);
	close(p[1]);
	close(efd);
}
END_TEST

START_TEST(poll_mixed_ready)
{
	struct fake_conn *a = fake_new(false), *b = fake_new(true);
	fake_set(a, POLLIN | POLLOUT);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct pollfd fds[] = {
		{ .fd = a->fd, .events = POLLIN | POLLRDNORM }, { .fd = b->fd, .events = POLLIN },
		{ .fd = p[0], .events = POLLIN },                { .fd = tfd, .events = POLLIN },
		{ .fd = -1, .events = POLLIN },                   { .fd = a->fd, .events = POLLOUT },
	};
	struct timespec ts;
	ck_assert_int_eq(stk_poll(fds, 6, ms_ts(&ts, 1000), NULL), 3);
	ck_assert_int_eq(fds[0].revents, POLLIN | POLLRDNORM);
	ck_assert_int_eq(fds[1].revents, 0);
	ck_assert_int_eq(fds[2].revents, POLLIN);
	ck_assert_int_eq(fds[3].revents, 0);
	ck_assert_int_eq(fds[4].revents, 0);
	ck_assert_int_eq(fds[5].revents, POLLOUT);
	close(p[0]);
	close(p[1]);
	close(tfd);
}
END_TEST

START_TEST(poll_nval_from_kernel)
{
	struct fake_conn *a = fake_new(false);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	close(p[1]);
	close(p[0]);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	ck_assert_int_eq(stk_poll(fds, 2, NULL, NULL), 1);
	ck_assert_int_eq(fds[0].revents, 0);
	ck_assert_int_eq(fds[1].revents, POLLNVAL);
}
END_TEST

START_TEST(poll_timeouts)
{
	struct fake_conn *a = fake_new(_i & 1);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	struct timespec ts;
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 2, ms_ts(&ts, 0), NULL), 0);
	ck_assert_uint_lt(now_ms() - t0, 50);
	t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 2, ms_ts(&ts, 50), NULL), 0);
	uint64_t el = now_ms() - t0;
	ck_assert_uint_ge(el, 50);
	ck_assert_uint_lt(el, 2000);
	ck_assert_int_eq(fds[0].revents, 0);
	/* -1 woken by accelerated data (sliced sleep, or the wait fd) */
	struct later l;
	later_start(&l, 30, act_readable, a);
	t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 2, NULL, NULL), 1);
	ck_assert_uint_lt(now_ms() - t0, 3000);
	ck_assert_int_eq(fds[0].revents, POLLIN);
	later_join(&l);
	/* -1 woken by the kernel fd */
	fake_set(a, 0);
	int wfd = p[1];
	struct pollfd fds2[] = { { .fd = a->fd, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	later_start(&l, 30, act_write_fd, &wfd);
	ck_assert_int_eq(stk_poll(fds2, 2, ms_ts(&ts, 5000), NULL), 1);
	ck_assert_int_eq(fds2[1].revents, POLLIN);
	ck_assert_int_eq(fds2[0].revents, 0);
	later_join(&l);
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(poll_liveness_wakes)
{
	struct fake_conn *a = fake_new(false);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN } };
	struct later l;
	later_start(&l, 30, act_close_peer, a);
	struct timespec ts;
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 1, ms_ts(&ts, 5000), NULL), 1);
	ck_assert_uint_lt(now_ms() - t0, 1000);
	ck_assert_int_eq(fds[0].revents, POLLIN | POLLHUP | POLLERR);
	ck_assert_int_ge(a->liveness_calls, 1);
	later_join(&l);
	/* a settled connection's channel (at EOF for good) is no longer watched: a
	 * wait for something it does not report sleeps to its timeout instead of
	 * waking on the EOF again and again */
	struct pollfd out[] = { { .fd = a->fd, .events = POLLOUT } };
	fake_set(a, POLLIN);
	int calls = a->liveness_calls;
	uint64_t t1 = now_ms();
	ck_assert_int_eq(stk_poll(out, 1, ms_ts(&ts, 100), NULL), 0);
	ck_assert_uint_ge(now_ms() - t1, 100);
	ck_assert_int_eq(a->liveness_calls, calls);
}
END_TEST

/* ---- signals ---- */

static volatile sig_atomic_t got_usr1;
static void on_usr1(int sig)
{
	(void)sig;
	got_usr1++;
}

struct kill_arg {
	pthread_t target;
	int delay_ms;
};

static void *kill_main(void *p)
{
	struct kill_arg *k = p;
	usleep((useconds_t)k->delay_ms * 1000);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

static void install_usr1(int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	got_usr1 = 0;
}

START_TEST(poll_eintr)
{
	/* _i: 0 without SA_RESTART, 1 with it (poll is never restarted) */
	install_usr1(_i ? SA_RESTART : 0);
	struct fake_conn *a = fake_new(false);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	struct kill_arg k = { .target = pthread_self(), .delay_ms = 50 };
	pthread_t thr;
	ck_assert_int_eq(pthread_create(&thr, NULL, kill_main, &k), 0);
	struct timespec ts;
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 2, ms_ts(&ts, 5000), NULL), -EINTR);
	ck_assert_uint_lt(now_ms() - t0, 3000);
	ck_assert_int_eq(got_usr1, 1);
	pthread_join(thr, NULL);
	/* the caller's mask is restored */
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	ck_assert(!sigismember(&cur, SIGUSR1));
	close(p[0]);
	close(p[1]);
}
END_TEST

START_TEST(ppoll_masks)
{
	install_usr1(0);
	struct fake_conn *a = fake_new(false);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN } };
	sigset_t usr1, old, unblocked;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	/* blocked by the caller, pending, unblocked by the call's mask: -EINTR at
	 * once, the handler ran (the pselect race closed) */
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	raise(SIGUSR1);
	ck_assert_int_eq(got_usr1, 0);
	unblocked = old;
	sigdelset(&unblocked, SIGUSR1);
	struct timespec ts;
	ck_assert_int_eq(stk_poll(fds, 1, ms_ts(&ts, 5000), &unblocked), -EINTR);
	ck_assert_int_eq(got_usr1, 1);
	sigset_t cur;
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	ck_assert(sigismember(&cur, SIGUSR1)); /* caller's mask back */
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	/* unblocked by the caller, blocked by the call's mask: no EINTR, the
	 * signal is handled after the call returns */
	got_usr1 = 0;
	sigset_t blocking = old;
	sigaddset(&blocking, SIGUSR1);
	struct kill_arg k = { .target = pthread_self(), .delay_ms = 20 };
	pthread_t thr;
	ck_assert_int_eq(pthread_create(&thr, NULL, kill_main, &k), 0);
	ck_assert_int_eq(stk_poll(fds, 1, ms_ts(&ts, 150), &blocking), 0);
	pthread_join(thr, NULL);
	ck_assert_int_eq(got_usr1, 1);

	/* same through pselect */
	got_usr1 = 0;
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	raise(SIGUSR1);
	fd_set r;
	FD_ZERO(&r);
	FD_SET(a->fd, &r);
	ck_assert_int_eq(stk_pselect(a->fd + 1, &r, NULL, NULL, ms_ts(&ts, 5000), &unblocked),
			 -EINTR);
	ck_assert_int_eq(got_usr1, 1);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
END_TEST

/* ---- select ---- */

START_TEST(select_mixed)
{
	struct fake_conn *a = fake_new(false), *b = fake_new(false);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	fake_set(a, POLLIN | POLLOUT);
	fake_set(b, 0);
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(a->fd, &r);
	FD_SET(b->fd, &r);
	FD_SET(p[0], &r);
	FD_SET(a->fd, &w);
	FD_SET(p[1], &w);
	int maxfd = a->fd > b->fd ? a->fd : b->fd;
	maxfd = maxfd > p[1] ? maxfd : p[1];
	struct timeval tv = { .tv_sec = 1 };
	ck_assert_int_eq(stk_select(maxfd + 1, &r, &w, NULL, &tv), 3);
	ck_assert(FD_ISSET(a->fd, &r));
	ck_assert(!FD_ISSET(b->fd, &r));
	ck_assert(!FD_ISSET(p[0], &r));
	ck_assert(FD_ISSET(a->fd, &w));
	ck_assert(FD_ISSET(p[1], &w));

	/* timeout write-back: 50 ms, nothing ready → 0 and tv reduced to ~0 */
	FD_ZERO(&r);
	FD_SET(b->fd, &r);
	FD_SET(p[0], &r);
	tv.tv_sec = 0;
	tv.tv_usec = 50000;
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_select(maxfd + 1, &r, NULL, NULL, &tv), 0);
	ck_assert_uint_ge(now_ms() - t0, 50);
	ck_assert_int_eq(tv.tv_sec, 0);
	ck_assert_int_lt(tv.tv_usec, 50000);
	/* woken by the accelerated socket */
	struct later l;
	later_start(&l, 30, act_readable, b);
	FD_ZERO(&r);
	FD_SET(b->fd, &r);
	FD_SET(p[0], &r);
	tv.tv_sec = 5;
	tv.tv_usec = 0;
	ck_assert_int_eq(stk_select(maxfd + 1, &r, NULL, NULL, &tv), 1);
	ck_assert(FD_ISSET(b->fd, &r));
	ck_assert(tv.tv_sec < 5);
	later_join(&l);

	/* EBADF for a closed fd in a set, EINVAL for nfds < 0 */
	int q[2];
	ck_assert_int_eq(pipe(q), 0);
	close(q[0]);
	close(q[1]);
	FD_ZERO(&r);
	FD_SET(a->fd, &r);
	FD_SET(q[0], &r);
	int m = a->fd > q[0] ? a->fd : q[0];
	ck_assert_int_eq(stk_select(m + 1, &r, NULL, NULL, NULL), -EBADF);
	ck_assert_int_eq(stk_select(-1, NULL, NULL, NULL, NULL), -EINVAL);
	/* a hung-up socket asked only for exceptional conditions is not ready:
	 * select sleeps to its timeout (as the kernel's) */
	int sp[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	close(sp[1]);
	fd_set e;
	FD_ZERO(&e);
	FD_SET(sp[0], &e);
	FD_ZERO(&r);
	FD_SET(b->fd, &r);
	fake_set(b, 0);
	m = sp[0] > b->fd ? sp[0] : b->fd;
	tv.tv_sec = 0;
	tv.tv_usec = 30000;
	t0 = now_ms();
	ck_assert_int_eq(stk_select(m + 1, &r, NULL, &e, &tv), 0);
	ck_assert_uint_ge(now_ms() - t0, 30);
	close(sp[0]);
	close(p[0]);
	close(p[1]);
}
END_TEST

/* ---- epoll ---- */

static struct stk_epoll *ep_new(int *epfd)
{
	*epfd = epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_ge(*epfd, 0);
	struct stk_epoll *ep;
	ck_assert_int_eq(stk_epoll_create(*epfd, &ep), 0);
	return ep;
}

static void ep_add(struct stk_epoll *ep, struct fake_conn *c, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, (struct stk_conn *)c, &ev), 0);
}

START_TEST(epoll_triggers)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *lt = fake_new(false), *et = fake_new(false), *os = fake_new(false);
	ep_add(ep, lt, EPOLLIN, 1);
	ep_add(ep, et, EPOLLIN | EPOLLET, 2);
	ep_add(ep, os, EPOLLIN | EPOLLONESHOT, 3);
	struct epoll_event evs[8];
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	fake_set(lt, POLLIN);
	fake_set(et, POLLIN);
	fake_set(os, POLLIN);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 1000, NULL), 3);
	/* second wait: level reported again, edge and one-shot not */
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 1);
	ck_assert_uint_eq(evs[0].events, EPOLLIN);
	/* new data on the edge-triggered socket (still readable): a new edge */
	fake_set(et, POLLIN);
	fake_set(os, POLLIN);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 2);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 1);
	/* one-shot re-armed by MOD */
	struct epoll_event mod = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 33 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_MOD, os->fd, (struct stk_conn *)os, &mod), 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 2);
	ck_assert(evs[0].data.u64 == 33 || evs[1].data.u64 == 33);
	/* EPOLLRDHUP only when asked; ERR/HUP always */
	struct epoll_event rd = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 1 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_MOD, lt->fd, (struct stk_conn *)lt, &rd), 0);
	fake_set(lt, POLLIN | POLLRDHUP | POLLOUT);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 1);
	ck_assert_uint_eq(evs[0].events, EPOLLIN | EPOLLRDHUP);
	fake_set(lt, POLLOUT | POLLHUP);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 1);
	ck_assert_uint_eq(evs[0].events, EPOLLHUP);
	/* ctl errors as the kernel's */
	struct epoll_event ev = { .events = EPOLLIN };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, lt->fd, (struct stk_conn *)lt, &ev), -EEXIST);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, 999, NULL, NULL), -ENOENT);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_MOD, 999, (struct stk_conn *)lt, &ev), -ENOENT);
	ck_assert_int_eq(stk_epoll_ctl(ep, 42, lt->fd, (struct stk_conn *)lt, &ev), -EINVAL);
	struct fake_conn *ex = fake_new(false);
	struct epoll_event bad = { .events = EPOLLIN | EPOLLEXCLUSIVE | EPOLLONESHOT };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, ex->fd, (struct stk_conn *)ex, &bad),
			 -EINVAL);
	ep_add(ep, ex, EPOLLIN | EPOLLEXCLUSIVE, 5);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_MOD, ex->fd, (struct stk_conn *)ex, &ev), -EINVAL);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, ex->fd, NULL, NULL), 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 0, 0, NULL), -EINVAL);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

/* The ready list: kernel order (as they became ready), a level-triggered
 * reporter moves to the back, an item that is no longer ready leaves, and a
 * wait looks at no idle item. */
START_TEST(epoll_ready_order)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *c[5];
	for (int i = 0; i < 5; i++) {
		c[i] = fake_new(false);
		ep_add(ep, c[i], EPOLLIN, (uint64_t)i);
	}
	struct epoll_event evs[8];
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	int before = __atomic_load_n(&events_calls, __ATOMIC_RELAXED);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	ck_assert_int_eq(__atomic_load_n(&events_calls, __ATOMIC_RELAXED), before);
	fake_set(c[2], POLLIN);
	fake_set(c[0], POLLIN);
	fake_set(c[4], POLLIN);
	static const int order[] = { 2, 0, 4, 2, 0 };
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(stk_epoll_wait(ep, evs, 1, 0, NULL), 1);
		ck_assert_uint_eq(evs[0].data.u64, (uint64_t)order[i]);
	}
	/* list now 4, 2, 0; 1 becomes ready, 2 is drained */
	fake_set(c[1], POLLIN);
	fake_set(c[2], 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 2, 0, NULL), 2);
	ck_assert_uint_eq(evs[0].data.u64, 4);
	ck_assert_uint_eq(evs[1].data.u64, 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 3);
	ck_assert_uint_eq(evs[0].data.u64, 1);
	ck_assert_uint_eq(evs[1].data.u64, 4);
	ck_assert_uint_eq(evs[2].data.u64, 0);
	/* all drained: one wait drops them, the next evaluates nothing */
	for (int i = 0; i < 5; i++)
		fake_set(c[i], 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	before = __atomic_load_n(&events_calls, __ATOMIC_RELAXED);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	ck_assert_int_eq(__atomic_load_n(&events_calls, __ATOMIC_RELAXED), before);
	/* ready at ADD time: queued by the ADD itself (kernel ep_insert) */
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, c[3]->fd, NULL, NULL), 0);
	fake_set(c[3], POLLIN);
	ep_add(ep, c[3], EPOLLIN, 3);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 3);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

/* A change made by another thread that rings no fd the sleeper watches (its
 * progress delivered the data, a shutdown, a ctl): the sleeper wakes at once
 * through the set's own wake eventfd, not at its timeout. */
struct quiet_set {
	struct fake_conn *c;
	short ev;
};

static void *quiet_set_main(void *arg)
{
	struct quiet_set *q = arg;
	usleep(100000);
	__atomic_fetch_add(&q->c->gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&q->c->ev, q->ev, __ATOMIC_RELEASE);
	stk_watch_notify(&q->c->watch); /* no wait fd rung */
	return NULL;
}

START_TEST(epoll_wake_from_other_thread)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *c = fake_new(true); /* a fabric with a wait fd: no slices */
	ep_add(ep, c, EPOLLIN, 9);
	struct quiet_set q = { .c = c, .ev = POLLIN };
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, quiet_set_main, &q), 0);
	struct epoll_event ev;
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, &ev, 1, 5000, NULL), 1);
	ck_assert_uint_lt(now_ms() - t0, 2000);
	ck_assert_uint_eq(ev.data.u64, 9);
	pthread_join(t, NULL);
	/* drained: the next sleep lasts its timeout (the wake fd is not left set) */
	fake_set(c, 0);
	t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, &ev, 1, 50, NULL), 0);
	ck_assert_uint_ge(now_ms() - t0, 45);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

START_TEST(epoll_mixed_fair)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *a = fake_new(false), *b = fake_new(false);
	ep_add(ep, a, EPOLLIN, 100);
	ep_add(ep, b, EPOLLIN, 200);
	int efd = eventfd(1, EFD_CLOEXEC), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	struct epoll_event kev = { .events = EPOLLIN, .data.u64 = 300 };
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &kev), 0);
	kev.data.u64 = 400;
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &kev), 0);
	fake_set(a, POLLIN);
	fake_set(b, POLLIN);
	/* max 1, three level-ready sources: each is reported within 4 waits */
	bool seen[5] = { false };
	for (int i = 0; i < 6; i++) {
		struct epoll_event ev;
		ck_assert_int_eq(stk_epoll_wait(ep, &ev, 1, 0, NULL), 1);
		ck_assert_uint_le(ev.data.u64 / 100, 3);
		seen[ev.data.u64 / 100] = true;
	}
	ck_assert(seen[1] && seen[2] && seen[3]);
	/* all at once with room */
	struct epoll_event evs[8];
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 3);
	/* a timerfd fires while we sleep: kernel side wakes the wait */
	fake_set(a, 0);
	fake_set(b, 0);
	uint64_t v;
	ck_assert_int_eq(read(efd, &v, sizeof(v)), sizeof(v));
	struct itimerspec its = { .it_value = { 0, 30 * 1000000L } };
	ck_assert_int_eq(timerfd_settime(tfd, 0, &its, NULL), 0);
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 5000, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 400);
	ck_assert_uint_lt(now_ms() - t0, 3000);
	ck_assert_int_eq(read(tfd, &v, sizeof(v)), sizeof(v));
	/* timeouts: 0 and 50 ms (also as epoll_pwait2's timespec) */
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 0, NULL), 0);
	t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, 50, NULL), 0);
	ck_assert_uint_ge(now_ms() - t0, 50);
	struct timespec ts50 = { 0, 50 * 1000000L };
	t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait_ts(ep, evs, 8, &ts50, NULL), 0);
	ck_assert_uint_ge(now_ms() - t0, 50);
	struct timespec bad = { 0, 1000000000L };
	ck_assert_int_eq(stk_epoll_wait_ts(ep, evs, 8, &bad, NULL), -EINVAL);
	/* -1 woken by accelerated data */
	struct later l;
	later_start(&l, 30, act_readable, b);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 8, -1, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 200);
	later_join(&l);
	stk_epoll_destroy(ep);
	close(epfd);
	close(efd);
	close(tfd);
}
END_TEST

START_TEST(epoll_liveness_and_eintr)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *a = fake_new(_i & 1);
	ep_add(ep, a, EPOLLIN | EPOLLET, 7);
	struct later l;
	later_start(&l, 30, act_close_peer, a);
	struct epoll_event evs[4];
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 5000, NULL), 1);
	ck_assert_uint_lt(now_ms() - t0, 1000);
	ck_assert_uint_eq(evs[0].events, EPOLLIN | EPOLLHUP | EPOLLERR);
	later_join(&l);
	/* EINTR (without SA_RESTART and with: epoll_wait is never restarted) */
	install_usr1(SA_RESTART);
	struct fake_conn *b = fake_new(_i & 1);
	ep_add(ep, b, EPOLLIN, 8);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL, NULL), 0);
	struct kill_arg k = { .target = pthread_self(), .delay_ms = 50 };
	pthread_t thr;
	ck_assert_int_eq(pthread_create(&thr, NULL, kill_main, &k), 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 5000, NULL), -EINTR);
	ck_assert_int_eq(got_usr1, 1);
	pthread_join(thr, NULL);
	/* epoll_pwait mask: pending signal unblocked by the mask */
	sigset_t usr1, old, unblocked;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	raise(SIGUSR1);
	unblocked = old;
	sigdelset(&unblocked, SIGUSR1);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 5000, &unblocked), -EINTR);
	ck_assert_int_eq(got_usr1, 2);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

struct waiter {
	struct stk_epoll *ep;
	int got;
	uint64_t data[8];
};

static void *waiter_main(void *p)
{
	struct waiter *w = p;
	uint64_t end = now_ms() + 2000;
	while (now_ms() < end && w->got < 8) {
		struct epoll_event ev[4];
		int n = stk_epoll_wait(w->ep, ev, 4, 200, NULL);
		for (int i = 0; i < n && w->got < 8; i++)
			w->data[w->got++] = ev[i].data.u64;
	}
	return NULL;
}

START_TEST(epoll_threads_and_two_sets)
{
	int epfd, epfd2;
	struct stk_epoll *ep = ep_new(&epfd), *ep2 = ep_new(&epfd2);
	struct fake_conn *a = fake_new(_i & 1), *b = fake_new(_i & 1);
	ep_add(ep, a, EPOLLIN | EPOLLET, 1);
	ep_add(ep, b, EPOLLIN | EPOLLET, 2);
	ep_add(ep2, a, EPOLLIN, 11); /* the same socket in a second set */
	struct waiter w1 = { .ep = ep }, w2 = { .ep = ep };
	pthread_t t1, t2;
	ck_assert_int_eq(pthread_create(&t1, NULL, waiter_main, &w1), 0);
	ck_assert_int_eq(pthread_create(&t2, NULL, waiter_main, &w2), 0);
	usleep(50000);
	fake_set(a, POLLIN);
	fake_set(b, POLLIN);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	/* each edge reported exactly once across the two threads */
	ck_assert_int_eq(w1.got + w2.got, 2);
	uint64_t sum = 0;
	for (int i = 0; i < w1.got; i++)
		sum += w1.data[i];
	for (int i = 0; i < w2.got; i++)
		sum += w2.data[i];
	ck_assert_uint_eq(sum, 3);
	struct epoll_event ev[4];
	ck_assert_int_eq(stk_epoll_wait(ep2, ev, 4, 1000, NULL), 1);
	ck_assert_uint_eq(ev[0].data.u64, 11);
	/* closing the connection removes it from both sets */
	stk_epoll_conn_closed((struct stk_conn *)a);
	ck_assert_int_eq(stk_epoll_wait(ep2, ev, 4, 0, NULL), 0);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL, NULL), -ENOENT);
	stk_epoll_destroy(ep);
	stk_epoll_destroy(ep2);
	close(epfd);
	close(epfd2);
}
END_TEST

START_TEST(epoll_nested)
{
	int inner_fd, outer_fd;
	struct stk_epoll *inner = ep_new(&inner_fd), *outer = ep_new(&outer_fd);
	struct fake_conn *a = fake_new(_i & 1);
	ep_add(inner, a, EPOLLIN, 1);
	/* what the preload does for epoll_ctl(outer, ADD, inner_fd): real ctl, then ours */
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 };
	ck_assert_int_eq(epoll_ctl(outer_fd, EPOLL_CTL_ADD, inner_fd, &ev), 0);
	ck_assert_int_eq(stk_epoll_ctl_inner(outer, EPOLL_CTL_ADD, inner_fd, inner, &ev), 0);
	struct epoll_event evs[4];
	ck_assert_int_eq(stk_epoll_wait(outer, evs, 4, 0, NULL), 0);
	struct later l;
	later_start(&l, 30, act_readable, a);
	ck_assert_int_eq(stk_epoll_wait(outer, evs, 4, 5000, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 77);
	ck_assert_uint_eq(evs[0].events, EPOLLIN);
	later_join(&l);
	ck_assert_int_eq(stk_epoll_wait(inner, evs, 4, 0, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 1);
	/* a plain kernel epoll holding the inner fd sees it readable once exposed */
	int kfd = epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_eq(epoll_ctl(kfd, EPOLL_CTL_ADD, inner_fd, &ev), 0);
	ck_assert_int_eq(stk_epoll_expose(inner), 0);
	ck_assert_int_eq(stk_epoll_wait(inner, evs, 4, 0, NULL), 1); /* a scan */
	ck_assert_int_eq(epoll_wait(kfd, evs, 4, 0), 1);
	fake_set(a, 0);
	ck_assert_int_eq(stk_epoll_wait(inner, evs, 4, 0, NULL), 0); /* drained */
	ck_assert_int_eq(epoll_wait(kfd, evs, 4, 0), 0);
	/* the exposure eventfd never reaches the app */
	ck_assert_int_eq(stk_epoll_wait(inner, evs, 4, 0, NULL), 0);
	stk_epoll_destroy(inner); /* drops it from outer */
	ck_assert_int_eq(stk_epoll_ctl_inner(outer, EPOLL_CTL_DEL, inner_fd, NULL, NULL), -ENOENT);
	stk_epoll_destroy(outer);
	close(kfd);
	close(inner_fd);
	close(outer_fd);
}
END_TEST

/* ---- an idle wait sleeps ---- */

static double cpu_share(void (*wait)(void *), void *arg)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_THREAD, &r0);
	uint64_t t0 = stk_now_ns();
	wait(arg);
	uint64_t wall = stk_now_ns() - t0;
	getrusage(RUSAGE_THREAD, &r1);
	double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec -
			      r0.ru_stime.tv_sec) * 1e9 +
		     (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec -
			      r0.ru_stime.tv_usec) * 1e3;
	return cpu / (double)wall;
}

static void idle_poll(void *arg)
{
	struct fake_conn *a = arg;
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct pollfd fds[] = { { .fd = a->fd, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	struct timespec ts;
	ck_assert_int_eq(stk_poll(fds, 2, ms_ts(&ts, 1000), NULL), 0);
	close(p[0]);
	close(p[1]);
}

static void idle_epoll(void *arg)
{
	struct stk_epoll *ep = arg;
	struct epoll_event ev;
	ck_assert_int_eq(stk_epoll_wait(ep, &ev, 1, 1000, NULL), 0);
}

START_TEST(idle_uses_little_cpu)
{
	stk_cfg.spin_us = 1000; /* a generous spin still ends in a sleep */
	struct fake_conn *a = fake_new(false); /* no wait fd: the sliced sleep */
	double share = cpu_share(idle_poll, a);
	fprintf(stderr, "idle poll 1 s: %.1f %% of a core\n", share * 100);
	ck_assert(share < 0.20);
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	ep_add(ep, a, EPOLLIN, 1);
	share = cpu_share(idle_epoll, ep);
	fprintf(stderr, "idle epoll_wait 1 s: %.1f %% of a core\n", share * 100);
	ck_assert(share < 0.20);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

/* epoll_ctl calls the stack makes on its own sets (P), counted by a wrapper
 * in stk_sys */
static int sys_ctl_calls;
static int (*sys_ctl_real)(int, int, int, struct epoll_event *);
static int counting_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	__atomic_fetch_add(&sys_ctl_calls, 1, __ATOMIC_RELAXED);
	return sys_ctl_real(epfd, op, fd, ev);
}

/* An event loop that removes and adds a socket around every request (as
 * redis-benchmark does): after the first ADD no system call, and the set
 * still behaves as the kernel's: a removed socket is never reported, one
 * added again reports with its new data, a closed one is gone for good. */
START_TEST(epoll_del_add_costs_no_syscall)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *a = fake_new(_i & 1), *b = fake_new(_i & 1);
	sys_ctl_real = stk_sys.epoll_ctl;
	stk_sys.epoll_ctl = counting_ctl;
	ep_add(ep, a, EPOLLIN, 1);
	ep_add(ep, b, EPOLLIN | EPOLLET, 2);
	int first = __atomic_load_n(&sys_ctl_calls, __ATOMIC_RELAXED);
	ck_assert_int_gt(first, 0); /* the liveness fds went into P */
	struct epoll_event evs[4];
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL, NULL), 0);
		ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL, NULL), -ENOENT);
		struct epoll_event mod = { .events = EPOLLIN };
		ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_MOD, a->fd, (struct stk_conn *)a, &mod),
				 -ENOENT);
		fake_set(a, i & 1 ? POLLIN : 0); /* while removed: never reported */
		ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 0, NULL), 0);
		ep_add(ep, a, EPOLLIN, 100 + (uint64_t)i);
		ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, a->fd, (struct stk_conn *)a, &mod),
				 -EEXIST);
		ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 0, NULL), i & 1);
		if (i & 1)
			ck_assert_uint_eq(evs[0].data.u64, 100 + (uint64_t)i);
	}
	ck_assert_int_eq(__atomic_load_n(&sys_ctl_calls, __ATOMIC_RELAXED), first);
	/* removed, then its peer dies: a wait neither reports it nor ends early;
	 * added again, it reports the end */
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, b->fd, NULL, NULL), 0);
	struct later l;
	later_start(&l, 10, act_close_peer, b);
	fake_set(a, 0);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 0, NULL), 0);
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 150, NULL), 0);
	ck_assert_uint_ge(now_ms() - t0, 140);
	later_join(&l);
	ep_add(ep, b, EPOLLIN | EPOLLET, 3);
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 1000, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 3);
	ck_assert_uint_eq(evs[0].events, EPOLLIN | EPOLLHUP | EPOLLERR);
	/* closing a removed connection takes its liveness fd out of P */
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, a->fd, NULL, NULL), 0);
	int before = __atomic_load_n(&sys_ctl_calls, __ATOMIC_RELAXED);
	stk_epoll_conn_closed((struct stk_conn *)a);
	ck_assert_int_eq(__atomic_load_n(&sys_ctl_calls, __ATOMIC_RELAXED), before + 1);
	ck_assert_ptr_eq(a->watch.first, NULL);
	/* a set destroyed with a removed connection leaves no watcher behind */
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, b->fd, NULL, NULL), 0);
	stk_sys.epoll_ctl = sys_ctl_real;
	stk_epoll_destroy(ep);
	ck_assert_ptr_eq(b->watch.first, NULL);
	close(epfd);
}
END_TEST


/* A connection that settles on the kernel while the app adds it to a set, as
 * the negotiation thread does it (stk_lazy.h): the phase, then
 * stk_epoll_conn_changed, then the close of the private duplicate that is the
 * liveness fd. hostile.sh's server got EBADF from epoll_ctl(ADD) of a socket
 * it had just accepted: the set registered the liveness fd that the thread
 * had closed meanwhile. */
struct settler {
	struct fake_conn *c;
	int priv;        /* atomic: the private duplicate, -1 once closed */
	int go, done;    /* atomic */
	int asked;       /* atomic: liveness_fd calls */
};
static struct settler *settling;

static void settle_now(struct settler *st)
{
	__atomic_store_n(&st->c->phase, STK_PHASE_KERNEL, __ATOMIC_RELEASE);
	stk_epoll_conn_changed((struct stk_conn *)st->c);
	close(__atomic_exchange_n(&st->priv, -1, __ATOMIC_ACQ_REL));
	__atomic_store_n(&st->done, 1, __ATOMIC_RELEASE);
}

static void *settler_main(void *arg)
{
	struct settler *st = arg;
	for (int i = 0; i < 5000 && !__atomic_load_n(&st->go, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	settle_now(st);
	return NULL;
}

/* The set asks for the liveness fd: the thread settles the conn right then;
 * the answer is what the set read before (bounded wait: the thread may have
 * to wait for the set's lock). */
static int settling_liveness_fd(struct stk_conn *c)
{
	struct settler *st = settling;
	ck_assert_ptr_eq(F(c), st->c);
	__atomic_fetch_add(&st->asked, 1, __ATOMIC_RELAXED);
	int fd = __atomic_load_n(&st->priv, __ATOMIC_ACQUIRE);
	__atomic_store_n(&st->go, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 50 && !__atomic_load_n(&st->done, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	return fd;
}

/* _i = 0: the conn settles while the set registers it; 1: it settled between
 * the app's lookup (still negotiating) and its EPOLL_CTL_ADD. Either way the
 * ADD succeeds, the socket ends up in the app's kernel set E with the app's
 * data, in none of ours, and the closed fd is never registered. */
START_TEST(epoll_add_races_settle)
{
	int epfd;
	struct stk_epoll *ep = ep_new(&epfd);
	struct fake_conn *c = fake_new(false);
	__atomic_store_n(&c->phase, STK_PHASE_PENDING, __ATOMIC_RELEASE);
	struct settler st = { .c = c, .priv = fcntl(c->fd, F_DUPFD_CLOEXEC, 100) };
	ck_assert_int_ge(st.priv, 0);
	settling = &st;
	stk_ready_ops.phase = fake_phase;
	stk_ready_ops.liveness_fd = settling_liveness_fd;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, settler_main, &st), 0);
	if (_i == 1) {
		__atomic_store_n(&st.go, 1, __ATOMIC_RELEASE);
		for (int i = 0; i < 5000 && !__atomic_load_n(&st.done, __ATOMIC_ACQUIRE); i++)
			usleep(1000);
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 42 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, (struct stk_conn *)c, &ev), 0);
	__atomic_store_n(&st.go, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_int_eq(st.done, 1);
	if (_i == 1)
		ck_assert_int_eq(st.asked, 0); /* a settled conn's fd is never asked for */
	ck_assert_ptr_eq(c->watch.first, NULL);
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL, NULL), -ENOENT);
	/* the kernel set reports it, with the app's data */
	ck_assert_int_eq(write(c->peer, "x", 1), 1);
	struct epoll_event out[2];
	ck_assert_int_eq(epoll_wait(epfd, out, 2, 1000), 1);
	ck_assert_uint_eq(out[0].data.u64, 42);
	stk_epoll_destroy(ep);
	close(epfd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ready");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, poll_all_kernel);
	tcase_add_test(tc, poll_mixed_ready);
	tcase_add_test(tc, poll_nval_from_kernel);
	tcase_add_loop_test(tc, poll_timeouts, 0, 2);
	tcase_add_test(tc, poll_liveness_wakes);
	tcase_add_loop_test(tc, poll_eintr, 0, 2);
	tcase_add_test(tc, ppoll_masks);
	tcase_add_test(tc, select_mixed);
	tcase_add_test(tc, epoll_triggers);
	tcase_add_test(tc, epoll_ready_order);
	tcase_add_test(tc, epoll_wake_from_other_thread);
	tcase_add_test(tc, epoll_mixed_fair);
	tcase_add_loop_test(tc, epoll_liveness_and_eintr, 0, 2);
	tcase_add_loop_test(tc, epoll_threads_and_two_sets, 0, 2);
	tcase_add_loop_test(tc, epoll_del_add_costs_no_syscall, 0, 2);
	tcase_add_loop_test(tc, epoll_nested, 0, 2);
	tcase_add_loop_test(tc, epoll_add_races_settle, 0, 2);
	tcase_add_test(tc, idle_uses_little_cpu);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
