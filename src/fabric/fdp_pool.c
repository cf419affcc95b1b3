/* fdp_pool.c - the port's mbuf pool.
 *
 * Why not rte_pktmbuf_pool_create: net_af_xdp (DPDK 22.11, shared-mempool
 * mode) registers the pool as the XDP socket's UMEM, sized as
 * populated_size x object size from the first memory chunk's page. A
 * default pool keeps each object inside one page (IOVA contiguity): with
 * --no-huge (4 KiB pages) and 2368-byte objects that is one object per
 * page, so the pool spans 1.7 times the registered UMEM. The kernel then
 * silently skips every TX and fill descriptor that points past the UMEM
 * (no completion, the mbuf leaks): transmission stops for good after a few
 * hundred frames, once allocation reaches the upper part of the pool. With
 * hugepages the same gaps exist at each page end (fixed in DPDK 24.07,
 * "net/af_xdp: fix umem map size for zero copy"). A packed pool
 * (RTE_MEMPOOL_F_NO_IOVA_CONTIG) in one memory chunk has no gaps; the
 * kernel copies in and out of it, there is no DMA. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <errno.h>

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

struct rte_mempool *fdp_pool_create(const char *name, unsigned int n,
				    uint16_t data_room, int socket, bool packed)
{
	struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = data_room};
	/* per-lcore cache (registered threads only, see fdp_eal_thread):
	 * large enough for a burst in and out, small next to the pool */
	unsigned int cache = n >= 8 * 256 ? 256 : 0;
	struct rte_mempool *mp;
	int err;

	if (!packed)
		return rte_pktmbuf_pool_create(name, n, cache, 0, data_room, socket);
	mp = rte_mempool_create_empty(name, n, (unsigned int)sizeof(struct rte_mbuf) + data_room,
				      cache, sizeof(priv), socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (!mp)
		return NULL;
	err = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (err == 0) {
		rte_pktmbuf_pool_init(mp, &priv);
		err = rte_mempool_populate_default(mp);
	}
	if (err >= 0 && mp->nb_mem_chunks != 1) {
		FDP_WARN(FI_LOG_DOMAIN, "mbuf pool %s: %u memory chunks, the device needs one (raise -m in FI_DPDK_EAL_ARGS?)\n",
			 name, mp->nb_mem_chunks);
		err = -ENOMEM;
	}
	if (err < 0) {
		rte_mempool_free(mp);
		rte_errno = -err;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}
