#include "config.h"
#include "stack/stk_fab.h"
#include "stack/stk_fi.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_thread.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

static stk_fab_deliver_fn *deliver; /* set once before any fabric opens */

void stk_fab_set_deliver(stk_fab_deliver_fn *fn)
{
	deliver = fn;
}

#define FAB_MAX 16
#define FAB_KEY_MAX (STK_FAB_NAME_MAX + INET6_ADDRSTRLEN + 16) /* "tcp@<local ip>[%scope]" */
#define AV_CACHE_MAX 256
#define BATCH_MAX 64
#define STK_FAB_RXM_SEG (16384u - 256u) /* below rxm's eager limit, header included */

struct stk_fab {
	char name[STK_FAB_NAME_MAX];
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *mr_desc;          /* NULL when the provider does not need FI_MR_LOCAL */
	uint8_t *slab;
	size_t slab_len;
	size_t seg;
	size_t inject;
	size_t stream_seg;      /* stk_fab_stream_seg */
	bool gather;            /* stk_fab_inject2 gathers: FI_INJECT sendmsg, 2 iovecs, no completion */
	int wait_fd;
	/* shm: the owner of our own region. A peer's region of another owner is
	 * refused before libfabric sees it (stk_fab_av_insert): the two 0600
	 * regions are not open to each other, and libfabric 1.17's shm fails
	 * such an insert half-way (seen: a later fi_cq_read crashed). */
	bool is_shm;
	uid_t shm_owner;
	struct stk_fab_buf bufs[STK_FAB_RX_BUFS + STK_FAB_TX_BUFS];
	uint64_t tx_free;       /* tagged head: tag << 32 | (index + 1) */
	pthread_mutex_t cq_lock; /* held while draining the CQ and delivering */
	/* Peers in the AV, shared by their connections: a process pair with many
	 * connections inserts its peer once (shm's AV holds 256 peers). */
	pthread_mutex_t av_lock;
	struct av_entry {
		uint8_t addr[STK_FAB_ADDR_MAX];
		uint16_t len;           /* 0: free slot */
		unsigned refs;          /* connections using it; 0: idle, kept */
		uint64_t last_used;     /* eviction order of idle entries */
		fi_addr_t fi;
	} av_cache[AV_CACHE_MAX];   /* protected by av_lock */
	uint64_t av_clock;          /* protected by av_lock */
	/* protected by cq_lock: rx buffers whose repost failed with -FI_EAGAIN */
	uint32_t repost[STK_FAB_RX_BUFS];
	unsigned repost_count;
};

/* Where a per-address provider's endpoint listens: the kernel connection's
 * local IP, port 0 (len 0: not an IP address). A v4-mapped IPv6 address
 * is its IPv4 one (the provider's peers see the IPv4 side). */
struct fab_src {
	struct sockaddr_storage addr;
	socklen_t len;
	uint32_t format;        /* FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
};

/* FI_TRY: after fi_getinfo, a failing call ends the open with one line naming
 * the provider's domain (for dpdk, the device: the likely culprit) and what
 * the connections do instead. */

/* Opening endpoints (slow path). open_lock is held for a whole open (one
 * libfabric open at a time); table_lock only for short looks at the table
 * (never while opening: a HELLO must not wait for an open of another
 * provider). Order: open_lock, then table_lock. Entries are only appended
 * (their index is stable), until a fork's child forgets them all. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by table_lock */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char key[FAB_KEY_MAX];  /* the cfg name, "name@ip" for per-address providers */
	char prov[STK_FAB_NAME_MAX];
	struct fab_src src;     /* where a per-address provider listens */
	bool pending;           /* not opened yet: the next stk_fab_get opens it */
	bool bg_started;        /* a background open was started for it */
	struct stk_fab *fab;    /* NULL with err set: failed, not retried */
	int err;
} table[FAB_MAX];
static unsigned table_count;

const char *stk_fab_name(const struct stk_fab *fab)
{
	return fab->name;
}

uint32_t stk_fab_addr_format(const struct stk_fab *fab)
{
	return fab->info->addr_format;
}

size_t stk_fab_seg_size(const struct stk_fab *fab)
{
	return fab->seg;
}

size_t stk_fab_stream_seg(const struct stk_fab *fab)
{
	return fab->stream_seg;
}

size_t stk_fab_inject_size(const struct stk_fab *fab)
{
	return fab->inject;
}

int stk_fab_wait_fd(const struct stk_fab *fab)
{
	return fab->wait_fd;
}

/* ---- send buffer free list (Treiber stack, tag against ABA) ---- */

struct stk_fab_buf *stk_fab_buf_get(struct stk_fab *fab)
{
	uint64_t head = __atomic_load_n(&fab->tx_free, __ATOMIC_ACQUIRE);
	for (;;) {
		uint32_t top = (uint32_t)head;
		if (top == 0)
			return NULL;
		struct stk_fab_buf *buf = &fab->bufs[top - 1];
		uint32_t next = __atomic_load_n(&buf->next, __ATOMIC_RELAXED);
		uint64_t want = ((head >> 32) + 1) << 32 | next;
		if (__atomic_compare_exchange_n(&fab->tx_free, &head, want, true,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			buf->outstanding = NULL;
			return buf;
		}
	}
}

bool stk_fab_tx_available(struct stk_fab *fab)
{
	return (uint32_t)__atomic_load_n(&fab->tx_free, __ATOMIC_RELAXED) != 0;
}

void stk_fab_buf_put(struct stk_fab *fab, struct stk_fab_buf *buf)
{
	uint64_t head = __atomic_load_n(&fab->tx_free, __ATOMIC_RELAXED);
	for (;;) {
		__atomic_store_n(&buf->next, (uint32_t)head, __ATOMIC_RELAXED);
		uint64_t want = ((head >> 32) + 1) << 32 | (buf->index + 1);
		if (__atomic_compare_exchange_n(&fab->tx_free, &head, want, true,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
}

/* ---- data path ---- */

/* A post's result: 0, -FI_EAGAIN (the caller retries after progress), or an
 * error, logged with the call that failed. */
static int post_result(struct stk_fab *fab, ssize_t ret, const char *call)
{
	if (ret != 0 && ret != -FI_EAGAIN)
		FSK_WARN("%s on %s: %s", call, fab->name, stk_fi.strerror((int)-ret));
	return (int)ret;
}

int stk_fab_send(struct stk_fab *fab, struct stk_fab_buf *buf, size_t len, fi_addr_t dest)
{
	stk_fi_enter();
	ssize_t ret = fi_send(fab->ep, buf->data, len, fab->mr_desc, dest, &buf->ctx);
	stk_fi_leave();
	return post_result(fab, ret, "fi_send");
}

int stk_fab_inject(struct stk_fab *fab, const void *msg, size_t len, fi_addr_t dest)
{
	stk_fi_enter();
	ssize_t ret = fi_inject(fab->ep, msg, len, dest);
	stk_fi_leave();
	return post_result(fab, ret, "fi_inject");
}

int stk_fab_inject2(struct stk_fab *fab, const void *hdr, size_t hlen, const void *payload,
		    size_t plen, fi_addr_t dest)
{
	if (!fab->gather || plen < STK_FAB_GATHER_MIN) {
		uint8_t tmp[STK_FAB_STAGE_MAX];
		if (hlen + plen > sizeof(tmp))
			return -EMSGSIZE;
		memcpy(tmp, hdr, hlen);
		if (plen)
			memcpy(tmp + hlen, payload, plen);
		return stk_fab_inject(fab, tmp, hlen + plen, dest);
	}
	struct iovec iov[2] = {
		{ .iov_base = (void *)hdr, .iov_len = hlen },
		{ .iov_base = (void *)payload, .iov_len = plen },
	};
	void *desc[2] = { NULL, NULL };
	struct fi_msg msg = { .msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dest };
	stk_fi_enter();
	/* no FI_COMPLETION: the CQ is bound with FI_SELECTIVE_COMPLETION (gather) */
	ssize_t ret = fi_sendmsg(fab->ep, &msg, FI_INJECT);
	stk_fi_leave();
	return post_result(fab, ret, "fi_sendmsg(FI_INJECT)");
}

/* Called with cq_lock held (or before the endpoint is published). */
static int post_rx(struct stk_fab *fab, struct stk_fab_buf *buf)
{
	ssize_t ret = fi_recv(fab->ep, buf->data, fab->seg, fab->mr_desc, FI_ADDR_UNSPEC,
			      &buf->ctx);
	if (ret == -FI_EAGAIN && fab->repost_count < STK_FAB_RX_BUFS) {
		fab->repost[fab->repost_count++] = buf->index;
		return 0;
	}
	if (ret)
		FSK_WARN("fi_recv on %s: %s", fab->name, stk_fi.strerror((int)-ret));
	return (int)ret;
}

static void complete(struct stk_fab *fab, void *context, uint64_t flags, size_t len, bool ok)
{
	struct stk_fab_buf *buf = context;
	if (!buf)
		return;
	if (buf->is_rx) {
		if (ok && (flags & FI_RECV))
			deliver(fab, buf->data, len);
		post_rx(fab, buf);
		return;
	}
	if (buf->outstanding)
		__atomic_fetch_sub(buf->outstanding, 1, __ATOMIC_RELEASE);
	stk_fab_buf_put(fab, buf);
}

static size_t batch_size(void)
{
	size_t batch = stk_cfg.batch ? stk_cfg.batch : 16;
	return batch > BATCH_MAX ? BATCH_MAX : batch;
}

void stk_fab_progress_all(struct stk_fab *fab, unsigned max_batches)
{
	size_t batch = batch_size();
	for (unsigned i = 0; i < max_batches; i++)
		if ((size_t)stk_fab_progress(fab) < batch)
			return;
}

int stk_fab_progress(struct stk_fab *fab)
{
	if (pthread_mutex_trylock(&fab->cq_lock) != 0)
		return 0;
	stk_fi_enter();
	unsigned retry = fab->repost_count;
	fab->repost_count = 0;
	for (unsigned i = 0; i < retry; i++)
		post_rx(fab, &fab->bufs[fab->repost[i]]);

	struct fi_cq_msg_entry ev[BATCH_MAX];
	size_t batch = batch_size();
	int handled = 0;
	ssize_t n = fi_cq_read(fab->cq, ev, batch);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			complete(fab, ev[i].op_context, ev[i].flags, ev[i].len, true);
		handled = (int)n;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(fab->cq, &err, 0) == 1) {
			stk_count(STK_C_FAB_CQ_ERRORS);
			/* Expected when a peer process exits (rxm reports its dropped
			 * connection): counted, logged at info the first time only. */
			static int logged;
			if (__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED) == 0)
				FSK_INFO("%s: completion error: %s (logged once, counted in "
					 "fab_cq_errors)", fab->name, stk_fi.strerror(err.err));
			else
				FSK_DBG("%s: completion error: %s", fab->name, stk_fi.strerror(err.err));
			complete(fab, err.op_context, err.flags, 0, false);
			handled = 1;
		}
	}
	stk_fi_leave();
	pthread_mutex_unlock(&fab->cq_lock);
	return handled;
}

void stk_fab_quiesce(struct stk_fab *fab)
{
	pthread_mutex_lock(&fab->cq_lock);
	pthread_mutex_unlock(&fab->cq_lock);
}

bool stk_fab_trywait(struct stk_fab *fab)
{
	if (fab->wait_fd < 0)
		return false;
	struct fid *fids[1] = { &fab->cq->fid };
	stk_fi_enter();
	int ret = fi_trywait(fab->fabric, fids, 1);
	stk_fi_leave();
	return ret == FI_SUCCESS;
}

/* ---- addresses ---- */

int stk_fab_getname(struct stk_fab *fab, const struct sockaddr *local_ip, void *addr,
		    size_t *len)
{
	size_t cap = *len;
	stk_fi_enter();
	int ret = fi_getname(&fab->ep->fid, addr, len);
	stk_fi_leave();
	if (ret)
		return ret == -FI_ETOOSMALL ? -ENOSPC : ret;
	if (*len > cap)
		return -ENOSPC;
	if (!local_ip)
		return 0;
	/* Socket-addressed providers bound to the wildcard: substitute the IP the
	 * kernel connection uses locally, which the peer can reach by construction. */
	/* addr may be unaligned (a byte array inside a wire struct): copy out. */
	if (fab->info->addr_format == FI_SOCKADDR_IN && *len >= sizeof(struct sockaddr_in) &&
	    local_ip->sa_family == AF_INET) {
		struct sockaddr_in sin, lin;
		memcpy(&sin, addr, sizeof(sin));
		memcpy(&lin, local_ip, sizeof(lin));
		if (sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
			sin.sin_addr = lin.sin_addr;
			memcpy(addr, &sin, sizeof(sin));
		}
	} else if (fab->info->addr_format == FI_SOCKADDR_IN6 &&
		   *len >= sizeof(struct sockaddr_in6) && local_ip->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6, lin6;
		memcpy(&sin6, addr, sizeof(sin6));
		memcpy(&lin6, local_ip, sizeof(lin6));
		if (IN6_IS_ADDR_UNSPECIFIED(&sin6.sin6_addr)) {
			sin6.sin6_addr = lin6.sin6_addr;
			memcpy(addr, &sin6, sizeof(sin6));
		}
	}
	return 0;
}

#define SHM_DIR "/dev/shm"
#define SHM_ADDR_PREFIX "fi_shm://"

/* The region name of a shm address ("fi_shm://<pid>:<n>:<m>", NUL included)
 * as a file name under SHM_DIR, or NULL when addr is not one. */
static const char *shm_region_of(const void *addr, size_t len)
{
	const char *a = addr;
	size_t plen = sizeof(SHM_ADDR_PREFIX) - 1;
	if (len <= plen || memchr(a, '\0', len) == NULL || strncmp(a, SHM_ADDR_PREFIX, plen) != 0)
		return NULL;
	const char *name = a + plen;
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return NULL;
	return name;
}

/* The owner of the region named, -errno when it cannot be looked at. */
static int shm_region_owner(const char *name, uid_t *owner)
{
	char path[sizeof(SHM_DIR) + STK_FAB_ADDR_MAX];
	snprintf(path, sizeof(path), SHM_DIR "/%s", name);
	struct stat st;
	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*owner = st.st_uid;
	return 0;
}

/* shm: a peer whose region has our region's owner (the regions are 0600, so
 * only then can each side map the other's). 0 or -errno, logged at info the
 * first time (a peer of another user is a normal event, not a fault). */
static int shm_peer_allowed(const struct stk_fab *fab, const void *addr, size_t len)
{
	const char *name = shm_region_of(addr, len);
	uid_t owner = 0;
	int ret = name ? shm_region_owner(name, &owner) : -EINVAL;
	if (ret == 0 && owner != fab->shm_owner)
		ret = -EPERM;
	if (ret == 0)
		return 0;
	static int logged;
	if (__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED) == 0)
		FSK_INFO("shm: peer address not used: %s (logged once; its connections use "
			 "another provider or the kernel)",
			 ret == -EPERM ? "its region belongs to another user"
			 : ret == -EINVAL ? "not a region of this host's " SHM_DIR
			 : strerror(-ret));
	else
		FSK_DBG("shm: peer address not used: %s", strerror(-ret));
	return ret;
}

int stk_fab_peer_allowed(struct stk_fab *fab, const void *addr, size_t len)
{
	if (len > STK_FAB_ADDR_MAX)
		return -EINVAL;
	return fab->is_shm ? shm_peer_allowed(fab, addr, len) : 0;
}

int stk_fab_av_insert(struct stk_fab *fab, const void *addr, size_t len, fi_addr_t *out)
{
	int allowed = stk_fab_peer_allowed(fab, addr, len);
	if (allowed)
		return allowed;
	pthread_mutex_lock(&fab->av_lock);
	struct av_entry *free_slot = NULL, *idle = NULL;
	for (unsigned i = 0; i < AV_CACHE_MAX; i++) {
		struct av_entry *e = &fab->av_cache[i];
		if (!e->len) {
			if (!free_slot)
				free_slot = e;
			continue;
		}
		if (e->len == len && memcmp(e->addr, addr, len) == 0) {
			e->refs++;
			e->last_used = ++fab->av_clock;
			*out = e->fi;
			pthread_mutex_unlock(&fab->av_lock);
			return 0;
		}
		if (!e->refs && (!idle || e->last_used < idle->last_used))
			idle = e;
	}
	if (!free_slot && idle) {
		/* full: the peer idle the longest leaves (its mapping too) */
		stk_fi_enter();
		fi_av_remove(fab->av, &idle->fi, 1, 0);
		stk_fi_leave();
		idle->len = 0;
		free_slot = idle;
	}
	stk_fi_enter();
	int ret = fi_av_insert(fab->av, addr, 1, out, 0, NULL);
	stk_fi_leave();
	struct av_entry *same = NULL;
	for (unsigned i = 0; ret == 1 && i < AV_CACHE_MAX && !same; i++)
		if (fab->av_cache[i].len && fab->av_cache[i].fi == *out)
			same = &fab->av_cache[i];
	if (same) {
		/* another byte form of a known peer: one entry, one removal */
		same->refs++;
		same->last_used = ++fab->av_clock;
	} else if (ret == 1 && free_slot) {
		memcpy(free_slot->addr, addr, len);
		free_slot->len = (uint16_t)len;
		free_slot->fi = *out;
		free_slot->refs = 1;
		free_slot->last_used = ++fab->av_clock;
	}
	pthread_mutex_unlock(&fab->av_lock);
	if (ret != 1) {
		/* a peer's address: its connection goes to the kernel, said at
		 * info (the peer may be another user's, or gone) */
		FSK_INFO("fi_av_insert on %s: %s", fab->name,
			 ret < 0 ? stk_fi.strerror(-ret) : "address rejected");
		return ret < 0 ? ret : -EINVAL;
	}
	return 0;
}

void stk_fab_av_release(struct stk_fab *fab, fi_addr_t addr)
{
	pthread_mutex_lock(&fab->av_lock);
	for (unsigned i = 0; i < AV_CACHE_MAX; i++) {
		struct av_entry *e = &fab->av_cache[i];
		if (!e->len || !e->refs || e->fi != addr)
			continue;
		/* kept when idle: the next connection to the same peer process reuses
		 * it (shm maps the peer's 16 MiB region once, not per connection) */
		e->refs--;
		break;
	}
	pthread_mutex_unlock(&fab->av_lock);
}

/* ---- shared-memory regions of the shm provider ----
 * libfabric's shm provider names an endpoint's region /dev/shm/<pid>:<n>:<m> and
 * unlinks it only when the endpoint is closed; a process that exits without
 * closing (every app: exit() does not close our endpoints) or is killed leaves
 * it behind (16 MiB of RAM each), and a later process that inherits the pid
 * cannot open its endpoint (EBUSY). So: our regions are unlinked at exit (the
 * mappings stay valid while threads finish), and before opening shm, regions of
 * processes that no longer exist — or of a previous owner of our pid — are
 * reclaimed. A pid in another pid namespace is not ours to judge: /dev/shm is
 * per mount, so only a shared /dev/shm across pid namespaces could mislead it. */

/* The pid of a region name "<pid>:<n>:<m>", or -1 for any other name. */
static long shm_region_pid(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);
	if (end == name || *end != ':' || pid <= 0)
		return -1;
	unsigned long a, b;
	char tail;
	if (sscanf(end, ":%lu:%lu%c", &a, &b, &tail) != 2)
		return -1;
	return pid;
}

static void shm_unlink_regions(bool ours_only)
{
	DIR *dir = opendir(SHM_DIR);
	if (!dir)
		return;
	long self = (long)getpid();
	unsigned reclaimed = 0;
	struct dirent *de;
	while ((de = readdir(dir)) != NULL) {
		long pid = shm_region_pid(de->d_name);
		if (pid < 0)
			continue;
		bool stale = pid == self || (!ours_only && kill((pid_t)pid, 0) != 0 &&
					     errno == ESRCH);
		if (stale && unlinkat(dirfd(dir), de->d_name, 0) == 0)
			reclaimed++;
	}
	closedir(dir);
	if (reclaimed && !ours_only)
		FSK_INFO("shm: reclaimed %u region(s) left in " SHM_DIR " by exited processes",
			 reclaimed);
}

static void shm_unlink_at_exit(void)
{
	shm_unlink_regions(true);
}

/* ---- opening ---- */

static void fab_close(struct stk_fab *fab)
{
	if (fab->ep)
		fi_close(&fab->ep->fid);
	if (fab->mr)
		fi_close(&fab->mr->fid);
	if (fab->cq)
		fi_close(&fab->cq->fid);
	if (fab->av)
		fi_close(&fab->av->fid);
	if (fab->domain)
		fi_close(&fab->domain->fid);
	if (fab->fabric)
		fi_close(&fab->fabric->fid);
	if (fab->info)
		stk_fi.freeinfo(fab->info);
	if (fab->slab)
		munmap(fab->slab, fab->slab_len);
	free(fab);
}

#define FI_TRY(call, what) \
	do { \
		int fi_try_ret = (call); \
		if (fi_try_ret) { \
			FSK_WARN("%s: %s (domain %s): %s; its connections use the next " \
				 "provider of '%s' or the kernel", name, what, \
				 fab->info->domain_attr->name ? fab->info->domain_attr->name : "?", \
				 stk_fi.strerror(-fi_try_ret), stk_cfg.providers); \
			ret = fi_try_ret < 0 ? fi_try_ret : -EIO; \
			goto fail; \
		} \
	} while (0)

static void fab_src_of(const struct sockaddr *local, struct fab_src *src)
{
	memset(src, 0, sizeof(*src));
	if (!local)
		return;
	struct sockaddr_in *sin = (struct sockaddr_in *)&src->addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&src->addr;
	if (local->sa_family == AF_INET) {
		memcpy(sin, local, sizeof(*sin));
	} else if (local->sa_family == AF_INET6) {
		memcpy(sin6, local, sizeof(*sin6));
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			struct in_addr v4;
			memcpy(&v4, &sin6->sin6_addr.s6_addr[12], sizeof(v4));
			memset(&src->addr, 0, sizeof(src->addr));
			sin->sin_family = AF_INET;
			sin->sin_addr = v4;
		}
	} else {
		return;
	}
	if (src->addr.ss_family == AF_INET) {
		sin->sin_port = 0;
		src->len = sizeof(*sin);
		src->format = FI_SOCKADDR_IN;
	} else {
		sin6->sin6_port = 0;
		sin6->sin6_flowinfo = 0;
		src->len = sizeof(*sin6);
		src->format = FI_SOCKADDR_IN6;
	}
}

/* "name@ip" (a scoped IPv6 address with its interface index). */
static void fab_key(const char *name, const struct fab_src *src, char key[FAB_KEY_MAX])
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&src->addr;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&src->addr;
	if (src->addr.ss_family == AF_INET)
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
	if (src->addr.ss_family == AF_INET6 && sin6->sin6_scope_id)
		snprintf(key, FAB_KEY_MAX, "%s@%s%%%u", name, ip, (unsigned)sin6->sin6_scope_id);
	else
		snprintf(key, FAB_KEY_MAX, "%s@%s", name, ip);
}

bool stk_fab_per_address(const char *prov)
{
	static const char *const ip_listeners[] = { "tcp", "sockets", "udp", "verbs" };
	for (size_t i = 0; i < sizeof(ip_listeners) / sizeof(ip_listeners[0]); i++)
		if (strcmp(prov, ip_listeners[i]) == 0)
			return true;
	return false;
}

/* shm: the owner of our own region (fi_getname names it). */
static void shm_note_owner(struct stk_fab *fab)
{
	fab->is_shm = true;
	fab->shm_owner = geteuid();
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	if (fi_getname(&fab->ep->fid, addr, &len) != 0 || len > sizeof(addr))
		return;
	const char *name = shm_region_of(addr, len);
	uid_t owner;
	if (name && shm_region_owner(name, &owner) == 0)
		fab->shm_owner = owner;
}

static int fab_open(const char *name, const struct fab_src *src, const char *key,
		    struct stk_fab **out)
{
	int ret = stk_fi_load();
	if (ret)
		return ret;
	struct stk_fab *fab = calloc(1, sizeof(*fab));
	struct fi_info *hints = stk_fi.dupinfo(NULL);
	if (!fab || !hints) {
		free(fab);
		stk_fi.freeinfo(hints);
		return -ENOMEM;
	}
	snprintf(fab->name, sizeof(fab->name), "%s", name);
	fab->wait_fd = -1;
	pthread_mutex_init(&fab->cq_lock, NULL);
	pthread_mutex_init(&fab->av_lock, NULL);

	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(name);
	if (src->len) {
		/* An IP-addressed provider listens where the kernel connection's
		 * local side is, never on the provider's default (the host's first
		 * external address) nor the wildcard: an app bound to 127.0.0.1
		 * gets no port elsewhere. A concrete address also keeps rxm's
		 * names stable (rxm identifies peers by the name each side
		 * reports; 0.0.0.0 names make the two directions open separate
		 * connections, which breaks send-after-send ordering). */
		hints->addr_format = src->format;
		hints->src_addr = malloc(src->len);
		if (!hints->src_addr) {
			stk_fi.freeinfo(hints);
			fab_close(fab);
			return -ENOMEM;
		}
		memcpy(hints->src_addr, &src->addr, src->len);
		hints->src_addrlen = src->len;
	}
	ret = stk_fi.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fab->info);
	stk_fi.freeinfo(hints);
	if (ret) {
		/* the default list names providers most hosts lack: say so only
		 * at info level, unless the user chose the list */
		if (stk_cfg.providers_chosen)
			FSK_WARN("%s: fi_getinfo: %s (provider absent or no RDM endpoint)", name,
				 stk_fi.strerror(-ret));
		else
			FSK_INFO("%s: fi_getinfo: %s (provider absent or no RDM endpoint)", name,
				 stk_fi.strerror(-ret));
		fab->info = NULL;
		goto fail;
	}
	struct fi_info *info = fab->info;
	FI_TRY(stk_fi.fabric(info->fabric_attr, &fab->fabric, NULL), "fi_fabric");
	FI_TRY(fi_domain(fab->fabric, info, &fab->domain, NULL), "fi_domain");

	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	FI_TRY(fi_av_open(fab->domain, &av_attr, &fab->av, NULL), "fi_av_open");

	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_MSG,
		.size = STK_FAB_RX_BUFS + STK_FAB_TX_BUFS + 64,
		.wait_obj = FI_WAIT_FD,
	};
	if (fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL) == 0) {
		if (fi_control(&fab->cq->fid, FI_GETWAIT, &fab->wait_fd) != 0)
			fab->wait_fd = -1;
	} else {
		/* shm: FI_WAIT_FD is -FI_ENOSYS (checked on this machine). */
		fab->cq = NULL;
		cq_attr.wait_obj = FI_WAIT_NONE;
		FI_TRY(fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL), "fi_cq_open");
	}

	/* Gathered injects (stk_fab_inject2) need two iovecs, and no completion:
	 * the transmit side is bound with FI_SELECTIVE_COMPLETION and the
	 * endpoint's default transmit flags keep FI_COMPLETION, so fi_send still
	 * completes (its buffer goes back to the free list) while fi_sendmsg
	 * without FI_COMPLETION does not. Without two iovecs: the old binding. */
	fab->gather = info->tx_attr->iov_limit >= 2 && info->tx_attr->inject_size >= STK_FAB_GATHER_MIN;
	if (fab->gather)
		info->tx_attr->op_flags |= FI_COMPLETION;
	FI_TRY(fi_endpoint(fab->domain, info, &fab->ep, NULL), "fi_endpoint");
	FI_TRY(fi_ep_bind(fab->ep, &fab->av->fid, 0), "fi_ep_bind(av)");
	if (fab->gather) {
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION),
		       "fi_ep_bind(cq, transmit)");
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_RECV), "fi_ep_bind(cq, recv)");
	} else {
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	}
	FI_TRY(fi_enable(fab->ep), "fi_enable");

	fab->seg = STK_FAB_SEG_MAX;
	if (info->ep_attr->max_msg_size && info->ep_attr->max_msg_size < fab->seg)
		fab->seg = info->ep_attr->max_msg_size;
	/* ofi_rxm sends messages above its eager size (FI_OFI_RXM_BUFFER_SIZE,
	 * 16 KiB by default) by rendezvous, and their receive completions can come
	 * after those of later eager messages (seen here as sequence gaps): keep
	 * every segment eager. */
	if (strstr(info->fabric_attr->prov_name, "ofi_rxm") && fab->seg > STK_FAB_RXM_SEG)
		fab->seg = STK_FAB_RXM_SEG;
	fab->inject = info->tx_attr->inject_size;
	if (fab->inject > fab->seg)
		fab->inject = fab->seg;
	fab->stream_seg = fab->seg;
	if (info->ep_attr->max_msg_size == SIZE_MAX && fab->inject >= STK_FAB_STREAM_INJECT_MIN)
		fab->stream_seg = fab->inject;

	size_t nbufs = STK_FAB_RX_BUFS + STK_FAB_TX_BUFS;
	fab->slab_len = nbufs * fab->seg;
	fab->slab = mmap(NULL, fab->slab_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fab->slab == MAP_FAILED) {
		fab->slab = NULL;
		ret = -ENOMEM;
		FSK_WARN("%s: cannot map %zu bytes of buffers", name, fab->slab_len);
		goto fail;
	}
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		FI_TRY(fi_mr_reg(fab->domain, fab->slab, fab->slab_len,
				 FI_SEND | FI_RECV, 0, 0, 0, &fab->mr, NULL), "fi_mr_reg");
		fab->mr_desc = fi_mr_desc(fab->mr);
	}
	for (size_t i = 0; i < nbufs; i++) {
		struct stk_fab_buf *buf = &fab->bufs[i];
		buf->data = fab->slab + i * fab->seg;
		buf->index = (uint32_t)i;
		buf->is_rx = i < STK_FAB_RX_BUFS;
	}
	for (size_t i = STK_FAB_RX_BUFS; i < nbufs; i++)
		stk_fab_buf_put(fab, &fab->bufs[i]);
	for (size_t i = 0; i < STK_FAB_RX_BUFS; i++) {
		ret = post_rx(fab, &fab->bufs[i]);
		if (ret)
			goto fail;
	}
	if (strcmp(name, "shm") == 0)
		shm_note_owner(fab);
	FSK_INFO("%s: RDM endpoint open (provider %s, segment %zu, stream segment %zu, "
		 "inject %zu%s, wait fd %d, order 0x%llx)", key, info->fabric_attr->prov_name,
		 fab->seg, fab->stream_seg, fab->inject, fab->gather ? " gathered" : "",
		 fab->wait_fd, (unsigned long long)info->tx_attr->msg_order);
	*out = fab;
	return 0;
fail:
	fab_close(fab);
	return ret ? ret : -EIO;
}

/* The table key and source address of prov for a connection whose local
 * address is local. 0 or -errno. */
static int fab_lookup_key(const char *prov, const struct sockaddr *local, struct fab_src *src,
			  char key[FAB_KEY_MAX])
{
	if (strlen(prov) >= STK_FAB_NAME_MAX)
		return -ENOSPC;
	memset(src, 0, sizeof(*src));
	if (!stk_fab_per_address(prov)) {
		snprintf(key, FAB_KEY_MAX, "%s", prov);
		return 0;
	}
	fab_src_of(local, src);
	if (!src->len)
		return -EADDRNOTAVAIL;
	fab_key(prov, src, key);
	return 0;
}

/* The entry for key, appended (pending) when absent; -1 when the table is full.
 * Called with table_lock held. */
static int entry_of(const char *key, const char *prov, const struct fab_src *src)
{
	for (unsigned i = 0; i < table_count; i++)
		if (strcmp(table[i].key, key) == 0)
			return (int)i;
	if (table_count == FAB_MAX)
		return -1;
	unsigned i = table_count++;
	memset(&table[i], 0, sizeof(table[i]));
	snprintf(table[i].key, FAB_KEY_MAX, "%s", key);
	snprintf(table[i].prov, STK_FAB_NAME_MAX, "%s", prov);
	table[i].src = *src;
	table[i].pending = true;
	return (int)i;
}

static bool exiting;            /* protected by open_lock: no open starts after */

/* Open entry i if it is still pending. Called with neither lock held. */
static void entry_open(unsigned i)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&table_lock);
	bool pending = i < table_count && table[i].pending && !exiting;
	char prov[STK_FAB_NAME_MAX], key[FAB_KEY_MAX];
	struct fab_src src = table[i].src;
	memcpy(prov, table[i].prov, sizeof(prov));
	memcpy(key, table[i].key, sizeof(key));
	pthread_mutex_unlock(&table_lock);
	if (!pending) {
		pthread_mutex_unlock(&open_lock);
		return;
	}
	if (strcmp(prov, "shm") == 0) {
		static bool exit_hook;
		shm_unlink_regions(false);
		if (!exit_hook)
			exit_hook = atexit(shm_unlink_at_exit) == 0;
	}
	struct stk_fab *fab = NULL;
	struct stk_fi_sigs *sigs = stk_fi_sigs_save();
	stk_fi_enter();
	int ret = fab_open(prov, &src, key, &fab);
	stk_fi_leave();
	stk_fi_sigs_restore(sigs);
	pthread_mutex_lock(&table_lock);
	table[i].fab = ret ? NULL : fab;
	table[i].err = ret;
	table[i].pending = false;
	pthread_mutex_unlock(&table_lock);
	pthread_mutex_unlock(&open_lock);
	if (ret)
		stk_count(STK_C_FAB_OPEN_FAILED);
}

int stk_fab_load(void)
{
	/* the same guard as an open: libfabric's constructors and providers
	 * install signal handlers (stk_fi.h) */
	struct stk_fi_sigs *sigs = stk_fi_sigs_save();
	stk_fi_enter();
	int ret = stk_fi_load();
	stk_fi_leave();
	stk_fi_sigs_restore(sigs);
	return ret;
}

/* The table entry of prov for local (created pending when new), with
 * table_lock held on success (*i < 0: the table is full). key receives the
 * entry's name. 0 or -errno (table_lock not held). */
static int lookup_locked(const char *prov, const struct sockaddr *local, char key[FAB_KEY_MAX],
			 int *i)
{
	struct fab_src src;
	int ret = fab_lookup_key(prov, local, &src, key);
	if (ret)
		return ret;
	pthread_mutex_lock(&table_lock);
	*i = entry_of(key, prov, &src);
	return 0;
}

int stk_fab_get(const char *prov, const struct sockaddr *local, struct stk_fab **out)
{
	*out = NULL;
	char key[FAB_KEY_MAX];
	int i;
	int ret = lookup_locked(prov, local, key, &i);
	if (ret)
		return ret;
	bool pending = i >= 0 && table[i].pending;
	pthread_mutex_unlock(&table_lock);
	if (i < 0)
		return -ENOSPC;
	if (pending)
		entry_open((unsigned)i);
	pthread_mutex_lock(&table_lock);
	*out = table[i].fab;
	ret = table[i].pending ? -ESHUTDOWN : table[i].err;
	pthread_mutex_unlock(&table_lock);
	return ret;
}

/* ---- opening in the background (stk_fab_get_ready) ---- */

static void *bg_open_main(void *arg)
{
	entry_open((unsigned)(uintptr_t)arg);
	return NULL;
}

/* atexit: libfabric's destructors must not run while a background open is
 * inside it; the open holds open_lock, so taking it waits for its end (10 s
 * at most, a safety net: an open takes well under a second). */
#define BG_EXIT_WAIT_S 10

static void bg_open_exit(void)
{
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += BG_EXIT_WAIT_S;
	if (pthread_mutex_timedlock(&open_lock, &end) != 0)
		return;
	exiting = true;
	pthread_mutex_unlock(&open_lock);
}

int stk_fab_get_ready(const char *prov, const struct sockaddr *local, struct stk_fab **out)
{
	*out = NULL;
	char key[FAB_KEY_MAX];
	int i;
	int ret = lookup_locked(prov, local, key, &i);
	if (ret)
		return ret;
	bool start = false;
	if (i < 0) {
		ret = -ENOSPC;
	} else if (table[i].pending) {
		start = !table[i].bg_started;
		table[i].bg_started = true;
		ret = -EAGAIN;
	} else {
		*out = table[i].fab;
		ret = table[i].err;
	}
	static bool exit_hook;
	if (start && !exit_hook)
		exit_hook = atexit(bg_open_exit) == 0;
	pthread_mutex_unlock(&table_lock);
	if (start && (!exit_hook ||
		      stk_thread_start(bg_open_main, (void *)(uintptr_t)i, 8u << 20) != 0))
		FSK_DBG("%s: no background open (the next connection that needs it opens it)",
			key);
	return ret;
}

void stk_fab_foreach_open(void (*fn)(struct stk_fab *fab, void *arg), void *arg)
{
	struct stk_fab *open[FAB_MAX];
	unsigned n = 0;
	pthread_mutex_lock(&table_lock);
	for (unsigned i = 0; i < table_count; i++)
		if (table[i].fab)
			open[n++] = table[i].fab;
	pthread_mutex_unlock(&table_lock);
	for (unsigned i = 0; i < n; i++)
		fn(open[i], arg);
}

void stk_fab_atfork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&table_lock);
}

void stk_fab_atfork_parent(void)
{
	pthread_mutex_unlock(&table_lock);
	pthread_mutex_unlock(&open_lock);
}

void stk_fab_atfork_child(void)
{
	/* The parent's objects stay allocated (a bounded leak per fork): freeing
	 * them would run libfabric close paths on state shared with the parent.
	 * The shm exit hook unlinks regions named after getpid() only, so it never
	 * removes the parent's. */
	table_count = 0;
	memset(table, 0, sizeof(table));
	pthread_mutex_init(&table_lock, NULL);
	pthread_mutex_init(&open_lock, NULL);
}
