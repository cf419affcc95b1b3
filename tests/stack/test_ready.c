/* The readiness core's poll side (stk_poll, stk_select, stk_pselect) against
 * the test double of the connection and fabric (ready_fake.h), mixed with real
 * kernel fds: pipes, eventfds, timerfds, sockets; and an idle poll or
 * epoll_wait that sleeps. Every wait is bounded. */
#include "config.h"

#include <check.h>
#include <errno.h>
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
#include "stack/stk_time.h"
#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "ready_fake.h"
#include "../lib/check_main.h"

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

static Suite *suite(void)
{
	Suite *s = suite_create("ready");
	TCase *tc = tcase_create("core");
	tcase_add_checked_fixture(tc, fake_setup, fake_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, poll_all_kernel);
	tcase_add_test(tc, poll_mixed_ready);
	tcase_add_test(tc, poll_nval_from_kernel);
	tcase_add_loop_test(tc, poll_timeouts, 0, 2);
	tcase_add_test(tc, poll_liveness_wakes);
	tcase_add_loop_test(tc, poll_eintr, 0, 2);
	tcase_add_test(tc, ppoll_masks);
	tcase_add_test(tc, select_mixed);
	tcase_add_test(tc, idle_uses_little_cpu);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
