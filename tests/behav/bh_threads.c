/* Threads: several threads create, use, duplicate and close sockets at the
 * same time (the preload's fd table is shared and read without locks), one
 * thread blocked in recv is woken by another's shutdown, one blocked in
 * epoll_wait by another's epoll_ctl of a ready socket. Each worker checks
 * its own bytes; the transcript holds only per-thread totals. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { WORKERS = 4, ROUNDS = 150, PAYLOAD = 3000 };

struct worker {
	int id;
	int rounds_ok;
	int failures;
};

/* One round: a TCP pair and a UNIX pair, data both ways with checksums,
 * dup/dup2/fcntl churn, then close everything. */
static int one_round(int id, int round)
{
	char out[PAYLOAD], in[PAYLOAD];
	int c, s, d, u[2], ok = 1;

	bh_tcp_pair(&c, &s, round % 2 ? SOCK_NONBLOCK : 0);
	bh_fill(out, sizeof(out), (uint32_t)(id * 1000 + round), 0);
	if (bh_write_all(c, out, sizeof(out)) != PAYLOAD ||
	    bh_read_all(s, in, sizeof(in)) != PAYLOAD ||
	    memcmp(in, out, sizeof(out)))
		ok = 0;
	d = dup(s);
	if (d < 0 || bh_write_all(d, out, 100) != 100 ||
	    bh_read_all(c, in, 100) != 100 || memcmp(in, out, 100))
		ok = 0;
	/* dup2 over the other end's dup: closes it, renames s. */
	if (dup2(s, d) != d || fcntl(d, F_GETFL) < 0)
		ok = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, u) ||
	    send(u[0], out, 500, 0) != 500 ||
	    bh_read_all(u[1], in, 500) != 500 || memcmp(in, out, 500))
		ok = 0;
	close(u[0]);
	close(u[1]);
	close(d);
	close(s);
	/* The peer sees EOF only now that both names are closed. */
	if (bh_read_all(c, in, 1) != 0)
		ok = 0;
	close(c);
	return ok;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int r = 0; r < ROUNDS; r++) {
		if (one_round(w->id, r))
			w->rounds_ok++;
		else
			w->failures++;
	}
	return NULL;
}

static void test_concurrent_churn(void)
{
	pthread_t t[WORKERS];
	struct worker w[WORKERS];

	bh_say("-- %d threads x %d rounds of create/use/dup/close", WORKERS,
	       ROUNDS);
	fflush(stdout);
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){ .id = i };
		pthread_create(&t[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(t[i], NULL);
		bh_say("thread %d: %d rounds ok, %d failed", i, w[i].rounds_ok,
		       w[i].failures);
		BH_CHECK(w[i].rounds_ok == ROUNDS && w[i].failures == 0);
	}
}

struct blocked {
	int fd;
	ssize_t ret;
	int err;
};

static void *recv_main(void *arg)
{
	struct blocked *b = arg;
	char buf[16];

	b->ret = recv(b->fd, buf, sizeof(buf), 0);
	b->err = b->ret < 0 ? errno : 0;
	return NULL;
}

static void *epoll_main(void *arg)
{
	struct blocked *b = arg;
	struct epoll_event ev;

	b->ret = epoll_wait(b->fd, &ev, 1, 10000);
	b->err = b->ret < 0 ? errno : (int)ev.data.u64;
	return NULL;
}

static void test_cross_thread_wakeups(void)
{
	struct blocked b = { 0 };
	pthread_t t;
	int c, s;

	bh_say("-- wake-ups across threads");
	bh_tcp_pair(&c, &s, 0);
	b.fd = s;
	pthread_create(&t, NULL, recv_main, &b);
	usleep(50000);
	bh_ok("shutdown(SHUT_RDWR) from another thread", shutdown(s, SHUT_RDWR));
	pthread_join(t, NULL);
	bh_say("blocked recv returned %zd (%s)", b.ret, bh_errname(b.err));
	BH_CHECK(b.ret == 0);
	close(c);
	close(s);

	bh_tcp_pair(&c, &s, 0);
	int ep = epoll_create1(0);
	b = (struct blocked){ .fd = ep };
	pthread_create(&t, NULL, epoll_main, &b);
	usleep(50000);
	write(c, "x", 1);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 };
	bh_ok("epoll_ctl(ADD ready socket) from another thread",
	      epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	pthread_join(t, NULL);
	bh_say("blocked epoll_wait returned %zd, cookie %d", b.ret, b.err);
	BH_CHECK(b.ret == 1 && b.err == 77);
	close(ep);
	close(c);
	close(s);
}

int main(void)
{
	bh_start("threads");
	test_concurrent_churn();
	test_cross_thread_wakeups();
	return bh_finish();
}
