/* 64-byte ping-pong where each side waits for the reply with the readiness layer
 * (stk_poll or stk_epoll_wait over the accelerated socket plus an idle pipe, as
 * an event loop would), on an accelerated connection (stack API, no preload)
 * against kernel TCP waited for with poll(2) / epoll_wait(2). Prints median and
 * p99 one-way latency (RTT / 2).
 * Usage: ready_poll [iterations] [provider]   (defaults 50000, "shm")
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
#include <sys/epoll.h>
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

#define MSG 64

enum mode { MODE_POLL, MODE_EPOLL };

static struct stk_conn *the_conn;

static struct stk_conn *lookup(int fd)
{
	return the_conn && the_conn->fd == fd ? the_conn : NULL;
}

/* libfabric 1.17's shm leaves "/dev/shm/<pid>:0:0" behind unless the endpoint
 * is closed, which the stack never does: remove ours before exiting. */
static void shm_cleanup_self(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/%d:0:0", (int)getpid());
	unlink(path);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *rtt, long n)
{
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_u64);
	printf("%-22s %7ld round trips  one-way median %7.2f us  p99 %7.2f us\n", name, n,
	       rtt[n / 2] / 2000.0, rtt[n * 99 / 100] / 2000.0);
	fflush(stdout);
}

static void die(const char *what)
{
	fprintf(stderr, "ready_poll: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A waiter: the socket plus an idle pipe, through the layer or the kernel. */
struct waiter {
	enum mode mode;
	bool accel;
	int fd;
	int pipe_rd;
	int epfd;
	struct stk_epoll *ep;
};

static void waiter_init(struct waiter *w, enum mode mode, bool accel, int fd,
			struct stk_conn *conn)
{
	int p[2];
	if (pipe(p) != 0)
		die("pipe");
	w->mode = mode;
	w->accel = accel;
	w->fd = fd;
	w->pipe_rd = p[0];
	if (mode == MODE_EPOLL) {
		w->epfd = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 1 };
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, p[0], &ev);
		if (accel) {
			if (stk_epoll_create(w->epfd, &w->ep) != 0)
				die("stk_epoll_create");
			ev.data.u64 = 2;
			if (stk_epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, conn, &ev) != 0)
				die("stk_epoll_ctl");
		} else {
			ev.data.u64 = 2;
			epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev);
		}
	}
}

static void wait_readable(struct waiter *w)
{
	if (w->mode == MODE_POLL) {
		struct pollfd fds[2] = { { .fd = w->pipe_rd, .events = POLLIN },
					 { .fd = w->fd, .events = POLLIN } };
		int n = w->accel ? stk_poll(fds, 2, NULL, NULL) : poll(fds, 2, -1);
		if (n <= 0)
			die("poll");
	} else {
		struct epoll_event ev[2];
		int n = w->accel ? stk_epoll_wait(w->ep, ev, 2, -1, NULL)
				 : epoll_wait(w->epfd, ev, 2, -1);
		if (n <= 0)
			die("epoll_wait");
	}
}

static ssize_t xfer(bool accel, struct stk_conn *conn, int fd, void *buf, bool send_it)
{
	if (accel)
		return send_it ? stk_send(conn, buf, MSG, 0) : stk_recv(conn, buf, MSG, MSG_WAITALL);
	return send_it ? send(fd, buf, MSG, 0) : recv(fd, buf, MSG, MSG_WAITALL);
}

/* The echo side, in the forked child: connect once go[0] says so, then
 * answer every message; exits (0 when all went through). */
static _Noreturn void echo_child(const struct sockaddr_in *addr, int lfd, const int go[2],
				 bool accel, enum mode mode, long iters)
{
	alarm(120);
	close(lfd);
	char g;
	if (read(go[0], &g, 1) != 1)
		_exit(2);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (accel) {
		stk_nego_cache_put((const struct sockaddr *)addr, STK_PEER_CAPABLE);
		stk_nego_mark_syn(fd, AF_INET);
	}
	if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0)
		_exit(3);
	struct stk_conn *conn = NULL;
	if (accel) {
		struct stk_attach_info info;
		stk_nego_unmark(fd, AF_INET);
		if (stk_accel_attach(fd, true, &conn, &info) != 0)
			_exit(4);
		the_conn = conn;
		stk_ready_lookup = lookup;
	}
	struct waiter w;
	waiter_init(&w, mode, accel, fd, conn);
	char buf[MSG];
	for (long i = 0; i < iters; i++) {
		wait_readable(&w);
		if (xfer(accel, conn, fd, buf, false) != MSG ||
		    xfer(accel, conn, fd, buf, true) != MSG)
			_exit(5);
	}
	if (accel)
		stk_close(conn, false);
	shm_cleanup_self();
	_exit(0);
}

static void run(const char *prov, bool accel, enum mode mode, long iters)
{
	struct sockaddr_in addr;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t len = sizeof(addr);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) != 0 || listen(lfd, 4) != 0)
		die("listen");
	int go[2];
	if (pipe(go) != 0)
		die("pipe");
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0)
		echo_child(&addr, lfd, go, accel, mode, iters);
	if (accel && stk_accel_listen(lfd) != 0)
		die("stk_accel_listen");
	if (write(go[1], "g", 1) != 1)
		die("write");
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		die("accept");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct stk_conn *conn = NULL;
	if (accel) {
		struct stk_attach_info info;
		if (stk_accel_attach(fd, false, &conn, &info) != 0) {
			fprintf(stderr, "attach: %s\n", info.reason);
			exit(1);
		}
		the_conn = conn;
		stk_ready_lookup = lookup;
	}
	struct waiter w;
	waiter_init(&w, mode, accel, fd, conn);
	uint64_t *rtt = calloc((size_t)iters, sizeof(*rtt));
	char buf[MSG] = { 0 };
	for (long i = 0; i < iters; i++) {
		uint64_t t0 = stk_now_ns();
		if (xfer(accel, conn, fd, buf, true) != MSG)
			die("send");
		wait_readable(&w);
		if (xfer(accel, conn, fd, buf, false) != MSG)
			die("recv");
		rtt[i] = stk_now_ns() - t0;
	}
	char name[64];
	snprintf(name, sizeof(name), "%s %s", accel ? prov : "kernel",
		 mode == MODE_POLL ? "poll" : "epoll");
	report(name, rtt, iters);
	free(rtt);
	int status;
	waitpid(child, &status, 0);
	if (accel) {
		the_conn = NULL;
		if (w.ep)
			stk_epoll_conn_closed(conn);
		stk_close(conn, false);
	} else {
		close(fd);
	}
	close(lfd);
}

/* The all-kernel case: stk_poll (lookup per fd + the real ppoll) against the
 * real ppoll on the same 4 kernel fds, timeout 0. */
static void kernel_overhead(long iters)
{
	int p[2];
	if (pipe(p) != 0)
		die("pipe");
	struct pollfd fds[4] = { { .fd = p[0], .events = POLLIN }, { .fd = p[1], .events = POLLOUT },
				 { .fd = 0, .events = POLLIN }, { .fd = p[0], .events = POLLIN } };
	const struct timespec zero = { 0, 0 };
	for (int pass = 0; pass < 2; pass++) {
		uint64_t t0 = stk_now_ns();
		for (long i = 0; i < iters; i++) {
			int n = pass ? stk_poll(fds, 4, &zero, NULL) : ppoll(fds, 4, &zero, NULL);
			if (n < 0)
				die("poll");
		}
		printf("%-22s %7ld calls  %7.1f ns per call (4 kernel fds, timeout 0)\n",
		       pass ? "stk_poll all-kernel" : "ppoll", iters,
		       (double)(stk_now_ns() - t0) / (double)iters);
	}
	close(p[0]);
	close(p[1]);
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? strtol(argv[1], NULL, 10) : 50000;
	const char *prov = argc > 2 ? argv[2] : "shm";
	if (iters < 100)
		iters = 100;
	snprintf(stk_cfg.providers, sizeof(stk_cfg.providers), "%s", prov);
	stk_cfg.enabled = true;
	stk_cfg.spin_us = getenv("SPIN") ? (unsigned)atoi(getenv("SPIN")) : 50;
	stk_cfg.window_bytes = 256 * 1024;
	stk_cfg.batch = 16;
	stk_log_level = STK_LOG_WARN;
	kernel_overhead(1000000);
	fflush(stdout); /* before the forks */
	/* each measurement in a fresh process: libfabric must be opened after the
	 * fork in both peers, never inherited */
	for (int i = 0; i < 4; i++) {
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			run(prov, i & 1, i < 2 ? MODE_POLL : MODE_EPOLL, iters);
			shm_cleanup_self();
			_exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fprintf(stderr, "ready_poll: run %d failed (status 0x%x)\n", i, status);
	}
	return 0;
}
