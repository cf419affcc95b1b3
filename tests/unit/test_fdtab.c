/* fd table: set/get/take, dup sharing and reference counts, bounds, and lock-free
 * readers racing writers. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "preload/pl_fdtab.h"
#include "stack/stk_sock.h"
#include "unit.h"

static struct pl_fdtab tab;

static void setup(void)
{
	ck_assert_int_eq(pl_fdtab_init(&tab, 64), 0);
}

static void teardown(void)
{
	pl_fdtab_fini(&tab);
}

static struct stk_sock *new_tcp(void)
{
	struct stk_sock *s = stk_sock_new(AF_INET, SOCK_STREAM, 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(test_candidates_only)
{
	ck_assert_ptr_null(stk_sock_new(AF_UNIX, SOCK_STREAM, 0));
	ck_assert_ptr_null(stk_sock_new(AF_INET, SOCK_RAW, IPPROTO_ICMP));
	ck_assert_ptr_null(stk_sock_new(AF_INET, SOCK_STREAM, IPPROTO_SCTP));
	struct stk_sock *udp = stk_sock_new(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	ck_assert_ptr_nonnull(udp);
	ck_assert_int_eq(udp->kind, STK_SOCK_UDP);
	stk_sock_unref(udp);
	struct stk_sock *tcp = stk_sock_new(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, IPPROTO_TCP);
	ck_assert_int_eq(tcp->kind, STK_SOCK_TCP);
	stk_sock_unref(tcp);
}
END_TEST

START_TEST(test_set_get_take)
{
	struct stk_sock *s = new_tcp();
	ck_assert_ptr_null(pl_fdtab_get(&tab, 5));
	ck_assert_int_eq(pl_fdtab_set(&tab, 5, s), 0);
	ck_assert_int_eq(s->refs, 2);
	ck_assert_ptr_eq(pl_fdtab_get(&tab, 5), s);
	ck_assert_uint_eq(pl_fdtab_count(&tab), 1);
	struct stk_sock *taken = pl_fdtab_take(&tab, 5);
	ck_assert_ptr_eq(taken, s);
	ck_assert_ptr_null(pl_fdtab_get(&tab, 5));
	ck_assert_int_eq(s->refs, 2); /* take hands the table's reference over */
	stk_sock_unref(taken);
	ck_assert_int_eq(s->refs, 1);
	stk_sock_unref(s);
	ck_assert_ptr_null(pl_fdtab_take(&tab, 5));
}
END_TEST

START_TEST(test_bounds)
{
	struct stk_sock *s = new_tcp();
	ck_assert_int_eq(pl_fdtab_set(&tab, 64, s), -EBADF);
	ck_assert_int_eq(pl_fdtab_set(&tab, -1, s), -EBADF);
	ck_assert_ptr_null(pl_fdtab_get(&tab, 64));
	ck_assert_ptr_null(pl_fdtab_get(&tab, -3));
	ck_assert_ptr_null(pl_fdtab_take(&tab, 1000));
	pl_fdtab_dup(&tab, 3, 99); /* out of range target: ignored */
	ck_assert_int_eq(s->refs, 1);
	stk_sock_unref(s);
}
END_TEST

START_TEST(test_dup_shares_and_overwrites)
{
	struct stk_sock *a = new_tcp(), *b = new_tcp();
	pl_fdtab_set(&tab, 3, a);
	pl_fdtab_set(&tab, 4, b);
	pl_fdtab_dup(&tab, 3, 7); /* dup: 7 shares a */
	ck_assert_ptr_eq(pl_fdtab_get(&tab, 7), a);
	ck_assert_int_eq(a->refs, 3);
	pl_fdtab_dup(&tab, 3, 4); /* dup2 over a tracked fd releases b */
	ck_assert_ptr_eq(pl_fdtab_get(&tab, 4), a);
	ck_assert_int_eq(b->refs, 1);
	ck_assert_int_eq(a->refs, 4);
	pl_fdtab_dup(&tab, 10, 4); /* dup2 of an untracked fd over a tracked one clears it */
	ck_assert_ptr_null(pl_fdtab_get(&tab, 4));
	ck_assert_int_eq(a->refs, 3);
	pl_fdtab_dup(&tab, 3, 3); /* dup2(fd, fd) changes nothing */
	ck_assert_int_eq(a->refs, 3);
	pl_fdtab_set(&tab, 3, NULL);
	pl_fdtab_set(&tab, 7, NULL);
	ck_assert_int_eq(a->refs, 1);
	stk_sock_unref(a);
	stk_sock_unref(b);
	ck_assert_uint_eq(pl_fdtab_count(&tab), 0);
}
END_TEST

START_TEST(test_sized_from_rlimit)
{
	struct pl_fdtab big;
	ck_assert_int_eq(pl_fdtab_init(&big, 0), 0);
	ck_assert_int_ge(big.size, 1024);
	ck_assert_int_le(big.size, PL_FDTAB_MAX);
	pl_fdtab_fini(&big);
}
END_TEST

/* Readers see either NULL or one of the two live objects, never garbage, while a
 * writer keeps swapping entries. */
static struct stk_sock *race_objs[2];
static atomic_int race_stop;

static void *reader(void *arg)
{
	(void)arg;
	long bad = 0;
	while (!atomic_load(&race_stop)) {
		for (int fd = 0; fd < 64; fd++) {
			struct stk_sock *s = pl_fdtab_get(&tab, fd);
			if (s && s != race_objs[0] && s != race_objs[1])
				bad++;
		}
	}
	return (void *)bad;
}

START_TEST(test_concurrent_readers)
{
	race_objs[0] = new_tcp();
	race_objs[1] = new_tcp();
	atomic_store(&race_stop, 0);
	pthread_t readers[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&readers[i], NULL, reader, NULL), 0);
	for (int round = 0; round < 20000; round++) {
		int fd = round % 64;
		pl_fdtab_set(&tab, fd, race_objs[round & 1]);
		pl_fdtab_dup(&tab, fd, (fd + 7) % 64);
		if (round % 3 == 0) {
			struct stk_sock *s = pl_fdtab_take(&tab, fd);
			if (s)
				stk_sock_unref(s);
		}
	}
	atomic_store(&race_stop, 1);
	for (int i = 0; i < 2; i++) {
		void *bad;
		pthread_join(readers[i], &bad);
		ck_assert_int_eq((long)bad, 0);
	}
	for (int fd = 0; fd < 64; fd++)
		pl_fdtab_set(&tab, fd, NULL);
	ck_assert_int_eq(race_objs[0]->refs, 1);
	ck_assert_int_eq(race_objs[1]->refs, 1);
	stk_sock_unref(race_objs[0]);
	stk_sock_unref(race_objs[1]);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("fdtab");
	TCase *tc = tcase_create("table");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_candidates_only);
	tcase_add_test(tc, test_set_get_take);
	tcase_add_test(tc, test_bounds);
	tcase_add_test(tc, test_dup_shares_and_overwrites);
	tcase_add_test(tc, test_sized_from_rlimit);
	tcase_add_test(tc, test_concurrent_readers);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}
