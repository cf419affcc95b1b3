/* The readiness core's epoll side (stk_epoll) against the test double of the
 * connection and fabric (ready_fake.h), mixed with real kernel fds: eventfds,
 * timerfds, nested epoll sets. Every wait is bounded. */
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
#include "ready_fake.h"
#include "../lib/check_main.h"

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
	Suite *s = suite_create("ready_epoll");
	TCase *tc = tcase_create("epoll");
	tcase_add_checked_fixture(tc, fake_setup, fake_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, epoll_triggers);
	tcase_add_test(tc, epoll_ready_order);
	tcase_add_test(tc, epoll_wake_from_other_thread);
	tcase_add_test(tc, epoll_mixed_fair);
	tcase_add_loop_test(tc, epoll_liveness_and_eintr, 0, 2);
	tcase_add_loop_test(tc, epoll_threads_and_two_sets, 0, 2);
	tcase_add_loop_test(tc, epoll_del_add_costs_no_syscall, 0, 2);
	tcase_add_loop_test(tc, epoll_nested, 0, 2);
	tcase_add_loop_test(tc, epoll_add_races_settle, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
