/* The negotiation of the stack over a real loopback TCP connection (no
 * LD_PRELOAD): fallbacks to the kernel with their reason and no stray byte,
 * and the bounds of the record codec. The client is a forked child
 * (fork_pair.h); the server is the test process. Every wait is bounded. */
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

static Suite *nego_suite(void)
{
	Suite *s = suite_create("nego");
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
	return check_main_run(nego_suite());
}
