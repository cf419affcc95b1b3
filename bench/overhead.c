/* Per-call cost of socket calls on kernel fds, for comparing a plain run
 * with a run under libfabsock (pass-through: every fd here is a kernel
 * AF_UNIX socket, so the difference is the interposition cost).
 *
 * usage: overhead [-r reps] [-s scale] [-o call]
 * Prints one line per measured call (only `call` with -o):
 *   <name> <calls per iteration> <median ns per call> <min ns per call>
 * bench/overhead.sh runs it with and without the preload and prints the
 * table. Each repetition times `iters * scale` iterations with
 * CLOCK_MONOTONIC (vDSO: not interposed); the median over repetitions
 * damps the noise of a shared machine. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { NFDS = 16, MSG = 64, MAX_REPS = 101 };

struct bench_ctx {
	int pair[2];		/* stream socketpair for data calls */
	int many[NFDS][2];	/* 16 socketpairs: poll/select/epoll sets */
	int ep;			/* epoll fd watching many[i][0] for EPOLLOUT */
	char buf[MSG];
};

struct bench_op {
	const char *name;
	int calls;		/* libc calls per iteration */
	long iters;		/* iterations per repetition (times scale) */
	int (*run)(struct bench_ctx *c, long n);
};

static int op_send_recv(struct bench_ctx *c, long n)
{
	for (long i = 0; i < n; i++) {
		if (send(c->pair[0], c->buf, MSG, 0) != MSG ||
		    recv(c->pair[1], c->buf, MSG, 0) != MSG)
			return -1;
	}
	return 0;
}

static int op_write_read(struct bench_ctx *c, long n)
{
	for (long i = 0; i < n; i++) {
		if (write(c->pair[0], c->buf, MSG) != MSG ||
		    read(c->pair[1], c->buf, MSG) != MSG)
			return -1;
	}
	return 0;
}

static int op_recv_eagain(struct bench_ctx *c, long n)
{
	for (long i = 0; i < n; i++) {
		if (recv(c->pair[1], c->buf, MSG, MSG_DONTWAIT) != -1 ||
		    errno != EAGAIN)
			return -1;
	}
	return 0;
}

static int op_poll16(struct bench_ctx *c, long n)
{
	struct pollfd p[NFDS];

	for (int i = 0; i < NFDS; i++) {
		p[i].fd = c->many[i][0];
		p[i].events = POLLIN | POLLOUT;
	}
	for (long i = 0; i < n; i++) {
		if (poll(p, NFDS, 0) != NFDS)
			return -1;
	}
	return 0;
}

static int op_select16(struct bench_ctx *c, long n)
{
	int maxfd = 0;

	for (int i = 0; i < NFDS; i++)
		if (c->many[i][0] > maxfd)
			maxfd = c->many[i][0];
	for (long i = 0; i < n; i++) {
		fd_set wr;
		struct timeval tv = { 0, 0 };

		FD_ZERO(&wr);
		for (int j = 0; j < NFDS; j++)
			FD_SET(c->many[j][0], &wr);
		if (select(maxfd + 1, NULL, &wr, NULL, &tv) != NFDS)
			return -1;
	}
	return 0;
}

static int op_epoll_wait16(struct bench_ctx *c, long n)
{
	struct epoll_event ev[NFDS];

	for (long i = 0; i < n; i++) {
		if (epoll_wait(c->ep, ev, NFDS, 0) != NFDS)
			return -1;
	}
	return 0;
}

static int op_getsockopt(struct bench_ctx *c, long n)
{
	int v;
	socklen_t len;

	for (long i = 0; i < n; i++) {
		len = sizeof(v);
		if (getsockopt(c->pair[0], SOL_SOCKET, SO_TYPE, &v, &len))
			return -1;
	}
	return 0;
}

static int op_fcntl(struct bench_ctx *c, long n)
{
	for (long i = 0; i < n; i++) {
		if (fcntl(c->pair[0], F_GETFL) < 0)
			return -1;
	}
	return 0;
}

static const struct bench_op ops[] = {
	{ "send+recv_64B", 2, 100000, op_send_recv },
	{ "write+read_64B", 2, 100000, op_write_read },
	{ "recv_EAGAIN", 1, 200000, op_recv_eagain },
	{ "poll_16fds", 1, 100000, op_poll16 },
	{ "select_16fds", 1, 100000, op_select16 },
	{ "epoll_wait_16fds", 1, 100000, op_epoll_wait16 },
	{ "getsockopt", 1, 300000, op_getsockopt },
	{ "fcntl_GETFL", 1, 300000, op_fcntl },
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int setup(struct bench_ctx *c)
{
	struct epoll_event ev = { .events = EPOLLOUT };

	memset(c->buf, 'x', sizeof(c->buf));
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, c->pair))
		return -1;
	fcntl(c->pair[1], F_SETFL, O_NONBLOCK);
	c->ep = epoll_create1(0);
	if (c->ep < 0)
		return -1;
	for (int i = 0; i < NFDS; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, c->many[i]))
			return -1;
		if (epoll_ctl(c->ep, EPOLL_CTL_ADD, c->many[i][0], &ev))
			return -1;
	}
	return 0;
}

static long parse_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "overhead: %s: expected %ld..%ld, got '%s'\n",
			what, lo, hi, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	static struct bench_ctx ctx;
	long reps = 7, scale = 1;
	const char *only = NULL;
	int opt, found = 0;

	while ((opt = getopt(argc, argv, "r:s:o:")) != -1) {
		switch (opt) {
		case 'r':
			reps = parse_long(optarg, 1, MAX_REPS, "-r repetitions");
			break;
		case 's':
			scale = parse_long(optarg, 1, 1000, "-s scale");
			break;
		case 'o':
			only = optarg;
			break;
		default:
			fprintf(stderr,
				"usage: overhead [-r reps] [-s scale] [-o call]\n");
			return 2;
		}
	}
	if (setup(&ctx)) {
		perror("overhead: setup");
		return 1;
	}
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		const struct bench_op *op = &ops[k];
		double ns[MAX_REPS];
		long n = op->iters * scale;

		if (only && strcmp(only, op->name))
			continue;
		found = 1;
		/* Warm-up: page in code and buffers, let the CPU clock up. */
		if (op->run(&ctx, n / 10 + 1)) {
			fprintf(stderr, "overhead: %s failed: %s\n", op->name,
				strerror(errno));
			return 1;
		}
		for (long r = 0; r < reps; r++) {
			double t0 = now_ns();

			if (op->run(&ctx, n))
				return 1;
			ns[r] = (now_ns() - t0) / (double)n / op->calls;
		}
		qsort(ns, (size_t)reps, sizeof(ns[0]), cmp_double);
		printf("%s %d %.1f %.1f\n", op->name, op->calls, ns[reps / 2],
		       ns[0]);
		fflush(stdout);
	}
	if (only && !found) {
		fprintf(stderr, "overhead: unknown call '%s'\n", only);
		return 2;
	}
	return 0;
}
