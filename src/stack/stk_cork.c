#include "config.h"
#include "stack/stk_cork.h"
#include "stack/stk_log.h"
#include "stack/stk_stream_proto.h"
#include "stack/stk_thread.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WORDS (STK_CONN_MAX / 64)

uint32_t stk_cork_count;
static uint32_t stages_started;            /* atomic (relaxed): stk_cork_mark calls */
static uint64_t bits[WORDS];               /* atomic */
static pthread_mutex_t cork_lock = PTHREAD_MUTEX_INITIALIZER;
static int flusher_state;                  /* atomic: FLUSHER_* */
static int flusher_waiting;                /* atomic: asleep on stk_cork_count */
static stk_cork_flush_fn *flush_slot;      /* set once before the first mark */

enum { FLUSHER_NONE, FLUSHER_STARTING, FLUSHER_RUNNING, FLUSHER_FAILED, FLUSHER_STOPPED };

static void futex_op(uint32_t *word, int op, uint32_t val)
{
	syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

/* cork_lock held. Returns how many stages it sent. */
static unsigned flush_locked(uint64_t older_than)
{
	unsigned sent = 0;

	for (unsigned w = 0; w < WORDS; w++) {
		uint64_t set = __atomic_load_n(&bits[w], __ATOMIC_ACQUIRE);
		while (set) {
			unsigned b = (unsigned)__builtin_ctzll(set);
			set &= set - 1;
			if (flush_slot(w * 64 + b, older_than))
				sent++;
		}
		if (!__atomic_load_n(&stk_cork_count, __ATOMIC_RELAXED))
			break;
	}
	return sent;
}

void stk_cork_flush(uint64_t older_than)
{
	pthread_mutex_lock(&cork_lock);
	flush_locked(older_than);
	pthread_mutex_unlock(&cork_lock);
}

/* Sleeps in the kernel while nothing is staged; else ticks every half of
 * STK_CORK_MAX_NS and sends what has waited that long (the app's own triggers
 * usually came first: a streaming sender's stage fills in microseconds).
 * Ticks that find stages starting (two or more since the last tick) but none
 * old stretch, doubling up to STK_CORK_STREAM_TICK_NS (stk_cork.h). */
static void *flusher(void *arg)
{
	uint64_t tick = STK_CORK_MAX_NS / 2;
	uint32_t started = 0;

	(void)arg;
	prctl(PR_SET_TIMERSLACK, 1000UL); /* the tick is tens of µs: no 50 µs slack */
	for (;;) {
		if (__atomic_load_n(&stk_cork_count, __ATOMIC_SEQ_CST) == 0) {
			__atomic_store_n(&flusher_waiting, 1, __ATOMIC_SEQ_CST);
			/* Dekker with stk_cork_mark: it counts then reads waiting */
			if (__atomic_load_n(&stk_cork_count, __ATOMIC_SEQ_CST) == 0)
				futex_op(&stk_cork_count, FUTEX_WAIT, 0);
			__atomic_store_n(&flusher_waiting, 0, __ATOMIC_SEQ_CST);
			tick = STK_CORK_MAX_NS / 2;
			started = __atomic_load_n(&stages_started, __ATOMIC_RELAXED);
			continue;
		}
		struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)tick };
		clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		uint64_t now = stk_now_ns();
		unsigned sent = 0;
		pthread_mutex_lock(&cork_lock);
		bool stopped = __atomic_load_n(&flusher_state, __ATOMIC_ACQUIRE) == FLUSHER_STOPPED;
		if (!stopped)
			sent = flush_locked(now - STK_CORK_MAX_NS / 2);
		pthread_mutex_unlock(&cork_lock);
		if (stopped)
			return NULL;
		uint32_t s = __atomic_load_n(&stages_started, __ATOMIC_RELAXED);
		if (sent == 0 && s - started >= 2)
			tick = tick * 2 > STK_CORK_STREAM_TICK_NS ? STK_CORK_STREAM_TICK_NS : tick * 2;
		else
			tick = STK_CORK_MAX_NS / 2;
		started = s;
	}
	return NULL;
}

static void start_flusher(void)
{
	int none = FLUSHER_NONE;
	if (!__atomic_compare_exchange_n(&flusher_state, &none, FLUSHER_STARTING, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return;
	int ret = stk_thread_start(flusher, NULL, 64 * 1024);
	int starting;
	if (ret) {
		/* the app's own triggers still apply; only the time bound is lost */
		STK_WARN("cork: no flusher thread (%s): coalesced sends leave at the "
			 "process's next socket call", strerror(ret));
		starting = FLUSHER_STARTING;
		__atomic_compare_exchange_n(&flusher_state, &starting, FLUSHER_FAILED, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		return;
	}
	/* not over a stop made meanwhile (exit) */
	starting = FLUSHER_STARTING;
	__atomic_compare_exchange_n(&flusher_state, &starting, FLUSHER_RUNNING, false,
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void stk_cork_set_flush(stk_cork_flush_fn *fn)
{
	flush_slot = fn;
}

void stk_cork_mark(uint32_t slot)
{
	__atomic_fetch_or(&bits[slot / 64], 1ull << (slot % 64), __ATOMIC_RELEASE);
	__atomic_fetch_add(&stages_started, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&stk_cork_count, 1, __ATOMIC_SEQ_CST) == 0 &&
	    __atomic_load_n(&flusher_waiting, __ATOMIC_SEQ_CST))
		futex_op(&stk_cork_count, FUTEX_WAKE, 1);
	if (__builtin_expect(__atomic_load_n(&flusher_state, __ATOMIC_RELAXED) == FLUSHER_NONE, 0))
		start_flusher();
}

void stk_cork_unmark(uint32_t slot)
{
	__atomic_fetch_and(&bits[slot / 64], ~(1ull << (slot % 64)), __ATOMIC_RELEASE);
	__atomic_fetch_sub(&stk_cork_count, 1, __ATOMIC_RELEASE);
}

void stk_cork_stop(void)
{
	pthread_mutex_lock(&cork_lock);
	__atomic_store_n(&flusher_state, FLUSHER_STOPPED, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cork_lock);
}

void stk_cork_barrier(void)
{
	pthread_mutex_lock(&cork_lock);
	pthread_mutex_unlock(&cork_lock);
}

void stk_cork_atfork_child(void)
{
	pthread_mutex_init(&cork_lock, NULL);
	for (unsigned w = 0; w < WORDS; w++)
		bits[w] = 0;
	stk_cork_count = 0;
	stages_started = 0;
	flusher_waiting = 0;
	flusher_state = FLUSHER_NONE;
}
