/* Readiness over real accelerated connections (stk_accel_attach on both ends of
 * a loopback TCP connection; the client is a forked child), on shm and tcp:
 * poll/select/epoll mixed with kernel fds, EPOLLET and EPOLLRDHUP after the
 * peer's shutdown(SHUT_WR), the peer killed with SIGKILL while we wait, and an
 * idle wait that sleeps. Every wait is bounded. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_lazy.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_conn.h"
#include "stack/stk_epoll.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"
#include "../lib/stk_pair.h"
#include "../lib/tcp_pair.h"
#include "../lib/check_main.h"

static const char *const providers[] = { "shm", "tcp" };

/* The accelerated sockets of this process, for the lookup hook. */
#define CONNS_MAX 8
static struct stk_conn *the_conn;
static struct stk_conn *more_conns[CONNS_MAX];

static struct stk_conn *lookup(int fd)
{
	struct stk_conn *c = __atomic_load_n(&the_conn, __ATOMIC_ACQUIRE);
	if (c && c->fd == fd)
		return c;
	for (int i = 0; i < CONNS_MAX; i++) {
		c = __atomic_load_n(&more_conns[i], __ATOMIC_ACQUIRE);
		if (c && c->fd == fd)
			return c;
	}
	return NULL;
}

static uint64_t now_ms(void)
{
	return stk_now_ns() / 1000000ull;
}

/* libfabric 1.17's shm names its region "/dev/shm/<pid>:0:0" and removes it only
 * when the endpoint is closed; the stack keeps its endpoint until exit and never
 * closes it, so every process that used shm leaves 16 MiB behind (reported to
 * the stack's owner), and a later process given the same pid fails to open shm
 * (EBUSY). Tests clean up after themselves and their children. */
static void shm_cleanup(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/%d:0:0", (int)pid);
	unlink(path);
}

static void shm_cleanup_self(void)
{
	shm_cleanup(getpid());
}

/* ---- the pair ---- */

struct pair {
	int lfd;
	int go[2];      /* parent → child: listening (and later: "go on") */
	int back[2];    /* child → parent: attached */
	struct sockaddr_in addr;
	pid_t child;
	const char *prov;
};

typedef int (*child_fn)(struct pair *p, struct stk_conn *conn);

static int child_main(struct pair *p, child_fn fn)
{
	char go;
	if (read(p->go[0], &go, 1) != 1)
		return 90;
	int fd = stk_pair_connect(&p->addr, STK_PAIR_MARK | STK_PAIR_KNOWN);
	if (fd < 0)
		return 91;
	struct stk_conn *conn = stk_pair_attach(fd, true, p->prov);
	if (!conn)
		return 92;
	if (write(p->back[1], "a", 1) != 1)
		return 93;
	return fn(p, conn);
}

/* Start the pair; returns the server side's connection. */
static struct stk_conn *pair_start(struct pair *p, int prov_index, child_fn fn)
{
	p->prov = providers[prov_index];
	stk_pair_config(p->prov);
	p->lfd = tcp_pair_listen(&p->addr, SOCK_CLOEXEC, 4);
	ck_assert_int_ge(p->lfd, 0);
	ck_assert_int_eq(pipe(p->go), 0);
	ck_assert_int_eq(pipe(p->back), 0);
	p->child = fork();
	ck_assert_int_ge(p->child, 0);
	if (p->child == 0) {
		alarm(30);
		close(p->lfd);
		int rc = child_main(p, fn);
		shm_cleanup_self();
		_exit(rc);
	}
	atexit(shm_cleanup_self);
	/* libfabric is opened after the fork, in each process */
	ck_assert_int_eq(stk_accel_listen(p->lfd), 0);
	ck_assert_int_eq(write(p->go[1], "g", 1), 1);
	int fd = tcp_pair_accept(p->lfd, 10000);
	ck_assert_int_ge(fd, 0);
	struct stk_conn *conn = stk_pair_attach(fd, false, p->prov);
	ck_assert_ptr_nonnull(conn);
	char a;
	struct pollfd pfd = { .fd = p->back[0], .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	ck_assert_int_eq(read(p->back[0], &a, 1), 1);
	__atomic_store_n(&the_conn, conn, __ATOMIC_RELEASE);
	stk_ready_lookup = lookup;
	return conn;
}

static int pair_wait(struct pair *p)
{
	int rc = tcp_pair_wait_child(p->child, 10000);
	if (rc < 0)
		return rc;
	close(p->lfd);
	close(p->go[0]);
	close(p->go[1]);
	close(p->back[0]);
	close(p->back[1]);
	return rc;
}

static void pair_close(struct pair *p, struct stk_conn *conn)
{
	__atomic_store_n(&the_conn, NULL, __ATOMIC_RELEASE);
	stk_epoll_conn_closed(conn);
	stk_close(conn, false);
	(void)p;
}

/* ---- poll, select, epoll over a real connection ---- */

/* Child: after 50 ms send "1"; wait for "2"; send "3" and shutdown(SHUT_WR);
 * wait for EOF. */
static int talk_child(struct pair *p, struct stk_conn *conn)
{
	(void)p;
	char b;
	usleep(50000);
	if (stk_send(conn, "1", 1, 0) != 1)
		return 10;
	if (stk_recv(conn, &b, 1, 0) != 1 || b != '2')
		return 11;
	if (stk_send(conn, "3", 1, 0) != 1 || stk_shutdown(conn, SHUT_WR) != 0)
		return 12;
	if (stk_recv(conn, &b, 1, 0) != 0)
		return 13;
	return stk_close(conn, false) == 0 ? 0 : 14;
}

START_TEST(pair_poll_select_epoll)
{
	struct pair p;
	struct stk_conn *conn = pair_start(&p, _i, talk_child);
	int pfd[2], sv[2];
	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	int efd = eventfd(0, EFD_CLOEXEC);
	struct pollfd fds[] = {
		{ .fd = pfd[0], .events = POLLIN }, { .fd = conn->fd, .events = POLLIN | POLLRDHUP },
		{ .fd = sv[0], .events = POLLIN },  { .fd = efd, .events = POLLIN },
	};
	struct timespec ts = { .tv_sec = 0 };
	/* nothing yet */
	ck_assert_int_eq(stk_poll(fds, 4, &ts, NULL), 0);
	/* -1 (bounded by the test timeout): woken by the child's byte */
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 4, NULL, NULL), 1);
	ck_assert_uint_lt(now_ms() - t0, 5000);
	ck_assert_int_eq(fds[1].revents, POLLIN);
	/* select sees it readable and writable */
	fd_set r, w;
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(conn->fd, &r);
	FD_SET(conn->fd, &w);
	FD_SET(pfd[0], &r);
	int maxfd = conn->fd > pfd[0] ? conn->fd : pfd[0];
	struct timeval tv = { .tv_sec = 1 };
	ck_assert_int_eq(stk_select(maxfd + 1, &r, &w, NULL, &tv), 2);
	ck_assert(FD_ISSET(conn->fd, &r) && FD_ISSET(conn->fd, &w) && !FD_ISSET(pfd[0], &r));
	char b;
	ck_assert_int_eq(stk_recv(conn, &b, 1, 0), 1);
	ck_assert_int_eq(b, '1');

	/* epoll: the socket edge-triggered with RDHUP, plus the kernel fds */
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	struct stk_epoll *ep;
	ck_assert_int_eq(stk_epoll_create(epfd, &ep), 0);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = 1 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, conn->fd, conn, &ev), 0);
	ev.events = EPOLLIN;
	ev.data.u64 = 2;
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, pfd[0], &ev), 0);
	ev.data.u64 = 3;
	ck_assert_int_eq(epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ev), 0);
	struct epoll_event evs[4];
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 0, NULL), 0);
	ck_assert_int_eq(stk_send(conn, "2", 1, 0), 1);
	/* the child answers "3" then SHUT_WR: IN (and RDHUP once the FIN is in) */
	bool rdhup = false;
	int got3 = 0;
	for (int i = 0; i < 50 && !rdhup; i++) {
		int n = stk_epoll_wait(ep, evs, 4, 2000, NULL);
		ck_assert_int_ge(n, 1);
		ck_assert_uint_eq(evs[0].data.u64, 1);
		ck_assert(evs[0].events & EPOLLIN);
		rdhup = evs[0].events & EPOLLRDHUP;
		ssize_t k;
		while ((k = stk_recv(conn, &b, 1, MSG_DONTWAIT)) == 1)
			got3 += b == '3';
		ck_assert(k == 0 || k == -EAGAIN);
	}
	ck_assert(rdhup);
	ck_assert_int_eq(got3, 1);
	ck_assert_int_eq(stk_recv(conn, &b, 1, 0), 0); /* EOF */
	/* edge-triggered: nothing new, no report; the kernel eventfd still works */
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 0, NULL), 0);
	uint64_t one = 1;
	ck_assert_int_eq(write(efd, &one, sizeof(one)), sizeof(one));
	ck_assert_int_eq(stk_epoll_wait(ep, evs, 4, 1000, NULL), 1);
	ck_assert_uint_eq(evs[0].data.u64, 3);
	stk_epoll_ctl(ep, EPOLL_CTL_DEL, conn->fd, NULL, NULL);
	stk_epoll_destroy(ep);
	close(epfd);
	pair_close(&p, conn);
	ck_assert_int_eq(pair_wait(&p), 0);
	close(pfd[0]);
	close(pfd[1]);
	close(sv[0]);
	close(sv[1]);
	close(efd);
}
END_TEST

/* ---- the peer is killed while we wait ---- */

static int sleepy_child(struct pair *p, struct stk_conn *conn)
{
	(void)conn;
	char b;
	/* blocks until the parent says so (or is killed) */
	return read(p->go[0], &b, 1) == 1 ? 0 : 20;
}

struct killer {
	pid_t pid;
	uint64_t killed_at;
};

static void *killer_main(void *arg)
{
	struct killer *k = arg;
	usleep(100000);
	__atomic_store_n(&k->killed_at, now_ms(), __ATOMIC_RELEASE);
	kill(k->pid, SIGKILL);
	return NULL;
}

START_TEST(pair_peer_killed)
{
	/* _i: provider × (poll, epoll) */
	bool use_epoll = _i & 1;
	struct pair p;
	struct stk_conn *conn = pair_start(&p, _i >> 1, sleepy_child);
	struct killer k = { .pid = p.child };
	pthread_t thr;
	ck_assert_int_eq(pthread_create(&thr, NULL, killer_main, &k), 0);
	int epfd = -1;
	struct stk_epoll *ep = NULL;
	short got;
	if (use_epoll) {
		epfd = epoll_create1(EPOLL_CLOEXEC);
		ck_assert_int_eq(stk_epoll_create(epfd, &ep), 0);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 9 };
		ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, conn->fd, conn, &ev), 0);
		struct epoll_event out;
		ck_assert_int_eq(stk_epoll_wait(ep, &out, 1, 5000, NULL), 1);
		got = (short)out.events;
	} else {
		struct pollfd fds[] = { { .fd = conn->fd, .events = POLLIN } };
		struct timespec ts = { .tv_sec = 5 };
		ck_assert_int_eq(stk_poll(fds, 1, &ts, NULL), 1);
		got = fds[0].revents;
	}
	uint64_t seen = now_ms();
	pthread_join(thr, NULL);
	uint64_t killed = __atomic_load_n(&k.killed_at, __ATOMIC_ACQUIRE);
	fprintf(stderr, "%s %s: peer death seen after %llu ms (events 0x%x)\n", p.prov,
		use_epoll ? "epoll" : "poll", (unsigned long long)(seen - killed), got);
	ck_assert_uint_lt(seen - killed, 1000);
	ck_assert(got & (POLLIN | POLLERR | POLLHUP));
	char b;
	ssize_t n = stk_recv(conn, &b, 1, MSG_DONTWAIT);
	ck_assert(n == 0 || n == -ECONNRESET);
	if (ep) {
		stk_epoll_destroy(ep);
		close(epfd);
	}
	pair_close(&p, conn);
	ck_assert_int_eq(pair_wait(&p), 128 + SIGKILL);
	shm_cleanup(p.child); /* the killed peer could not clean up */
}
END_TEST

/* ---- idle: a 1 s wait on a quiet connection sleeps ---- */

static double thread_cpu_s(void)
{
	struct rusage r;
	getrusage(RUSAGE_THREAD, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

START_TEST(pair_idle_sleeps)
{
	struct pair p;
	struct stk_conn *conn = pair_start(&p, _i, sleepy_child);
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	struct pollfd fds[] = { { .fd = conn->fd, .events = POLLIN }, { .fd = pfd[0], .events = POLLIN } };
	struct timespec ts = { .tv_sec = 1 };
	double c0 = thread_cpu_s();
	uint64_t t0 = now_ms();
	ck_assert_int_eq(stk_poll(fds, 2, &ts, NULL), 0);
	double share = (thread_cpu_s() - c0) / ((double)(now_ms() - t0) / 1e3);
	fprintf(stderr, "%s: idle poll 1 s used %.1f %% of a core\n", p.prov, share * 100);
	ck_assert(share < 0.20);

	int epfd = epoll_create1(EPOLL_CLOEXEC);
	struct stk_epoll *ep;
	ck_assert_int_eq(stk_epoll_create(epfd, &ep), 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, conn->fd, conn, &ev), 0);
	c0 = thread_cpu_s();
	t0 = now_ms();
	ck_assert_int_eq(stk_epoll_wait(ep, &ev, 1, 1000, NULL), 0);
	share = (thread_cpu_s() - c0) / ((double)(now_ms() - t0) / 1e3);
	fprintf(stderr, "%s: idle epoll_wait 1 s used %.1f %% of a core\n", p.prov, share * 100);
	ck_assert(share < 0.20);
	stk_epoll_destroy(ep);
	close(epfd);
	ck_assert_int_eq(write(p.go[1], "x", 1), 1); /* let the child go */
	ck_assert_int_eq(pair_wait(&p), 0);
	pair_close(&p, conn);
	close(pfd[0]);
	close(pfd[1]);
}
END_TEST

/* ---- a thread pool: one epoll set, two threads, EPOLLONESHOT re-armed ---- */

#define POOL_CONNS 4
#define POOL_ROUNDS 500
#define POOL_MSG 64

static int pool_client_conn(struct pair *p, struct stk_conn **out)
{
	int fd = stk_pair_connect(&p->addr, STK_PAIR_MARK);
	if (fd < 0)
		return -1;
	*out = stk_pair_attach(fd, true, p->prov);
	return *out ? 0 : -1;
}

/* Child: 4 connections; each round sends one numbered message on every one,
 * then reads every echo back and checks it. */
static int pool_child(struct pair *p, struct stk_conn *first)
{
	struct stk_conn *c[POOL_CONNS] = { first };
	for (int i = 1; i < POOL_CONNS; i++)
		if (pool_client_conn(p, &c[i]) != 0)
			return 30;
	for (int r = 0; r < POOL_ROUNDS; r++) {
		for (int i = 0; i < POOL_CONNS; i++) {
			unsigned char msg[POOL_MSG];
			memset(msg, (r * 7 + i) & 0xff, sizeof(msg));
			if (stk_send(c[i], msg, sizeof(msg), 0) != POOL_MSG)
				return 31;
		}
		for (int i = 0; i < POOL_CONNS; i++) {
			unsigned char msg[POOL_MSG];
			if (stk_recv(c[i], msg, sizeof(msg), MSG_WAITALL) != POOL_MSG)
				return 32;
			for (int k = 0; k < POOL_MSG; k++)
				if (msg[k] != ((r * 7 + i) & 0xff))
					return 33;
		}
	}
	for (int i = 0; i < POOL_CONNS; i++)
		stk_close(c[i], false);
	return 0;
}

struct pool {
	struct stk_epoll *ep;
	struct stk_conn *conn[POOL_CONNS];
	int fds[POOL_CONNS];
	int closed;          /* atomic */
	long echoed;         /* atomic */
	int errors;          /* atomic */
};

static void *pool_thread(void *arg)
{
	struct pool *pl = arg;
	uint64_t end = now_ms() + 30000;
	while (__atomic_load_n(&pl->closed, __ATOMIC_ACQUIRE) < POOL_CONNS && now_ms() < end) {
		struct epoll_event ev[2];
		int n = stk_epoll_wait(pl->ep, ev, 2, 100, NULL);
		if (n < 0) {
			__atomic_fetch_add(&pl->errors, 1, __ATOMIC_RELAXED);
			break;
		}
		for (int i = 0; i < n; i++) {
			int idx = (int)ev[i].data.u64;
			struct stk_conn *c = pl->conn[idx];
			unsigned char buf[4096];
			bool eof = false;
			for (;;) {
				ssize_t got = stk_recv(c, buf, sizeof(buf), MSG_DONTWAIT);
				if (got == -EAGAIN)
					break;
				if (got <= 0) {
					eof = true;
					break;
				}
				if (stk_send(c, buf, (size_t)got, 0) != got)
					__atomic_fetch_add(&pl->errors, 1, __ATOMIC_RELAXED);
				__atomic_fetch_add(&pl->echoed, got, __ATOMIC_RELAXED);
			}
			if (eof) {
				__atomic_fetch_add(&pl->closed, 1, __ATOMIC_RELEASE);
				continue; /* one-shot: stays disabled */
			}
			struct epoll_event re = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
						  .data.u64 = (uint64_t)idx };
			if (stk_epoll_ctl(pl->ep, EPOLL_CTL_MOD, pl->fds[idx], c, &re) != 0)
				__atomic_fetch_add(&pl->errors, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

START_TEST(pair_thread_pool)
{
	struct pair p;
	struct pool pl = { .closed = 0 };
	pl.conn[0] = pair_start(&p, _i, pool_child);
	for (int i = 1; i < POOL_CONNS; i++) {
		int fd = tcp_pair_accept(p.lfd, 10000);
		ck_assert_int_ge(fd, 0);
		pl.conn[i] = stk_pair_attach(fd, false, p.prov);
		ck_assert_ptr_nonnull(pl.conn[i]);
		__atomic_store_n(&more_conns[i], pl.conn[i], __ATOMIC_RELEASE);
	}
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_eq(stk_epoll_create(epfd, &pl.ep), 0);
	for (int i = 0; i < POOL_CONNS; i++) {
		pl.fds[i] = pl.conn[i]->fd;
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
					  .data.u64 = (uint64_t)i };
		ck_assert_int_eq(stk_epoll_ctl(pl.ep, EPOLL_CTL_ADD, pl.fds[i], pl.conn[i], &ev), 0);
	}
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, pool_thread, &pl), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(pl.errors, 0);
	ck_assert_int_eq(pl.closed, POOL_CONNS);
	ck_assert_int_eq(pl.echoed, (long)POOL_CONNS * POOL_ROUNDS * POOL_MSG);
	ck_assert_int_eq(pair_wait(&p), 0);
	for (int i = 0; i < POOL_CONNS; i++) {
		__atomic_store_n(&more_conns[i], NULL, __ATOMIC_RELEASE);
		if (i == 0)
			__atomic_store_n(&the_conn, NULL, __ATOMIC_RELEASE);
		stk_epoll_conn_closed(pl.conn[i]);
		stk_close(pl.conn[i], false);
	}
	stk_epoll_destroy(pl.ep);
	close(epfd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ready_pair");
	TCase *tc = tcase_create("pair");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, pair_poll_select_epoll, 0, 2);
	tcase_add_loop_test(tc, pair_peer_killed, 0, 4);
	tcase_add_loop_test(tc, pair_idle_sleeps, 0, 2);
	tcase_add_loop_test(tc, pair_thread_pool, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
