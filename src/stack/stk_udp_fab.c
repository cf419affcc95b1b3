/* The process's raw UDP fabric on the dpdk provider (stk_udp.h): fabric,
 * domain, AV and one completion queue shared by every accelerated UDP
 * socket's endpoint. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_counters.h"
#include "stack/stk_fi.h"
#include "stack/stk_log.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define UDP_AV_MAX 4096          /* destinations and sources known (a power of 2) */
#define UDP_CQ_SIZE 8192
#define UDP_DRAIN_BATCH 32
#define UDP_DRAIN_ROUNDS 8

struct stk_udp_fab {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_eq *eq;                /* joins complete here (fi_join) */
	int wait_fd;
	uint32_t ip, mask;                /* network order */
	size_t max_msg;
	pthread_mutex_t cq_lock;          /* held while draining and delivering */
	pthread_mutex_t av_lock;
	/* protected by av_lock (addr read without it for an index below count) */
	struct sockaddr_in addr[UDP_AV_MAX]; /* by AV index */
	uint32_t count;                   /* atomic: indices below it may be in addr */
	uint32_t known;                   /* entries in hash (at most UDP_AV_MAX / 2) */
	uint16_t hash[2 * UDP_AV_MAX];    /* key → index + 1, open addressing */
};

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stk_udp_fab *the_fab;   /* atomic once set */
static int open_error;                /* protected by open_lock: cached failure */

/* The objects opened so far, closed in reverse order of opening. */
static void fab_free(struct stk_udp_fab *fab)
{
	struct fid *opened[] = {
		fab->eq ? &fab->eq->fid : NULL, fab->cq ? &fab->cq->fid : NULL,
		fab->av ? &fab->av->fid : NULL, fab->domain ? &fab->domain->fid : NULL,
		fab->fabric ? &fab->fabric->fid : NULL,
	};
	for (size_t i = 0; i < sizeof(opened) / sizeof(opened[0]); i++)
		if (opened[i])
			fi_close(opened[i]);
	if (fab->info)
		stk_fi.freeinfo(fab->info);
	free(fab);
}

/* The port's prefix from FI_DPDK_IP ("A.B.C.D/N", /24 without one). */
static uint32_t subnet_mask(void)
{
	const char *v = getenv("FI_DPDK_IP");
	const char *slash = v ? strchr(v, '/') : NULL;
	unsigned long bits = 24;
	if (slash) {
		char *end;
		unsigned long n = strtoul(slash + 1, &end, 10);
		if (end != slash + 1 && *end == '\0' && n <= 32)
			bits = n;
		else
			STK_WARN("FI_DPDK_IP=%s: bad prefix, /24 assumed for UDP routing", v);
	}
	return bits == 0 ? 0 : htonl(~0u << (32 - bits));
}

static int fab_getinfo(struct stk_udp_fab *fab)
{
	struct fi_info *hints = stk_fi.dupinfo(NULL);
	if (!hints)
		return -ENOMEM;
	hints->caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_SOURCE_ERR | FI_MULTICAST;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->ep_attr->protocol = FI_PROTO_UDP;
	hints->fabric_attr->prov_name = strdup("dpdk");
	int ret = stk_fi.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fab->info);
	stk_fi.freeinfo(hints);
	if (ret) {
		fab->info = NULL;
		STK_WARN("dpdk UDP: fi_getinfo: %s", stk_fi.strerror(-ret));
		return ret;
	}
	if (fab->info->ep_attr->protocol != FI_PROTO_UDP || !fab->info->src_addr ||
	    fab->info->src_addrlen < sizeof(struct sockaddr_in)) {
		STK_WARN("dpdk UDP: the provider offers no raw UDP endpoint");
		return -ENOPROTOOPT;
	}
	return 0;
}

static int fab_open(struct stk_udp_fab **out)
{
	int ret = stk_fi_load();
	if (ret)
		return ret;
	struct stk_udp_fab *fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -ENOMEM;
	fab->wait_fd = -1;
	pthread_mutex_init(&fab->cq_lock, NULL);
	pthread_mutex_init(&fab->av_lock, NULL);
	struct stk_fi_sigs *sigs = stk_fi_sigs_save();
	ret = fab_getinfo(fab);
	if (!ret)
		ret = stk_fi.fabric(fab->info->fabric_attr, &fab->fabric, NULL);
	if (!ret)
		ret = fi_domain(fab->fabric, fab->info, &fab->domain, NULL);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = UDP_AV_MAX };
	if (!ret)
		ret = fi_av_open(fab->domain, &av_attr, &fab->av, NULL);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG, .size = UDP_CQ_SIZE,
				      .wait_obj = FI_WAIT_FD };
	if (!ret)
		ret = fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL);
	if (!ret && fi_control(&fab->cq->fid, FI_GETWAIT, &fab->wait_fd) != 0)
		fab->wait_fd = -1;
	struct fi_eq_attr eq_attr = { .size = 64, .wait_obj = FI_WAIT_NONE };
	if (!ret)
		ret = fi_eq_open(fab->fabric, &eq_attr, &fab->eq, NULL);
	stk_fi_sigs_restore(sigs);
	if (ret) {
		STK_WARN("dpdk UDP: opening the fabric: %s; UDP sockets use the kernel",
			 stk_fi.strerror(ret < 0 ? -ret : ret));
		fab_free(fab);
		return ret < 0 ? ret : -EIO;
	}
	fab->ip = ((const struct sockaddr_in *)fab->info->src_addr)->sin_addr.s_addr;
	fab->mask = subnet_mask();
	fab->max_msg = fab->info->ep_attr->max_msg_size;
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &fab->ip, ip, sizeof(ip));
	STK_INFO("dpdk UDP: raw UDP endpoints on %s (datagrams up to %zu bytes, wait fd %d)", ip,
		 fab->max_msg, fab->wait_fd);
	*out = fab;
	return 0;
}

int stk_udp_fab_get(struct stk_udp_fab **out)
{
	struct stk_udp_fab *fab = __atomic_load_n(&the_fab, __ATOMIC_ACQUIRE);
	if (fab) {
		*out = fab;
		return 0;
	}
	pthread_mutex_lock(&open_lock);
	int ret = open_error;
	if (!the_fab && !ret) {
		ret = fab_open(&fab);
		if (ret) {
			open_error = ret;
			stk_count(STK_C_FAB_OPEN_FAILED);
		} else {
			__atomic_store_n(&the_fab, fab, __ATOMIC_RELEASE);
		}
	}
	fab = the_fab;
	pthread_mutex_unlock(&open_lock);
	if (!fab)
		return ret;
	*out = fab;
	return 0;
}

void stk_udp_fab_atfork_child(void)
{
	pthread_mutex_init(&open_lock, NULL);
	the_fab = NULL;
	open_error = -ECHILD;
}

struct stk_udp_fab *stk_udp_fab_current(void)
{
	return __atomic_load_n(&the_fab, __ATOMIC_ACQUIRE);
}

void stk_udp_fab_subnet(const struct stk_udp_fab *fab, uint32_t *ip, uint32_t *mask)
{
	*ip = fab->ip;
	*mask = fab->mask;
}

size_t stk_udp_fab_max_msg(const struct stk_udp_fab *fab)
{
	return fab->max_msg;
}

unsigned stk_udp_fab_rx_max(const struct stk_udp_fab *fab)
{
	size_t size = fab->info->rx_attr ? fab->info->rx_attr->size : 0;
	return size && size < UINT32_MAX ? (unsigned)size : UINT32_MAX;
}

/* ---- addresses ---- */

static unsigned hash_of(uint64_t key)
{
	return (unsigned)((key * 0x9e3779b97f4a7c15ull) >> 40) & (2 * UDP_AV_MAX - 1);
}

/* The AV index of dest, inserted when new. 0 or -ENOBUFS (full), -EIO. */
static int av_index(struct stk_udp_fab *fab, const struct sockaddr_in *dest, uint32_t *out)
{
	uint64_t key = stk_udp_key(dest);
	int ret = 0;
	pthread_mutex_lock(&fab->av_lock);
	unsigned h = hash_of(key);
	for (;; h = (h + 1) & (2 * UDP_AV_MAX - 1)) {
		uint16_t slot = fab->hash[h];
		if (slot == 0)
			break;
		if (stk_udp_key(&fab->addr[slot - 1]) == key) {
			*out = slot - 1u;
			goto done;
		}
	}
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = dest->sin_port,
				  .sin_addr = dest->sin_addr };
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	if (fab->known >= UDP_AV_MAX / 2) {
		ret = -ENOBUFS;
		goto done;
	}
	if (fi_av_insert(fab->av, &sa, 1, &fa, 0, NULL) != 1) {
		ret = -EIO;
		goto done;
	}
	if (fa >= UDP_AV_MAX - 1) {
		fi_av_remove(fab->av, &fa, 1, 0);
		ret = -ENOBUFS;
		goto done;
	}
	/* an index may come after ones fi_join took for its groups (never a
	 * source, not in the table: their slots stay empty) */
	fab->addr[fa] = sa;
	fab->hash[h] = (uint16_t)(fa + 1);
	fab->known++;
	if (fa >= fab->count)
		__atomic_store_n(&fab->count, (uint32_t)fa + 1, __ATOMIC_RELEASE);
	*out = (uint32_t)fa;
done:
	pthread_mutex_unlock(&fab->av_lock);
	return ret;
}

/* dest's AV index through the socket's one-entry cache. */
static int dest_index(struct stk_udp_fab *fab, struct stk_udp *udp,
		      const struct sockaddr_in *dest, uint32_t *out)
{
	uint64_t key = stk_udp_key(dest);
	uint64_t cached = __atomic_load_n(&udp->tx_cache, __ATOMIC_RELAXED);
	if (cached && cached >> 16 == key) {
		*out = (uint32_t)(cached & 0xffff) - 1;
		return 0;
	}
	int ret = av_index(fab, dest, out);
	if (ret == 0 && *out < 0xffff)
		__atomic_store_n(&udp->tx_cache, key << 16 | (*out + 1), __ATOMIC_RELAXED);
	return ret;
}

/* ---- endpoints ---- */

int stk_udp_fab_open_ep(struct stk_udp_fab *fab, struct stk_udp *udp)
{
	struct fi_info *info = stk_fi.dupinfo(fab->info);
	if (!info)
		return -ENOMEM;
	memcpy(info->src_addr, &udp->local, sizeof(udp->local));
	int ret = fi_endpoint(fab->domain, info, &udp->ep, udp);
	stk_fi.freeinfo(info);
	if (ret) {
		udp->ep = NULL;
		return ret;
	}
	ret = fi_ep_bind(udp->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(udp->ep, &fab->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(udp->ep, &fab->eq->fid, 0);
	if (!ret)
		ret = fi_enable(udp->ep);
	for (unsigned i = 0; !ret && i < udp->nslots; i++)
		ret = stk_udp_fab_repost(udp, &udp->slots[i]);
	if (ret) {
		fi_close(&udp->ep->fid);
		udp->ep = NULL;
	}
	return ret;
}

int stk_udp_fab_repost(struct stk_udp *udp, struct stk_udp_slot *slot)
{
	ssize_t ret = fi_recv(udp->ep, slot->data, udp->slot_size, NULL, FI_ADDR_UNSPEC,
			      &slot->ctx);
	if (ret)
		STK_WARN("dpdk UDP: fi_recv: %s", stk_fi.strerror((int)-ret));
	return (int)ret;
}

/* ---- completions ---- */

/* A datagram for slot from src (len bytes), or len UINT32_MAX: the receive
 * failed (the reader skips and reposts it). cq_lock held. */
static void deliver(struct stk_udp_slot *slot, uint32_t len, const struct sockaddr_in *src)
{
	struct stk_udp *udp = slot->owner;
	if (udp->dead)
		return;
	slot->len = len;
	if (src)
		slot->src = *src;
	else
		memset(&slot->src, 0, sizeof(slot->src));
	clock_gettime(CLOCK_REALTIME, &slot->stamp);
	__atomic_store_n(&udp->done, udp->done + 1, __ATOMIC_RELEASE);
	__atomic_fetch_add(&udp->generation, 1, __ATOMIC_RELEASE);
	if (len != UINT32_MAX)
		stk_count(STK_C_DATAGRAMS_RX_DPDK);
	stk_watch_notify(&udp->watch);
}

static void take_error(struct stk_udp_fab *fab)
{
	struct sockaddr_in src;
	struct fi_cq_err_entry err = { .err_data = &src, .err_data_size = sizeof(src) };
	if (fi_cq_readerr(fab->cq, &err, 0) != 1 || !(err.flags & FI_RECV) || !err.op_context)
		return;
	struct stk_udp_slot *slot = err.op_context;
	if (err.err == FI_EADDRNOTAVAIL && err.err_data_size >= sizeof(src)) {
		deliver(slot, (uint32_t)err.len, &src);
		return;
	}
	if (err.err == FI_ECANCELED)
		return;
	stk_count(STK_C_FAB_CQ_ERRORS);
	deliver(slot, UINT32_MAX, NULL);
}

static int drain_locked(struct stk_udp_fab *fab)
{
	struct fi_cq_msg_entry e[UDP_DRAIN_BATCH];
	fi_addr_t from[UDP_DRAIN_BATCH];
	int total = 0;
	for (int round = 0; round < UDP_DRAIN_ROUNDS; round++) {
		ssize_t n = fi_cq_readfrom(fab->cq, e, UDP_DRAIN_BATCH, from);
		if (n == -FI_EAVAIL) {
			take_error(fab);
			total++;
			continue;
		}
		if (n <= 0)
			break;
		uint32_t known = __atomic_load_n(&fab->count, __ATOMIC_ACQUIRE);
		for (ssize_t i = 0; i < n; i++) {
			if (!(e[i].flags & FI_RECV) || !e[i].op_context)
				continue;
			const struct sockaddr_in *src = from[i] < known &&
								fab->addr[from[i]].sin_family == AF_INET
							? &fab->addr[from[i]]
							: NULL;
			deliver(e[i].op_context, (uint32_t)e[i].len, src);
		}
		total += (int)n;
		if (n < UDP_DRAIN_BATCH)
			break;
	}
	return total;
}

int stk_udp_fab_progress(struct stk_udp_fab *fab)
{
	if (pthread_mutex_trylock(&fab->cq_lock) != 0)
		return 0;
	int n = drain_locked(fab);
	pthread_mutex_unlock(&fab->cq_lock);
	return n;
}

void stk_udp_fab_close_ep(struct stk_udp_fab *fab, struct stk_udp *udp)
{
	pthread_mutex_lock(&fab->cq_lock);
	udp->dead = true;
	if (udp->ep)
		fi_close(&udp->ep->fid);
	udp->ep = NULL;
	drain_locked(fab); /* the others' completions delivered, ours dropped */
	pthread_mutex_unlock(&fab->cq_lock);
}

/* ---- multicast ---- */

int stk_udp_fab_join(struct stk_udp_fab *fab, struct stk_udp *udp, uint32_t group,
		     struct fid_mc **out)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = group };
	pthread_mutex_lock(&fab->av_lock);
	int ret = fi_join(udp->ep, &sa, 0, out, NULL);
	if (ret == 0) {
		struct fi_eq_entry entry;
		uint32_t event;
		(void)fi_eq_read(fab->eq, &event, &entry, sizeof(entry), 0); /* FI_JOIN_COMPLETE */
	}
	pthread_mutex_unlock(&fab->av_lock);
	return ret;
}

void stk_udp_fab_leave(struct stk_udp_fab *fab, struct fid_mc *mc)
{
	pthread_mutex_lock(&fab->av_lock);
	fi_close(&mc->fid);
	pthread_mutex_unlock(&fab->av_lock);
}

/* ---- sending ---- */

ssize_t stk_udp_fab_send(struct stk_udp_fab *fab, struct stk_udp *udp,
			 const struct sockaddr_in *dest, const struct iovec *iov, int iovcnt,
			 bool dontwait)
{
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > fab->max_msg)
		return -EMSGSIZE;
	uint32_t index;
	int ret = dest_index(fab, udp, dest, &index);
	if (ret)
		return ret;
	struct iovec one;
	if (iovcnt > 4) { /* the provider gathers 4: stage the rest */
		uint8_t *stage = stk_wait_scratch(3, len ? len : 1);
		if (!stage)
			return -ENOMEM;
		size_t off = 0;
		for (int i = 0; i < iovcnt; i++) {
			memcpy(stage + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
		one.iov_base = stage;
		one.iov_len = len;
		iov = &one;
		iovcnt = 1;
	}
	struct fi_msg msg = { .msg_iov = iov, .iov_count = (size_t)iovcnt, .addr = index };
	uint64_t deadline = 0;
	for (;;) {
		ssize_t r = fi_sendmsg(udp->ep, &msg, FI_INJECT);
		if (r == 0) {
			stk_count(STK_C_DATAGRAMS_TX_DPDK);
			return (ssize_t)len;
		}
		if (r != -FI_EAGAIN)
			return r == -FI_EHOSTUNREACH ? -EHOSTUNREACH : (r < 0 ? r : -EIO);
		uint64_t now = stk_now_ns();
		if (!deadline)
			deadline = now + (dontwait ? STK_UDP_TX_RETRY_NS / 100 : STK_UDP_TX_RETRY_NS);
		else if (now > deadline)
			return dontwait ? -EAGAIN : -ENOBUFS;
		stk_udp_fab_progress(fab);
	}
}

/* ---- sleeping ---- */

int stk_udp_fab_wait_fd(const struct stk_udp_fab *fab)
{
	return fab->wait_fd;
}

bool stk_udp_fab_trywait(struct stk_udp_fab *fab)
{
	struct fid *fids[1] = { &fab->cq->fid };
	return fi_trywait(fab->fabric, fids, 1) == 0;
}

void stk_udp_fab_quiesce(struct stk_udp_fab *fab)
{
	pthread_mutex_lock(&fab->cq_lock);
	pthread_mutex_unlock(&fab->cq_lock);
}
