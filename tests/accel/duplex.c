/* Full-duplex streams with two threads per socket, every byte checked; and a
 * reader woken by a peer that has unread data of its own.
 *
 *   duplex server PORT CONNS BYTES MINW MAXW
 *   duplex client PORT CONNS BYTES MINW MAXW PAR
 *       CONNS connections in all, PAR of them at a time. On each, both ends
 *       run a writer thread (BYTES in writes of MINW..MAXW random bytes, then
 *       shutdown(SHUT_WR)) and a reader thread (reads to EOF, comparing every
 *       byte) on the same socket at the same time (DUPLEX_ONEWAY=1 in both
 *       processes: the server's writer sends nothing). The stream of each direction
 *       of each connection is a different pseudo-random sequence (the client
 *       writes the connection's number first: both ends derive it from that).
 *   duplex wake-server PORT ROUNDS
 *   duplex wake-client PORT ROUNDS IDLE_MS
 *       ROUNDS times: the server writes 64 bytes the client does not read yet,
 *       then blocks in read(); the client, after a pause (the server is asleep
 *       by then), writes 8 bytes, then stays away from the socket IDLE_MS; the
 *       server answers the 8 bytes; the client then reads the 64 + 8 bytes and
 *       checks them.
 *
 * Every wait is bounded (DUPLEX_TIMEOUT_S, default 120 s, for the whole run:
 * SO_RCVTIMEO/SO_SNDTIMEO on every socket). Prints "listening" when the server
 * is up and an "ok" line; exits 0 on success. Timings are printed, never
 * judged (tests assert the library's counters instead). */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int timeout_s = 120;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
	fprintf(stderr, "duplex: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Byte off of the stream named seed. */
static inline uint8_t stream_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(mix(seed ^ (off >> 3) * 0x100000001b3ull) >> (8 * (off & 7)));
}

static void bound(int fd)
{
	struct timeval tv = { .tv_sec = timeout_s };
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		die("setsockopt");
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 || listen(fd, 128) != 0)
		die("listen");
	printf("listening\n");
	fflush(stdout);
	return fd;
}

static int accept_one(int lfd)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	bound(fd);
	return fd;
}

static int connect_to(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		die("connect");
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	bound(fd);
	return fd;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- duplex ---- */

struct params {
	uint64_t bytes;
	size_t minw, maxw;
	bool oneway;        /* DUPLEX_ONEWAY=1: the server sends nothing back */
};
static struct params par;

struct side {
	int fd;
	uint32_t conn;      /* the connection's number */
	bool client;
	int err;            /* errno of the failure, or -1: mismatch */
	uint64_t off;       /* where it stopped */
};

/* Bytes the side sends (the client always sends; the server not one-way). */
static uint64_t bytes_from(bool client)
{
	return client || !par.oneway ? par.bytes : 0;
}

/* Direction seeds: client to server, server to client. */
static uint64_t seed_of(uint32_t conn, bool from_client)
{
	return mix(((uint64_t)conn << 1) | from_client);
}

static void *writer(void *arg)
{
	struct side *s = arg;
	uint64_t seed = seed_of(s->conn, s->client);
	uint64_t rng = mix(seed + 1);
	uint8_t *buf = malloc(par.maxw);
	uint64_t off = 0, total = bytes_from(s->client);
	while (off < total) {
		rng = mix(rng);
		size_t len = par.minw + (size_t)(rng % (par.maxw - par.minw + 1));
		if (len > total - off)
			len = (size_t)(total - off);
		for (size_t i = 0; i < len; i++)
			buf[i] = stream_byte(seed, off + i);
		if (write_all(s->fd, buf, len) != 0) {
			s->err = errno;
			s->off = off;
			free(buf);
			return NULL;
		}
		off += len;
	}
	free(buf);
	s->off = off;
	if (shutdown(s->fd, SHUT_WR) != 0)
		s->err = errno;
	return NULL;
}

static void *reader(void *arg)
{
	struct side *s = arg;
	uint64_t seed = seed_of(s->conn, !s->client);
	uint8_t buf[65536];
	uint64_t off = 0;
	for (;;) {
		ssize_t n = read(s->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			s->err = errno;
			break;
		}
		if (n == 0)
			break;
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] != stream_byte(seed, off + (uint64_t)i)) {
				s->err = -1;
				s->off = off + (uint64_t)i;
				fprintf(stderr, "duplex: conn %u: %s read byte %llu: 0x%02x, "
					"expected 0x%02x\n", s->conn, s->client ? "client" : "server",
					(unsigned long long)s->off, buf[i],
					stream_byte(seed, s->off));
				return NULL;
			}
		}
		off += (uint64_t)n;
	}
	s->off = off;
	return NULL;
}

/* Both threads on fd; 0 when every byte went and came back right. */
static int run_conn(int fd, uint32_t conn, bool client)
{
	struct side w = { .fd = fd, .conn = conn, .client = client };
	struct side r = w;
	pthread_t tw, tr;
	if (pthread_create(&tr, NULL, reader, &r) || pthread_create(&tw, NULL, writer, &w))
		die("pthread_create");
	pthread_join(tw, NULL);
	pthread_join(tr, NULL);
	const char *who = client ? "client" : "server";
	int rc = 0;
	if (w.err) {
		fprintf(stderr, "duplex: conn %u: %s write failed at %llu: %s\n", conn, who,
			(unsigned long long)w.off, strerror(w.err));
		rc = 1;
	}
	if (r.err > 0)
		fprintf(stderr, "duplex: conn %u: %s read failed at %llu: %s\n", conn, who,
			(unsigned long long)r.off, strerror(r.err));
	if (r.err) {
		rc = 1;
	} else if (r.off != bytes_from(!client)) {
		fprintf(stderr, "duplex: conn %u: %s read %llu bytes, expected %llu\n", conn, who,
			(unsigned long long)r.off, (unsigned long long)bytes_from(!client));
		rc = 1;
	}
	return rc;
}

static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void *server_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	uint32_t conn;
	int rc = 1;
	if (read_all(fd, &conn, sizeof(conn)) == 0)
		rc = run_conn(fd, conn, false);
	else
		fprintf(stderr, "duplex: server: no connection number: %s\n", strerror(errno));
	close(fd);
	pthread_mutex_lock(&fail_lock);
	failures += rc;
	pthread_mutex_unlock(&fail_lock);
	return NULL;
}

static int duplex_server(int port, int conns)
{
	int lfd = listen_on(port);
	pthread_t *t = calloc((size_t)conns, sizeof(*t));
	for (int i = 0; i < conns; i++) {
		int fd = accept_one(lfd);
		if (pthread_create(&t[i], NULL, server_conn, (void *)(intptr_t)fd))
			die("pthread_create");
	}
	for (int i = 0; i < conns; i++)
		pthread_join(t[i], NULL);
	close(lfd);
	free(t);
	if (failures) {
		fprintf(stderr, "duplex: server: %d of %d connections failed\n", failures, conns);
		return 1;
	}
	printf("ok: server: %d connections, %llu bytes %s, checked\n", conns,
	       (unsigned long long)par.bytes, par.oneway ? "one way" : "each way");
	return 0;
}

static void *client_conn(void *arg)
{
	uint32_t conn = (uint32_t)(uintptr_t)arg;
	int port = (int)(conn >> 16);
	conn &= 0xffff;
	int fd = connect_to(port);
	int rc = 1;
	if (write_all(fd, &conn, sizeof(conn)) == 0)
		rc = run_conn(fd, conn, true);
	close(fd);
	pthread_mutex_lock(&fail_lock);
	failures += rc;
	pthread_mutex_unlock(&fail_lock);
	return NULL;
}

static int duplex_client(int port, int conns, int parallel)
{
	double start = now_s();
	pthread_t *t = calloc((size_t)parallel, sizeof(*t));
	for (int done = 0; done < conns; done += parallel) {
		int n = conns - done < parallel ? conns - done : parallel;
		for (int i = 0; i < n; i++) {
			uintptr_t arg = (uintptr_t)port << 16 | (uintptr_t)(done + i);
			if (pthread_create(&t[i], NULL, client_conn, (void *)arg))
				die("pthread_create");
		}
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
	}
	free(t);
	if (failures) {
		fprintf(stderr, "duplex: client: %d of %d connections failed\n", failures, conns);
		return 1;
	}
	printf("ok: client: %d connections (%d at a time), %llu bytes %s in writes of "
	       "%zu..%zu, checked, %.2f s\n", conns, parallel, (unsigned long long)par.bytes,
	       par.oneway ? "one way" : "each way", par.minw, par.maxw, now_s() - start);
	return 0;
}

/* ---- wake ---- */

#define WAKE_HELD 64

static void pause_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The request carries the client's clock at its write (one host: the same
 * CLOCK_MONOTONIC): the server prints how late its read woke (not judged). */
static int wake_server(int port, int rounds)
{
	int lfd = listen_on(port);
	int fd = accept_one(lfd);
	double latest = 0;
	uint8_t hello;
	if (read_all(fd, &hello, 1) != 0 || write_all(fd, &hello, 1) != 0)
		die("server hello");
	for (int r = 0; r < rounds; r++) {
		uint8_t held[WAKE_HELD];
		double sent;
		/* idle outside the library first: the SLEEP this read announces
		 * reaches a client that is idle too (it has read our last answer) */
		pause_ms(5);
		for (int i = 0; i < WAKE_HELD; i++)
			held[i] = stream_byte((uint64_t)r, (uint64_t)i);
		if (write_all(fd, held, sizeof(held)) != 0)
			die("server write");
		if (read_all(fd, &sent, sizeof(sent)) != 0)
			die("server read");
		double late = now_s() - sent;
		if (late > latest)
			latest = late;
		if (getenv("DUPLEX_VERBOSE"))
			fprintf(stderr, "duplex: round %d: woke %.3f ms after the write\n", r,
				late * 1e3);
		if (write_all(fd, &sent, sizeof(sent)) != 0)
			die("server answer");
	}
	close(fd);
	close(lfd);
	printf("ok: wake-server: %d rounds, latest wake %.3f ms after the write\n", rounds,
	       latest * 1e3);
	return 0;
}

/* Each round: the server's 64 bytes arrive unread; the client writes, then
 * stays away from the socket idle_ms (past the 1 s safety net of a sleep:
 * only the doorbell wakes the server in time), then reads them and the answer. */
static int wake_client(int port, int rounds, long idle_ms)
{
	int fd = connect_to(port);
	/* one exchange first: the negotiation is over before the rounds */
	uint8_t hello = 'h';
	if (write_all(fd, &hello, 1) != 0 || read_all(fd, &hello, 1) != 0)
		die("client hello");
	for (int r = 0; r < rounds; r++) {
		pause_ms(20); /* the server writes, then sleeps in read() */
		double sent = now_s();
		if (write_all(fd, &sent, sizeof(sent)) != 0)
			die("client write");
		pause_ms(idle_ms);
		uint8_t got[WAKE_HELD + sizeof(sent)];
		if (read_all(fd, got, sizeof(got)) != 0)
			die("client read");
		for (int i = 0; i < WAKE_HELD; i++)
			if (got[i] != stream_byte((uint64_t)r, (uint64_t)i)) {
				fprintf(stderr, "duplex: wake round %d: byte %d wrong\n", r, i);
				return 1;
			}
		if (memcmp(got + WAKE_HELD, &sent, sizeof(sent)) != 0) {
			fprintf(stderr, "duplex: wake round %d: wrong answer\n", r);
			return 1;
		}
	}
	close(fd);
	printf("ok: wake-client: %d rounds\n", rounds);
	return 0;
}

int main(int argc, char **argv)
{
	const char *t = getenv("DUPLEX_TIMEOUT_S");
	if (t && atoi(t) > 0)
		timeout_s = atoi(t);
	alarm((unsigned)timeout_s + 10);
	if ((argc == 7 && strcmp(argv[1], "server") == 0) ||
	    (argc == 8 && strcmp(argv[1], "client") == 0)) {
		par.bytes = strtoull(argv[4], NULL, 10);
		par.minw = strtoul(argv[5], NULL, 10);
		par.maxw = strtoul(argv[6], NULL, 10);
	} else if (argc == 4 && strcmp(argv[1], "wake-server") == 0) {
		return wake_server(atoi(argv[2]), atoi(argv[3]));
	} else if (argc == 5 && strcmp(argv[1], "wake-client") == 0) {
		return wake_client(atoi(argv[2]), atoi(argv[3]), atol(argv[4]));
	} else {
		fprintf(stderr, "usage: duplex server PORT CONNS BYTES MINW MAXW\n"
				"       duplex client PORT CONNS BYTES MINW MAXW PAR\n"
				"       duplex wake-server PORT ROUNDS\n"
				"       duplex wake-client PORT ROUNDS IDLE_MS\n");
		return 2;
	}
	par.oneway = getenv("DUPLEX_ONEWAY") && atoi(getenv("DUPLEX_ONEWAY"));
	if (par.minw == 0 || par.maxw < par.minw) {
		fprintf(stderr, "duplex: bad write sizes\n");
		return 2;
	}
	int port = atoi(argv[2]), conns = atoi(argv[3]);
	if (argv[1][0] == 's')
		return duplex_server(port, conns);
	return duplex_client(port, conns, atoi(argv[7]));
}
