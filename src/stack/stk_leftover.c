#include "config.h"
#include "stack/stk_leftover.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- leftover ---- */

struct stk_leftover {
	int lock;          /* process-shared spin lock (held for one memcpy) */
	bool shared;       /* a shared mapping (else malloc) */
	size_t map_len;
	size_t head;       /* protected by lock */
	size_t count;      /* protected by lock; read atomically for readiness */
	uint8_t data[];
};

/* A memfd mapping: shared with a forked child, and reachable by an exec'd
 * image through the memfd (stk_leftover_fd). Else anonymous shared memory
 * (fork only), else malloc (this process only). */
static struct stk_leftover *left_map(size_t len, int *fd_out)
{
	*fd_out = -1;
	int fd = memfd_create("fabsock-leftover", MFD_CLOEXEC);
	if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) {
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			*fd_out = fd;
			return p;
		}
	}
	if (fd >= 0)
		stk_sys.close(fd);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

struct stk_leftover *stk_leftover_new(const uint8_t *ring, size_t size, size_t head,
				      size_t count, int *fd_out)
{
	*fd_out = -1;
	if (count == 0)
		return NULL;
	size_t len = sizeof(struct stk_leftover) + count;
	struct stk_leftover *left = left_map(len, fd_out);
	bool shared = left != NULL;
	if (!shared) {
		/* Still exact in this process; a forked child gets its own copy. */
		STK_WARN("migration: no shared mapping for %zu unread bytes; a child forked "
			 "now would see them too", count);
		left = calloc(1, len);
		if (!left)
			return NULL;
	}
	left->shared = shared;
	left->map_len = len;
	size_t first = size - head < count ? size - head : count;
	memcpy(left->data, ring + head, first);
	memcpy(left->data + first, ring, count - first);
	left->head = 0;
	left->count = count;
	return left;
}

struct stk_leftover *stk_leftover_open(int memfd)
{
	struct stat st;
	if (fstat(memfd, &st) != 0 || (size_t)st.st_size < sizeof(struct stk_leftover))
		return NULL;
	struct stk_leftover *left = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
					 MAP_SHARED, memfd, 0);
	if (left == MAP_FAILED || left->map_len != (size_t)st.st_size || !left->shared) {
		if (left != MAP_FAILED)
			munmap(left, (size_t)st.st_size);
		return NULL;
	}
	return left;
}

static void left_lock(struct stk_leftover *left)
{
	unsigned spins = 0;
	while (__atomic_exchange_n(&left->lock, 1, __ATOMIC_ACQUIRE) != 0)
		if (++spins % 64 == 0)
			sched_yield();
}

static void left_unlock(struct stk_leftover *left)
{
	__atomic_store_n(&left->lock, 0, __ATOMIC_RELEASE);
}

size_t stk_leftover_take(struct stk_leftover *left, void *dst, size_t len, bool peek)
{
	if (!left || len == 0)
		return 0;
	left_lock(left);
	size_t n = left->count < len ? left->count : len;
	memcpy(dst, left->data + left->head, n);
	if (!peek) {
		left->head += n;
		__atomic_store_n(&left->count, left->count - n, __ATOMIC_RELEASE);
	}
	left_unlock(left);
	return n;
}

size_t stk_leftover_count(struct stk_leftover *left)
{
	return left ? __atomic_load_n(&left->count, __ATOMIC_ACQUIRE) : 0;
}

void stk_leftover_free(struct stk_leftover *left)
{
	if (!left)
		return;
	if (left->shared)
		munmap(left, left->map_len);
	else
		free(left);
}

