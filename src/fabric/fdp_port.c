/* fdp_port.c - the process's DPDK port: set-up at the first fi_domain,
 * shutdown at provider cleanup.
 *
 * One port per process (FI_DPDK_DEVICE), one RX and one TX queue, shared by
 * every domain and endpoint: endpoints are told apart by UDP port. The
 * port's state and locks are described in fdp_port_dev.h. */
#include "config.h"

#include "fabric/fdp_eal.h"
#include "fabric/fdp_port_dev.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#define RING_SIZE 1024
#define POOL_MAX_BYTES (32u << 20)
#define HOOK_IDLE_GAP_NS 2000
/* At cleanup, wait this long after the last transmitted frame: a peer on a
 * shared-memory device (memif) loses what it has not yet polled when our
 * side of the connection goes away with the process. */
#define LINGER_NS (100ull * 1000 * 1000)

static pthread_mutex_t port_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct fdp_port *the_port;

/* ---------------------------------------------------------------- setup */

/* The IP MTU of our frames (p->mtu) within the device's limits; returns
 * the MTU the device is configured with. */
static size_t port_choose_mtu(struct fdp_port *p, const struct rte_eth_dev_info *info)
{
	size_t dev_mtu;

	p->mtu = dev_mtu = fdp_params.mtu;
	if (info->max_mtu && dev_mtu > info->max_mtu)
		dev_mtu = info->max_mtu;
	if (info->max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN &&
	    dev_mtu > info->max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN)
		dev_mtu = info->max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN;
	/* net_memif carries any frame that fits one of its ring buffers
	 * (bsize, which fdp_params.devargs sizes for the MTU): the 1518-byte
	 * limit it reports is nominal (FDP_MEMIF_MTU). The device is
	 * configured within its limit; our frames use ours. */
	if (strcmp(info->driver_name, "net_memif") != 0)
		p->mtu = dev_mtu;
	else if (p->mtu + RTE_ETHER_HDR_LEN > fdp_memif_bsize())
		p->mtu = fdp_memif_bsize() - RTE_ETHER_HDR_LEN;
	if (p->mtu != fdp_params.mtu)
		FDP_WARN(FI_LOG_DOMAIN, "FI_DPDK_MTU=%zu: %s allows at most %zu, using that\n",
			 fdp_params.mtu, fdp_params.device, p->mtu);
	return dev_mtu;
}

/* Checksum offloads: what the device computes on TX and verifies on RX. */
static void port_choose_offloads(struct fdp_port *p, const struct rte_eth_dev_info *info,
				 struct rte_eth_conf *conf)
{
	if ((info->tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) &&
	    (info->tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)) {
		conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
					 RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		p->tx_ip_csum = p->tx_udp_csum = true;
	}
	/* A memif "link" is shared memory between two processes of one host:
	 * nothing on it can corrupt a frame, and the UDP checksum (computed
	 * by the sender and verified by the receiver, memif offloads neither)
	 * is a third of a sender's cycles at 16 KiB messages. IPv4 allows
	 * UDP checksum 0 ("none"), which every receiver here accepts. The IP
	 * header checksum (20 bytes) stays. */
	if (!p->tx_udp_csum && strcmp(info->driver_name, "net_memif") == 0)
		p->tx_udp_csum_none = true;
	if ((info->rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) &&
	    (info->rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
		conf->rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
					 RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		p->rx_csum = true;
	}
}

/* The mbuf pool for rings of nb_rx and nb_tx descriptors. */
static int port_pool(struct fdp_port *p, const struct rte_eth_dev_info *info,
		     uint16_t nb_rx, uint16_t nb_tx)
{
	char pool_name[RTE_MEMPOOL_NAMESIZE];
	uint32_t frame_max = (uint32_t)p->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 4;
	unsigned int nb_mbufs = 2u * nb_rx + 2u * nb_tx + 1024;

	/* af_packet refuses mbufs smaller than its 2 KiB ring frames */
	if (frame_max < RTE_MBUF_DEFAULT_DATAROOM)
		frame_max = RTE_MBUF_DEFAULT_DATAROOM;
	/* Jumbo frames: the pool keeps within POOL_MAX_BYTES (EAL memory is
	 * 64 MiB) as long as the rings and a burst's worth stay covered. */
	if ((size_t)nb_mbufs * (RTE_PKTMBUF_HEADROOM + frame_max) > POOL_MAX_BYTES) {
		unsigned int fit = (unsigned int)(POOL_MAX_BYTES / (RTE_PKTMBUF_HEADROOM + frame_max));
		unsigned int need = (unsigned int)nb_rx + nb_tx + 1024;

		nb_mbufs = fit > need ? fit : need;
	}
	fdp_eal_pool_name(p->port_id, pool_name, sizeof(pool_name));
	/* a previous fi_domain that failed after this point left it behind */
	p->pool = rte_mempool_lookup(pool_name);
	if (!p->pool)
		p->pool = fdp_pool_create(pool_name, nb_mbufs,
			(uint16_t)(RTE_PKTMBUF_HEADROOM + frame_max), (int)rte_socket_id(),
			strcmp(info->driver_name, "net_af_xdp") == 0);
	if (!p->pool) {
		FDP_WARN(FI_LOG_DOMAIN, "mbuf pool of %u x %u bytes: %s (raise -m in FI_DPDK_EAL_ARGS?)\n",
			 nb_mbufs, frame_max, rte_strerror(rte_errno));
		return -FI_ENOMEM;
	}
	return 0;
}

/* One RX and one TX queue, then start the device. */
static int port_start(struct fdp_port *p, uint16_t nb_rx, uint16_t nb_tx)
{
	int ret;

	ret = rte_eth_rx_queue_setup(p->port_id, 0, nb_rx,
				     (unsigned int)rte_eth_dev_socket_id(p->port_id),
				     NULL, p->pool);
	if (ret == 0)
		ret = rte_eth_tx_queue_setup(p->port_id, 0, nb_tx,
					     (unsigned int)rte_eth_dev_socket_id(p->port_id),
					     NULL);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "queue setup on %s: %s\n",
			 fdp_params.device, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	ret = rte_eth_dev_start(p->port_id);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "rte_eth_dev_start(%s): %s\n",
			 fdp_params.device, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	/* Not every virtual device implements these; neither failure matters. */
	rte_eth_promiscuous_disable(p->port_id);
	rte_eth_allmulticast_disable(p->port_id);
	rte_eth_macaddr_get(p->port_id, &p->mac);
	return 0;
}

static int port_configure(struct fdp_port *p)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nb_rx = RING_SIZE, nb_tx = RING_SIZE;
	uint64_t t0 = fdp_now_ns(); /* the set-up's duration is logged (info) */
	int ret;

	ret = rte_eth_dev_info_get(p->port_id, &info);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "rte_eth_dev_info_get(%s): %s\n",
			 fdp_params.device, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = (uint32_t)port_choose_mtu(p, &info);
	port_choose_offloads(p, &info, &conf);
	ret = rte_eth_dev_configure(p->port_id, 1, 1, &conf);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "rte_eth_dev_configure(%s, mtu %zu): %s\n",
			 fdp_params.device, p->mtu, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &nb_rx, &nb_tx);
	if (ret)
		nb_rx = nb_tx = RING_SIZE;
	ret = port_pool(p, &info, nb_rx, nb_tx);
	if (ret == 0)
		ret = port_start(p, nb_rx, nb_tx);
	if (ret)
		return ret;
	FDP_INFO(FI_LOG_DOMAIN,
		 "port %s: mac " RTE_ETHER_ADDR_PRT_FMT " mtu %zu csum offload tx %d rx %d%s; "
		 "set up in %llu ms\n",
		 fdp_params.device, RTE_ETHER_ADDR_BYTES(&p->mac), p->mtu,
		 p->tx_udp_csum, p->rx_csum,
		 p->tx_udp_csum_none ? " (shared-memory link: no UDP checksum)" : "",
		 (unsigned long long)((fdp_now_ns() - t0) / 1000000));
	return 0;
}

int fdp_port_get(struct fdp_port **out)
{
	struct fdp_libprint libprint;
	struct fdp_fd_floor fd_floor;
	struct fdp_port *p;
	int ret;

	pthread_mutex_lock(&port_mutex);
	if (the_port) {
		the_port->ref++;
		*out = the_port;
		pthread_mutex_unlock(&port_mutex);
		return 0;
	}
	ret = fdp_eal_start();
	if (ret)
		goto out;
	p = calloc(1, sizeof(*p));
	if (!p) {
		ret = -FI_ENOMEM;
		goto out;
	}
	p->ep_by_port = calloc(65536, sizeof(*p->ep_by_port));
	p->scratch = malloc(65536);
	if (!p->ep_by_port || !p->scratch) {
		ret = -FI_ENOMEM;
		goto free;
	}
	p->port_id = fdp_eal_port_id();
	fdp_lock_init(&p->rx_lock);
	fdp_lock_init(&p->tx_lock);
	fdp_lock_init(&p->ep_lock);
	p->rng = fdp_params.seed ? fdp_params.seed :
		 (fdp_now_ns() ^ ((uint64_t)getpid() << 32));
	if (!p->rng)
		p->rng = 1;
	p->hook_gap_tsc = rte_get_tsc_hz() / (1000000000ull / HOOK_IDLE_GAP_NS);
	p->faults = fdp_params.drop > 0 || fdp_params.dup > 0 ||
		    fdp_params.reorder > 0;
	p->next_ephemeral = (uint16_t)(FDP_EPHEMERAL_FIRST + (p->rng % 8192));
	/* net_af_xdp loads its XDP program here: libbpf's and libxdp's lines
	 * go to our log, not the application's stderr */
	fdp_libprint_begin(&libprint);
	fdp_fd_floor_begin(&fd_floor);
	ret = port_configure(p);
	fdp_fd_floor_end(&fd_floor);
	fdp_libprint_end(&libprint);
	if (ret)
		goto free;
	ret = fdp_progress_start(p);
	if (ret)
		goto free;
	p->ref = 1;
	the_port = p;
	*out = p;
	goto out;
free:
	/* A device that failed to start stays configured in DPDK; a later
	 * fi_domain retries port_configure on it. */
	free(p->ep_by_port);
	free(p->scratch);
	free(p);
out:
	pthread_mutex_unlock(&port_mutex);
	return ret;
}

void fdp_port_put(struct fdp_port *port)
{
	/* The port lives until provider cleanup: DPDK devices cannot be
	 * re-started cheaply, and memif peers would see a link flap. */
	pthread_mutex_lock(&port_mutex);
	if (port->ref > 0)
		port->ref--;
	pthread_mutex_unlock(&port_mutex);
}


static bool any_tx_pending(struct fdp_port *p)
{
	bool pending = false;
	size_t i;

	fdp_lock(&p->ep_lock);
	for (i = 0; i < p->hook_count && !pending; i++) {
		struct fdp_ep *ep = p->hook_eps[i];

		fdp_lock(&ep->lock);
		pending = ep->enabled && ep->hooks && ep->hooks->tx_pending &&
			  ep->hooks->tx_pending(ep);
		fdp_unlock(&ep->lock);
	}
	fdp_unlock(&p->ep_lock);
	return pending;
}

/* The process exits with endpoints open: as fi_close would, wait (at most
 * FDP_CLOSE_LINGER_NS) for the peers to acknowledge what was sent, then
 * take the frames that arrived (a last data frame is acked from here) and
 * have every endpoint send what its peers are owed, or their last sends
 * would complete only when they declare us unreachable. */
static void flush_eps(struct fdp_port *p)
{
	uint64_t start = fdp_now_ns();

	fdp_port_progress(p);
	while (any_tx_pending(p) && fdp_now_ns() - start < FDP_CLOSE_LINGER_NS) {
		if (fdp_port_progress(p) == 0)
			sched_yield();
	}
	fdp_port_each_hook_ep(p, true, fdp_now_ns());
}

/* At exit the port lock may be held by a set-up the exit interrupted (a signal
 * handler that calls exit() from inside it, on this thread or another): wait a
 * bounded time for it, else leave the port to the process's end (its files are
 * reclaimed at the next start) rather than hang the exit. */
static bool lock_for_shutdown(void)
{
	for (int i = 0; i < 200; i++) {
		if (pthread_mutex_trylock(&port_mutex) == 0)
			return true;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};

		nanosleep(&ts, NULL);
	}
	return false;
}

void fdp_port_shutdown(void)
{
	struct fdp_port *p;
	uint64_t since;

	if (fdp_eal_foreign())
		return; /* a forked child: the port, its thread and queues are the parent's */
	if (!lock_for_shutdown()) {
		FDP_WARN(FI_LOG_CORE, "exit during the port's set-up: port left as is\n");
		return;
	}
	p = the_port;
	the_port = NULL;
	pthread_mutex_unlock(&port_mutex);
	if (!p)
		return;
	/* the progress thread must not poll a device being torn down */
	fdp_progress_stop(p);
	flush_eps(p);
	since = p->last_tx_tsc ? (rte_rdtsc() - p->last_tx_tsc) / (rte_get_tsc_hz() / 1000000 + 1) * 1000 : LINGER_NS;
	if (since < LINGER_NS) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(LINGER_NS - since)};

		nanosleep(&ts, NULL);
	}
	fdp_lock(&p->tx_lock);
	if (p->held) {
		rte_pktmbuf_free(p->held);
		p->held = NULL;
	}
	fdp_unlock(&p->tx_lock);
	FDP_INFO(FI_LOG_DOMAIN,
		 "port stats: rx %" PRIu64 " tx %" PRIu64 " tx-full %" PRIu64
		 " not-ours %" PRIu64 " no-ep %" PRIu64 " arp req/rep/rx %" PRIu64
		 "/%" PRIu64 "/%" PRIu64 " injected drop/dup/reorder %" PRIu64
		 "/%" PRIu64 "/%" PRIu64 " igmp tx/queries %" PRIu64 "/%" PRIu64
		 " multicast delivered %" PRIu64 "\n",
		 p->stats.rx_frames, p->stats.tx_frames, p->stats.tx_full,
		 p->stats.rx_not_ours, p->stats.rx_no_ep, p->stats.arp_req_tx,
		 p->stats.arp_rep_tx, p->stats.arp_rx, p->stats.inj_drop,
		 p->stats.inj_dup, p->stats.inj_reorder, p->stats.igmp_tx,
		 p->stats.igmp_query_rx, p->stats.rx_mc_delivered);
	{
		struct rte_eth_stats es;

		if (rte_eth_stats_get(p->port_id, &es) == 0)
			FDP_INFO(FI_LOG_DOMAIN,
				 "device stats: ipackets %" PRIu64 " opackets %" PRIu64
				 " imissed %" PRIu64 " ierrors %" PRIu64 " oerrors %" PRIu64
				 " rx_nombuf %" PRIu64 "\n", es.ipackets, es.opackets,
				 es.imissed, es.ierrors, es.oerrors, es.rx_nombuf);
	}
	for (int i = 1; i < FDP_DROP__COUNT; i++)
		if (p->stats.rx_drop[i])
			FDP_INFO(FI_LOG_DOMAIN, "rx dropped (%s): %" PRIu64 "\n",
				 fdp_drop_name(i), p->stats.rx_drop[i]);
	/* the device and its pool are closed by fdp_eal_cleanup, next */
	free(p->ep_by_port);
	free(p->scratch);
	free(p->hook_eps);
	free(p);
}

size_t fdp_port_mtu(const struct fdp_port *port)
{
	return port->mtu;
}

void fdp_port_stats(struct fdp_port *port, struct fdp_port_stats *out)
{
	fdp_lock(&port->rx_lock);
	fdp_lock(&port->tx_lock);
	*out = port->stats;
	fdp_unlock(&port->tx_lock);
	fdp_unlock(&port->rx_lock);
}

struct fdp_progress **fdp_port_progress_slot(struct fdp_port *port)
{
	return &port->progress;
}
