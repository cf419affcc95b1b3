/* Accelerated TCP through the stack's own API (no LD_PRELOAD): a real loopback
 * TCP connection, the negotiation on it, then the stream over shm or tcp.
 * The client is a forked child (fork_pair.h); the server is the test
 * process. Every wait is bounded. */
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
#include "fork_pair.h"
#include "../lib/check_main.h"

static const char *const providers[] = { "shm", "tcp" };

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

static Suite *stream_suite(void)
{
	Suite *s = suite_create("stream");
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
	return s;
}

int main(void)
{
	return check_main_run(stream_suite());
}
