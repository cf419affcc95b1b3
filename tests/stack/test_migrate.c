/* The leftover of a migrated connection (stk_migrate.h): the bytes received
 * and not read at migration, read exactly once by whichever process reads
 * first after a fork, and reachable through its memfd after an exec. No
 * fabric needed: the leftover is plain shared memory. */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stack/stk_migrate.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

static void fill(uint8_t *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + seed);
}

/* A ring of 64 bytes whose 40 buffered bytes start at 50 (they wrap). */
static struct stk_leftover *wrapped(uint8_t want[40], int *fd)
{
	uint8_t ring[64];
	fill(want, 40, 7);
	memcpy(ring + 50, want, 14);
	memcpy(ring, want + 14, 26);
	return stk_leftover_new(ring, sizeof(ring), 50, 40, fd);
}

START_TEST(test_take_peek_count)
{
	uint8_t want[40], got[64];
	int fd;
	struct stk_leftover *left = wrapped(want, &fd);
	ck_assert_ptr_nonnull(left);
	ck_assert_uint_eq(stk_leftover_count(left), 40);
	ck_assert_uint_eq(stk_leftover_take(left, got, 10, true), 10);
	ck_assert_mem_eq(got, want, 10);
	ck_assert_uint_eq(stk_leftover_count(left), 40); /* peek keeps them */
	ck_assert_uint_eq(stk_leftover_take(left, got, 25, false), 25);
	ck_assert_mem_eq(got, want, 25);
	ck_assert_uint_eq(stk_leftover_take(left, got, sizeof(got), false), 15);
	ck_assert_mem_eq(got, want + 25, 15);
	ck_assert_uint_eq(stk_leftover_count(left), 0);
	ck_assert_uint_eq(stk_leftover_take(left, got, sizeof(got), false), 0);
	stk_leftover_free(left);
	if (fd >= 0)
		stk_sys.close(fd);
	uint8_t ring[8];
	ck_assert_ptr_null(stk_leftover_new(ring, sizeof(ring), 0, 0, &fd));
	ck_assert_int_eq(fd, -1);
}
END_TEST

/* After a fork, the child takes the first bytes; the parent gets the rest,
 * never the child's again (a kernel receive queue shared by two processes). */
START_TEST(test_shared_across_fork)
{
	uint8_t want[40], got[40];
	int fd;
	struct stk_leftover *left = wrapped(want, &fd);
	ck_assert_ptr_nonnull(left);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		uint8_t part[16];
		size_t n = stk_leftover_take(left, part, sizeof(part), false);
		_exit(n == sizeof(part) && memcmp(part, want, sizeof(part)) == 0 ? 0 : 1);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_uint_eq(stk_leftover_take(left, got, sizeof(got), false), 24);
	ck_assert_mem_eq(got, want + 16, 24);
	stk_leftover_free(left);
	if (fd >= 0)
		stk_sys.close(fd);
}
END_TEST

/* The memfd names the same bytes for an exec'd image (stk_leftover_open). */
START_TEST(test_open_memfd)
{
	uint8_t want[40], got[40];
	int fd;
	struct stk_leftover *left = wrapped(want, &fd);
	ck_assert_ptr_nonnull(left);
	ck_assert_int_ge(fd, 0);
	ck_assert_uint_eq(stk_leftover_take(left, got, 5, false), 5);
	struct stk_leftover *other = stk_leftover_open(fd);
	ck_assert_ptr_nonnull(other);
	ck_assert_uint_eq(stk_leftover_count(other), 35);
	ck_assert_uint_eq(stk_leftover_take(other, got, sizeof(got), false), 35);
	ck_assert_mem_eq(got, want + 5, 35);
	ck_assert_uint_eq(stk_leftover_count(left), 0);
	stk_leftover_free(other);
	stk_leftover_free(left);
	stk_sys.close(fd);
	/* Not one of ours: refused. */
	int pipefd[2];
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_ptr_null(stk_leftover_open(pipefd[0]));
	stk_sys.close(pipefd[0]);
	stk_sys.close(pipefd[1]);
}
END_TEST

/* A close in one thread while another prepares a fork (pthread_atfork: the
 * connection table, then every connection's lock): both take the table and a
 * connection's lock, in the same order, so neither waits for the other for
 * ever. 1.5 s of each, bounded by the case's timeout. */
static int stop_forking; /* atomic */

static void *fork_preparer(void *arg)
{
	unsigned long *rounds = arg;
	while (!__atomic_load_n(&stop_forking, __ATOMIC_ACQUIRE)) {
		stk_conn_atfork_prepare();
		stk_conn_atfork_parent();
		(*rounds)++;
	}
	return NULL;
}

START_TEST(test_close_meets_fork_prepare)
{
	unsigned long rounds = 0, closes = 0;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, fork_preparer, &rounds), 0);
	uint64_t end = stk_now_ns() + 1500000000ull;
	while (stk_now_ns() < end) {
		int sv[2];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		struct stk_conn *conn;
		ck_assert_int_eq(stk_conn_create(sv[0], 4096, &conn), 0);
		ck_assert_int_eq(stk_close(conn, false), 0); /* closes sv[0] */
		stk_sys.close(sv[1]);
		closes++;
	}
	__atomic_store_n(&stop_forking, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_uint_gt(closes, 0);
	ck_assert_uint_gt(rounds, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("migrate");
	TCase *tc = tcase_create("leftover");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_take_peek_count);
	tcase_add_test(tc, test_shared_across_fork);
	tcase_add_test(tc, test_open_memfd);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("locks");
	tcase_set_timeout(tl, 10);
	tcase_add_test(tl, test_close_meets_fork_prepare);
	suite_add_tcase(s, tl);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
