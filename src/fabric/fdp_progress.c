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
 * never pay a syscall. */
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

struct fdp_progress {
	struct fdp_port *port;
	pthread_t thread;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	int waiters;        /* protected by mutex */
	bool stop;          /* protected by mutex */
};

struct fdp_progress **fdp_port_progress_slot(struct fdp_port *port) FDP_HIDDEN;

static void *progress_main(void *arg)
{
	struct fdp_progress *pg = arg;
	uint64_t last_work = fdp_now_ns(), pause = MIN_SLEEP_NS, now;
	struct timespec ts;

	/* nanosleep's default 50 µs timer slack would dominate short pauses */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	for (;;) {
		pthread_mutex_lock(&pg->mutex);
		while (!pg->stop && pg->waiters == 0) {
			pthread_cond_wait(&pg->cond, &pg->mutex);
			last_work = fdp_now_ns();
			pause = MIN_SLEEP_NS;
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
		ts.tv_sec = 0;
		ts.tv_nsec = (long)pause;
		nanosleep(&ts, NULL);
		pause *= 2;
		if (pause > MAX_SLEEP_NS)
			pause = MAX_SLEEP_NS;
	}
	return NULL;
}

int fdp_progress_start(struct fdp_port *port)
{
	struct fdp_progress *pg = calloc(1, sizeof(*pg));
	sigset_t all, old;
	int ret;

	if (!pg)
		return -FI_ENOMEM;
	pg->port = port;
	pthread_mutex_init(&pg->mutex, NULL);
	pthread_cond_init(&pg->cond, NULL);
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
	free(pg);
}

void fdp_port_waiter_add(struct fdp_port *port)
{
	struct fdp_progress *pg = *fdp_port_progress_slot(port);

	pthread_mutex_lock(&pg->mutex);
	if (pg->waiters++ == 0)
		pthread_cond_signal(&pg->cond);
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
