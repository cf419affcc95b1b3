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
#include "stack/stk_conn.h"
#include "stack/stk_epoll.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"

static const char *const providers[] = { "shm", "tcp" };

static void config(const char *prov)
{
	snprintf(stk_cfg.providers, sizeof(stk_cfg.providers), "%s", prov);
	stk_cfg.enabled = true;
	stk_cfg.spin_us = 20;
	stk_cfg.window_bytes = 256 * 1024;
	stk_cfg.batch = 16;
	const char *log = getenv("FABSOCK_LOG");
	stk_log_level = log ? stk_log_level_parse(log) : STK_LOG_WARN;
	if (stk_log_level < 0)
		stk_log_level = STK_LOG_WARN;
}

/* The one accelerated socket of this process, for the lookup hook. */
static struct stk_conn *the_conn;

static struct stk_conn *lookup(int fd)
{
	struct stk_conn *c = __atomic_load_n(&the_conn, __ATOMIC_ACQUIRE);
	return c && c->fd == fd ? c : NULL;
}

static uint64_t now_ms(void)
{
	return stk_ready_now_ns() / 1000000ull;
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

static struct stk_conn *attach(int fd, bool client, const char *prov)
{
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	int ret = stk_accel_attach(fd, client, &conn, &info);
	if (ret != 0 || strcmp(info.provider, prov) != 0) {
		fprintf(stderr, "%s attach over %s: %d (%s, got %s)\n", client ? "client" : "server",
			prov, ret, info.reason, info.provider);
		return NULL;
	}
	return conn;
}

static int child_main(struct pair *p, child_fn fn)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char go;
	if (fd < 0 || read(p->go[0], &go, 1) != 1)
		return 90;
	stk_nego_cache_put((const struct sockaddr *)&p->addr, STK_PEER_CAPABLE);
	if (stk_nego_mark_syn(fd, AF_INET) != 0 ||
	    connect(fd, (const struct sockaddr *)&p->addr, sizeof(p->addr)) != 0 ||
	    stk_nego_unmark(fd, AF_INET) != 0)
		return 91;
	struct stk_conn *conn = attach(fd, true, p->prov);
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
	config(p->prov);
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(p->lfd, 0);
	memset(&p->addr, 0, sizeof(p->addr));
	p->addr.sin_family = AF_INET;
	p->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(p->lfd, (struct sockaddr *)&p->addr, sizeof(p->addr)), 0);
	socklen_t len = sizeof(p->addr);
	ck_assert_int_eq(getsockname(p->lfd, (struct sockaddr *)&p->addr, &len), 0);
	ck_assert_int_eq(listen(p->lfd, 4), 0);
	ck_assert_int_eq(pipe(p->go), 0);
	ck_assert_int_eq(pipe(p->back), 0);
	p->child = fork();
	ck_assert_int_ge(p->child, 0);
	if (p->child == 0) {
		alarm(30);
		close(p->lfd);
		_exit(child_main(p, fn));
	}
	/* libfabric is opened after the fork, in each process */
	ck_assert_int_eq(stk_accel_listen(p->lfd), 0);
	ck_assert_int_eq(write(p->go[1], "g", 1), 1);
	struct pollfd pfd = { .fd = p->lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	int fd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	struct stk_conn *conn = attach(fd, false, p->prov);
	ck_assert_ptr_nonnull(conn);
	char a;
	pfd.fd = p->back[0];
	ck_assert_int_eq(poll(&pfd, 1, 10000), 1);
	ck_assert_int_eq(read(p->back[0], &a, 1), 1);
	__atomic_store_n(&the_conn, conn, __ATOMIC_RELEASE);
	stk_ready_lookup = lookup;
	return conn;
}

static int pair_wait(struct pair *p)
{
	int status = 0;
	for (int i = 0; i < 1000; i++) {
		if (waitpid(p->child, &status, WNOHANG) == p->child)
			goto done;
		usleep(10000);
	}
	kill(p->child, SIGKILL);
	waitpid(p->child, &status, 0);
	return -1;
done:
	close(p->lfd);
	close(p->go[0]);
	close(p->go[1]);
	close(p->back[0]);
	close(p->back[1]);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
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

static Suite *suite(void)
{
	Suite *s = suite_create("ready_pair");
	TCase *tc = tcase_create("pair");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, pair_poll_select_epoll, 0, 2);
	tcase_add_loop_test(tc, pair_peer_killed, 0, 4);
	tcase_add_loop_test(tc, pair_idle_sleeps, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
