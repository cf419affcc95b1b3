/* The test double of the connection and fabric (stk_ready_ops) that the
 * readiness suites (test_ready, test_ready_epoll) run stk_poll, stk_select and
 * stk_epoll against, and their shared helpers: timing, delayed actions,
 * SIGUSR1 delivery, epoll sets. Every helper fails the running Check test on
 * error. */
#ifndef FSK_TESTS_READY_FAKE_H
#define FSK_TESTS_READY_FAKE_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_wait.h"
#include "stack/stk_watch.h"

struct fake_fab {
	int wait_fd; /* eventfd, or -1 (like shm) */
};

struct fake_conn {
	int fd;            /* the app's fd and the liveness channel (socketpair end) */
	int peer;          /* the other end: closing it = peer died */
	short ev;          /* atomic: what stk_poll_events would say */
	uint64_t gen;      /* atomic */
	int liveness_calls;
	bool settled;      /* atomic: the liveness channel said EOF (peer gone) */
	int phase;         /* atomic: enum stk_phase, for tests that install fake_phase */
	struct fake_fab *fab;
	struct stk_watch watch; /* epoll items watching it */
};

static inline struct fake_conn *F(struct stk_conn *c)
{
	return (struct fake_conn *)c;
}

extern int events_calls; /* evaluations of any fake: epoll must not scan idle ones */

/* stk_ready_ops.phase of a fake: its phase field (fake_setup leaves phase
 * unset; the tests that need it install this) */
int fake_phase(struct stk_conn *c);

/* "Data arrives": set events, bump the generation, ring the fabric's wait fd. */
void fake_set(struct fake_conn *c, short ev);
/* A new fake (at most 8 per test), on a fabric with a wait fd or without. */
struct fake_conn *fake_new(bool with_wait_fd);

/* Check fixture: install the double (stk_ready_ops, stk_ready_lookup) with a
 * 20 µs spin; teardown closes every fake and restores the default ops. */
void fake_setup(void);
void fake_teardown(void);

uint64_t now_ms(void);
const struct timespec *ms_ts(struct timespec *ts, int ms);

/* A thread that, after delay_ms, runs an action. */
struct later {
	pthread_t thr;
	int delay_ms;
	void (*fn)(void *);
	void *arg;
};

void later_start(struct later *l, int delay_ms, void (*fn)(void *), void *arg);
void later_join(struct later *l);
/* actions: a fake (arg) becomes readable; write 1 to an eventfd/pipe (arg: int *);
 * close a fake's peer (arg) */
void act_readable(void *arg);
void act_write_fd(void *arg);
void act_close_peer(void *arg);

/* SIGUSR1: its handler counts in got_usr1; kill_main sends it to target
 * after delay_ms (a pthread start routine, arg: struct kill_arg *). */
extern volatile sig_atomic_t got_usr1;

struct kill_arg {
	pthread_t target;
	int delay_ms;
};

void *kill_main(void *p);
/* install the counting handler with these sa_flags, reset got_usr1 */
void install_usr1(int flags);

/* A stack epoll set over a new kernel epoll fd (*epfd), and ADD of a fake. */
struct stk_epoll *ep_new(int *epfd);
void ep_add(struct stk_epoll *ep, struct fake_conn *c, uint32_t events, uint64_t data);

#endif
