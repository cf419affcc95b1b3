/* pl_fdtab: fd number -> stack socket object, for the sockets libfabsock tracks.
 *
 * An array indexed by fd, sized from RLIMIT_NOFILE's hard limit (capped at
 * PL_FDTAB_MAX) and reserved with mmap so untouched pages cost nothing. Reads are
 * lock-free (one bounds check, one relaxed load); writes (socket, accept, dup*,
 * close — all rare) take a mutex so a slot's reference count stays exact.
 * Each slot holds one reference on its stk_sock; dup'ed fds share the object.
 *
 * Lifetime rule: an entry is cleared BEFORE the real close(), so a number the
 * kernel hands out again can never be shadowed by a stale entry. An fd above the
 * table's size is simply never tracked (it behaves as a kernel fd). */
#ifndef PL_FDTAB_H
#define PL_FDTAB_H

#include <stddef.h>

struct stk_sock;

#define PL_FDTAB_MAX (1 << 20)

struct pl_fdtab {
	struct stk_sock **slots; /* atomic pointers */
	int size;
};

extern struct pl_fdtab pl_fdtab;

/* Size the table (from RLIMIT_NOFILE unless size > 0). 0 or -ENOMEM. */
int pl_fdtab_init(struct pl_fdtab *tab, int size);
void pl_fdtab_fini(struct pl_fdtab *tab);

static inline struct stk_sock *pl_fdtab_get(const struct pl_fdtab *tab, int fd)
{
	if ((unsigned)fd >= (unsigned)tab->size)
		return NULL;
	return __atomic_load_n(&tab->slots[fd], __ATOMIC_ACQUIRE);
}

/* Install sock at fd (taking a new reference), releasing what was there.
 * sock may be NULL (= clear). Returns 0, or -EBADF if fd is outside the table. */
int pl_fdtab_set(struct pl_fdtab *tab, int fd, struct stk_sock *sock);

/* Remove fd's entry and return it without dropping its reference (the caller
 * owns it now), or NULL. */
struct stk_sock *pl_fdtab_take(struct pl_fdtab *tab, int fd);

/* newfd becomes an alias of oldfd (dup semantics): shares its object, or is
 * cleared when oldfd is untracked. */
void pl_fdtab_dup(struct pl_fdtab *tab, int oldfd, int newfd);

/* Number of tracked fds (for tests and counters). */
size_t pl_fdtab_count(const struct pl_fdtab *tab);

/* fork support: hold the write lock across fork() so the child never inherits
 * it locked (registered with pthread_atfork by the preload). */
void pl_fdtab_lock(void);
void pl_fdtab_unlock(void);

#endif
