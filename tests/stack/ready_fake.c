/* The readiness test double and helpers (ready_fake.h). */
#include "config.h"

#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "ready_fake.h"

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

int events_calls;
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

int fake_phase(struct stk_conn *c)
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
void fake_set(struct fake_conn *c, short ev)
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

struct fake_conn *fake_new(bool with_wait_fd)
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

void fake_setup(void)
{
	stk_cfg.spin_us = 20;
	stk_ready_ops = fake_ops;
	stk_ready_lookup = fake_lookup;
	nfakes = 0;
	fab_fd.wait_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ck_assert_int_ge(fab_fd.wait_fd, 0);
}

void fake_teardown(void)
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

uint64_t now_ms(void)
{
	return stk_now_ns() / 1000000ull;
}

const struct timespec *ms_ts(struct timespec *ts, int ms)
{
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
	return ts;
}

static void *later_main(void *p)
{
	struct later *l = p;
	usleep((useconds_t)l->delay_ms * 1000);
	l->fn(l->arg);
	return NULL;
}

void later_start(struct later *l, int delay_ms, void (*fn)(void *), void *arg)
{
	l->delay_ms = delay_ms;
	l->fn = fn;
	l->arg = arg;
	ck_assert_int_eq(pthread_create(&l->thr, NULL, later_main, l), 0);
}

void later_join(struct later *l)
{
	pthread_join(l->thr, NULL);
}

void act_readable(void *arg)
{
	fake_set(arg, POLLIN | POLLOUT);
}

void act_write_fd(void *arg)
{
	uint64_t v = 1;
	ck_assert_int_eq(write(*(int *)arg, &v, sizeof(v)), sizeof(v));
}

void act_close_peer(void *arg)
{
	struct fake_conn *c = arg;
	close(c->peer);
	c->peer = -1;
}

volatile sig_atomic_t got_usr1;
static void on_usr1(int sig)
{
	(void)sig;
	got_usr1++;
}

void *kill_main(void *p)
{
	struct kill_arg *k = p;
	usleep((useconds_t)k->delay_ms * 1000);
	pthread_kill(k->target, SIGUSR1);
	return NULL;
}

void install_usr1(int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	got_usr1 = 0;
}

struct stk_epoll *ep_new(int *epfd)
{
	*epfd = epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_ge(*epfd, 0);
	struct stk_epoll *ep;
	ck_assert_int_eq(stk_epoll_create(*epfd, &ep), 0);
	return ep;
}

void ep_add(struct stk_epoll *ep, struct fake_conn *c, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, (struct stk_conn *)c, &ev), 0);
}
