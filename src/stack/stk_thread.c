#include "config.h"
#include "stack/stk_thread.h"
#include "stack/stk_log.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

struct start {
	void *(*fn)(void *);
	void *arg;
	sem_t running;
};

static void *trampoline(void *p)
{
	struct start *st = p;
	void *(*fn)(void *) = st->fn;
	void *arg = st->arg;
	stk_log_thread_internal();
	sem_post(&st->running); /* st is the creator's: not touched after this */
	return fn(arg);
}

int stk_thread_start(void *(*fn)(void *), void *arg, size_t stack_size)
{
	struct start st = { .fn = fn, .arg = arg };
	if (sem_init(&st.running, 0, 0) != 0)
		return errno;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* inherited by the new thread */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, stack_size);
	pthread_t tid;
	int ret = pthread_create(&tid, &attr, trampoline, &st);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret == 0)
		while (sem_wait(&st.running) != 0 && errno == EINTR)
			;
	sem_destroy(&st.running);
	return ret;
}
