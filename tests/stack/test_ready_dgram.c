/* Readiness of datagram sockets (stk_ready_is_dgram): a tagged object stands
 * where a connection does, and the default operations hand it to
 * stk_ready_dgram_ops. A double of that table drives stk_poll and stk_epoll
 * with real kernel fds beside it (its "liveness" fd is an eventfd), so the
 * tag must survive the epoll sleep set, where stk_epoll tags inner sets with
 * bit 0. Every wait is bounded. */
#include "config.h"

#include <check.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_watch.h"
#include "../lib/check_main.h"

struct fake_dgram {
	struct stk_watch watch;
	int fd;            /* stands for the kernel socket */
	short events;
	uint64_t generation;
	int calls;
};

static struct fake_dgram *untag(struct stk_conn *c)
{
	return (struct fake_dgram *)((uintptr_t)c & ~STK_READY_DGRAM_TAG);
}

static struct stk_conn *tag(struct fake_dgram *d)
{
	return (struct stk_conn *)((uintptr_t)d | STK_READY_DGRAM_TAG);
}

static short fake_events(struct stk_conn *c)
{
	untag(c)->calls++;
	return untag(c)->events;
}

static int fake_liveness_fd(struct stk_conn *c)
{
	return untag(c)->fd;
}

static void fake_liveness(struct stk_conn *c)
{
	stk_watch_notify(&untag(c)->watch);
}

static uint64_t fake_generation(struct stk_conn *c)
{
	return untag(c)->generation;
}

static struct stk_fab *fake_fab(struct stk_conn *c)
{
	(void)c;
	return NULL;
}

static struct stk_watch *fake_watch(struct stk_conn *c)
{
	return &untag(c)->watch;
}

static const struct stk_ready_ops fake_ops = {
	.events = fake_events,
	.liveness_fd = fake_liveness_fd,
	.liveness = fake_liveness,
	.generation = fake_generation,
	.fab = fake_fab,
	.watch = fake_watch,
};

static struct fake_dgram *the_dgram;

static struct stk_conn *lookup(int fd)
{
	return the_dgram && fd == the_dgram->fd ? tag(the_dgram) : NULL;
}

static struct fake_dgram *dgram_new(void)
{
	struct fake_dgram *d = calloc(1, sizeof(*d));
	ck_assert_ptr_nonnull(d);
	d->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(d->fd, 0);
	d->events = POLLOUT;
	stk_ready_dgram_ops = &fake_ops;
	stk_ready_ops = stk_ready_ops_default;
	stk_ready_lookup = lookup;
	the_dgram = d;
	return d;
}

static void dgram_free(struct fake_dgram *d)
{
	close(d->fd);
	the_dgram = NULL;
	free(d);
}

START_TEST(dispatch_tagged)
{
	struct fake_dgram *d = dgram_new();
	d->generation = 42;
	ck_assert(stk_ready_is_dgram(tag(d)));
	ck_assert(!stk_ready_is_dgram(d));
	ck_assert_int_eq(stk_ready_ops.events(tag(d)), POLLOUT);
	ck_assert_int_eq(d->calls, 1);
	ck_assert_int_eq(stk_ready_ops.events_now(tag(d)), POLLOUT); /* falls back to events */
	ck_assert_int_eq(d->calls, 2);
	ck_assert_uint_eq(stk_ready_ops.generation(tag(d)), 42);
	ck_assert_ptr_eq(stk_ready_ops.watch(tag(d)), &d->watch);
	ck_assert_int_eq(stk_ready_ops.liveness_fd(tag(d)), d->fd);
	ck_assert_int_eq(stk_ready_phase(tag(d)), 0); /* on the fabric */
	ck_assert(!stk_ready_ops.tx_blocked(tag(d)));
	dgram_free(d);
}
END_TEST

START_TEST(poll_mixed)
{
	struct fake_dgram *d = dgram_new();
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct pollfd fds[2] = { { .fd = p[0], .events = POLLIN }, { .fd = d->fd, .events = POLLIN } };
	struct timespec zero = { 0 };
	ck_assert_int_eq(stk_poll(fds, 2, &zero, NULL), 0);
	d->events = POLLIN | POLLOUT;
	ck_assert_int_eq(stk_poll(fds, 2, &zero, NULL), 1);
	ck_assert_int_eq(fds[1].revents, POLLIN);
	ck_assert_int_eq(fds[0].revents, 0);
	close(p[0]);
	close(p[1]);
	dgram_free(d);
}
END_TEST

/* Readable through its kernel side while the wait sleeps: the liveness fd
 * in the sleep set wakes it, the object is evaluated again. */
START_TEST(epoll_wakes_on_kernel_side)
{
	struct fake_dgram *d = dgram_new();
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	struct stk_epoll *ep;
	ck_assert_int_eq(stk_epoll_create(epfd, &ep), 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 77 };
	ck_assert_int_eq(stk_epoll_ctl(ep, EPOLL_CTL_ADD, d->fd, tag(d), &ev), 0);
	struct epoll_event out[4];
	ck_assert_int_eq(stk_epoll_wait(ep, out, 4, 0, NULL), 0);
	d->events = POLLIN | POLLOUT;
	uint64_t one = 1;
	ck_assert_int_eq(write(d->fd, &one, sizeof(one)), sizeof(one));
	ck_assert_int_eq(stk_epoll_wait(ep, out, 4, 2000, NULL), 1);
	ck_assert_uint_eq(out[0].data.u64, 77);
	ck_assert_uint_eq(out[0].events, EPOLLIN);
	stk_epoll_conn_closed(tag(d));
	ck_assert_int_eq(stk_epoll_wait(ep, out, 4, 0, NULL), 0);
	stk_epoll_destroy(ep);
	close(epfd);
	dgram_free(d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ready_dgram");
	TCase *tc = tcase_create("dgram");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, dispatch_tagged);
	tcase_add_test(tc, poll_mixed);
	tcase_add_test(tc, epoll_wakes_on_kernel_side);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
