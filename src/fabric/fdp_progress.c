/* fdp_progress.c - the progress thread behind the wait fds.
 *
 * None of the virtual PMDs we target (memif, af_packet, af_xdp, tap) has
 * ethdev Rx interrupts in DPDK 22.11, so a sleeping reader cannot be woken
 * by the device. Instead, while at least one CQ or counter is armed by
 * fi_trywait (its owner is about to sleep on the eventfd), this thread polls
 * the port: it spins (with sched_yield) for SPIN_NS after the last frame,
 * then sleeps with nanosleep, doubling the pause up to MAX_SLEEP_NS. When no
 * one waits, it blocks on a condition variable and costs nothing. The cost is
 * wake-up latency: a few µs while traffic is recent, up to ~1 ms when idle
 * (documented in fi_dpdk.7). Readers that poll fi_cq_read never arm and
 * never pay a syscall.
 *
 * Long idle: a reader that sleeps for seconds (an idle connection) would
 * keep the 1 ms polls going, ~1 % of a CPU. After an idle period T (no
 * frame received) the pause may grow to T/DEEP_IDLE_DIV, at most
 * FI_DPDK_IDLE_MAX_MS (32 ms), so idle costs ~30 wake-ups a second; such
 * long pauses are condition waits that a newly armed waiter (a reader that consumed a
 * completion, e.g. of its own send, and sleeps again) ends at once. The
 * price: a frame that ends a long silence waits up to T/16 (<= 32 ms) more
 * for its reader (FI_DPDK_IDLE_MAX_MS=1 trades that for ~1 % of a CPU);
 * ping-pong traffic never gets there.
 *
 * Timers: with no waiter armed, endpoints attached with
 * fdp_progress_timers_attach (the RDM endpoint) still need their
 * retransmission, ack and unreachability timers when the application blocks
 * elsewhere. The thread then sleeps (timed condition wait) until the
 * earliest deadline they report and runs one progress pass; an endpoint
 * that the application progressed within APP_GRACE_NS is left to it, and
 * thread-driven passes are at least TIMER_GAP_NS apart, so an active
 * application costs at most one wake-up per APP_GRACE_NS. When every
 * attached endpoint is idle the thread blocks; a kick (one relaxed
 * load on the endpoint's side) wakes it when timers appear. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_port.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <sys/prctl.h>

#define SPIN_NS (50ull * 1000)
#define MIN_SLEEP_NS (2ull * 1000)
#define MAX_SLEEP_NS (1000ull * 1000)
#define DEEP_IDLE_DIV 16                     /* idle for T: pause at most T/16 */
/* ... and at most FI_DPDK_IDLE_MAX_MS */
#define MAX_DEEP_SLEEP_NS ((uint64_t)fdp_params.idle_max_ms * 1000 * 1000)
#define APP_GRACE_NS (10ull * 1000 * 1000) /* the app progressed recently: leave it */
#define TIMER_GAP_NS (50ull * 1000)     /* min gap between thread timer passes */
#define MAX_TIMER_GAP_NS (20ull * 1000 * 1000) /* idle polls back off to 50/s */

struct fdp_progress {
	struct fdp_port *port;
	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	int waiters;        /* protected by mutex */
	bool stop;          /* protected by mutex */
	struct fdp_ep **timer_eps;      /* attached endpoints, protected by mutex */
	size_t timer_count, timer_cap;  /* protected by mutex */
	uint64_t self_done_ns;          /* end of the thread's last timer pass */
	uint64_t timer_gap;             /* min gap to the next one (back-off) */
	/* set (under mutex) while the thread blocks with timers attached but
	 * all idle: a kick must signal */
	atomic_bool blocked;
	bool deep;          /* in a long idle pause: a waiter arming ends it (mutex) */
	bool nudged;        /* a waiter armed during the long pause (mutex) */
};

/* When the thread must run a timer pass: UINT64_MAX when every attached
 * endpoint is idle. Called with pg->mutex held; takes each ep->lock with
 * trylock only (an endpoint in use by the application is progressing). */
static uint64_t timers_wake_ns(struct fdp_progress *pg, uint64_t now)
{
	uint64_t wake = UINT64_MAX, deadline, last, at;
	size_t i;

	for (i = 0; i < pg->timer_count; i++) {
		struct fdp_ep *ep = pg->timer_eps[i];

		if (!fdp_trylock(&ep->lock)) {
			at = now + APP_GRACE_NS;
		} else {
			deadline = UINT64_MAX;
			last = 0;
			if (ep->enabled && ep->hooks && ep->hooks->next_deadline)
				deadline = ep->hooks->next_deadline(ep, now, &last);
			fdp_unlock(&ep->lock);
			if (deadline == UINT64_MAX)
				continue;
			if (last > pg->self_done_ns)    /* the application ran it */
				at = last + APP_GRACE_NS;
			else
				at = pg->self_done_ns + pg->timer_gap;
			if (at < deadline)
				at = deadline;
		}
		if (at < wake)
			wake = at;
	}
	return wake;
}

static void abs_time(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Sleep with pg->mutex held until a waiter arms, stop, or an attached
 * endpoint's timers are due. Returns true for a timer pass. */
static bool wait_for_work(struct fdp_progress *pg)
{
	struct timespec ts;
	uint64_t now, wake;

	while (!pg->stop && pg->waiters == 0) {
		if (pg->timer_count == 0) {
			pthread_cond_wait(&pg->cond, &pg->mutex);
			continue;
		}
		/* blocked is raised before the scan: an endpoint that gets
		 * timers after our trylock of it sees it and signals (it needs
		 * the mutex, so the signal lands once we sleep) */
		atomic_store(&pg->blocked, true);
		now = fdp_now_ns();
		wake = timers_wake_ns(pg, now);
		if (wake != UINT64_MAX)
			atomic_store(&pg->blocked, false);
		if (wake <= now)
			return true;
		if (wake == UINT64_MAX) {
			pthread_cond_wait(&pg->cond, &pg->mutex);
			atomic_store(&pg->blocked, false);
			continue;
		}
		abs_time(wake, &ts);
		pthread_cond_timedwait(&pg->cond, &pg->mutex, &ts);
	}
	return false;
}

static void timer_pass(struct fdp_progress *pg)
{
	int i, got = 0, n;

	/* drain what arrived while nobody polled, bounded */
	for (i = 0; i < 16 && (n = fdp_port_progress(pg->port)) > 0; i++)
		got += n;
	pthread_mutex_lock(&pg->mutex);
	pg->self_done_ns = fdp_now_ns();
	/* back off while polls find nothing, like the waiter loop */
	if (got)
		pg->timer_gap = TIMER_GAP_NS;
	else if ((pg->timer_gap *= 2) > MAX_TIMER_GAP_NS)
		pg->timer_gap = MAX_TIMER_GAP_NS;
	pthread_mutex_unlock(&pg->mutex);
}

/* A long idle pause until until_ns: a condition wait that a waiter arming
 * (fdp_port_waiter_add) or stop ends. True when a waiter armed. */
static bool deep_sleep(struct fdp_progress *pg, uint64_t until_ns)
{
	struct timespec ts;
	bool nudged;

	abs_time(until_ns, &ts);
	pthread_mutex_lock(&pg->mutex);
	pg->deep = true;
	pg->nudged = false;
	while (!pg->stop && pg->waiters > 0 && !pg->nudged &&
	       pthread_cond_timedwait(&pg->cond, &pg->mutex, &ts) == 0)
		;
	nudged = pg->nudged;
	pg->deep = false;
	pthread_mutex_unlock(&pg->mutex);
	return nudged;
}

static void *progress_main(void *arg)
{
	struct fdp_progress *pg = arg;
	uint64_t last_work = fdp_now_ns(), pause = MIN_SLEEP_NS, now, cap;
	struct timespec ts;
	bool timers;

	/* nanosleep's default 50 µs timer slack would dominate short pauses */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	for (;;) {
		pthread_mutex_lock(&pg->mutex);
		if (!pg->stop && pg->waiters == 0) {
			timers = wait_for_work(pg);
			last_work = fdp_now_ns();
			pause = MIN_SLEEP_NS;
			if (timers && !pg->stop && pg->waiters == 0) {
				pthread_mutex_unlock(&pg->mutex);
				timer_pass(pg);
				continue;
			}
		}
		if (pg->stop) {
			pthread_mutex_unlock(&pg->mutex);
			break;
		}
		pthread_mutex_unlock(&pg->mutex);

		if (fdp_port_progress(pg->port) > 0) {
			last_work = fdp_now_ns();
			pause = MIN_SLEEP_NS;
			continue;
		}
		now = fdp_now_ns();
		if (now - last_work < SPIN_NS) {
			sched_yield();
			continue;
		}
		/* the longer the silence, the longer the pause may be */
		cap = (now - last_work) / DEEP_IDLE_DIV;
		if (cap < MAX_SLEEP_NS)
			cap = MAX_SLEEP_NS;
		if (cap > MAX_DEEP_SLEEP_NS)
			cap = MAX_DEEP_SLEEP_NS;
		if (pause > cap)
			pause = cap;
		if (pause > MAX_SLEEP_NS && deep_sleep(pg, now + pause)) {
			last_work = fdp_now_ns(); /* a reader armed: it expects traffic */
			pause = MIN_SLEEP_NS;
			continue;
		}
		if (pause <= MAX_SLEEP_NS) {
			ts.tv_sec = 0;
			ts.tv_nsec = (long)pause;
			nanosleep(&ts, NULL);
		}
		pause *= 2;
		if (pause > MAX_DEEP_SLEEP_NS)
			pause = MAX_DEEP_SLEEP_NS;
	}
	return NULL;
}

int fdp_progress_start(struct fdp_port *port)
{
	struct fdp_progress *pg = calloc(1, sizeof(*pg));
	pthread_condattr_t cattr;
	sigset_t all, old;
	int ret;

	if (!pg)
		return -FI_ENOMEM;
	pg->port = port;
	pthread_mutex_init(&pg->mutex, NULL);
	/* timed waits use fdp_now_ns()'s clock */
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&pg->cond, &cattr);
	pthread_condattr_destroy(&cattr);
	atomic_init(&pg->blocked, false);
	pg->timer_gap = TIMER_GAP_NS;
	/* the application's signals must never land on our thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&pg->thread, NULL, progress_main, pg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret) {
		FDP_WARN(FI_LOG_CORE, "pthread_create(progress): error %d\n", ret);
		free(pg);
		return -FI_ENOMEM;
	}
	pthread_setname_np(pg->thread, "fdp-progress");
	*fdp_port_progress_slot(port) = pg;
	return 0;
}

void fdp_progress_stop(struct fdp_port *port)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(port);

	if (!pg)
		return;
	pthread_mutex_lock(&pg->mutex);
	pg->stop = true;
	pthread_cond_signal(&pg->cond);
	pthread_mutex_unlock(&pg->mutex);
	pthread_join(pg->thread, NULL);
	*fdp_port_progress_slot(port) = NULL;
	free(pg->timer_eps);
	free(pg);
}

void fdp_port_waiter_add(struct fdp_port *port)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(port);

	pthread_mutex_lock(&pg->mutex);
	if (pg->waiters++ == 0 || pg->deep) {
		pg->nudged = true;
		pthread_cond_signal(&pg->cond);
	}
	pthread_mutex_unlock(&pg->mutex);
}

void fdp_port_waiter_del(struct fdp_port *port)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(port);

	pthread_mutex_lock(&pg->mutex);
	if (pg->waiters > 0)
		pg->waiters--;
	pthread_mutex_unlock(&pg->mutex);
}

int fdp_progress_timers_attach(struct fdp_ep *ep)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(ep->domain->port);
	struct fdp_ep **n;

	if (!pg)
		return 0;
	pthread_mutex_lock(&pg->mutex);
	if (pg->timer_count == pg->timer_cap) {
		size_t cap = pg->timer_cap ? pg->timer_cap * 2 : 8;

		n = realloc(pg->timer_eps, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&pg->mutex);
			FDP_WARN(FI_LOG_EP_CTRL, "out of memory: no timer progress\n");
			return -FI_ENOMEM;
		}
		pg->timer_eps = n;
		pg->timer_cap = cap;
	}
	pg->timer_eps[pg->timer_count++] = ep;
	pthread_cond_signal(&pg->cond);
	pthread_mutex_unlock(&pg->mutex);
	return 0;
}

void fdp_progress_timers_detach(struct fdp_ep *ep)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(ep->domain->port);
	size_t i;

	if (!pg)
		return;
	pthread_mutex_lock(&pg->mutex);
	for (i = 0; i < pg->timer_count; i++) {
		if (pg->timer_eps[i] == ep) {
			pg->timer_eps[i] = pg->timer_eps[--pg->timer_count];
			break;
		}
	}
	pthread_mutex_unlock(&pg->mutex);
}

void fdp_progress_timers_kick(struct fdp_ep *ep)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(ep->domain->port);

	/* seq_cst pairs with the thread's store before its scan (a plain
	 * load on x86) */
	if (!pg || !atomic_load(&pg->blocked))
		return;
	pthread_mutex_lock(&pg->mutex);
	atomic_store(&pg->blocked, false);
	pthread_cond_signal(&pg->cond);
	pthread_mutex_unlock(&pg->mutex);
}
