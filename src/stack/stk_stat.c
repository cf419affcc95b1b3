/* The statistics segment (stk_stat.h): creation, records, reclaim of stale
 * segments, fork and exit. */
#include "config.h"
#include "stack/stk_stat.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(STK_C_COUNT <= STK_STAT_COUNTERS_MAX, "stat segment: too many counters");

#define REC_RETRY_SPINS 1000   /* a writer waits this many turns for another */
#define RECLAIM_GAP_NS 100000000ull /* a full table is scanned for dead orphans at most this often */

static struct stk_stat_hdr *seg;     /* atomic: the mapping, NULL until created */
static char seg_path[64];            /* protected by create_lock */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static bool create_failed;           /* protected by create_lock */
static char providers[STK_STAT_PROV_LEN]; /* protected by create_lock */
static uint64_t last_reclaim_ns;     /* atomic */
static __thread char fallback_reason[STK_STAT_REASON_LEN];

#define COUNTER_NAME(id, name, help) name,
static const char *const counter_names[STK_C_COUNT] = { STK_COUNTER_LIST(COUNTER_NAME) };
#undef COUNTER_NAME

static struct stk_stat_rec *recs_of(struct stk_stat_hdr *h)
{
	return (struct stk_stat_rec *)((char *)h + STK_STAT_HDR_SIZE);
}

/* Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), 0 when
 * unreadable. The command field may hold spaces and parentheses: parse after
 * its last ')'. */
static uint64_t start_time_of(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = stk_sys.read(fd, buf, sizeof(buf) - 1);
	stk_sys.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++) { /* p is before field 3's space */
		p = strchr(p + 1, ' ');
	}
	if (!p)
		return 0;
	char *end;
	unsigned long long v = strtoull(p + 1, &end, 10);
	return end == p + 1 ? 0 : v;
}

/* A segment of ours whose process is gone (or whose pid now runs another
 * process) is removed. Only files owned by our uid, regular, not links. */
static void reclaim_stale(void)
{
	DIR *dir = opendir(STK_STAT_DIR);
	if (!dir)
		return;
	size_t plen = strlen(STK_STAT_PREFIX);
	unsigned seen = 0;
	struct dirent *de;
	while ((de = readdir(dir)) && seen++ < 100000) {
		if (strncmp(de->d_name, STK_STAT_PREFIX, plen) != 0)
			continue;
		char *end;
		long pid = strtol(de->d_name + plen, &end, 10);
		if (*end || pid <= 0 || pid == getpid())
			continue;
		struct stat st;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		bool gone = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
		if (!gone) {
			/* alive: is it the process that made the file? */
			int fd = openat(dirfd(dir), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			struct stk_stat_hdr h;
			if (fd < 0)
				continue;
			ssize_t n = pread(fd, &h, sizeof(h), 0);
			stk_sys.close(fd);
			uint64_t now_start = start_time_of((int)pid);
			gone = n == (ssize_t)sizeof(h) && now_start && h.pid == (uint32_t)pid &&
			       h.start_time != now_start;
		}
		if (gone)
			unlinkat(dirfd(dir), de->d_name, 0);
	}
	closedir(dir);
}

/* Our pid's file exists: ours from the image before an exec, or that of a
 * dead process that had our pid: no live process's. Removed when it is a
 * regular file of our uid (else we go without a segment). */
static void remove_previous(const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
		unlink(path);
}

static void fill_header(struct stk_stat_hdr *h, uint64_t start)
{
	h->version = STK_STAT_VERSION;
	h->hdr_size = (uint32_t)STK_STAT_HDR_SIZE;
	h->rec_size = sizeof(struct stk_stat_rec);
	h->rec_max = STK_STAT_RECS;
	h->counter_count = STK_C_COUNT;
	h->pid = (uint32_t)getpid();
	h->start_time = start;
	h->uid = geteuid();
	snprintf(h->lib_version, sizeof(h->lib_version), "%s", PACKAGE_VERSION);
	snprintf(h->providers, sizeof(h->providers), "%s", providers);
	for (int i = 0; i < STK_C_COUNT; i++)
		snprintf(h->counter_names[i], STK_STAT_NAME_LEN, "%s", counter_names[i]);
}

/* Map a new file for this process (create_lock held). NULL on failure. */
static struct stk_stat_hdr *create_file(void)
{
	uint64_t start = start_time_of(getpid());
	snprintf(seg_path, sizeof(seg_path), "%s/%s%d", STK_STAT_DIR, STK_STAT_PREFIX, (int)getpid());
	int fd = open(seg_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == EEXIST) {
		remove_previous(seg_path);
		fd = open(seg_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0) {
		STK_DBG("statistics segment %s: %s (fabsock-stat will not list this process)",
			seg_path, strerror(errno));
		return NULL;
	}
	void *p = MAP_FAILED;
	if (ftruncate(fd, (off_t)STK_STAT_SIZE) == 0)
		p = mmap(NULL, STK_STAT_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int err = p == MAP_FAILED ? errno : 0;
	stk_sys.close(fd);
	if (err) {
		STK_DBG("statistics segment %s: %s", seg_path, strerror(err));
		unlink(seg_path);
		return NULL;
	}
	fill_header(p, start);
	return p;
}

/* The file's magic goes last, after everything a reader checks. */
static void publish(struct stk_stat_hdr *h)
{
	uint64_t magic;
	memcpy(&magic, STK_STAT_MAGIC, sizeof(magic));
	__atomic_store_n(&h->magic, magic, __ATOMIC_RELEASE);
	__atomic_store_n(&seg, h, __ATOMIC_RELEASE);
	stk_counters_set_mirror(h->counters);
}

void stk_stat_start(void)
{
	if (__atomic_load_n(&seg, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&create_lock);
	if (!seg && !create_failed) {
		reclaim_stale();
		struct stk_stat_hdr *h = create_file();
		if (h) {
			/* the counters so far (none, at a process's first socket) */
			for (int i = 0; i < STK_C_COUNT; i++)
				h->counters[i] = __atomic_load_n(&stk_counters[i], __ATOMIC_RELAXED);
			publish(h);
			atexit(stk_stat_exit);
		} else {
			create_failed = true;
		}
	}
	pthread_mutex_unlock(&create_lock);
}

/* ---- records ---- */

static void rec_lock(struct stk_stat_rec *r)
{
	for (unsigned i = 0; i < REC_RETRY_SPINS; i++) {
		uint32_t s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
		if (!(s & 1) && __atomic_compare_exchange_n(&r->seq, &s, s + 1, false,
							    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
		sched_yield();
	}
	__atomic_fetch_or(&r->seq, 1, __ATOMIC_ACQUIRE); /* a writer that died mid-way */
}

static void rec_unlock(struct stk_stat_rec *r)
{
	__atomic_fetch_add(&r->seq, 1, __ATOMIC_RELEASE);
}

static void addr_of(int fd, uint8_t out[STK_STAT_ADDR_LEN], bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int saved = errno;
	int ret = peer ? stk_sys.getpeername(fd, (struct sockaddr *)&ss, &len)
		       : stk_sys.getsockname(fd, (struct sockaddr *)&ss, &len);
	errno = saved;
	if (ret == 0 && len <= STK_STAT_ADDR_LEN && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
		memcpy(out, &ss, len);
}

/* Orphans whose fd is no longer their socket are freed (rate-limited: a
 * table full of live sockets is not scanned on every allocation). */
static bool reclaim_orphans(struct stk_stat_hdr *h)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	uint64_t last = __atomic_load_n(&last_reclaim_ns, __ATOMIC_RELAXED);
	if (last && now - last < RECLAIM_GAP_NS)
		return false;
	__atomic_store_n(&last_reclaim_ns, now, __ATOMIC_RELAXED);
	bool freed = false;
	struct stk_stat_rec *r = recs_of(h);
	for (uint32_t i = 0; i < STK_STAT_RECS; i++) {
		if (__atomic_load_n(&r[i].used, __ATOMIC_ACQUIRE) && r[i].orphan &&
		    !stk_sys_fd_is(r[i].fd, (ino_t)r[i].ino)) {
			stk_stat_rec_free(&r[i]);
			freed = true;
		}
	}
	return freed;
}

static struct stk_stat_rec *rec_take(struct stk_stat_hdr *h)
{
	struct stk_stat_rec *r = recs_of(h);
	for (int round = 0; round < 2; round++) {
		uint32_t used = __atomic_load_n(&h->rec_used, __ATOMIC_ACQUIRE);
		for (uint32_t i = 0; i < STK_STAT_RECS; i++) {
			if (i >= used) {
				/* extend the high-water mark first: a reader scans to it */
				uint32_t want = i + 1;
				while (used < want && !__atomic_compare_exchange_n(&h->rec_used, &used,
						want, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
					;
			}
			uint32_t z = 0;
			if (__atomic_load_n(&r[i].used, __ATOMIC_RELAXED) == 0 &&
			    __atomic_compare_exchange_n(&r[i].used, &z, 1, false, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				return &r[i];
		}
		if (!reclaim_orphans(h))
			break;
	}
	__atomic_fetch_add(&h->rec_overflow, 1, __ATOMIC_RELAXED);
	return NULL;
}

struct stk_stat_rec *stk_stat_rec_new(int fd)
{
	struct stk_stat_hdr *h = __atomic_load_n(&seg, __ATOMIC_ACQUIRE);
	if (!h || fd < 0)
		return NULL;
	struct stk_stat_rec *r = rec_take(h);
	if (!r)
		return NULL;
	struct stat st;
	uint64_t ino = fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
	rec_lock(r);
	uint32_t used = r->used, seq = r->seq;
	memset(r, 0, sizeof(*r));
	r->used = used;
	r->seq = seq;
	r->fd = fd;
	r->ino = ino;
	addr_of(fd, r->local, false);
	addr_of(fd, r->remote, true);
	r->state = STK_STAT_NEGOTIATING;
	rec_unlock(r);
	return r;
}

void stk_stat_rec_free(struct stk_stat_rec *rec)
{
	if (!rec)
		return;
	rec_lock(rec);
	rec->state = STK_STAT_FREE;
	rec->orphan = 0;
	rec_unlock(rec);
	__atomic_store_n(&rec->used, 0, __ATOMIC_RELEASE);
}

void stk_stat_rec_set(struct stk_stat_rec *rec, enum stk_stat_state state, const char *provider,
		      const char *reason)
{
	if (!rec)
		return;
	rec_lock(rec);
	rec->state = (uint8_t)state;
	if (provider)
		snprintf(rec->provider, sizeof(rec->provider), "%s", provider);
	if (reason)
		snprintf(rec->reason, sizeof(rec->reason), "%s", reason);
	rec_unlock(rec);
}

void stk_stat_rec_fill_remote(struct stk_stat_rec *rec, int fd)
{
	if (!rec || fd < 0 || rec->remote[0] || rec->remote[1])
		return;
	uint8_t remote[STK_STAT_ADDR_LEN] = { 0 };
	addr_of(fd, remote, true);
	rec_lock(rec);
	memcpy(rec->remote, remote, sizeof(remote));
	rec_unlock(rec);
}

void stk_stat_orphan(int fd, enum stk_stat_state state, const char *reason)
{
	struct stk_stat_rec *r = stk_stat_rec_new(fd);
	if (!r)
		return;
	rec_lock(r);
	r->orphan = 1;
	rec_unlock(r);
	stk_stat_rec_set(r, state, NULL, reason);
}

void stk_stat_note_fallback(const char *reason)
{
	snprintf(fallback_reason, sizeof(fallback_reason), "%s", reason);
}

const char *stk_stat_take_fallback(void)
{
	static __thread char taken[STK_STAT_REASON_LEN];
	memcpy(taken, fallback_reason, sizeof(taken));
	fallback_reason[0] = 0;
	return taken;
}

void stk_stat_provider_open(const char *name)
{
	pthread_mutex_lock(&create_lock);
	size_t len = strlen(providers);
	if (strlen(name) + len + 2 < sizeof(providers))
		snprintf(providers + len, sizeof(providers) - len, "%s%s", len ? "," : "", name);
	struct stk_stat_hdr *h = seg;
	if (h) {
		__atomic_fetch_add(&h->prov_seq, 1, __ATOMIC_ACQUIRE);
		memcpy(h->providers, providers, sizeof(providers));
		__atomic_fetch_add(&h->prov_seq, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&create_lock);
}

/* ---- fork and exit ---- */

static struct stk_stat_hdr *parent_seg; /* the child's view of its parent's, until rebased */

void stk_stat_atfork_child(void)
{
	pthread_mutex_init(&create_lock, NULL);
	struct stk_stat_hdr *old = seg;
	parent_seg = NULL;
	if (!old)
		return;
	/* never write into the parent's file from here on (stk_fork_child took
	 * the counters' mirror away first) */
	stk_counters_set_mirror(NULL);
	__atomic_store_n(&seg, NULL, __ATOMIC_RELEASE);
	struct stk_stat_hdr *h = create_file();
	if (!h) {
		create_failed = true;
		parent_seg = old; /* rebase answers NULL */
		return;
	}
	/* the parent's state at the fork: counters and the records in use (not
	 * the untouched rest of the file: reading it would allocate it) */
	uint32_t used = old->rec_used;
	size_t body = STK_STAT_HDR_SIZE - offsetof(struct stk_stat_hdr, rec_used) +
		      (size_t)used * sizeof(struct stk_stat_rec);
	memcpy(&h->rec_used, &old->rec_used, body);
	h->prov_seq = 0;
	for (int i = 0; i < STK_C_COUNT; i++) /* ours: the parent's at the fork, and the child's since */
		h->counters[i] = stk_counters[i];
	parent_seg = old;
	publish(h);
}

struct stk_stat_rec *stk_stat_rebase(struct stk_stat_rec *rec)
{
	struct stk_stat_hdr *old = parent_seg, *h = seg;
	if (!rec || !old)
		return rec;
	if (!h)
		return NULL;
	return (struct stk_stat_rec *)((char *)h + ((char *)rec - (char *)old));
}

void stk_stat_rebase_done(void)
{
	if (parent_seg)
		munmap(parent_seg, STK_STAT_SIZE);
	parent_seg = NULL;
}

void stk_stat_exit(void)
{
	static int removed; /* atomic */
	struct stk_stat_hdr *h = __atomic_load_n(&seg, __ATOMIC_ACQUIRE);
	/* a vfork child shares our memory: the file is its parent's */
	if (h && h->pid == (uint32_t)getpid() && !__atomic_exchange_n(&removed, 1, __ATOMIC_ACQ_REL))
		unlink(seg_path);
}
