/* POSIX aio on sockets (see pl_wrap_bypass.c): glibc's own threads do the I/O
 * with internal calls, so the connection moves to the kernel first; a read
 * while the stack still holds unread bytes of it is served from them. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <aio.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

/* glibc's aio_error/aio_return read these two fields of the request. */
static void *notify_thread(void *arg)
{
	struct sigevent *sev = arg;
	void (*fn)(union sigval) = sev->sigev_notify_function;
	union sigval value = sev->sigev_value;
	free(sev);
	fn(value);
	return NULL;
}

/* A read served from the stack's leftover, complete when aio_read returns:
 * the result where aio_error/aio_return find it, the notification the app
 * asked for. */
static void aio_complete(struct aiocb *cb, ssize_t ret)
{
	cb->__return_value = ret;
	__atomic_store_n(&cb->__error_code, 0, __ATOMIC_RELEASE);
	struct sigevent *sev = &cb->aio_sigevent;
	if (sev->sigev_notify == SIGEV_SIGNAL) {
		sigqueue(getpid(), sev->sigev_signo, sev->sigev_value);
	} else if (sev->sigev_notify == SIGEV_THREAD && sev->sigev_notify_function) {
		struct sigevent *copy = malloc(sizeof(*copy));
		pthread_t t;
		pthread_attr_t detached, *attr = sev->sigev_notify_attributes;
		if (!attr) {
			pthread_attr_init(&detached);
			pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
			attr = &detached;
		}
		if (copy) {
			*copy = *sev;
			if (pthread_create(&t, attr, notify_thread, copy) != 0)
				free(copy);
			else if (attr != &detached)
				pthread_detach(t);
		}
		if (attr == &detached)
			pthread_attr_destroy(&detached);
	}
}

/* Before glibc's aio touches fd: the connection moves to the kernel. A read
 * while the stack still holds unread bytes is served from them (true). */
static bool aio_prepare(struct aiocb *cb, bool read_op)
{
	struct stk_sock *sock = pl_stack_sock(cb->aio_fildes);
	if (!sock)
		return false;
	pl_to_kernel(sock);
	if (!read_op || stk_sock_leftover_count(sock) == 0)
		return false;
	size_t n = stk_sock_leftover_take(sock, (void *)cb->aio_buf, cb->aio_nbytes, false);
	aio_complete(cb, (ssize_t)n);
	return true;
}

PL_EXPORT int aio_read(struct aiocb *cb)
{
	if (aio_prepare(cb, true))
		return 0;
	return PL_REAL(aio_read)(cb);
}

PL_EXPORT int aio_write(struct aiocb *cb)
{
	aio_prepare(cb, false);
	return PL_REAL(aio_write)(cb);
}

_Static_assert(sizeof(struct aiocb) == sizeof(struct aiocb64), "aiocb64 is aiocb on 64-bit");

PL_EXPORT int aio_read64(struct aiocb64 *cb)
{
	if (aio_prepare((struct aiocb *)cb, true))
		return 0;
	return PL_REAL(aio_read64)(cb);
}

PL_EXPORT int aio_write64(struct aiocb64 *cb)
{
	aio_prepare((struct aiocb *)cb, false);
	return PL_REAL(aio_write64)(cb);
}

/* Every socket of the list moves first; reads served from a leftover become
 * LIO_NOP for glibc for the duration of the call (it reads the opcodes while
 * queueing, before it returns). */
static void lio_prepare(struct aiocb *const list[], int n, bool *served)
{
	for (int i = 0; i < n; i++) {
		served[i] = false;
		if (!list[i] || list[i]->aio_lio_opcode == LIO_NOP)
			continue;
		served[i] = aio_prepare(list[i], list[i]->aio_lio_opcode == LIO_READ);
		if (served[i])
			list[i]->aio_lio_opcode = LIO_NOP;
	}
}

static void lio_restore(struct aiocb *const list[], int n, const bool *served)
{
	for (int i = 0; i < n; i++)
		if (served[i])
			list[i]->aio_lio_opcode = LIO_READ;
}

#define LIO_PREPARE_MAX 1024

PL_EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	bool served[LIO_PREPARE_MAX];
	bool any = n > 0 && n <= LIO_PREPARE_MAX;
	if (any)
		lio_prepare(list, n, served);
	int ret = PL_REAL(lio_listio)(mode, list, n, sev);
	if (any)
		lio_restore(list, n, served);
	return ret;
}

PL_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	bool served[LIO_PREPARE_MAX];
	bool any = n > 0 && n <= LIO_PREPARE_MAX;
	if (any)
		lio_prepare((struct aiocb *const *)list, n, served);
	int ret = PL_REAL(lio_listio64)(mode, list, n, sev);
	if (any)
		lio_restore((struct aiocb *const *)list, n, served);
	return ret;
}
