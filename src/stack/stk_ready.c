#include "config.h"
#include "stack/stk_ready.h"
#include "stack/stk_config.h"
#include "stack/stk_fab.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct stk_conn *lookup_none(int fd)
{
	(void)fd;
	return NULL;
}

struct stk_conn *(*stk_ready_lookup)(int fd) = lookup_none;
struct stk_epoll *(*stk_ready_lookup_set)(int fd);

/* ---- the real stack behind the ops table ---- */

static int conn_liveness_fd(struct stk_conn *conn)
{
	/* Unlocked reads: a stale answer costs one extra wake-up at most to a
	 * sleep (poll); a set registers the fd only while it cannot be closed
	 * (stk_epoll_conn_changed). After the peer's MIGRATE the kernel
	 * connection carries the data: watch it. */
	int fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE);
	if (__atomic_load_n(&conn->mig_rx, __ATOMIC_RELAXED))
		return fd;
	if (__atomic_load_n(&conn->reset, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&conn->peer_closed, __ATOMIC_RELAXED))
		return -1;
	return fd;
}

static struct stk_fab *conn_fab(struct stk_conn *conn)
{
	return __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
}

/* As readiness sees it: a conn migrated to its kernel socket with no leftover
 * bytes (stk_migrate.h) is on the kernel as much as one that settled there. */
static int conn_phase(struct stk_conn *conn)
{
	if (__atomic_load_n(&conn->kernel_only, __ATOMIC_RELAXED))
		return STK_PHASE_KERNEL;
	return __atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE);
}

static int fab_wait_fd(struct stk_fab *fab)
{
	return stk_fab_wait_fd(fab);
}

/* The real connection; tests swap stk_ready_ops for a double and restore it
 * from stk_ready_ops_default. */
#define READY_OPS_REAL { \
	.events = stk_poll_events, \
	.liveness_fd = conn_liveness_fd, \
	.liveness = stk_conn_check_liveness, \
	.generation = stk_conn_generation, \
	.fab = conn_fab, \
	.progress = stk_fab_progress, \
	.wait_fd = fab_wait_fd, \
	.trywait = stk_fab_trywait, \
	.quiesce = stk_fab_quiesce, \
	.watch = stk_conn_watch, \
	.events_now = stk_conn_events, \
	.tx_blocked = stk_conn_tx_blocked, \
	.phase = conn_phase, \
	.announce = stk_conn_sleep_announce, \
	.sleepers = stk_conn_sleepers_add, \
	.wake_link = stk_conn_wake_link, \
}

const struct stk_ready_ops stk_ready_ops_default = READY_OPS_REAL;
struct stk_ready_ops stk_ready_ops = READY_OPS_REAL;

/* ---- time ---- */

uint64_t stk_ready_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t stk_ready_deadline_ts(const struct timespec *timeout)
{
	if (!timeout)
		return STK_READY_NEVER;
	if (timeout->tv_sec < 0 || timeout->tv_nsec < 0)
		return 0;
	uint64_t ns = (uint64_t)timeout->tv_sec * 1000000000ull + (uint64_t)timeout->tv_nsec;
	if (timeout->tv_sec > 100000000) /* > 3 years: forever for our purposes */
		return STK_READY_NEVER;
	return stk_ready_now_ns() + ns;
}

uint64_t stk_ready_deadline_ms(int timeout_ms)
{
	if (timeout_ms < 0)
		return STK_READY_NEVER;
	return stk_ready_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* ---- system calls ---- */

int stk_ready_sys_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			const sigset_t *sigmask)
{
	int n;
	if (stk_sys.ppoll) {
		n = stk_sys.ppoll(fds, nfds, timeout, sigmask);
	} else {
		/* The preload did not fill the slot: the raw call is never interposed.
		 * The kernel writes the remaining time back, so pass a copy. */
		struct timespec copy;
		if (timeout)
			copy = *timeout;
		n = (int)syscall(SYS_ppoll, fds, nfds, timeout ? &copy : NULL, sigmask,
				 (size_t)(_NSIG / 8));
	}
	return n < 0 ? -errno : n;
}

/* ---- user pointers ---- */

#define USER_MIN_ADDR 4096ul /* mmap_min_addr is at least a page everywhere */
#if UINTPTR_MAX > 0xffffffffu
#define USER_END_ADDR 0x800000000000ul /* 47-bit user half (x86-64, arm64 48-bit) */
#else
#define USER_END_ADDR 0xc0000000ul
#endif

bool stk_ready_bad_user_range(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	if (len == 0)
		return false;
	return a < USER_MIN_ADDR || a + len < a || a + len > USER_END_ADDR;
}

/* ---- scratch ---- */

#define SCRATCH_SLOTS 4

struct scratch {
	void *buf[SCRATCH_SLOTS];
	size_t size[SCRATCH_SLOTS];
};

static __thread struct scratch *tls_scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
	struct scratch *s = p;
	for (unsigned i = 0; i < SCRATCH_SLOTS; i++)
		free(s->buf[i]);
	free(s);
}

static void scratch_key_init(void)
{
	pthread_key_create(&scratch_key, scratch_free);
}

void *stk_ready_scratch(unsigned slot, size_t bytes)
{
	if (slot >= SCRATCH_SLOTS)
		return NULL;
	struct scratch *s = tls_scratch;
	if (!s) {
		pthread_once(&scratch_once, scratch_key_init);
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		tls_scratch = s;
		pthread_setspecific(scratch_key, s);
	}
	if (s->size[slot] < bytes) {
		size_t size = s->size[slot] ? s->size[slot] : 4096;
		while (size < bytes)
			size *= 2;
		void *p = realloc(s->buf[slot], size);
		if (!p)
			return NULL;
		s->buf[slot] = p;
		s->size[slot] = size;
	}
	return s->buf[slot];
}

/* ---- signals ---- */

void stk_ready_block_signals(struct stk_ready_sigs *s)
{
	if (s->blocked)
		return;
	sigset_t all;
	sigfillset(&all);
	/* Signals a fault raises synchronously are never blocked: the kernel would
	 * kill the process instead of running the app's handler (a GC or a JIT
	 * relying on SIGSEGV). */
	static const int sync_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };
	for (size_t i = 0; i < sizeof(sync_sigs) / sizeof(sync_sigs[0]); i++)
		sigdelset(&all, sync_sigs[i]);
	if (pthread_sigmask(SIG_SETMASK, &all, &s->saved) == 0)
		s->blocked = true;
}

void stk_ready_restore_signals(struct stk_ready_sigs *s)
{
	if (!s->blocked)
		return;
	pthread_sigmask(SIG_SETMASK, &s->saved, NULL);
	s->blocked = false;
}

const sigset_t *stk_ready_sleep_mask(const struct stk_ready_sigs *s, const sigset_t *sigmask)
{
	if (sigmask)
		return sigmask;
	return s->blocked ? &s->saved : NULL;
}

/* ---- fabrics ---- */

void stk_ready_fabs_add(struct stk_ready_fabs *f, struct stk_conn *conn)
{
	struct stk_fab *fab = stk_ready_ops.fab(conn);
	if (!fab)
		return;
	for (unsigned i = 0; i < f->n; i++)
		if (f->fab[i] == fab)
			return;
	if (f->n < STK_READY_FAB_MAX)
		f->fab[f->n++] = fab;
}

int stk_ready_fabs_prepare(struct stk_ready_fabs *f, struct pollfd *out, uint64_t *slice_ns)
{
	int n = 0;
	*slice_ns = 0;
	for (unsigned i = 0; i < f->n; i++) {
		int wfd = stk_ready_ops.wait_fd(f->fab[i]);
		if (wfd < 0) {
			if (!f->slice_ns)
				f->slice_ns = STK_READY_SLICE_MIN_NS;
			*slice_ns = f->slice_ns;
			continue;
		}
		if (!stk_ready_ops.trywait(f->fab[i]))
			return -EAGAIN;
		stk_ready_ops.quiesce(f->fab[i]);
		out[n].fd = wfd;
		out[n].events = POLLIN;
		out[n].revents = 0;
		n++;
	}
	return n;
}

void stk_ready_bells_add(struct stk_ready_bells *b, struct stk_conn *conn)
{
	if (b->uncovered && !b->send)
		return; /* the answer is known: slices */
	int r = stk_ready_ops.announce ? stk_ready_ops.announce(conn, b->send) : STK_SLEEP_NO;
	if (r == STK_SLEEP_NO)
		b->uncovered = true;
	else if (r == STK_SLEEP_SENT)
		b->sent = true;
}

int stk_ready_bells_result(const struct stk_ready_bells *b)
{
	if (b->sent)
		return STK_READY_BELLS_RECHECK;
	return b->uncovered ? STK_READY_BELLS_SLICES : STK_READY_BELLS_SLEEP;
}

void stk_ready_fabs_backoff(struct stk_ready_fabs *f, bool activity)
{
	if (activity || !f->slice_ns)
		f->slice_ns = STK_READY_SLICE_MIN_NS;
	else if (f->slice_ns < STK_READY_SLICE_MAX_NS)
		f->slice_ns = f->slice_ns * 2 > STK_READY_SLICE_MAX_NS ? STK_READY_SLICE_MAX_NS
								   : f->slice_ns * 2;
}

short stk_ready_revents(short stk_events, short requested)
{
	short ev = stk_events;
	if (ev & POLLIN)
		ev |= POLLRDNORM;
	if (ev & POLLOUT)
		ev |= POLLWRNORM;
	return (short)(ev & (requested | POLLERR | POLLHUP));
}

enum stk_ready_step stk_ready_spin_step(int cnt, uint64_t deadline, uint64_t *spin_end,
					struct stk_ready_sigs *sigs, int *ret)
{
	if (cnt) {
		*ret = cnt;
		return STK_READY_STOP;
	}
	uint64_t now = stk_ready_now_ns();
	if (now >= deadline) {
		*ret = 0;
		return STK_READY_STOP;
	}
	stk_ready_block_signals(sigs);
	if (!*spin_end)
		*spin_end = now + (uint64_t)stk_cfg.spin_us * 1000ull;
	if (now < *spin_end) {
		stk_ready_cpu_relax();
		return STK_READY_SPIN;
	}
	return STK_READY_SLEEP;
}
