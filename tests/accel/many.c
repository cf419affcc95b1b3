/* Many concurrent connections through one epoll server, every byte checked.
 *
 *   many server PORT N              epoll echo server; exits after N connections
 *                                   were served and closed by their client
 *   many client PORT N ROUNDS MAX   N connections (connected first, all at once
 *                                   open), then ROUNDS echoes of 1..MAX random
 *                                   bytes each, all connections in flight together,
 *                                   every byte compared
 *   many both N ROUNDS MAX          both in one process (server in a thread)
 *
 * The server runs half of its connections level-triggered (EPOLLIN, EPOLLOUT only
 * while a reply is pending) and half edge-triggered (EPOLLIN|EPOLLOUT|EPOLLET,
 * drained to EAGAIN), so both modes carry real traffic. Memory: the client (or
 * the whole process, for both) prints its resident size per connection after
 * connecting and after the echoes, and fails above MANY_MAX_KIB_PER_CONN (KiB,
 * per connection; 0 or unset: not checked). Every wait is bounded (MANY_TIMEOUT_S,
 * default 120 s, for the whole run). Prints "listening" when the server is up
 * and "ok" lines; exits 0 on success. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define IOBUF 4096

static double deadline_s;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "many: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void check_time(const char *phase)
{
	if (now_s() > deadline_s) {
		fprintf(stderr, "many: time limit exceeded during %s\n", phase);
		exit(1);
	}
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* ---- server ---- */

struct srv_conn {
	int fd;
	int et;
	size_t out_off, out_len;
	unsigned char buf[IOBUF];
};

#define SRV_TRACK 70000 /* diagnostics: connections by fd */
static struct srv_conn *srv_by_fd[SRV_TRACK];

struct server {
	int lfd, ep;
	int want;      /* connections to serve */
	int served;    /* closed by their client */
	int accepted;
};

static void srv_close(struct server *s, struct srv_conn *c)
{
	if (c->fd < SRV_TRACK)
		srv_by_fd[c->fd] = NULL;
	close(c->fd); /* the kernel and libfabsock drop it from the set */
	free(c);
	s->served++;
}

/* Flush the pending reply; 1 when empty, 0 when the socket is full. */
static int srv_flush(struct srv_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = write(c->fd, c->buf + c->out_off, c->out_len - c->out_off);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			die("server write");
		c->out_off += (size_t)n;
	}
	c->out_off = c->out_len = 0;
	return 1;
}

/* Returns 0 when the connection was closed. */
static int srv_event(struct server *s, struct srv_conn *c)
{
	for (int loops = 0;; loops++) {
		if (!srv_flush(c))
			break;
		ssize_t n = read(c->fd, c->buf, sizeof(c->buf));
		if (n == 0) {
			srv_close(s, c);
			return 0;
		}
		if (n < 0 && errno == EAGAIN)
			break;
		if (n < 0)
			die("server read");
		c->out_len = (size_t)n;
		if (!c->et && loops > 0)
			break; /* level-triggered: the next wait says if more is there */
	}
	if (!c->et) {
		struct epoll_event ev = { .events = c->out_len ? EPOLLOUT : EPOLLIN, .data.ptr = c };
		if (epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
			die("epoll_ctl MOD");
	} else if (c->out_len == 0) {
		/* edge-triggered and drained to EAGAIN: the next edge wakes us */
	}
	return 1;
}

static void srv_accept(struct server *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN)
				return;
			die("accept4");
		}
		struct srv_conn *c = calloc(1, sizeof(*c));
		if (!c)
			die("calloc");
		c->fd = fd;
		if (fd < SRV_TRACK)
			srv_by_fd[fd] = c;
		c->et = getenv("MANY_LT_ONLY") ? 0 : s->accepted & 1;
		s->accepted++;
		struct epoll_event ev = {
			.events = c->et ? EPOLLIN | EPOLLOUT | EPOLLET : EPOLLIN, .data.ptr = c
		};
		if (epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
			die("epoll_ctl ADD");
	}
}

static int server_listen(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("bind");
	if (listen(fd, 4096) != 0)
		die("listen");
	return fd;
}

static void *server_run(void *arg)
{
	struct server *s = arg;
	struct epoll_event evs[256];
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->ep < 0)
		die("epoll_create1");
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	if (epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &lev) != 0)
		die("epoll_ctl listener");
	while (s->served < s->want) {
		if (now_s() > deadline_s) {
			unsigned shown = 0;
			for (int fd = 0; fd < SRV_TRACK && shown < 5; fd++) {
				struct srv_conn *c = srv_by_fd[fd];
				if (!c)
					continue;
				shown++;
				int inq = -1;
				ioctl(fd, FIONREAD, &inq);
				struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
				poll(&p, 1, 0);
				fprintf(stderr, "many: server stuck: et %d out %zu/%zu inq %d revents %#x\n",
					c->et, c->out_off, c->out_len, inq, p.revents);
			}
		}
		check_time("serving");
		int n = epoll_wait(s->ep, evs, 256, 1000);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++) {
			if (!evs[i].data.ptr)
				srv_accept(s);
			else
				srv_event(s, evs[i].data.ptr);
		}
	}
	close(s->ep);
	close(s->lfd);
	printf("server: ok, %d connections served\n", s->served);
	return NULL;
}

/* ---- client ---- */

struct cli_conn {
	int fd;
	unsigned id, round;
	size_t size, sent, got;
	uint32_t seed;
	int done;
};

/* Byte i of round r of connection id: the expected echo. */
static unsigned char pattern(unsigned id, unsigned round, size_t i)
{
	uint32_t x = id * 2654435761u ^ round * 40503u ^ (uint32_t)i * 2246822519u;
	x ^= x >> 15;
	x *= 2654435761u;
	return (unsigned char)(x >> 24);
}

static size_t next_size(struct cli_conn *c, size_t max)
{
	c->seed = c->seed * 1103515245u + 12345u;
	return 1 + (c->seed >> 8) % max;
}

static int client_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("client socket");
	/* blocking connect: negotiation happens inside it */
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		die("connect");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
		die("fcntl");
	return fd;
}

static void cli_arm(int ep, struct cli_conn *c, int op)
{
	struct epoll_event ev = { .events = c->sent < c->size ? EPOLLOUT : EPOLLIN,
				  .data.ptr = c };
	if (epoll_ctl(ep, op, c->fd, &ev) != 0)
		die("client epoll_ctl");
}

/* Progress one connection; returns 1 when it finished all rounds. */
static int cli_event(int ep, struct cli_conn *c, unsigned rounds, size_t max)
{
	unsigned char buf[IOBUF];
	while (c->sent < c->size) {
		size_t len = c->size - c->sent < sizeof(buf) ? c->size - c->sent : sizeof(buf);
		for (size_t i = 0; i < len; i++)
			buf[i] = pattern(c->id, c->round, c->sent + i);
		ssize_t n = write(c->fd, buf, len);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			die("client write");
		c->sent += (size_t)n;
		if (c->sent == c->size)
			cli_arm(ep, c, EPOLL_CTL_MOD);
	}
	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			fprintf(stderr, "many: conn %u round %u: read %zd (%s) after %zu of %zu\n",
				c->id, c->round, n, n < 0 ? strerror(errno) : "EOF", c->got, c->size);
			exit(1);
		}
		if (c->got + (size_t)n > c->size) {
			fprintf(stderr, "many: conn %u round %u: %zu bytes more than sent\n", c->id,
				c->round, c->got + (size_t)n - c->size);
			exit(1);
		}
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != pattern(c->id, c->round, c->got + (size_t)i)) {
				fprintf(stderr, "many: conn %u round %u: byte %zu differs\n", c->id,
					c->round, c->got + (size_t)i);
				exit(1);
			}
		}
		c->got += (size_t)n;
		if (c->got == c->size) {
			if (++c->round == rounds) {
				close(c->fd);
				c->done = 1;
				return 1;
			}
			c->size = next_size(c, max);
			c->sent = c->got = 0;
			cli_arm(ep, c, EPOLL_CTL_MOD);
			return 0;
		}
	}
}

/* Memory per connection is measured from after the first connection: that one
 * also pays for what a process holds once (the provider's endpoint and its
 * registered buffers). */
static int client_run(int port, unsigned n, unsigned rounds, size_t max)
{
	long limit = getenv("MANY_MAX_KIB_PER_CONN") ? atol(getenv("MANY_MAX_KIB_PER_CONN")) : 0;
	struct cli_conn *conns = calloc(n, sizeof(*conns));
	if (!conns)
		die("calloc");
	double t0 = now_s();
	long rss0 = 0;
	for (unsigned i = 0; i < n; i++) {
		check_time("connecting");
		conns[i].fd = client_connect(port);
		conns[i].id = i;
		conns[i].seed = i * 7919u + 1;
		if (i == 0) {
			usleep(100000); /* the server's side of it is set up too */
			rss0 = rss_kib();
		}
	}
	double t1 = now_s();
	long rss1 = rss_kib();
	long per = n > 1 ? n - 1 : 1;
	printf("client: %u connections open (%.2f ms each); %.1f KiB resident per connection\n",
	       n, (t1 - t0) * 1e3 / n, (double)(rss1 - rss0) / per);
	fflush(stdout);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	for (unsigned i = 0; i < n; i++) {
		conns[i].size = next_size(&conns[i], max);
		cli_arm(ep, &conns[i], EPOLL_CTL_ADD);
	}
	unsigned finished = 0;
	struct epoll_event evs[256];
	while (finished < n) {
		if (now_s() > deadline_s) {
			unsigned shown = 0;
			for (unsigned i = 0; i < n && shown < 5; i++) {
				struct cli_conn *c = &conns[i];
				if (c->done)
					continue;
				shown++;
				fprintf(stderr, "many: stuck: conn %u round %u sent %zu got %zu of %zu\n",
					c->id, c->round, c->sent, c->got, c->size);
			}
		}
		check_time("echoing");
		int k = epoll_wait(ep, evs, 256, 1000);
		if (k < 0 && errno != EINTR)
			die("client epoll_wait");
		for (int i = 0; i < k; i++)
			finished += (unsigned)cli_event(ep, evs[i].data.ptr, rounds, max);
	}
	double t2 = now_s();
	long rss2 = rss_kib();
	close(ep);
	printf("client: ok, %u connections x %u rounds echoed byte for byte (%.0f round trips/s); "
	       "%.1f KiB resident per connection after the echoes\n", n, rounds,
	       (double)n * rounds / (t2 - t1), (double)(rss2 - rss0) / per);
	free(conns);
	if (limit > 0 && ((rss1 - rss0) / per > limit || (rss2 - rss0) / per > limit)) {
		printf("client: FAIL: more than %ld KiB per connection\n", limit);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *t = getenv("MANY_TIMEOUT_S");
	deadline_s = now_s() + (t ? atof(t) : 120.0);
	if (argc >= 4 && strcmp(argv[1], "server") == 0) {
		struct server s = { .lfd = server_listen(atoi(argv[2])), .want = atoi(argv[3]) };
		printf("listening\n");
		server_run(&s);
		return 0;
	}
	if (argc >= 6 && strcmp(argv[1], "client") == 0) {
		return client_run(atoi(argv[2]), (unsigned)atoi(argv[3]), (unsigned)atoi(argv[4]),
				  (size_t)atol(argv[5]));
	}
	if (argc >= 5 && strcmp(argv[1], "both") == 0) {
		struct server s = { .lfd = server_listen(0), .want = atoi(argv[2]) };
		struct sockaddr_in a;
		socklen_t alen = sizeof(a);
		if (getsockname(s.lfd, (struct sockaddr *)&a, &alen) != 0)
			die("getsockname");
		pthread_t th;
		if (pthread_create(&th, NULL, server_run, &s) != 0)
			die("pthread_create");
		int rc = client_run(ntohs(a.sin_port), (unsigned)atoi(argv[2]),
				    (unsigned)atoi(argv[3]), (size_t)atol(argv[4]));
		pthread_join(th, NULL);
		return rc;
	}
	fprintf(stderr, "usage: many server PORT N | client PORT N ROUNDS MAX | both N ROUNDS MAX\n");
	return 2;
}
