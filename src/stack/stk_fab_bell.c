/* stk_fab's same-host wake-up channel for shm (stk_fab_bell.h). */
#include "config.h"
#include "stack/stk_fab_bell.h"
#include "stack/stk_counters.h"
#include "stack/stk_fab_int.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

#define BELL_DIR "/dev/shm"
#define BELL_PAGE_PREFIX "fsk-bell."
#define BELL_RING_PREFIX "fsk-ring."
#define BELL_PAGE_LEN 4096

static void bell_path(char *out, size_t cap, const char *prefix, const char *region)
{
	snprintf(out, cap, BELL_DIR "/%s%s", prefix, region);
}

const char *fab_bell_region_of(const char *file)
{
	if (strncmp(file, BELL_PAGE_PREFIX, sizeof(BELL_PAGE_PREFIX) - 1) == 0)
		return file + sizeof(BELL_PAGE_PREFIX) - 1;
	if (strncmp(file, BELL_RING_PREFIX, sizeof(BELL_RING_PREFIX) - 1) == 0)
		return file + sizeof(BELL_RING_PREFIX) - 1;
	return NULL;
}

/* An fd of ours moved to the stack's high range (the app's low fds stay
 * where the app expects them). */
static int keep_high(int fd)
{
	int high = stk_sys_dup_high(fd);
	if (high < 0)
		return fd;
	stk_sys.close(fd);
	return high;
}

/* ---- the owner ---- */

static int bell_create_files(const char *region, struct fab_bell_page **page_out, int *ring_out)
{
	char path[sizeof(BELL_DIR) + sizeof(BELL_PAGE_PREFIX) + STK_FAB_ADDR_MAX];
	bell_path(path, sizeof(path), BELL_PAGE_PREFIX, region);
	unlink(path); /* a stale one of a previous owner of our pid */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	void *p = MAP_FAILED;
	if (ftruncate(fd, BELL_PAGE_LEN) == 0)
		p = mmap(NULL, BELL_PAGE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = p == MAP_FAILED ? -errno : 0;
	stk_sys.close(fd);
	if (err) {
		unlink(path);
		return err;
	}
	char rpath[sizeof(path)];
	bell_path(rpath, sizeof(rpath), BELL_RING_PREFIX, region);
	unlink(rpath);
	int ring = -1;
	if (mkfifo(rpath, 0600) != 0 ||
	    (ring = open(rpath, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		err = -errno;
		munmap(p, BELL_PAGE_LEN);
		unlink(path);
		unlink(rpath);
		return err;
	}
	struct fab_bell_page *page = p;
	memcpy(page->magic, FAB_BELL_MAGIC, sizeof(page->magic));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	*page_out = page;
	*ring_out = keep_high(ring);
	return 0;
}

int fab_bell_create(struct stk_fab *fab)
{
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	if (fi_getname(&fab->ep->fid, addr, &len) != 0 || len > sizeof(addr))
		return -EINVAL;
	const char *region = fab_shm_region_of(addr, len);
	if (!region)
		return -EINVAL;
	struct fab_bell_page *page = NULL;
	int ring = -1;
	int ret = bell_create_files(region, &page, &ring);
	if (ret) {
		STK_WARN("%s: cannot create its wake-up channel in " BELL_DIR "/" BELL_PAGE_PREFIX
			 "%s: %s", fab->name, region, strerror(-ret));
		return ret;
	}
	fab->bell_page = page;
	fab->wait_fd = ring;
	return 0;
}

static void bell_drain(int fd)
{
	uint8_t buf[64];
	while (stk_sys.read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
}

bool fab_bell_trywait(struct stk_fab *fab)
{
	struct fab_bell_page *page = fab->bell_page;
	if (__atomic_load_n(&page->rung, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&page->rung, 0, __ATOMIC_SEQ_CST);
		bell_drain(fab->wait_fd);
	}
	__atomic_store_n(&page->armed, 1, __ATOMIC_SEQ_CST);
	/* A progress of another thread may be past a message that came before
	 * our store: wait for it (it delivers what it took), then look. */
	int taken = fab_progress_locked(fab);
	return taken == 0;
}

/* ---- a peer's bell ---- */

static int open_checked(const char *path, int flags, mode_t type, uid_t owner, off_t min_size)
{
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	struct stat st;
	int err = 0;
	if (fstat(fd, &st) != 0)
		err = -errno;
	else if ((st.st_mode & S_IFMT) != type || st.st_uid != owner || st.st_size < min_size)
		err = -EPERM;
	if (err) {
		stk_sys.close(fd);
		return err;
	}
	return fd;
}

int fab_bell_open_peer(struct stk_fab *fab, const void *addr, size_t len, struct fab_bell *out)
{
	out->fd = -1;
	out->page = NULL;
	const char *region = fab_shm_region_of(addr, len);
	if (!region)
		return -EINVAL;
	char path[sizeof(BELL_DIR) + sizeof(BELL_PAGE_PREFIX) + STK_FAB_ADDR_MAX];
	bell_path(path, sizeof(path), BELL_PAGE_PREFIX, region);
	int fd = open_checked(path, O_RDWR, S_IFREG, fab->shm_owner, BELL_PAGE_LEN);
	if (fd < 0)
		return fd;
	void *p = mmap(NULL, BELL_PAGE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = p == MAP_FAILED ? -errno : 0;
	stk_sys.close(fd);
	if (err)
		return err;
	struct fab_bell_page *page = p;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (memcmp(page->magic, FAB_BELL_MAGIC, sizeof(page->magic)) != 0) {
		munmap(p, BELL_PAGE_LEN);
		return -EPROTO;
	}
	bell_path(path, sizeof(path), BELL_RING_PREFIX, region);
	fd = open_checked(path, O_RDWR | O_NONBLOCK, S_IFIFO, fab->shm_owner, 0);
	if (fd < 0) {
		munmap(p, BELL_PAGE_LEN);
		return fd;
	}
	out->fd = keep_high(fd);
	out->page = page;
	return 0;
}

void fab_bell_close(struct fab_bell *bell)
{
	if (bell->fd >= 0)
		stk_sys.close(bell->fd);
	if (bell->page)
		munmap(bell->page, BELL_PAGE_LEN);
	bell->fd = -1;
	bell->page = NULL;
}

void fab_bell_write(struct fab_bell *bell)
{
	uint8_t b = 0xdb;
	/* full FIFO: bytes are waiting already; the owner drains them all */
	(void)!stk_sys.write(bell->fd, &b, 1);
	__atomic_store_n(&bell->page->rung, 1, __ATOMIC_RELEASE);
	stk_count(STK_C_BELLS);
}
