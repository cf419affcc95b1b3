/* 64-byte ping-pong over the stack's own API (stk_accel_attach + stk_send /
 * stk_recv) on a loopback TCP connection, against plain kernel TCP on the same
 * machine. Prints the median and 99th percentile one-way latency (RTT / 2).
 * Usage: stack_pingpong [iterations] [providers]   (defaults 100000, "shm")
 * A benchmark, never a test: numbers depend on the machine and its load. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_conn.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_stream.h"

#define MSG 64

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *rtt, long n)
{
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
	printf("%-16s %8ld round trips  one-way median %7.2f us  p99 %7.2f us\n", name, n,
	       rtt[n / 2] / 2000.0, rtt[n * 99 / 100] / 2000.0);
}

/* Loopback listener; the port is returned in addr. */
static int listen_any(struct sockaddr_in *addr, bool accel)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || (accel && stk_nego_listener_prepare(lfd) != 0) ||
	    bind(lfd, (struct sockaddr *)addr, sizeof(*addr)) != 0 || listen(lfd, 4) != 0) {
		perror("listen");
		exit(1);
	}
	socklen_t len = sizeof(*addr);
	getsockname(lfd, (struct sockaddr *)addr, &len);
	return lfd;
}

static int dial(const struct sockaddr_in *addr, bool accel)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (accel)
		stk_nego_mark_syn(fd, AF_INET);
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
		perror("connect");
		exit(1);
	}
	if (accel)
		stk_nego_unmark(fd, AF_INET);
	return fd;
}

static int accept_one(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static ssize_t k_recv_all(int fd, char *buf, size_t len)
{
	return recv(fd, buf, len, MSG_WAITALL);
}

static void run_kernel(long iters, uint64_t *rtt)
{
	struct sockaddr_in addr;
	int lfd = listen_any(&addr, false);
	pid_t child = fork();
	if (child == 0) {
		int fd = accept_one(lfd);
		char buf[MSG];
		while (k_recv_all(fd, buf, MSG) == MSG)
			if (send(fd, buf, MSG, 0) != MSG)
				break;
		_exit(0);
	}
	struct timespec c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &c0);
	int fd = dial(&addr, false);
	clock_gettime(CLOCK_MONOTONIC, &c1);
	printf("kernel connect: %.1f us\n",
	       ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / 1000.0);
	char buf[MSG] = { 0 };
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		if (send(fd, buf, MSG, 0) != MSG || k_recv_all(fd, buf, MSG) != MSG)
			exit(2);
		rtt[i] = now_ns() - t0;
	}
	close(fd);
	close(lfd);
	waitpid(child, NULL, 0);
	report("kernel TCP", rtt, iters);
}

static void run_stack(long iters, uint64_t *rtt)
{
	struct sockaddr_in addr;
	int lfd = listen_any(&addr, true);
	int go[2];
	if (pipe(go) != 0)
		exit(1);
	pid_t child = fork();
	if (child == 0) {
		/* server: open the endpoint after the fork, then let the client in */
		stk_accel_listen(lfd);
		if (write(go[1], "g", 1) != 1)
			_exit(1);
		for (int round = 0; round < 2; round++) {
			int fd = accept_one(lfd);
			struct stk_conn *conn;
			struct stk_attach_info info;
			if (stk_accel_attach(fd, false, &conn, &info) != 0) {
				fprintf(stderr, "server: kernel path: %s\n", info.reason);
				_exit(1);
			}
			char buf[MSG];
			while (stk_recv(conn, buf, MSG, MSG_WAITALL) == MSG)
				if (stk_send(conn, buf, MSG, 0) != MSG)
					break;
			stk_close(conn, false);
		}
		_exit(0);
	}
	char byte;
	if (read(go[0], &byte, 1) != 1)
		exit(1);
	struct timespec c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &c0);
	int fd = dial(&addr, true);
	struct stk_conn *conn;
	struct stk_attach_info info;
	stk_nego_cache_put((struct sockaddr *)&addr, STK_PEER_CAPABLE);
	if (stk_accel_attach(fd, true, &conn, &info) != 0) {
		fprintf(stderr, "client: kernel path: %s\n", info.reason);
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &c1);
	printf("connect + negotiate + fabric handshake (first connection, endpoint open "
	       "included): %.1f us\n",
	       ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / 1000.0);
	/* a second connection: endpoints already open (the steady-state cost) */
	stk_close(conn, false);
	clock_gettime(CLOCK_MONOTONIC, &c0);
	fd = dial(&addr, true);
	if (stk_accel_attach(fd, true, &conn, &info) != 0) {
		fprintf(stderr, "client: kernel path: %s\n", info.reason);
		exit(1);
	}
	clock_gettime(CLOCK_MONOTONIC, &c1);
	printf("connect + negotiate + fabric handshake (second connection): %.1f us\n",
	       ((c1.tv_sec - c0.tv_sec) * 1e9 + (c1.tv_nsec - c0.tv_nsec)) / 1000.0);
	char buf[MSG] = { 0 };
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		if (stk_send(conn, buf, MSG, 0) != MSG ||
		    stk_recv(conn, buf, MSG, MSG_WAITALL) != MSG)
			exit(2);
		rtt[i] = now_ns() - t0;
	}
	stk_close(conn, false);
	close(lfd);
	waitpid(child, NULL, 0);
	char name[64];
	snprintf(name, sizeof(name), "stk over %s", info.provider);
	report(name, rtt, iters);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	if (iters < 100 || iters > 100000000) {
		fprintf(stderr, "iterations: expected 100..100000000\n");
		return 1;
	}
	snprintf(stk_cfg.providers, sizeof(stk_cfg.providers), "%s", argc > 2 ? argv[2] : "shm");
	stk_cfg.enabled = true;
	stk_cfg.spin_us = 1000; /* the latency profile */
	stk_cfg.window_bytes = 256 * 1024;
	stk_cfg.batch = 4;
	stk_log_level = STK_LOG_WARN;
	uint64_t *rtt = calloc((size_t)iters, sizeof(*rtt));
	if (!rtt)
		return 1;
	run_kernel(iters, rtt);
	run_stack(iters, rtt);
	free(rtt);
	return 0;
}
