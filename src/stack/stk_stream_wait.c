/* Blocking waits: a connection's spin and sleep, and the blocking data calls'
 * SO_RCVTIMEO / SO_SNDTIMEO and signals. */
#include "config.h"
#include "stack/stk_stream_int.h"
#include "stack/stk_config.h"
#include "stack/stk_cork.h"
#include "stack/stk_counters.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>

#define QUICK_SPIN_NS 20000ull      /* a blocking call spins this before setting up its wait */
#define ANNOUNCE_NS 200000ull       /* idle this long (sleep back-off): announce the sleep */

/* ---- signals of blocking data calls ---- */

static pthread_key_t sigfd_key;
static pthread_once_t sigfd_once = PTHREAD_ONCE_INIT;
static __thread int tls_sigfd = -1;

static void sigfd_close(void *arg)
{
	stk_sys.close((int)(intptr_t)arg - 1);
}

static void sigfd_init(void)
{
	pthread_key_create(&sigfd_key, sigfd_close);
}

static bool sig_never_watched(int sig)
{
	return sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS ||
	       sig == SIGFPE || sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

/* The thread's signalfd, watching the signals the caller's mask lets through. */
static int sigfd_watch(const sigset_t *caller_mask)
{
	sigset_t watch;
	sigemptyset(&watch);
	for (int sig = 1; sig < NSIG; sig++)
		if (!sig_never_watched(sig) && sigismember(caller_mask, sig) == 0)
			sigaddset(&watch, sig);
	int fd = signalfd(tls_sigfd, &watch, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (tls_sigfd < 0) {
		/* It lives as long as the thread: keep it out of the low numbers the
		 * app expects to get back (the lowest free one is POSIX's promise). */
		int high = stk_sys_dup_high(fd);
		if (high >= 0) {
			stk_sys.close(fd);
			fd = high;
		}
		tls_sigfd = fd;
		pthread_once(&sigfd_once, sigfd_init);
		pthread_setspecific(sigfd_key, (void *)(intptr_t)(fd + 1));
	}
	return fd;
}

/* Read SO_RCVTIMEO / SO_SNDTIMEO of the kernel socket (shared with the app's
 * fd): a deadline, or STK_WAIT_NEVER. */
static uint64_t sock_deadline(int fd, int opt)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	if (stk_sys.getsockopt(fd, SOL_SOCKET, opt, &tv, &len) != 0 ||
	    (tv.tv_sec == 0 && tv.tv_usec == 0))
		return STK_WAIT_NEVER;
	return stk_now_ns() + (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

/* Signals are pending for us: run their handlers (unblock, re-block). Returns
 * -EINTR when a handler ran and the call must end, 1 when every handler that
 * ran asked for SA_RESTART (and no timeout is set), 0 when no handler ran. */
static int deliver_signals(struct stream_block_wait *bw)
{
	sigset_t pending;
	if (sigpending(&pending) != 0)
		return -EINTR;
	bool handled = false, restart = true;
	for (int sig = 1; sig < NSIG; sig++) {
		if (sig_never_watched(sig) || sigismember(&pending, sig) != 1 ||
		    sigismember(&bw->sigs.saved, sig) == 1)
			continue;
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) != 0)
			continue;
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue; /* ignored, or ends/stops the process: no EINTR */
		handled = true;
		if (!(sa.sa_flags & SA_RESTART))
			restart = false;
	}
	pthread_sigmask(SIG_SETMASK, &bw->sigs.saved, NULL); /* handlers run here */
	bw->sigs.blocked = false;
	stk_wait_block_signals(&bw->sigs);
	if (!handled)
		return 0;
	return restart && bw->deadline == STK_WAIT_NEVER ? 1 : -EINTR;
}

/* ---- waiting on a connection ---- */

/* One step of wait_core's spin (stk_wait.h): true to look again; false once
 * the spin is over (budget spent, or descheduled: then it gives way). */
static bool spin_on(uint64_t now, uint64_t *spin_end, uint64_t *last_look)
{
	if (now < *spin_end && stk_wait_spin_look(now, last_look)) {
		stream_cpu_relax();
		return true;
	}
	*spin_end = now;
	return false;
}

/* Sleeping: with a CQ wait fd (tcp) we ppoll it together with the kernel
 * connection after fi_trywait (shm: its bell's FIFO); without one we ppoll the kernel
 * connection, in slices growing from 20 µs until the doorbell is announced
 * (stk_conn_sleep_announce), then without slices. Either way with the thread's
 * wake-up (stk_wake.h) and at most stk_sleep_cap() (stk_stream.h). */
/* Returns the events, 0 at the deadline, -EINTR when the sleep was interrupted
 * by a signal (sleep_mask given) or sigfd (>= 0, also polled) became readable. */
static int wait_core(struct stk_conn *conn, short events, uint64_t deadline, int sigfd,
		     const sigset_t *sleep_mask, bool (*until)(struct stk_conn *))
{
	events |= POLLERR | POLLHUP;
	stk_cork_before_wait();
	uint64_t start = stk_now_ns();
	uint64_t spin_end = stk_wait_spin_allowed(start) ? start + (uint64_t)stk_cfg.spin_us * 1000ull
							: start;
	uint64_t last_look = 0;
	uint64_t backoff = SLEEP_MIN_NS;
	for (;;) {
		short ev = until ? (until(conn) ? events : 0) : stk_stream_events(conn) & events;
		if (ev)
			return ev;
		uint64_t now = stk_now_ns();
		if (now >= deadline)
			return 0;
		if (spin_on(now, &spin_end, &last_look))
			continue;
		struct pollfd pfd[4] = { { .fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE),
					   .events = POLLIN | POLLRDHUP } };
		nfds_t nfds = 1;
		uint64_t sleep = deadline - now;
		if (until && sleep > SLEEP_MAX_NS)
			sleep = SLEEP_MAX_NS; /* the condition may change without an fd event */
		struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
		int wfd = fab ? stk_fab_wait_fd(fab) : -1;
		stk_conn_sleepers_add(conn, 1);
		int bell = until ? STK_SLEEP_NO : stk_conn_sleep_announce(conn, backoff >= ANNOUNCE_NS);
		if (bell == STK_SLEEP_SENT) {
			stk_conn_sleepers_add(conn, -1);
			continue; /* look once more before sleeping */
		}
		if (wfd >= 0) {
			if (!stk_fab_trywait(fab)) {
				stk_conn_sleepers_add(conn, -1);
				continue; /* completions pending: progress again */
			}
			pfd[nfds].fd = wfd;
			pfd[nfds++].events = POLLIN;
		}
		/* from here on any change of the conn, by any thread, wakes us */
		struct stk_wake_node wake;
		int wake_idx = -1;
		if (!until && stk_wake_prepare(&wake)) {
			stk_conn_wake_link(conn, &wake, true);
			if (stk_stream_events(conn) & events) {
				stk_conn_wake_link(conn, &wake, false);
				stk_conn_sleepers_add(conn, -1);
				continue; /* delivered by another thread meanwhile */
			}
			wake_idx = (int)nfds;
			pfd[nfds].fd = stk_wake_fd(&wake);
			pfd[nfds++].events = POLLIN;
		}
		bool capped = false;
		if (wfd >= 0 || bell == STK_SLEEP_COVERED) {
			uint64_t cap = stk_sleep_cap(wake_idx >= 0, events & POLLOUT);
			capped = sleep > cap;
			if (capped)
				sleep = cap;
		} else {
			if (sleep > backoff)
				sleep = backoff;
			if (backoff < SLEEP_MAX_NS)
				backoff *= 2;
		}
		int sig_idx = -1;
		if (sigfd >= 0) {
			sig_idx = (int)nfds;
			pfd[nfds].fd = sigfd;
			pfd[nfds++].events = POLLIN;
		}
		struct timespec ts = { .tv_sec = (time_t)(sleep / 1000000000ull),
				       .tv_nsec = (long)(sleep % 1000000000ull) };
		int n = stk_wait_sys_ppoll(pfd, nfds, &ts, sleep_mask);
		if (wake_idx >= 0) {
			stk_conn_wake_link(conn, &wake, false);
			if (n > 0 && pfd[wake_idx].revents)
				stk_wake_drain(&wake);
		}
		stk_conn_sleepers_add(conn, -1);
		/* a wake-up was missed when the conn is ready: with a wait fd, as
		 * delivered so far (what progress would receive now was on its
		 * way: a provider polling for its wait fd, dpdk, signals a frame
		 * up to its idle pause after it came); covered by doorbells, with
		 * what the provider holds (a message there was owed a ring) */
		if (n == 0 && capped &&
		    __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) == STK_PHASE_FABRIC &&
		    ((wfd >= 0 ? stk_conn_events(conn) : stk_stream_events(conn)) & events))
			stk_count(STK_C_SLEEP_LATE_WAKES);
		if (n == -EINTR)
			return -EINTR;
		if (n > 0 && pfd[0].revents && !until)
			stk_conn_check_liveness(conn);
		if (n > 0 && pfd[0].revents && until)
			backoff = SLEEP_MIN_NS; /* the negotiation moves: watch it closely */
		if (n > 0 && sig_idx >= 0 && pfd[sig_idx].revents)
			return -EINTR;
	}
}

short stk_conn_wait(struct stk_conn *conn, short events, int timeout_ms)
{
	struct stk_wait_sigs sigs = { .blocked = false };
	stk_wait_block_signals(&sigs);
	int ret = wait_core(conn, events, stk_wait_deadline_ms(timeout_ms), -1,
			    stk_wait_sleep_mask(&sigs, NULL), NULL);
	stk_wait_restore_signals(&sigs);
	return (short)ret;
}

/* ---- blocking data calls: SO_RCVTIMEO/SO_SNDTIMEO and signals ---- */

/* Before a call's first wait is set up (signals blocked, the thread's
 * signalfd, the socket's timeout read: four system calls, a large part of a
 * bulk transfer's cost when paid per message), spin a moment without it: the
 * credit a streaming sender waits for, or the next message of a reader, is
 * usually microseconds away. A handler that runs meanwhile runs as if its
 * signal came just before the call: the kernel interrupts only a call that
 * sleeps. True when events are ready. */
static bool quick_spin(struct stk_conn *conn, short events)
{
	uint64_t budget = (uint64_t)stk_cfg.spin_us * 1000ull;
	if (budget > QUICK_SPIN_NS)
		budget = QUICK_SPIN_NS;
	if (!budget)
		return false;
	events |= POLLERR | POLLHUP;
	stk_cork_before_wait();
	uint64_t end = stk_now_ns() + budget;
	for (unsigned i = 1;; i++) {
		if (stk_stream_events(conn) & events)
			return true;
		if (i % 16 == 0 && stk_now_ns() >= end)
			return false;
		stream_cpu_relax();
	}
}

/* Wait for events. 0: ready (or restarted after a signal: re-check), 1: a
 * handler with SA_RESTART ran (the caller returns what it already moved, else
 * re-checks), -EAGAIN: the socket's timeout expired, -EINTR. */
int stream_block_wait(struct stk_conn *conn, short events, int timeo_opt,
		      struct stream_block_wait *bw, bool (*until)(struct stk_conn *))
{
	stk_fab_batch_flush(); /* the peer may sleep on a ring we deferred */
	if (!bw->ready) {
		if (!until && quick_spin(conn, events))
			return 0;
		bw->ready = true;
		bw->deadline = sock_deadline(conn->fd, timeo_opt);
		stk_wait_block_signals(&bw->sigs);
		bw->sigfd = bw->sigs.blocked ? sigfd_watch(&bw->sigs.saved) : -1;
	}
	for (;;) {
		const sigset_t *mask = bw->sigfd >= 0 ? NULL : stk_wait_sleep_mask(&bw->sigs, NULL);
		int ev = wait_core(conn, events, bw->deadline, bw->sigfd, mask, until);
		if (ev > 0)
			return 0;
		if (ev == 0)
			return -EAGAIN;
		if (bw->sigfd < 0) /* a handler ran during the sleep; which one is unknown */
			return -EINTR;
		int r = deliver_signals(bw);
		if (r != 0)
			return r;
	}
}

int stk_conn_block_until(struct stk_conn *conn, bool (*until)(struct stk_conn *conn))
{
	struct stream_block_wait bw = { .ready = false };
	int w;
	do
		w = stream_block_wait(conn, POLLIN, SO_RCVTIMEO, &bw, until);
	while (w == 1);
	stk_wait_restore_signals(&bw.sigs);
	return w;
}
