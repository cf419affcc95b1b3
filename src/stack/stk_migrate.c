/* Migration of accelerated connections to their kernel socket. Contracts in
 * stk_migrate.h; the per-connection protocol steps live in stk_stream.c (they
 * need its lock and wire), the process-wide orchestration and the kernel-side
 * data calls here. */
#include "config.h"
#include "stack/stk_migrate.h"
#include "stack/stk_counters.h"
#include "stack/stk_epoll.h"
#include "stack/stk_fab.h"
#include "stack/stk_lazy.h"
#include "stack/stk_log.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_wake.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

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
		FSK_WARN("migration: no shared mapping for %zu unread bytes; a child forked "
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

/* ---- data calls after the fabric ---- */

ssize_t stk_migrated_recv(struct stk_conn *conn, void *buf, size_t len, int flags)
{
	struct stk_leftover *left = __atomic_load_n(&conn->left, __ATOMIC_ACQUIRE);
	size_t n = stk_leftover_take(left, buf, len, flags & MSG_PEEK);
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE) && stk_leftover_count(left) == 0 &&
	    !__atomic_exchange_n(&conn->kernel_only, true, __ATOMIC_ACQ_REL))
		stk_epoll_conn_changed(conn); /* epoll sets hand it to their kernel set */
	if (n && (n == len || !(flags & MSG_WAITALL) || (flags & MSG_PEEK)))
		return (ssize_t)n;
	ssize_t k = stk_sys.recv(conn->fd, (uint8_t *)buf + n, len - n, flags);
	if (k < 0)
		return n ? (ssize_t)n : -errno;
	return (ssize_t)n + k;
}

ssize_t stk_migrated_send(struct stk_conn *conn, const void *buf, size_t len, int flags)
{
	ssize_t k = stk_sys.send(conn->fd, buf, len, flags | MSG_NOSIGNAL);
	return k < 0 ? -errno : k;
}

short stk_migrated_events(struct stk_conn *conn, size_t extra_in)
{
	struct pollfd p = { .fd = conn->fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	short ev = stk_sys.poll(&p, 1, 0) > 0 ? p.revents : 0;
	if (extra_in)
		ev |= POLLIN;
	return ev;
}

/* ---- accounting ---- */

static const char *const reason_text[] = {
	[STK_MIGRATE_REASON_FORK] = "the process forks (connections existing at fork "
				    "continue on the kernel; new ones are accelerated)",
	[STK_MIGRATE_REASON_EXEC] = "it survives an exec (not close-on-exec)",
	[STK_MIGRATE_REASON_PASS] = "it is sent to another socket (SCM_RIGHTS)",
	[STK_MIGRATE_REASON_PEER] = "the peer process moved it (fork, exec or fd passing)",
	[STK_MIGRATE_REASON_BYPASS] = "the app uses it through calls libfabsock never sees "
				      "(stdio after fdopen, POSIX aio)",
	[STK_MIGRATE_REASON_ZEROCOPY] = "the app turned SO_ZEROCOPY on (MSG_ZEROCOPY "
					"completions come from the kernel socket)",
};
static const enum stk_counter reason_counter[] = {
	[STK_MIGRATE_REASON_FORK] = STK_C_MIGRATE_FORK,
	[STK_MIGRATE_REASON_EXEC] = STK_C_MIGRATE_EXEC,
	[STK_MIGRATE_REASON_PASS] = STK_C_MIGRATE_PASS,
	[STK_MIGRATE_REASON_PEER] = STK_C_MIGRATE_PEER,
	[STK_MIGRATE_REASON_BYPASS] = STK_C_MIGRATE_BYPASS,
	[STK_MIGRATE_REASON_ZEROCOPY] = STK_C_MIGRATE_ZEROCOPY,
};

void stk_migrate_note(struct stk_conn *conn, enum stk_migrate_reason why)
{
	static int logged[STK_MIGRATE_REASON_ZEROCOPY + 1]; /* atomic flags */
	stk_count(STK_C_MIGRATED_TO_KERNEL);
	stk_count(reason_counter[why]);
	if (__atomic_exchange_n(&logged[why], 1, __ATOMIC_RELAXED) == 0)
		FSK_INFO("fd %d: accelerated connection moved to the kernel: %s (logged once "
			 "per reason, counted in migrated_to_kernel)", conn->fd, reason_text[why]);
	else
		FSK_DBG("fd %d: accelerated connection moved to the kernel: %s", conn->fd,
			reason_text[why]);
}

/* ---- orchestration ---- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define WAIT_PAUSE_MIN_NS 20000ull     /* between looks at the peers' answers ... */
#define WAIT_PAUSE_MAX_NS 1000000ull   /* ... backing off to this */
#define WAIT_NOTE_NS 1000000000ull     /* a wait this long is logged (once per call) */

/* One look at a connection that waits: its MIGRATE posted (retried while the
 * provider is full), the peer's answer taken, or its death seen (the kernel
 * connection ended: the liveness check resets it, after the grace a closing
 * peer's FIN needs). Returns 1 (migrated), -1 (migrated: the peer died) or 0. */
static int migrate_step(struct stk_conn *conn)
{
	stk_conn_progress(conn);
	int r = stk_conn_migrate_begin(conn) ? stk_conn_migrate_finish(conn) : 0;
	if (r == 0)
		stk_conn_check_liveness(conn); /* doorbells taken, or the peer is gone */
	return r;
}

unsigned stk_migrate_conns(struct stk_conn **conns, size_t n, enum stk_migrate_reason why)
{
	size_t waiting = 0;
	for (size_t i = 0; i < n; i++) {
		if (!conns[i])
			continue;
		if (__atomic_load_n(&conns[i]->migrated, __ATOMIC_ACQUIRE)) {
			conns[i] = NULL; /* done before (by the peer, or an earlier call) */
			continue;
		}
		stk_conn_migrate_begin(conns[i]);
		waiting++;
	}
	/* No deadline: a live peer always answers (its negotiation thread does
	 * when its app makes no call), and until it has, bytes it sends come on
	 * the fabric to this process: giving up would lose them. */
	uint64_t start = now_ns(), pause = WAIT_PAUSE_MIN_NS;
	bool noted = false;
	unsigned gone = 0;
	while (waiting) {
		for (size_t i = 0; i < n; i++) {
			if (!conns[i])
				continue;
			int r = migrate_step(conns[i]);
			if (r == 0)
				continue;
			if (r < 0) {
				gone++;
				stk_count(STK_C_MIGRATE_PEER_GONE);
				FSK_WARN("fd %d: the peer died before it answered the migration: "
					 "the bytes received before stay readable, then the kernel "
					 "socket tells the end", conns[i]->fd);
			}
			stk_migrate_note(conns[i], why);
			conns[i] = NULL;
			waiting--;
		}
		if (!waiting)
			break;
		if (!noted && now_ns() - start > WAIT_NOTE_NS) {
			noted = true;
			FSK_INFO("migration: %zu peer(s) have not answered after %llu ms; waiting "
				 "(their processes are alive)", waiting,
				 (unsigned long long)(WAIT_NOTE_NS / 1000000ull));
		}
		struct timespec ts = { 0, (long)pause };
		nanosleep(&ts, NULL);
		if (pause < WAIT_PAUSE_MAX_NS)
			pause *= 2;
	}
	return gone;
}

unsigned stk_migrate_all(enum stk_migrate_reason why)
{
	/* The table is held so that no connection is freed under us (a close in
	 * another thread waits for the end of the migration: the peers' answers,
	 * which their negotiation threads give within milliseconds). */
	stk_conn_table_hold();
	size_t cap = 64, n = 0;
	struct stk_conn **conns = malloc(cap * sizeof(*conns));
	for (uint32_t slot = 0; conns && slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = stk_conn_at(slot);
		if (!conn || !__atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
			continue;
		/* still negotiating (stk_lazy.h): nothing went over the fabric; a
		 * forked child refuses the negotiation it inherits */
		if (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC)
			continue;
		if (n == cap) {
			struct stk_conn **more = realloc(conns, 2 * cap * sizeof(*conns));
			if (!more)
				break;
			conns = more;
			cap *= 2;
		}
		conns[n++] = conn;
	}
	unsigned gone = 0;
	if (conns) {
		gone = stk_migrate_conns(conns, n, why);
		free(conns);
	} else {
		FSK_WARN("migration: out of memory: connections inherited by the child are "
			 "abandoned");
	}
	stk_conn_table_release();
	return gone;
}

void stk_migrate_atfork_prepare(void)
{
	stk_lazy_atfork_prepare();
	stk_epoll_atfork_prepare();
	stk_conn_atfork_prepare();
	stk_fab_atfork_prepare();
	stk_log_atfork_prepare();
}

void stk_migrate_atfork_parent(void)
{
	stk_log_atfork_parent();
	stk_fab_atfork_parent();
	stk_conn_atfork_parent();
	stk_epoll_atfork_parent();
	stk_lazy_atfork_parent();
}

void stk_migrate_atfork_child(void)
{
	stk_log_atfork_child();
	stk_fab_atfork_child();
	stk_conn_atfork_child();
	stk_epoll_atfork_child();
	stk_lazy_atfork_child();
	stk_wake_atfork_child();
}
