/* stk_wait: what every blocking call of the stack needs, whatever it waits on:
 * absolute deadlines, the kernel's ppoll, signal blocking for the duration of a
 * wait, the spin-then-sleep step, a user-pointer sanity check and thread-local
 * scratch buffers. The waiting contract itself (spin, then sleep in the kernel
 * with the caller's signal mask) is in stk_ready.h and docs/design.md. */
#ifndef STK_WAIT_H
#define STK_WAIT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Deadline from a timespec (NULL = never) or from milliseconds (< 0 = never). */
uint64_t stk_wait_deadline_ts(const struct timespec *timeout);
uint64_t stk_wait_deadline_ms(int timeout_ms);
#define STK_WAIT_NEVER UINT64_MAX

/* The kernel ppoll through stk_sys (or the raw system call when the table has
 * none). Returns the count or -errno. */
int stk_wait_sys_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			const sigset_t *sigmask);

/* True when [p, p + len) cannot be user memory: below the lowest address the
 * kernel maps (vm.mmap_min_addr, 64 KiB by default; NULL and small integers),
 * wrapping around, or beyond the user half of the address space. The kernel
 * answers EFAULT for those; we must not touch them (a SIGSEGV the kernel would
 * not raise). Other unmapped ranges are not detected (no system call on the
 * fast path). */
bool stk_wait_bad_user_range(const void *p, size_t len);

/* A thread-local buffer of at least bytes, grown (never shrunk) on demand; slot
 * 0..3 are independent buffers. NULL when out of memory. */
void *stk_wait_scratch(unsigned slot, size_t bytes);

/* Signal blocking for the duration of a wait (see the contract above). */
struct stk_wait_sigs {
	bool blocked;
	sigset_t saved;   /* the caller's mask while blocked */
};
void stk_wait_block_signals(struct stk_wait_sigs *s);
void stk_wait_restore_signals(struct stk_wait_sigs *s);
/* The mask a kernel sleep must use: sigmask if given, else the caller's. */
const sigset_t *stk_wait_sleep_mask(const struct stk_wait_sigs *s, const sigset_t *sigmask);

/* The step after a scan that found cnt ready, shared by every wait loop:
 * STK_WAIT_STOP (*ret = cnt, or 0 when the deadline passed), STK_WAIT_SPIN
 * (scan again: within the stk_cfg.spin_us budget that *spin_end tracks, 0 at
 * first), or STK_WAIT_SLEEP (budget spent: sleep in the kernel). Blocks the
 * signals (sigs) from the first spin on, as stk_wait_block_signals says. */
enum stk_wait_step { STK_WAIT_STOP, STK_WAIT_SPIN, STK_WAIT_SLEEP };
enum stk_wait_step stk_wait_spin_step(int cnt, uint64_t deadline, uint64_t *spin_end,
					struct stk_wait_sigs *sigs, int *ret);

/* Spinning gives way under contention: a spin that sees a gap of more than
 * STK_WAIT_SPIN_GAP_NS between two of its looks was descheduled (another
 * runnable thread needed the CPU, perhaps the peer it waits for). The thread
 * then sleeps at once, without spinning, for STK_WAIT_SPIN_OFF_NS (its sleeps
 * are woken exactly: wait fds, bells), and tries spinning again after. */
#define STK_WAIT_SPIN_GAP_NS 100000ull      /* 100 µs */
#define STK_WAIT_SPIN_OFF_NS 50000000ull    /* 50 ms */
/* A spin may begin at now (false while spinning gives way). */
bool stk_wait_spin_allowed(uint64_t now);
/* One look of a spin at now; last: the previous look's time (0 at the
 * first), updated. False when the spin must end (it was descheduled). */
bool stk_wait_spin_look(uint64_t now, uint64_t *last);

static inline void stk_wait_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
