#include "config.h"
#include "stack/stk_wait.h"
#include "stack/stk_config.h"
#include "stack/stk_sys.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ---- deadlines ---- */

uint64_t stk_wait_deadline_ts(const struct timespec *timeout)
{
	if (!timeout)
		return STK_WAIT_NEVER;
	if (timeout->tv_sec < 0 || timeout->tv_nsec < 0)
		return 0;
	uint64_t ns = (uint64_t)timeout->tv_sec * 1000000000ull + (uint64_t)timeout->tv_nsec;
	if (timeout->tv_sec > 100000000) /* > 3 years: forever for our purposes */
		return STK_WAIT_NEVER;
	return stk_now_ns() + ns;
}

uint64_t stk_wait_deadline_ms(int timeout_ms)
{
	if (timeout_ms < 0)
		return STK_WAIT_NEVER;
	return stk_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* ---- system calls ---- */

int stk_wait_sys_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
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

bool stk_wait_bad_user_range(const void *p, size_t len)
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

void *stk_wait_scratch(unsigned slot, size_t bytes)
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

void stk_wait_block_signals(struct stk_wait_sigs *s)
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

void stk_wait_restore_signals(struct stk_wait_sigs *s)
{
	if (!s->blocked)
		return;
	pthread_sigmask(SIG_SETMASK, &s->saved, NULL);
	s->blocked = false;
}

const sigset_t *stk_wait_sleep_mask(const struct stk_wait_sigs *s, const sigset_t *sigmask)
{
	if (sigmask)
		return sigmask;
	return s->blocked ? &s->saved : NULL;
}

/* ---- spinning ---- */

static __thread uint64_t spin_off_until; /* no spinning before this (contention) */
static __thread uint64_t spin_last;      /* stk_wait_spin_step's previous look */

bool stk_wait_spin_allowed(uint64_t now)
{
	return now >= spin_off_until;
}

bool stk_wait_spin_look(uint64_t now, uint64_t *last)
{
	uint64_t prev = *last;
	*last = now;
	if (prev && now - prev > STK_WAIT_SPIN_GAP_NS) {
		spin_off_until = now + STK_WAIT_SPIN_OFF_NS;
		return false;
	}
	return true;
}

enum stk_wait_step stk_wait_spin_step(int cnt, uint64_t deadline, uint64_t *spin_end,
					struct stk_wait_sigs *sigs, int *ret)
{
	if (cnt) {
		*ret = cnt;
		return STK_WAIT_STOP;
	}
	uint64_t now = stk_now_ns();
	if (now >= deadline) {
		*ret = 0;
		return STK_WAIT_STOP;
	}
	stk_wait_block_signals(sigs);
	if (!*spin_end) {
		*spin_end = stk_wait_spin_allowed(now) ? now + (uint64_t)stk_cfg.spin_us * 1000ull
						       : now;
		spin_last = 0;
	}
	if (now < *spin_end && stk_wait_spin_look(now, &spin_last)) {
		stk_wait_cpu_relax();
		return STK_WAIT_SPIN;
	}
	*spin_end = now; /* spent (or given way): the next steps sleep */
	return STK_WAIT_SLEEP;
}
