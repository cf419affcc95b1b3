/* The shm bell (stk_fab_bell.h) between two shm endpoints of this process:
 * a post rings the peer's FIFO only when the peer is about to sleep, once per
 * sleep; the peer's trywait takes what came before it sleeps and drains the
 * FIFO; a batch of posts (stk_fab_batch_begin) rings once, at its end or
 * at a flush; a peer whose bell is unusable is refused by stk_fab_av_insert. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "stack/stk_counters.h"
#include "stack/stk_fab_int.h"
#include "../lib/check_main.h"

static int delivered;

static void count_delivery(struct stk_fab *fab, const void *msg, size_t len)
{
	(void)fab;
	(void)msg;
	(void)len;
	delivered++;
}

static struct stk_fab *open_shm(void)
{
	struct fab_src src;
	memset(&src, 0, sizeof(src));
	struct stk_fab *fab = NULL;
	ck_assert_int_eq(fab_open("shm", &src, "shm", &fab), 0);
	ck_assert_int_ge(stk_fab_wait_fd(fab), 0);
	return fab;
}

/* a's address of b */
static fi_addr_t insert(struct stk_fab *a, struct stk_fab *b, int *ret)
{
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	ck_assert_int_eq(stk_fab_getname(b, NULL, addr, &len), 0);
	fi_addr_t fi = FI_ADDR_UNSPEC;
	*ret = stk_fab_av_insert(a, addr, len, &fi);
	return fi;
}

static int fifo_bytes(struct stk_fab *fab)
{
	int n = -1;
	ck_assert_int_eq(ioctl(stk_fab_wait_fd(fab), FIONREAD, &n), 0);
	return n;
}

static uint64_t bells(void)
{
	uint64_t v = 0;
	ck_assert_int_eq(stk_counter_get("bells", &v), 0);
	return v;
}

static const char msg[] = "bell test";

static void post(struct stk_fab *from, fi_addr_t to)
{
	ck_assert_int_eq(stk_fab_inject(from, msg, sizeof(msg), to), 0);
}

/* shm maps a new peer during the first sends (-FI_EAGAIN meanwhile, both
 * sides' progress moves it on): one message a → b delivered, before the
 * test watches b */
static void first_message(struct stk_fab *a, struct stk_fab *b, fi_addr_t to_b)
{
	int ret = -FI_EAGAIN;
	for (int i = 0; i < 10000 && ret == -FI_EAGAIN; i++) {
		ret = stk_fab_inject(a, msg, sizeof(msg), to_b);
		stk_fab_progress(a);
		stk_fab_progress(b);
		if (ret == -FI_EAGAIN)
			usleep(100);
	}
	ck_assert_int_eq(ret, 0);
	for (int i = 0; i < 10000 && !delivered; i++) {
		stk_fab_progress(b);
		usleep(100);
	}
	ck_assert_int_eq(delivered, 1);
}

START_TEST(bell_rings_only_a_sleeper)
{
	stk_fab_set_deliver(count_delivery);
	struct stk_fab *a = open_shm(), *b = open_shm();
	int ret;
	fi_addr_t to_b = insert(a, b, &ret);
	ck_assert_int_eq(ret, 0);
	delivered = 0;
	first_message(a, b, to_b);
	/* b was awake throughout: no byte */
	ck_assert_int_eq(fifo_bytes(b), 0);
	uint64_t rung = bells();

	/* b awake: a post costs no byte */
	post(a, to_b);
	ck_assert_int_eq(fifo_bytes(b), 0);
	ck_assert_uint_eq(bells(), rung);
	/* b about to sleep: its trywait takes the message instead */
	delivered = 0;
	ck_assert(!stk_fab_trywait(b));
	ck_assert_int_eq(delivered, 1);
	/* nothing left: b may sleep; one byte for the next posts, however many */
	ck_assert(stk_fab_trywait(b));
	post(a, to_b);
	post(a, to_b);
	ck_assert_int_eq(fifo_bytes(b), 1);
	ck_assert_uint_eq(bells(), rung + 1);
	struct pollfd p = { .fd = stk_fab_wait_fd(b), .events = POLLIN };
	ck_assert_int_eq(poll(&p, 1, 0), 1);
	/* woken: the next trywait takes both and drains the FIFO */
	delivered = 0;
	ck_assert(!stk_fab_trywait(b));
	ck_assert_int_eq(delivered, 2);
	ck_assert_int_eq(fifo_bytes(b), 0);
	fab_shm_unlink_regions(true);
}
END_TEST

/* b asleep with nothing pending (its FIFO drained by the trywait that takes
 * what came before) */
static void put_to_sleep(struct stk_fab *b)
{
	delivered = 0;
	for (int i = 0; i < 3 && !stk_fab_trywait(b); i++)
		;
	ck_assert_int_eq(fifo_bytes(b), 0);
}

START_TEST(bell_batch_rings_once)
{
	stk_fab_set_deliver(count_delivery);
	struct stk_fab *a = open_shm(), *b = open_shm();
	int ret;
	fi_addr_t to_b = insert(a, b, &ret);
	ck_assert_int_eq(ret, 0);
	delivered = 0;
	first_message(a, b, to_b);
	uint64_t rung = bells();

	/* a batch of posts to a sleeper: no byte until its end, then one */
	put_to_sleep(b);
	stk_fab_batch_begin();
	for (int i = 0; i < 8; i++)
		post(a, to_b);
	ck_assert_int_eq(fifo_bytes(b), 0);
	stk_fab_batch_end();
	ck_assert_int_eq(fifo_bytes(b), 1);
	ck_assert_uint_eq(bells(), rung + 1);
	ck_assert(!stk_fab_trywait(b));
	ck_assert_int_eq(delivered, 8);

	/* nested: the inner end rings nothing, the outer end does */
	put_to_sleep(b);
	stk_fab_batch_begin();
	stk_fab_batch_begin();
	post(a, to_b);
	stk_fab_batch_end();
	ck_assert_int_eq(fifo_bytes(b), 0);
	stk_fab_batch_end();
	ck_assert_int_eq(fifo_bytes(b), 1);
	ck_assert(!stk_fab_trywait(b));

	/* a flush (before the sender waits) rings at once; the batch goes on,
	 * and the sleeper, rung already, costs no second byte */
	put_to_sleep(b);
	stk_fab_batch_begin();
	post(a, to_b);
	stk_fab_batch_flush();
	ck_assert_int_eq(fifo_bytes(b), 1);
	post(a, to_b);
	stk_fab_batch_end();
	ck_assert_int_eq(fifo_bytes(b), 1);
	ck_assert_uint_eq(bells(), rung + 3);
	ck_assert(!stk_fab_trywait(b));
	ck_assert_int_eq(delivered, 2);
	fab_shm_unlink_regions(true);
}
END_TEST

/* _i: 0 page of another magic, 1 no FIFO, 2 a regular file for the FIFO */
START_TEST(bell_unusable_peer_refused)
{
	stk_fab_set_deliver(count_delivery);
	struct stk_fab *a = open_shm(), *b = open_shm();
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	ck_assert_int_eq(stk_fab_getname(b, NULL, addr, &len), 0);
	const char *region = fab_shm_region_of(addr, len);
	ck_assert_ptr_nonnull(region);
	char page[256], ring[256];
	snprintf(page, sizeof(page), "/dev/shm/fsk-bell.%s", region);
	snprintf(ring, sizeof(ring), "/dev/shm/fsk-ring.%s", region);
	if (_i == 0) {
		int fd = open(page, O_WRONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, "notabell", 8, 0), 8);
		close(fd);
	} else {
		ck_assert_int_eq(unlink(ring), 0);
		if (_i == 2)
			close(open(ring, O_CREAT | O_WRONLY, 0600));
	}
	int ret;
	insert(a, b, &ret);
	ck_assert_int_eq(ret, -EPERM);
	fab_shm_unlink_regions(true);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("fab_bell");
	TCase *tc = tcase_create("bell");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, bell_rings_only_a_sleeper);
	tcase_add_test(tc, bell_batch_rings_once);
	tcase_add_loop_test(tc, bell_unusable_peer_refused, 0, 3);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
