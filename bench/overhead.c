/* Per-call cost of socket calls on kernel fds, for comparing a plain run
 * with a run under libfabsock (pass-through: every fd here is a kernel
 * AF_UNIX socket, so the difference is the interposition cost).
 *
 * usage: overhead [-r reps] [-s scale] [-o call] [-p]
 * Default: one line per measured call (only `call` with -o):
 *   <name> <calls per iteration> <median ns per call> <min ns per call>
 * Each repetition times `iters * scale` iterations with CLOCK_MONOTONIC
 * (vDSO: not interposed); the median over repetitions damps the noise of a
 * shared machine. bench/overhead.sh compares a plain and a preloaded run.
 *
 * -p (paired): inside one process, alternate blocks of calls through the
 * symbols the program links to (libfabsock's wrappers when preloaded) and
 * blocks of calls straight into libc (dlsym on libc.so.6's own handle), and
 * report the median of the per-block differences:
 *   <name> <calls per iteration> <libc ns> <symbol ns> <added ns>
 * Both sides see the same machine at the same moment, so the difference is
 * the wrapper's cost without the run-to-run noise of separate processes.
 * Without the preload both sides are libc and the difference is ~0. */
#include "config.h"

#include <dlfcn.h>
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

/* The measured functions, called through pointers so the same loop can
 * run against the linked symbols or against libc's own definitions. */
struct calls {
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*read)(int, void *, size_t);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*fcntl)(int, int, ...);
};

/* What the program links to: libfabsock's wrappers when it is preloaded. */
static const struct calls via_symbols = {
	.send = send, .recv = recv, .write = write, .read = read,
	.poll = poll, .select = select, .epoll_wait = epoll_wait,
	.getsockopt = getsockopt, .fcntl = fcntl,
};

struct bench_op {
	const char *name;
	int calls;		/* libc calls per iteration */
	long iters;		/* iterations per repetition (times scale) */
	int (*run)(struct bench_ctx *c, const struct calls *k, long n);
};

static int op_send_recv(struct bench_ctx *c, const struct calls *k, long n)
{
	for (long i = 0; i < n; i++) {
		if (k->send(c->pair[0], c->buf, MSG, 0) != MSG ||
		    k->recv(c->pair[1], c->buf, MSG, 0) != MSG)
			return -1;
	}
	return 0;
}

static int op_write_read(struct bench_ctx *c, const struct calls *k, long n)
{
	for (long i = 0; i < n; i++) {
		if (k->write(c->pair[0], c->buf, MSG) != MSG ||
		    k->read(c->pair[1], c->buf, MSG) != MSG)
			return -1;
	}
	return 0;
}

static int op_recv_eagain(struct bench_ctx *c, const struct calls *k, long n)
{
	for (long i = 0; i < n; i++) {
		if (k->recv(c->pair[1], c->buf, MSG, MSG_DONTWAIT) != -1 ||
		    errno != EAGAIN)
			return -1;
	}
	return 0;
}

static int op_poll16(struct bench_ctx *c, const struct calls *k, long n)
{
	struct pollfd p[NFDS];

	for (int i = 0; i < NFDS; i++) {
		p[i].fd = c->many[i][0];
		p[i].events = POLLIN | POLLOUT;
	}
	for (long i = 0; i < n; i++) {
		if (k->poll(p, NFDS, 0) != NFDS)
			return -1;
	}
	return 0;
}

static int op_select16(struct bench_ctx *c, const struct calls *k, long n)
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
		if (k->select(maxfd + 1, NULL, &wr, NULL, &tv) != NFDS)
			return -1;
	}
	return 0;
}

static int op_epoll_wait16(struct bench_ctx *c, const struct calls *k, long n)
{
	struct epoll_event ev[NFDS];

	for (long i = 0; i < n; i++) {
		if (k->epoll_wait(c->ep, ev, NFDS, 0) != NFDS)
			return -1;
	}
	return 0;
}

static int op_getsockopt(struct bench_ctx *c, const struct calls *k, long n)
{
	int v;
	socklen_t len;

	for (long i = 0; i < n; i++) {
		len = sizeof(v);
		if (k->getsockopt(c->pair[0], SOL_SOCKET, SO_TYPE, &v, &len))
			return -1;
	}
	return 0;
}

static int op_fcntl(struct bench_ctx *c, const struct calls *k, long n)
{
	for (long i = 0; i < n; i++) {
		if (k->fcntl(c->pair[0], F_GETFL) < 0)
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

/* libc's own definitions, found on libc.so.6's handle so the preload's
 * wrappers are not in the way. */
static int resolve_libc(struct calls *k)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	if (!libc)
		return -1;
#define RESOLVE(f) \
	do { *(void **)&k->f = dlsym(libc, #f); if (!k->f) return -1; } while (0)
	RESOLVE(send);
	RESOLVE(recv);
	RESOLVE(write);
	RESOLVE(read);
	RESOLVE(poll);
	RESOLVE(select);
	RESOLVE(epoll_wait);
	RESOLVE(getsockopt);
	RESOLVE(fcntl);
#undef RESOLVE
	return 0;
}

/* Plain: median and minimum ns per call over reps repetitions. */
static int run_plain(struct bench_ctx *ctx, const struct bench_op *op,
		     long reps, long n)
{
	double ns[MAX_REPS];

	for (long r = 0; r < reps; r++) {
		double t0 = now_ns();

		if (op->run(ctx, &via_symbols, n))
			return -1;
		ns[r] = (now_ns() - t0) / (double)n / op->calls;
	}
	qsort(ns, (size_t)reps, sizeof(ns[0]), cmp_double);
	printf("%s %d %.1f %.1f\n", op->name, op->calls, ns[reps / 2], ns[0]);
	return 0;
}

/* Paired: BLOCKS blocks per repetition, each timing n/BLOCKS iterations
 * through libc and through the symbols, in alternating order. */
enum { BLOCKS = 20 };

static int run_paired(struct bench_ctx *ctx, const struct bench_op *op,
		      const struct calls *libc, long reps, long n)
{
	static double t_libc[MAX_REPS * BLOCKS], t_sym[MAX_REPS * BLOCKS],
		diff[MAX_REPS * BLOCKS];
	long per = n / BLOCKS + 1;
	size_t m = 0;

	for (long r = 0; r < reps; r++) {
		for (int b = 0; b < BLOCKS; b++, m++) {
			const struct calls *first = b % 2 ? libc : &via_symbols;
			const struct calls *second = b % 2 ? &via_symbols : libc;
			double t0 = now_ns(), t1, t2;

			if (op->run(ctx, first, per))
				return -1;
			t1 = now_ns();
			if (op->run(ctx, second, per))
				return -1;
			t2 = now_ns();
			double a = (t1 - t0) / (double)per / op->calls;
			double z = (t2 - t1) / (double)per / op->calls;

			t_libc[m] = first == libc ? a : z;
			t_sym[m] = first == libc ? z : a;
			diff[m] = t_sym[m] - t_libc[m];
		}
	}
	qsort(t_libc, m, sizeof(double), cmp_double);
	qsort(t_sym, m, sizeof(double), cmp_double);
	qsort(diff, m, sizeof(double), cmp_double);
	printf("%s %d %.1f %.1f %.1f\n", op->name, op->calls, t_libc[m / 2],
	       t_sym[m / 2], diff[m / 2]);
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench_ctx ctx;
	struct calls libc;
	long reps = 7, scale = 1;
	const char *only = NULL;
	int opt, found = 0, paired = 0;

	while ((opt = getopt(argc, argv, "r:s:o:p")) != -1) {
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
		case 'p':
			paired = 1;
			break;
		default:
			fprintf(stderr, "usage: overhead [-r reps] [-s scale] "
				"[-o call] [-p]\n");
			return 2;
		}
	}
	if (setup(&ctx)) {
		perror("overhead: setup");
		return 1;
	}
	if (paired && resolve_libc(&libc)) {
		fprintf(stderr, "overhead: cannot resolve libc's functions: %s\n",
			dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		const struct bench_op *op = &ops[i];
		long n = op->iters * scale;

		if (only && strcmp(only, op->name))
			continue;
		found = 1;
		/* Warm-up: page in code and buffers, let the CPU clock up. */
		if (op->run(&ctx, &via_symbols, n / 10 + 1) ||
		    (paired ? run_paired(&ctx, op, &libc, reps, n) :
			      run_plain(&ctx, op, reps, n))) {
			fprintf(stderr, "overhead: %s failed: %s\n", op->name,
				strerror(errno));
			return 1;
		}
		fflush(stdout);
	}
	if (only && !found) {
		fprintf(stderr, "overhead: unknown call '%s'\n", only);
		return 2;
	}
	return 0;
}
