#include "config.h"
#include "preload/pl_fdtab.h"
#include "stack/stk.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>

struct pl_fdtab pl_fdtab;

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

void pl_fdtab_lock(void)
{
	pthread_mutex_lock(&write_lock);
}

void pl_fdtab_unlock(void)
{
	pthread_mutex_unlock(&write_lock);
}

int pl_fdtab_init(struct pl_fdtab *tab, int size)
{
	if (size <= 0) {
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY ||
		    rl.rlim_max > PL_FDTAB_MAX)
			size = PL_FDTAB_MAX;
		else
			size = (int)rl.rlim_max;
		if (size < 1024)
			size = 1024; /* the soft limit can be raised later: keep room */
	}
	if (size > PL_FDTAB_MAX)
		size = PL_FDTAB_MAX;
	/* Anonymous mmap: zero pages appear only where fds are actually used. */
	void *mem = mmap(NULL, (size_t)size * sizeof(*tab->slots), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	tab->slots = mem;
	__atomic_store_n(&tab->size, size, __ATOMIC_RELEASE);
	return 0;
}

void pl_fdtab_fini(struct pl_fdtab *tab)
{
	if (!tab->slots)
		return;
	for (int fd = 0; fd < tab->size; fd++)
		if (tab->slots[fd])
			stk_sock_unref(tab->slots[fd]);
	munmap(tab->slots, (size_t)tab->size * sizeof(*tab->slots));
	tab->slots = NULL;
	tab->size = 0;
}

/* Swap the slot's content under the write lock; returns what was there. */
static struct stk_sock *swap_locked(struct pl_fdtab *tab, int fd, struct stk_sock *sock)
{
	if (sock)
		stk_sock_ref(sock);
	return __atomic_exchange_n(&tab->slots[fd], sock, __ATOMIC_ACQ_REL);
}

int pl_fdtab_set(struct pl_fdtab *tab, int fd, struct stk_sock *sock)
{
	if ((unsigned)fd >= (unsigned)tab->size)
		return -EBADF;
	pthread_mutex_lock(&write_lock);
	struct stk_sock *old = swap_locked(tab, fd, sock);
	pthread_mutex_unlock(&write_lock);
	if (old)
		stk_sock_unref(old);
	return 0;
}

struct stk_sock *pl_fdtab_take(struct pl_fdtab *tab, int fd)
{
	if ((unsigned)fd >= (unsigned)tab->size)
		return NULL;
	pthread_mutex_lock(&write_lock);
	struct stk_sock *old = swap_locked(tab, fd, NULL);
	pthread_mutex_unlock(&write_lock);
	return old;
}

void pl_fdtab_dup(struct pl_fdtab *tab, int oldfd, int newfd)
{
	if ((unsigned)newfd >= (unsigned)tab->size || oldfd == newfd)
		return;
	if (!pl_fdtab_get(tab, oldfd) && !pl_fdtab_get(tab, newfd))
		return; /* the common case: neither is ours, no lock */
	pthread_mutex_lock(&write_lock);
	struct stk_sock *sock = pl_fdtab_get(tab, oldfd);
	struct stk_sock *old = swap_locked(tab, newfd, sock);
	pthread_mutex_unlock(&write_lock);
	if (old)
		stk_sock_unref(old);
}

size_t pl_fdtab_count(const struct pl_fdtab *tab)
{
	size_t n = 0;
	for (int fd = 0; fd < tab->size; fd++)
		if (pl_fdtab_get(tab, fd))
			n++;
	return n;
}
