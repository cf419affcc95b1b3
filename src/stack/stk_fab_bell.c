/* stk_fab's same-host wake-up channel, the bell (stk_fab_bell.h). */
#include "config.h"
#include "stack/stk_fab_bell.h"
#include "stack/stk_counters.h"
#include "stack/stk_fab_int.h"
#include "stack/stk_sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

#define BELL_DIR "/dev/shm"
#define BELL_PAGE_PREFIX "fsk-bell."
#define BELL_RING_PREFIX "fsk-ring."
#define BELL_PAGE_LEN 4096
#define BELL_KEY_DPDK "dpdk-"

bool fab_bell_wanted(const char *name)
{
	return strcmp(name, "shm") == 0 || strcmp(name, "dpdk") == 0;
}

/* "dpdk-<ip>:<port>" of a socket address (the bytes of its padding aside,
 * which differ between forms of one address). */
static bool sockaddr_key(const void *addr, size_t len, char *out, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];
	uint16_t port;
	sa_family_t family;
	if (len < sizeof(family))
		return false;
	memcpy(&family, addr, sizeof(family));
	if (family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		struct sockaddr_in sin;
		memcpy(&sin, addr, sizeof(sin));
		inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
		port = ntohs(sin.sin_port);
	} else if (family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		struct sockaddr_in6 sin6;
		memcpy(&sin6, addr, sizeof(sin6));
		inet_ntop(AF_INET6, &sin6.sin6_addr, ip, sizeof(ip));
		port = ntohs(sin6.sin6_port);
	} else {
		return false;
	}
	int n = snprintf(out, cap, BELL_KEY_DPDK "%s:%u", ip, (unsigned)port);
	return n > 0 && (size_t)n < cap;
}

bool fab_bell_key(const struct stk_fab *fab, const void *addr, size_t len, char *out,
		  size_t cap)
{
	if (fab->is_shm) {
		const char *region = fab_shm_region_of(addr, len);
		if (!region || strlen(region) >= cap)
			return false;
		snprintf(out, cap, "%s", region);
		return true;
	}
	return sockaddr_key(addr, len, out, cap);
}

/* Who must own a peer's bell files: shm, the region's owner; else us. */
static uid_t bell_owner(const struct stk_fab *fab)
{
	return fab->is_shm ? fab->shm_owner : geteuid();
}

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
	char path[sizeof(BELL_DIR) + sizeof(BELL_PAGE_PREFIX) + FAB_BELL_KEY_MAX];
	bell_path(path, sizeof(path), BELL_PAGE_PREFIX, region);
	unlink(path); /* a stale one of a previous owner of our pid (shm) or address */
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
	page->pid = (int32_t)getpid();
	memcpy(page->magic, FAB_BELL_MAGIC, sizeof(page->magic));
	fab_bell_fence(__ATOMIC_RELEASE);
	*page_out = page;
	*ring_out = keep_high(ring);
	return 0;
}

/* The provider has a wait fd of its own: sleep on an epoll set of it and
 * the FIFO. 0 (fab->wait_fd is the set) or -errno. */
static int bell_join_wait_fd(struct stk_fab *fab, int ring)
{
	int set = stk_sys.epoll_create1(EPOLL_CLOEXEC);
	if (set < 0)
		return -errno;
	struct epoll_event ev = { .events = EPOLLIN };
	int fds[2] = { fab->cq_wait_fd, ring };
	for (int i = 0; i < 2; i++) {
		ev.data.fd = fds[i];
		if (stk_sys.epoll_ctl(set, EPOLL_CTL_ADD, fds[i], &ev) != 0) {
			int err = -errno;
			stk_sys.close(set);
			return err;
		}
	}
	fab->wait_fd = keep_high(set);
	return 0;
}

unsigned fab_bell_unlink_at(int dirfd, const char *key)
{
	char name[sizeof(BELL_PAGE_PREFIX) + FAB_BELL_KEY_MAX];
	unsigned removed = 0;
	snprintf(name, sizeof(name), BELL_PAGE_PREFIX "%s", key);
	removed += unlinkat(dirfd, name, 0) == 0;
	snprintf(name, sizeof(name), BELL_RING_PREFIX "%s", key);
	removed += unlinkat(dirfd, name, 0) == 0;
	return removed;
}

int fab_bell_create(struct stk_fab *fab)
{
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	char key[FAB_BELL_KEY_MAX];
	if (fi_getname(&fab->ep->fid, addr, &len) != 0 || len > sizeof(addr) ||
	    !fab_bell_key(fab, addr, len, key, sizeof(key))) {
		STK_WARN("%s: no name for its wake-up channel", fab->name);
		return -EINVAL;
	}
	struct fab_bell_page *page = NULL;
	int ring = -1;
	int ret = bell_create_files(key, &page, &ring);
	if (ret == 0 && fab->cq_wait_fd >= 0 && (ret = bell_join_wait_fd(fab, ring)) != 0) {
		stk_sys.close(ring);
		munmap(page, BELL_PAGE_LEN);
		char path[sizeof(BELL_DIR) + sizeof(BELL_PAGE_PREFIX) + FAB_BELL_KEY_MAX];
		bell_path(path, sizeof(path), BELL_PAGE_PREFIX, key);
		unlink(path);
		bell_path(path, sizeof(path), BELL_RING_PREFIX, key);
		unlink(path);
	}
	if (ret) {
		STK_WARN("%s: cannot create its wake-up channel in " BELL_DIR "/" BELL_PAGE_PREFIX
			 "%s: %s", fab->name, key, strerror(-ret));
		return ret;
	}
	fab->bell_page = page;
	fab->bell_fd = ring;
	if (fab->cq_wait_fd < 0)
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
		bell_drain(fab->bell_fd);
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

static int bell_open_files(struct stk_fab *fab, const char *key, struct fab_bell *out)
{
	char path[sizeof(BELL_DIR) + sizeof(BELL_PAGE_PREFIX) + FAB_BELL_KEY_MAX];
	bell_path(path, sizeof(path), BELL_PAGE_PREFIX, key);
	int fd = open_checked(path, O_RDWR, S_IFREG, bell_owner(fab), BELL_PAGE_LEN);
	if (fd < 0)
		return fd;
	void *p = mmap(NULL, BELL_PAGE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = p == MAP_FAILED ? -errno : 0;
	stk_sys.close(fd);
	if (err)
		return err;
	struct fab_bell_page *page = p;
	fab_bell_fence(__ATOMIC_ACQUIRE);
	if (memcmp(page->magic, FAB_BELL_MAGIC, sizeof(page->magic)) != 0) {
		munmap(p, BELL_PAGE_LEN);
		return -EPROTO;
	}
	bell_path(path, sizeof(path), BELL_RING_PREFIX, key);
	fd = open_checked(path, O_RDWR | O_NONBLOCK, S_IFIFO, bell_owner(fab), 0);
	if (fd < 0) {
		munmap(p, BELL_PAGE_LEN);
		return fd;
	}
	out->fd = keep_high(fd);
	out->page = page;
	return 0;
}

int fab_bell_open_peer(struct stk_fab *fab, const void *addr, size_t len, struct fab_bell *out)
{
	out->fd = -1;
	out->page = NULL;
	char key[FAB_BELL_KEY_MAX];
	if (!fab_bell_key(fab, addr, len, key, sizeof(key)))
		return fab->is_shm ? -EINVAL : 0;
	int ret = bell_open_files(fab, key, out);
	if (ret && !fab->is_shm) {
		/* another host, another user: woken through the provider */
		STK_DBG("%s: peer %s has no bell here (%s)", fab->name, key, strerror(-ret));
		return 0;
	}
	return ret;
}

long fab_bell_page_pid(int dirfd, const char *file)
{
	const char *key = fab_bell_region_of(file);
	if (!key)
		return 0;
	char page_name[sizeof(BELL_PAGE_PREFIX) + FAB_BELL_KEY_MAX];
	snprintf(page_name, sizeof(page_name), BELL_PAGE_PREFIX "%s", key);
	int fd = openat(dirfd, page_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return 0;
	struct fab_bell_page page;
	ssize_t n = pread(fd, &page, sizeof(page), 0);
	stk_sys.close(fd);
	if (n != (ssize_t)sizeof(page) || memcmp(page.magic, FAB_BELL_MAGIC, sizeof(page.magic)) != 0)
		return 0;
	return page.pid > 0 ? page.pid : 0;
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

/* ---- batches (stk_fab_batch_begin): one ring per peer at the end ---- */

#define BATCH_BELLS 4

__thread unsigned fab_batch_depth;
static __thread struct fab_bell *batch_bells[BATCH_BELLS];
static __thread unsigned batch_count;

bool fab_batch_defer(struct fab_bell *bell)
{
	for (unsigned i = 0; i < batch_count; i++)
		if (batch_bells[i] == bell)
			return true;
	if (batch_count == BATCH_BELLS)
		return false;
	batch_bells[batch_count++] = bell;
	return true;
}

void stk_fab_batch_begin(void)
{
	fab_batch_depth++;
}

void stk_fab_batch_end(void)
{
	if (--fab_batch_depth == 0)
		stk_fab_batch_flush();
}

void stk_fab_batch_flush(void)
{
	unsigned n = batch_count;
	batch_count = 0;
	for (unsigned i = 0; i < n; i++)
		fab_bell_ring(batch_bells[i]);
}
