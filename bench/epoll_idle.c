/* epoll_wait cost with many registered, mostly idle TCP connections: run it on
 * the kernel and under the launcher (bench/epoll_idle.sh does both) to compare.
 *
 * A child process accepts and echoes; the parent opens connections to it in
 * steps (1, 100, 1000, ... up to MAX), registers each in one epoll set
 * (level-triggered EPOLLIN), and at each step measures
 *   - idle: epoll_wait(timeout 0) returning nothing, ns per call;
 *   - ping: a 1-byte round trip on one connection, waited for with
 *     epoll_wait(-1) over the whole set (median and p99, µs).
 * Usage: epoll_idle [MAX]  (default 10000, capped by RLIMIT_NOFILE: an
 * accelerated socket holds two fds). A benchmark, never a test. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IDLE_CALLS 20000
#define PINGS 5000

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "epoll_idle: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The echo peer: accepts up to max connections, echoes, exits at EOF of all. */
static void serve(int lfd, int max)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = lfd }, evs[64];
	int open = 0, accepted = 0;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 64, 60000);
		if (n <= 0)
			_exit(n == 0 ? 2 : 1);
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd) {
				int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (c < 0)
					continue;
				int one = 1;
				setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
				open++;
				accepted++;
				continue;
			}
			char buf[256];
			ssize_t r = read(fd, buf, sizeof(buf));
			if (r <= 0) {
				close(fd);
				if (--open == 0 && accepted == max)
					_exit(0);
				continue;
			}
			if (write(fd, buf, (size_t)r) != r)
				_exit(1);
		}
	}
}

static int connect_to(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = (uint16_t)port,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("connect");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void measure(int ep, int fd0, int n)
{
	struct epoll_event evs[64];
	uint64_t t0 = now_ns();
	for (int i = 0; i < IDLE_CALLS; i++)
		if (epoll_wait(ep, evs, 64, 0) != 0)
			die("epoll_wait: something is not idle");
	double idle_ns = (double)(now_ns() - t0) / IDLE_CALLS;

	static uint64_t rtt[PINGS];
	for (int i = 0; i < PINGS; i++) {
		char c = 'p';
		uint64_t s = now_ns();
		if (write(fd0, &c, 1) != 1)
			die("write");
		for (int got = 0; !got;) {
			int k = epoll_wait(ep, evs, 64, 5000);
			if (k <= 0)
				die("epoll_wait: no echo");
			for (int j = 0; j < k; j++)
				got |= evs[j].data.fd == fd0;
		}
		if (read(fd0, &c, 1) != 1)
			die("read");
		rtt[i] = now_ns() - s;
	}
	qsort(rtt, PINGS, sizeof(rtt[0]), cmp_u64);
	printf("%8d %14.0f %14.2f %14.2f\n", n, idle_ns, rtt[PINGS / 2] / 1e3,
	       rtt[PINGS * 99 / 100] / 1e3);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "serve") == 0) {
		int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t alen = sizeof(a);
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
		    listen(lfd, 4096) != 0 || getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
			die("listener");
		int wfd = atoi(argv[3]);
		if (write(wfd, &a.sin_port, sizeof(a.sin_port)) != sizeof(a.sin_port))
			die("write port");
		close(wfd);
		serve(lfd, atoi(argv[2]));
	}
	int max = argc > 1 ? atoi(argv[1]) : 10000;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		int cap = (int)((rl.rlim_cur > 1u << 20 ? 1u << 20 : rl.rlim_cur) - 64) / 2;
		if (max > cap) {
			fprintf(stderr, "epoll_idle: RLIMIT_NOFILE allows %d connections, not %d\n",
				cap, max);
			max = cap;
		}
	}
	/* The peer is a fresh process (fork + exec of ourselves): under the
	 * launcher it then starts its own libfabsock, as a real server would. */
	int pfd[2];
	if (pipe(pfd) != 0)
		die("pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		char maxs[16], fds[16];
		snprintf(maxs, sizeof(maxs), "%d", max);
		snprintf(fds, sizeof(fds), "%d", pfd[1]);
		close(pfd[0]);
		execl("/proc/self/exe", argv[0], "serve", maxs, fds, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	struct sockaddr_in a = { .sin_family = AF_INET };
	if (read(pfd[0], &a.sin_port, sizeof(a.sin_port)) != sizeof(a.sin_port))
		die("the echo peer did not start");
	close(pfd[0]);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	printf("%8s %14s %14s %14s\n", "sockets", "idle wait ns", "ping p50 us", "ping p99 us");
	int n = 0, fd0 = -1;
	for (int step = 1; step <= max; step = step < max && step * 10 > max ? max : step * 10) {
		while (n < step) {
			int fd = connect_to(a.sin_port); /* network order */
			struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
				die("epoll_ctl");
			if (fd0 < 0)
				fd0 = fd;
			n++;
		}
		measure(ep, fd0, n);
		if (step == max)
			break;
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return 0;
}
