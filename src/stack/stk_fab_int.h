/* stk_fab's private header: the fabric (struct stk_fab) and what its files
 * share. Contracts in stk_fab.h. */
#ifndef STK_FAB_INT_H
#define STK_FAB_INT_H

#include "stack/stk_fab.h"
#include "stack/stk_fab_bell.h"
#include "stack/stk_fi.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#define AV_CACHE_MAX 256

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
	int wait_fd;            /* what a sleeper polls: the CQ's wait fd, our bell's
				 * FIFO (shm, stk_fab_bell.h), or an epoll set of
				 * both (dpdk) */
	int cq_wait_fd;         /* the CQ's wait fd, -1: none (shm) */
	struct fab_bell_page *bell_page; /* our bell (shm, dpdk), NULL: none */
	int bell_fd;            /* our bell's FIFO (with bell_page) */
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
		struct fab_bell bell;   /* the peer's bell (shm), fd -1: none */
	} av_cache[AV_CACHE_MAX];   /* protected by av_lock */
	uint64_t av_clock;          /* protected by av_lock */
	/* fi_addr → the bell to ring after a post (written under av_lock, read
	 * without: an entry's bell changes only while no connection uses it);
	 * fi_addr values from AV_CACHE_MAX on are looked up in av_cache */
	struct fab_bell *ring_map[AV_CACHE_MAX];
	bool peer_bells;            /* some peer has a bell: look after each post */
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

/* Called with cq_lock held (or before the endpoint is published). */
static inline int fab_post_rx(struct stk_fab *fab, struct stk_fab_buf *buf)
{
	ssize_t ret = fi_recv(fab->ep, buf->data, fab->seg, fab->mr_desc, FI_ADDR_UNSPEC,
			      &buf->ctx);
	if (ret == -FI_EAGAIN && fab->repost_count < STK_FAB_RX_BUFS) {
		fab->repost[fab->repost_count++] = buf->index;
		return 0;
	}
	if (ret)
		STK_WARN("fi_recv on %s: %s", fab->name, stk_fi.strerror((int)-ret));
	return (int)ret;
}

/* Open the endpoint of provider name (stk_fab_open.c): src is where a
 * per-address provider listens, key the table's name of it (for the log).
 * 0 and *out, or -errno (logged). */
int fab_open(const char *name, const struct fab_src *src, const char *key, struct stk_fab **out);

/* Take everything the CQ holds, waiting for the CQ lock (stk_fab_io.c):
 * the number of completions handled. */
int fab_progress_locked(struct stk_fab *fab);
/* The bell of the peer at dest, or NULL (stk_fab_addr.c; after a post). */
struct fab_bell *fab_bell_of_slow(struct stk_fab *fab, fi_addr_t dest);
/* Inside a batch (stk_fab_batch_begin): note the bell for its end; false
 * when the batch has no room left for it (ring now). */
bool fab_batch_defer(struct fab_bell *bell);
extern __thread unsigned fab_batch_depth;
static inline void fab_ring_after_post(struct stk_fab *fab, fi_addr_t dest)
{
	if (!__atomic_load_n(&fab->peer_bells, __ATOMIC_RELAXED))
		return;
	struct fab_bell *bell = dest < AV_CACHE_MAX
					? __atomic_load_n(&fab->ring_map[dest], __ATOMIC_ACQUIRE)
					: fab_bell_of_slow(fab, dest);
	/* batched on shm only (where it was measured); dpdk rings after each
	 * post */
	if (bell && !(fab_batch_depth && fab->is_shm && fab_batch_defer(bell)))
		fab_bell_ring(bell);
}

/* The region name of a shm address ("fi_shm://<pid>:<n>:<m>", NUL included),
 * or NULL when addr is not one. */
const char *fab_shm_region_of(const void *addr, size_t len);

/* shm (stk_fab_addr.c): note the owner of our own region (the endpoint
 * enabled); unlink our regions (ours_only) or also those of processes that
 * exited; the atexit handler that unlinks ours. */
void fab_shm_note_owner(struct stk_fab *fab);
void fab_shm_unlink_regions(bool ours_only);
void fab_shm_unlink_at_exit(void);

#endif
