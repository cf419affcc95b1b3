/* Accelerated TCP through the stack's own API (no LD_PRELOAD): a real loopback
 * TCP connection, the negotiation on it, then the stream over shm or tcp.
 * The client is a forked child (libfabric is opened after the fork, in each
 * process); the server is the test process. Every wait is bounded. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_lazy.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_conn.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_migrate.h"
#include "stack/stk_nego.h"
#include "stack/stk_stream.h"
#include "../lib/stk_pair.h"
#include "../lib/tcp_pair.h"
#include "../lib/check_main.h"

static const char *const providers[] = { "shm", "tcp" };

static void config(const char *prov)
{
	stk_pair_config(prov);
	/* server and client threads share 2 busy cores: the first HELLO may take
	 * longer than the 5 ms default to be sent */
	stk_cfg.nego_wait_ms = 100;
}

/* ---- plumbing: a listener, a forked client, bounded waits ---- */

struct pair {
	int lfd;
	bool accel;       /* the server side runs stk_accel_listen (after the fork) */
	int ready[2];     /* server → client: listening and providers open */
	struct sockaddr_in addr;
	pid_t child;
};

static void pair_listen(struct pair *p, bool save_syn)
{
	p->lfd = tcp_pair_listen(&p->addr, SOCK_CLOEXEC, 8);
	ck_assert_int_ge(p->lfd, 0);
	p->accel = save_syn;
	ck_assert_int_eq(pipe(p->ready), 0);
}

/* In the child: a connected socket, marked or not; exits 90..94 on failure. */
static int client_connect(const struct pair *p, bool mark)
{
	static bool ready; /* per process: the server said go once */
	char go;
	if (!ready && read(p->ready[0], &go, 1) != 1)
		_exit(94);
	ready = true;
	int flags = mark ? STK_PAIR_MARK | (p->accel ? STK_PAIR_KNOWN : 0) : 0;
	int fd = stk_pair_connect(&p->addr, flags);
	if (fd < 0)
		_exit(89 - fd);
	return fd;
}

static int server_accept(struct pair *p)
{
	int fd = tcp_pair_accept(p->lfd, 10000);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static void pair_fork(struct pair *p, int (*client)(struct pair *p, const char *prov),
		      const char *client_prov)
{
	p->child = fork();
	ck_assert_int_ge(p->child, 0);
	if (p->child == 0) {
		alarm(60);
		close(p->lfd);
		config(client_prov);
		_exit(client(p, client_prov));
	}
	/* libfabric is opened only now, after the fork, in each process */
	if (p->accel)
		ck_assert_int_eq(stk_accel_listen(p->lfd), 0);
	ck_assert_int_eq(write(p->ready[1], "g", 1), 1);
}

static int pair_wait(struct pair *p)
{
	int rc = tcp_pair_wait_child(p->child, 60000);
	if (rc >= 0)
		close(p->lfd);
	return rc;
}

/* Server side of an accelerated pair (config, listener, forked client,
 * accept, attach): the attached connection. */
static struct stk_conn *accel_pair(struct pair *p, int (*client)(struct pair *p, const char *prov),
				   const char *prov)
{
	config(prov);
	pair_listen(p, true);
	pair_fork(p, client, prov);
	int fd = server_accept(p);
	struct stk_conn *conn = stk_pair_attach(fd, false, prov);
	ck_assert_ptr_nonnull(conn);
	return conn;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void fill(uint8_t *buf, size_t len, uint64_t *seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(rng_next(seed) >> 24);
}

static ssize_t send_all(struct stk_conn *conn, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = stk_send(conn, (const uint8_t *)buf + done, len - done, 0);
		if (n < 0)
			return n;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* ---- echo of random sizes ---- */

static int echo_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	size_t max = 1u << 20;
	uint8_t *out = malloc(max), *in = malloc(max);
	uint64_t seed = 0x1234567;
	/* sizes: 1 B, 1 MiB, and log-uniform in between */
	for (int round = 0; round < 40; round++) {
		size_t len = round == 0 ? 1 : round == 1 ? max
				: 1 + (size_t)(rng_next(&seed) % (1u << (1 + rng_next(&seed) % 20)));
		fill(out, len, &seed);
		size_t sent = 0, got = 0;
		while (got < len) {
			bool moved = false;
			if (sent < len) {
				ssize_t n = stk_send(conn, out + sent, len - sent, MSG_DONTWAIT);
				if (n > 0) {
					sent += (size_t)n;
					moved = true;
				} else if (n != -EAGAIN) {
					return 2;
				}
			}
			ssize_t n = stk_recv(conn, in + got, len - got, MSG_DONTWAIT);
			if (n > 0) {
				got += (size_t)n;
				moved = true;
			} else if (n != -EAGAIN) {
				return 3;
			}
			if (!moved)
				stk_conn_wait(conn, POLLIN | (sent < len ? POLLOUT : 0), 1000);
		}
		if (memcmp(in, out, len) != 0) {
			fprintf(stderr, "echo mismatch at round %d (%zu bytes)\n", round, len);
			return 4;
		}
	}
	free(out);
	free(in);
	return stk_close(conn, false) == 0 ? 0 : 5;
}

START_TEST(test_echo_random)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, echo_client, prov);
	uint8_t *buf = malloc(65536);
	for (;;) {
		ssize_t n = stk_recv(conn, buf, 65536, 0);
		ck_assert_int_ge(n, 0);
		if (n == 0)
			break;
		ck_assert_int_eq(send_all(conn, buf, (size_t)n), n);
	}
	free(buf);
	ck_assert_int_eq(stk_close(conn, false), 0);
	ck_assert_int_eq(pair_wait(&p), 0);
	uint64_t v = 0;
	ck_assert_int_eq(stk_counter_get(strcmp(prov, "shm") == 0 ? "bytes_rx_shm" : "bytes_rx_tcp", &v), 0);
	ck_assert_uint_gt(v, 1u << 20);
}
END_TEST

/* ---- bulk transfer with checksum ---- */

#define BULK_BYTES (256ull << 20)

static uint64_t checksum(uint64_t sum, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		sum = (sum ^ p[i]) * 0x100000001b3ull;
	return sum;
}

static int bulk_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	size_t chunk = 1u << 20;
	uint8_t *buf = malloc(chunk);
	uint64_t seed = 42, sum = 0xcbf29ce484222325ull;
	for (uint64_t done = 0; done < BULK_BYTES; done += chunk) {
		fill(buf, chunk, &seed);
		sum = checksum(sum, buf, chunk);
		if (send_all(conn, buf, chunk) != (ssize_t)chunk)
			return 2;
	}
	/* the checksum goes last, then close: data before close must arrive */
	if (send_all(conn, &sum, sizeof(sum)) != sizeof(sum))
		return 3;
	free(buf);
	return stk_close(conn, false) == 0 ? 0 : 4;
}

START_TEST(test_bulk_checksum)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, bulk_client, prov);
	size_t cap = 1u << 20;
	uint8_t *buf = malloc(cap);
	uint64_t total = 0, sum = 0xcbf29ce484222325ull;
	while (total < BULK_BYTES) {
		size_t want = cap;
		if (BULK_BYTES - total < want)
			want = (size_t)(BULK_BYTES - total);
		ssize_t n = stk_recv(conn, buf, want, 0);
		ck_assert_int_gt(n, 0);
		sum = checksum(sum, buf, (size_t)n);
		total += (uint64_t)n;
	}
	uint64_t theirs = 0;
	ck_assert_int_eq(stk_recv(conn, &theirs, sizeof(theirs), MSG_WAITALL), sizeof(theirs));
	ck_assert_uint_eq(sum, theirs);
	ck_assert_int_eq(stk_recv(conn, buf, cap, 0), 0); /* EOF */
	free(buf);
	ck_assert_int_eq(stk_close(conn, false), 0);
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* ---- slow reader: the writer stalls, memory stays bounded ---- */

static int slow_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	static uint8_t buf[65536];
	size_t sent = 0;
	for (int i = 0; i < 1000; i++) {
		ssize_t n = stk_send(conn, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == -EAGAIN)
			break;
		if (n < 0)
			return 2;
		sent += (size_t)n;
	}
	/* exactly the receiver's window fits, then EAGAIN; no POLLOUT either */
	if (sent != stk_cfg.window_bytes) {
		fprintf(stderr, "sent %zu before EAGAIN, window %u\n", sent, stk_cfg.window_bytes);
		return 3;
	}
	if (stk_poll_events(conn) & POLLOUT)
		return 4;
	/* the reader now drains: the writer becomes writable again */
	if (!(stk_conn_wait(conn, POLLOUT, 10000) & POLLOUT))
		return 5;
	if (send_all(conn, buf, sizeof(buf)) != sizeof(buf))
		return 6;
	return stk_close(conn, false) == 0 ? 0 : 7;
}

START_TEST(test_slow_reader)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, slow_client, prov);
	/* do not read until the window is full (the buffered bytes prove it) */
	for (int i = 0; i < 1000 && stk_conn_readable(conn) < stk_cfg.window_bytes; i++)
		usleep(5000);
	ck_assert_uint_eq(stk_conn_readable(conn), stk_cfg.window_bytes);
	usleep(50000);
	ck_assert_uint_eq(stk_conn_readable(conn), stk_cfg.window_bytes); /* bounded */
	static uint8_t buf[65536];
	size_t total = 0;
	for (;;) {
		ssize_t n = stk_recv(conn, buf, sizeof(buf), 0);
		ck_assert_int_ge(n, 0);
		if (n == 0)
			break;
		total += (size_t)n;
	}
	ck_assert_uint_eq(total, stk_cfg.window_bytes + sizeof(buf));
	ck_assert_int_eq(stk_close(conn, false), 0);
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* ---- half-close, peek, waitall, EPIPE ---- */

static int half_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	if (send_all(conn, "hello world", 11) != 11)
		return 2;
	if (stk_shutdown(conn, SHUT_WR) != 0)
		return 3;
	if (stk_send(conn, "x", 1, 0) != -EPIPE)
		return 4;
	char buf[64];
	/* the server answers after our FIN: half-close the other way */
	if (stk_recv(conn, buf, 5, MSG_WAITALL) != 5 || memcmp(buf, "reply", 5) != 0)
		return 5;
	if (stk_recv(conn, buf, sizeof(buf), 0) != 0) /* then EOF */
		return 6;
	return stk_close(conn, false) == 0 ? 0 : 7;
}

START_TEST(test_half_close)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, half_client, prov);
	char buf[64];
	ck_assert_int_eq(stk_recv(conn, buf, 11, MSG_WAITALL | MSG_PEEK), 11);
	ck_assert_int_eq(memcmp(buf, "hello world", 11), 0);
	ck_assert_int_eq(stk_recv(conn, buf, 5, 0), 5);  /* partial read */
	ck_assert_int_eq(stk_recv(conn, buf + 5, 64, MSG_WAITALL), 6); /* WAITALL stops at EOF */
	ck_assert_int_eq(memcmp(buf, "hello world", 11), 0);
	ck_assert_int_eq(stk_recv(conn, buf, 64, 0), 0);
	ck_assert(stk_poll_events(conn) & POLLRDHUP);
	ck_assert_int_eq(send_all(conn, "reply", 5), 5);
	ck_assert_int_eq(stk_close(conn, false), 0);
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* After the peer closed completely, sends fail with EPIPE. */
static int closer_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	return stk_close(conn, false) == 0 ? 0 : 2;
}

START_TEST(test_epipe_after_close)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, closer_client, prov);
	char buf[8];
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(pair_wait(&p), 0);
	ck_assert_int_eq(stk_send(conn, "x", 1, 0), -EPIPE);
	ck_assert_int_eq(stk_close(conn, false), 0);
}
END_TEST

/* The peer closes completely while our MIGRATE is on its way (a fork meets a
 * client that is exiting): its FIN|CLOSE is the answer (it never sends one),
 * so the migration ends at once, not counted as a dead peer, and the
 * connection reads EOF from its kernel socket. */
START_TEST(test_migrate_meets_close)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, closer_client, prov);
	/* the client's close is in our queue, not delivered: no call of ours ran */
	ck_assert_int_eq(pair_wait(&p), 0);
	uint64_t late0 = __atomic_load_n(&stk_counters[STK_C_MIGRATE_PEER_GONE], __ATOMIC_RELAXED);
	struct stk_conn *conns[] = { conn };
	ck_assert_uint_eq(stk_migrate_conns(conns, 1, STK_MIGRATE_REASON_FORK), 0);
	ck_assert_uint_eq(__atomic_load_n(&stk_counters[STK_C_MIGRATE_PEER_GONE], __ATOMIC_RELAXED), late0);
	char buf[8];
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(stk_close(conn, false), 0);
}
END_TEST

/* ---- abortive close and peer death ---- */

static int abort_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	if (send_all(conn, "data", 4) != 4)
		return 2;
	return stk_close(conn, true) == 0 ? 0 : 3;
}

static int death_client(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = stk_pair_attach(fd, true, prov);
	if (!conn)
		return 1;
	usleep(100000); /* let the server block in recv */
	raise(SIGKILL);
	return 2;
}

START_TEST(test_abortive_close)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, abort_client, prov);
	ck_assert_int_eq(pair_wait(&p), 0);
	char buf[8];
	/* as Linux (tcp_reset keeps the receive queue): the data sent before the
	 * RST, then ECONNRESET once, then EOF */
	ck_assert(stk_poll_events(conn) & POLLERR);
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), 4);
	ck_assert_mem_eq(buf, "data", 4);
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), -ECONNRESET);
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(stk_close(conn, false), 0);
}
END_TEST

START_TEST(test_peer_death)
{
	const char *prov = providers[_i];
	struct pair p;
	struct stk_conn *conn = accel_pair(&p, death_client, prov);
	char buf[8];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(stk_recv(conn, buf, sizeof(buf), 0), -ECONNRESET);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* blocked in recv, woken by the liveness channel (bound, not a timing) */
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 2);
	ck_assert_int_eq(pair_wait(&p), 128 + SIGKILL);
	ck_assert_int_eq(stk_close(conn, false), 0);
}
END_TEST

/* ---- many connections on one endpoint, threads on distinct connections ---- */

#define MANY 64
#define THREADS 4
#define THREAD_BYTES (16u << 20)

struct worker {
	struct stk_conn *conn;
	unsigned index;
	bool sender;
	int result;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t *buf = malloc(65536), *want = malloc(65536);
	uint64_t seed = 1000 + w->index;
	w->result = 0;
	for (size_t done = 0; done < THREAD_BYTES && w->result == 0; done += 65536) {
		fill(want, 65536, &seed);
		if (w->sender) {
			if (send_all(w->conn, want, 65536) != 65536)
				w->result = 1;
		} else if (stk_recv(w->conn, buf, 65536, MSG_WAITALL) != 65536 ||
			   memcmp(buf, want, 65536) != 0) {
			w->result = 2;
		}
	}
	free(buf);
	free(want);
	return NULL;
}

static int run_workers(struct stk_conn **conns, bool sender)
{
	struct worker w[THREADS];
	pthread_t tid[THREADS];
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .conn = conns[i], .index = i, .sender = sender };
		if (pthread_create(&tid[i], NULL, worker_main, &w[i]) != 0)
			return 10;
	}
	int result = 0;
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		if (w[i].result)
			result = w[i].result;
	}
	return result;
}

static int many_client(struct pair *p, const char *prov)
{
	struct stk_conn *conns[MANY];
	for (unsigned i = 0; i < MANY; i++) {
		conns[i] = stk_pair_attach(client_connect(p, true), true, prov);
		if (!conns[i])
			return 1;
	}
	/* each connection carries its own bytes, interleaved on the one endpoint */
	for (unsigned round = 0; round < 4; round++)
		for (unsigned i = 0; i < MANY; i++) {
			uint8_t msg[1000];
			memset(msg, (int)(i * 7 + round), sizeof(msg));
			if (send_all(conns[i], msg, sizeof(msg)) != sizeof(msg))
				return 2;
		}
	int ret = run_workers(conns, true);
	if (ret)
		return ret;
	for (unsigned i = 0; i < MANY; i++)
		if (stk_close(conns[i], false) != 0)
			return 3;
	return 0;
}

START_TEST(test_many_conns_threads)
{
	const char *prov = providers[_i];
	config(prov);
	struct pair p;
	pair_listen(&p, true);
	pair_fork(&p, many_client, prov);
	struct stk_conn *conns[MANY];
	for (unsigned i = 0; i < MANY; i++) {
		conns[i] = stk_pair_attach(server_accept(&p), false, prov);
		ck_assert_ptr_nonnull(conns[i]);
	}
	for (unsigned round = 0; round < 4; round++)
		for (unsigned i = 0; i < MANY; i++) {
			uint8_t msg[1000], want[1000];
			memset(want, (int)(i * 7 + round), sizeof(want));
			ck_assert_int_eq(stk_recv(conns[i], msg, sizeof(msg), MSG_WAITALL), sizeof(msg));
			ck_assert_int_eq(memcmp(msg, want, sizeof(msg)), 0);
		}
	ck_assert_int_eq(run_workers(conns, false), 0);
	for (unsigned i = 0; i < MANY; i++) {
		char byte;
		ck_assert_int_eq(stk_recv(conns[i], &byte, 1, 0), 0);
		ck_assert_int_eq(stk_close(conns[i], false), 0);
	}
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* ---- negotiation fallbacks: kernel path, reason, no stray byte ---- */

static int plain_client(struct pair *p, const char *prov)
{
	(void)prov;
	int fd = client_connect(p, false);
	char buf[16];
	/* the server must not have sent anything: our first bytes are the app's */
	if (send(fd, "ping", 4, 0) != 4)
		return 1;
	if (recv(fd, buf, 4, MSG_WAITALL) != 4 || memcmp(buf, "pong", 4) != 0)
		return 2;
	close(fd);
	return 0;
}

START_TEST(test_fallback_plain_client)
{
	config("shm,tcp");
	struct pair p;
	pair_listen(&p, true);
	pair_fork(&p, plain_client, "shm,tcp");
	int fd = server_accept(&p);
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	ck_assert_int_eq(stk_accel_attach(fd, false, &conn, &info), STK_ATTACH_KERNEL);
	ck_assert_ptr_null(conn);
	ck_assert_ptr_nonnull(strstr(info.reason, "not marked"));
	char buf[8];
	ck_assert_int_eq(recv(fd, buf, 4, MSG_WAITALL), 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
	ck_assert_int_eq(send(fd, "pong", 4, 0), 4);
	close(fd);
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* A launched client against a plain server (client speaks first, or server
 * speaks first): the client falls back, the server sees only app bytes. */
static int launched_client_vs_plain(struct pair *p, const char *prov)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int ret = stk_accel_attach(fd, true, &conn, &info);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (ret != STK_ATTACH_KERNEL || conn)
		return 1;
	fprintf(stderr, "client fell back: %s\n", info.reason);
	char buf[32];
	if (strcmp(prov, "banner") == 0) {
		if (!strstr(info.reason, "spoke first"))
			return 2;
		if (recv(fd, buf, 7, MSG_WAITALL) != 7 || memcmp(buf, "220 x\r\n", 7) != 0)
			return 3; /* the banner stayed for the app */
	} else {
		if (!strstr(info.reason, "no HELLO") || !info.strip_late_hello)
			return 4;
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > 500) /* bound: stk_cfg.nego_wait_ms (100 here), generous for load */
			return 5;
	}
	if (send(fd, "ping", 4, 0) != 4)
		return 6;
	if (recv(fd, buf, 4, MSG_WAITALL) != 4 || memcmp(buf, "pong", 4) != 0)
		return 7;
	/* second connection to the same destination: cached, no wait at all */
	close(fd);
	return 0;
}

static void plain_server(const char *banner)
{
	struct pair p;
	pair_listen(&p, false);
	pair_fork(&p, launched_client_vs_plain, banner ? "banner" : "shm,tcp");
	int fd = server_accept(&p);
	if (banner)
		ck_assert_int_eq(send(fd, banner, strlen(banner), 0), (ssize_t)strlen(banner));
	char buf[8];
	ck_assert_int_eq(recv(fd, buf, 4, MSG_WAITALL), 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0); /* nothing before the app's bytes */
	ck_assert_int_eq(send(fd, "pong", 4, 0), 4);
	ck_assert_int_eq(pair_wait(&p), 0);
	close(fd);
}

START_TEST(test_fallback_plain_server)
{
	config("shm,tcp");
	plain_server(NULL);
}
END_TEST

START_TEST(test_fallback_banner_server)
{
	config("shm,tcp");
	plain_server("220 x\r\n");
}
END_TEST

/* Server offers tcp only, client wants shm only → both on the kernel. */
/* Client side of a fallback case: connect, attach, and require the kernel with a
 * reason containing `why`. Returns the fd, or -1 / -2 for the failed step. */
static int client_falls_back(struct pair *p, const char *why)
{
	int fd = client_connect(p, true);
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	if (stk_accel_attach(fd, true, &conn, &info) != STK_ATTACH_KERNEL)
		return -1;
	if (!strstr(info.reason, why))
		return -2;
	return fd;
}

/* Server side of a fallback case: the client app's "ping" arrives intact on the
 * kernel connection (nothing of the negotiation before it), then the child ends. */
static void server_gets_ping(struct pair *p, int fd)
{
	char buf[8];
	ck_assert_int_eq(recv(fd, buf, 4, MSG_WAITALL), 4);
	ck_assert_int_eq(memcmp(buf, "ping", 4), 0);
	close(fd);
	ck_assert_int_eq(pair_wait(p), 0);
}

static int nocommon_client(struct pair *p, const char *prov)
{
	(void)prov;
	int fd = client_falls_back(p, "no common provider");
	if (fd < 0)
		return -fd;
	uint64_t v = 0;
	if (stk_counter_get("fallback_no_common", &v) != 0 || v != 1)
		return 3;
	if (send(fd, "ping", 4, 0) != 4)
		return 4;
	close(fd);
	return 0;
}

START_TEST(test_fallback_no_common)
{
	config("tcp");
	struct pair p;
	pair_listen(&p, true);
	pair_fork(&p, nocommon_client, "shm");
	int fd = server_accept(&p);
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	ck_assert_int_eq(stk_accel_attach(fd, false, &conn, &info), STK_ATTACH_KERNEL);
	ck_assert_ptr_nonnull(strstr(info.reason, "no common provider"));
	server_gets_ping(&p, fd);
}
END_TEST

/* A server of another version: the client rejects, both stay on the kernel. */
static int version_client(struct pair *p, const char *prov)
{
	(void)prov;
	int fd = client_falls_back(p, "version");
	if (fd < 0)
		return -fd;
	if (send(fd, "ping", 4, 0) != 4)
		return 3;
	close(fd);
	return 0;
}

START_TEST(test_fallback_version)
{
	config("shm");
	struct pair p;
	pair_listen(&p, true);
	pair_fork(&p, version_client, "shm");
	int fd = server_accept(&p);
	ck_assert_int_eq(stk_nego_syn_marked(fd), 1);
	struct stk_nego_msg hello;
	memset(&hello, 0, sizeof(hello));
	hello.version = STK_NEGO_VERSION + 1;
	hello.type = STK_NEGO_HELLO;
	hello.conn_id = 1;
	hello.credits = 65536;
	ck_assert_int_eq(stk_nego_send_msg(fd, &hello, 1000), 0);
	struct stk_nego_msg reply;
	ck_assert_int_eq(stk_nego_recv_msg(fd, &reply, 5000), 0);
	ck_assert_uint_eq(reply.type, STK_NEGO_REPLY);
	ck_assert_uint_eq(reply.status, STK_NEGO_REJECT_VERSION);
	server_gets_ping(&p, fd);
}
END_TEST

/* A peer that speaks garbage with our magic: malformed → kernel, reported. */
static int garbage_client(struct pair *p, const char *prov)
{
	(void)prov;
	int fd = client_falls_back(p, "malformed");
	if (fd < 0)
		return -fd;
	close(fd);
	return 0;
}

START_TEST(test_fallback_garbage)
{
	config("shm");
	struct pair p;
	pair_listen(&p, true);
	pair_fork(&p, garbage_client, "shm");
	int fd = server_accept(&p);
	/* magic, our version, HELLO, length 40 but a body that lies about counts */
	uint8_t msg[40] = { 0x7f, 'f', 's', 'k', 'N', 'E', 'G', 'O', STK_NEGO_VERSION, 0, 1, 0, 40, 0, 0, 0 };
	memset(msg + 16, 0xff, sizeof(msg) - 16);
	ck_assert_int_eq(send(fd, msg, sizeof(msg), 0), (ssize_t)sizeof(msg));
	struct stk_nego_msg reply;
	ck_assert_int_eq(stk_nego_recv_msg(fd, &reply, 5000), 0);
	ck_assert_uint_eq(reply.status, STK_NEGO_REJECT_BAD_HELLO);
	close(fd);
	ck_assert_int_eq(pair_wait(&p), 0);
}
END_TEST

/* ---- encode/decode bounds ---- */

START_TEST(test_nego_codec)
{
	struct stk_nego_msg m, d;
	memset(&m, 0, sizeof(m));
	m.version = STK_NEGO_VERSION;
	m.type = STK_NEGO_HELLO;
	m.conn_id = 0x1122334455667788ull;
	m.slot = 7;
	m.credits = 65536;
	m.nprov = 2;
	strcpy(m.prov[0].name, "shm");
	m.prov[0].addr_len = 5;
	memcpy(m.prov[0].addr, "abcde", 5);
	strcpy(m.prov[1].name, "tcp");
	m.prov[1].addr_len = 16;
	uint8_t buf[STK_NEGO_MSG_MAX];
	ssize_t len = stk_nego_encode(&m, buf, sizeof(buf));
	ck_assert_int_gt(len, STK_NEGO_HDR_LEN);
	size_t ml = 0;
	ck_assert_int_eq(stk_nego_decode(buf, (size_t)len, &d, &ml), 0);
	ck_assert_uint_eq(ml, (size_t)len);
	ck_assert_uint_eq(d.conn_id, m.conn_id);
	ck_assert_uint_eq(d.nprov, 2);
	ck_assert_str_eq(d.prov[1].name, "tcp");
	/* every strict prefix is "need more", never a crash or a false success */
	for (ssize_t i = 1; i < len; i++)
		ck_assert_int_eq(stk_nego_decode(buf, (size_t)i, &d, &ml), -EAGAIN);
	/* a wrong first byte is a plain peer */
	buf[0] = 'G';
	ck_assert_int_eq(stk_nego_decode(buf, (size_t)len, &d, &ml), -EPROTO);
	buf[0] = 0x7f;
	/* corrupt the provider count: malformed */
	uint8_t bad[STK_NEGO_MSG_MAX];
	memcpy(bad, buf, (size_t)len);
	bad[STK_NEGO_HDR_LEN + 16 + 8 + 8 + 4 + 4] = 200;
	ck_assert_int_eq(stk_nego_decode(bad, (size_t)len, &d, &ml), -EBADMSG);
	/* random bytes after the magic never crash */
	uint64_t seed = 99;
	for (int i = 0; i < 2000; i++) {
		memcpy(bad, buf, (size_t)len);
		size_t at = 8 + rng_next(&seed) % ((size_t)len - 8);
		bad[at] = (uint8_t)rng_next(&seed);
		int r = stk_nego_decode(bad, (size_t)len, &d, &ml);
		ck_assert(r == 0 || r == -EAGAIN || r == -EBADMSG || r == -EPROTONOSUPPORT);
	}
}
END_TEST

/* STACK_TEST=name runs one test only (debugging aid). */
static bool wanted(const char *name)
{
	const char *only = getenv("STACK_TEST");
	return !only || strcmp(only, name) == 0;
}
#define ADD_LOOP(tc, fn, n) do { if (wanted(#fn)) tcase_add_loop_test(tc, fn, 0, n); } while (0)
#define ADD(tc, fn) do { if (wanted(#fn)) tcase_add_test(tc, fn); } while (0)

static Suite *stack_suite(void)
{
	Suite *s = suite_create("stack");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 120);
	int np = (int)(sizeof(providers) / sizeof(providers[0]));
	ADD_LOOP(tc, test_echo_random, np);
	ADD_LOOP(tc, test_bulk_checksum, np);
	ADD_LOOP(tc, test_slow_reader, np);
	ADD_LOOP(tc, test_half_close, np);
	ADD_LOOP(tc, test_epipe_after_close, np);
	ADD_LOOP(tc, test_migrate_meets_close, np);
	ADD_LOOP(tc, test_abortive_close, np);
	ADD_LOOP(tc, test_peer_death, np);
	ADD_LOOP(tc, test_many_conns_threads, np);
	suite_add_tcase(s, tc);
	TCase *nego = tcase_create("nego");
	tcase_set_timeout(nego, 30);
	ADD(nego, test_nego_codec);
	ADD(nego, test_fallback_plain_client);
	ADD(nego, test_fallback_plain_server);
	ADD(nego, test_fallback_banner_server);
	ADD(nego, test_fallback_no_common);
	ADD(nego, test_fallback_version);
	ADD(nego, test_fallback_garbage);
	suite_add_tcase(s, nego);
	return s;
}

int main(void)
{
	return check_main_run(stack_suite());
}
