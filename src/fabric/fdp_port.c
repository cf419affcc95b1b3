/* fdp_port.c - the process's DPDK port.
 *
 * One port per process (FI_DPDK_DEVICE), one RX and one TX queue, shared by
 * every domain and endpoint: endpoints are told apart by UDP port. RX runs
 * under rx_lock taken with trylock by whichever thread drives progress; TX,
 * the ARP cache and fault injection run under tx_lock.
 *
 * TX burst contract (rte_eth_tx_burst): mbufs not accepted stay ours; we
 * free them and report -FI_EAGAIN. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"
#include "fabric/fdp_port.h"

#include <arpa/inet.h>
#include <endian.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_errno.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define RX_BURST 32
#define RX_BURSTS_PER_CALL 4
#define RING_SIZE 1024
#define POOL_MAX_BYTES (32u << 20)
#define ARP_SLOTS 256           /* power of two */
#define ARP_TRIES 10
/* Requests are retried after 1, 2, 4 ... 256 ms: a request lost while a
 * link comes up costs a millisecond, an absent peer about 0.5 s in all. */
#define ARP_RETRY_FIRST_NS (1000ull * 1000)
#define ARP_HOLDDOWN_NS (1000ull * 1000 * 1000)
/* While the port's link is down, requests are lost before anyone can
 * answer them, so they are not counted: a memif client's link comes up
 * only once the EAL interrupt thread has run the handshake, which a loaded
 * host delays past ARP's 0.5 s. The wait for the link is bounded. */
#define ARP_LINK_WAIT_NS (3000ull * 1000 * 1000)
#define REORDER_HOLD_NS (1000ull * 1000)
#define HOOK_IDLE_GAP_NS 2000
#define EPHEMERAL_FIRST 49152
/* At cleanup, wait this long after the last transmitted frame: a peer on a
 * shared-memory device (memif) loses what it has not yet polled when our
 * side of the connection goes away with the process. */
#define LINGER_NS (100ull * 1000 * 1000)

enum arp_state { ARP_FREE = 0, ARP_PENDING, ARP_RESOLVED, ARP_FAILED };

struct arp_entry {
	uint32_t ip;                /* network order */
	uint8_t state;
	uint8_t tries;
	uint8_t mac[RTE_ETHER_ADDR_LEN];
	uint64_t next_ns;           /* next request (PENDING) / retry (FAILED) */
	uint64_t link_wait_end_ns;  /* end of the wait for a down link (0: none yet) */
};

struct fdp_port {
	uint16_t port_id;
	int ref;                            /* protected by port_mutex */
	struct rte_mempool *pool;
	struct rte_ether_addr mac;
	size_t mtu;
	bool tx_ip_csum, tx_udp_csum;       /* device computes them */
	bool tx_udp_csum_none;              /* send UDP checksum 0 (see port_configure) */
	bool rx_csum;                       /* device reports checksum status */

	struct fdp_lock rx_lock;
	uint8_t *scratch;                   /* linearised multi-segment frames; rx_lock */
	struct fdp_ep **ep_by_port;         /* 65536 entries; written under rx_lock */
	uint16_t next_ephemeral;            /* rx_lock */

	struct fdp_lock ep_lock;            /* eps with progress hooks */
	struct fdp_ep **hook_eps;
	size_t hook_count, hook_cap;
	atomic_size_t hook_count_hint;      /* read without the lock */
	uint64_t hook_gap_tsc;              /* min TSC cycles between idle hook runs */
	_Atomic uint64_t hook_last_tsc;

	struct fdp_lock tx_lock;
	uint16_t ip_id;                     /* tx_lock */
	struct arp_entry arp[ARP_SLOTS];    /* tx_lock */
	uint64_t rng;                       /* tx_lock: fault injection xorshift */
	bool faults;
	uint64_t last_tx_tsc;               /* tx_lock: rte_rdtsc() of the last TX (a
	                                     * clock_gettime per frame showed in profiles) */
	struct rte_mbuf *held;              /* tx_lock: frame held back (reorder) */
	uint64_t held_ns;

	struct fdp_port_stats stats;        /* rx_* under rx_lock, tx_* under tx_lock */
	struct fdp_progress *progress;
};

static pthread_mutex_t port_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct fdp_port *the_port;

/* ---------------------------------------------------------------- setup */

static int port_configure(struct fdp_port *p)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	char pool_name[RTE_MEMPOOL_NAMESIZE];
	uint16_t nb_rx = RING_SIZE, nb_tx = RING_SIZE;
	uint32_t frame_max;
	size_t dev_mtu;
	unsigned int nb_mbufs;
	uint64_t t0 = fdp_now_ns(); /* the set-up's duration is logged (info) */
	int ret;

	ret = rte_eth_dev_info_get(p->port_id, &info);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "rte_eth_dev_info_get(%s): %s\n",
			 fdp_params.device, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	p->mtu = dev_mtu = fdp_params.mtu;
	if (info.max_mtu && dev_mtu > info.max_mtu)
		dev_mtu = info.max_mtu;
	if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN &&
	    dev_mtu > info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN)
		dev_mtu = info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN;
	/* net_memif carries any frame that fits one of its ring buffers
	 * (bsize, which fdp_params.devargs sizes for the MTU): the 1518-byte
	 * limit it reports is nominal (FDP_MEMIF_MTU). The device is
	 * configured within its limit; our frames use ours. */
	if (strcmp(info.driver_name, "net_memif") != 0)
		p->mtu = dev_mtu;
	else if (p->mtu + RTE_ETHER_HDR_LEN > fdp_memif_bsize())
		p->mtu = fdp_memif_bsize() - RTE_ETHER_HDR_LEN;
	if (p->mtu != fdp_params.mtu)
		FDP_WARN(FI_LOG_DOMAIN, "FI_DPDK_MTU=%zu: %s allows at most %zu, using that\n",
			 fdp_params.mtu, fdp_params.device, p->mtu);
	frame_max = (uint32_t)p->mtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 4;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = (uint32_t)dev_mtu;
	if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_IPV4_CKSUM) &&
	    (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_UDP_CKSUM)) {
		conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
					RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		p->tx_ip_csum = p->tx_udp_csum = true;
	}
	/* A memif "link" is shared memory between two processes of one host:
	 * nothing on it can corrupt a frame, and the UDP checksum (computed
	 * by the sender and verified by the receiver, memif offloads neither)
	 * was a third of a sender's cycles at 16 KiB messages. IPv4 allows
	 * UDP checksum 0 ("none"), which every receiver here accepts. The IP
	 * header checksum (20 bytes) stays. */
	if (!p->tx_udp_csum && strcmp(info.driver_name, "net_memif") == 0)
		p->tx_udp_csum_none = true;
	if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_IPV4_CKSUM) &&
	    (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_UDP_CKSUM)) {
		conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
					RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		p->rx_csum = true;
	}
	ret = rte_eth_dev_configure(p->port_id, 1, 1, &conf);
	if (ret) {
		FDP_WARN(FI_LOG_DOMAIN, "rte_eth_dev_configure(%s, mtu %zu): %s\n",
			 fdp_params.device, p->mtu, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(p->port_id, &nb_rx, &nb_tx);
	if (ret)
		nb_rx = nb_tx = RING_SIZE;

	nb_mbufs = 2u * nb_rx + 2u * nb_tx + 1024;
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
			strcmp(info.driver_name, "net_af_xdp") == 0);
	if (!p->pool) {
		FDP_WARN(FI_LOG_DOMAIN, "mbuf pool of %u x %u bytes: %s (raise -m in FI_DPDK_EAL_ARGS?)\n",
			 nb_mbufs, frame_max, rte_strerror(rte_errno));
		return -FI_ENOMEM;
	}
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
	p->next_ephemeral = (uint16_t)(EPHEMERAL_FIRST + (p->rng % 8192));
	/* net_af_xdp loads its XDP program here: libbpf's and libxdp's lines
	 * go to our log, not the application's stderr */
	fdp_libprint_begin(&libprint);
	ret = port_configure(p);
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

/* Run every enabled endpoint's progress hook (flush: its flush hook
 * instead), each under its lock. */
static void each_hook_ep(struct fdp_port *p, bool flush, uint64_t now)
{
	size_t i;

	fdp_lock(&p->ep_lock);
	for (i = 0; i < p->hook_count; i++) {
		struct fdp_ep *ep = p->hook_eps[i];

		fdp_lock(&ep->lock);
		if (ep->enabled && ep->hooks) {
			void (*fn)(struct fdp_ep *, uint64_t) =
				flush ? ep->hooks->flush : ep->hooks->progress;

			if (fn)
				fn(ep, now);
		}
		fdp_unlock(&ep->lock);
	}
	fdp_unlock(&p->ep_lock);
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
	each_hook_ep(p, true, fdp_now_ns());
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
		 "/%" PRIu64 "/%" PRIu64 "\n",
		 p->stats.rx_frames, p->stats.tx_frames, p->stats.tx_full,
		 p->stats.rx_not_ours, p->stats.rx_no_ep, p->stats.arp_req_tx,
		 p->stats.arp_rep_tx, p->stats.arp_rx, p->stats.inj_drop,
		 p->stats.inj_dup, p->stats.inj_reorder);
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

/* ---------------------------------------------------------------- endpoints */

int fdp_port_bind(struct fdp_port *port, struct fdp_ep *ep, uint16_t *udp_port)
{
	uint16_t want = ntohs(*udp_port);
	int i, ret = 0;

	fdp_lock(&port->rx_lock);
	if (want) {
		if (port->ep_by_port[want])
			ret = -FI_EADDRINUSE;
		else
			port->ep_by_port[want] = ep;
		goto out;
	}
	for (i = 0; i < 65536 - EPHEMERAL_FIRST; i++) {
		want = port->next_ephemeral++;
		if (port->next_ephemeral == 0)
			port->next_ephemeral = EPHEMERAL_FIRST;
		if (want >= EPHEMERAL_FIRST && !port->ep_by_port[want]) {
			port->ep_by_port[want] = ep;
			*udp_port = htons(want);
			goto out;
		}
	}
	ret = -FI_EADDRINUSE;
out:
	fdp_unlock(&port->rx_lock);
	return ret;
}

void fdp_port_unbind(struct fdp_port *port, uint16_t udp_port)
{
	fdp_lock(&port->rx_lock);
	port->ep_by_port[ntohs(udp_port)] = NULL;
	fdp_unlock(&port->rx_lock);
}

void fdp_port_attach(struct fdp_port *port, struct fdp_ep *ep)
{
	struct fdp_ep **n;

	if (!ep->hooks || !ep->hooks->progress)
		return;
	fdp_lock(&port->ep_lock);
	if (port->hook_count == port->hook_cap) {
		size_t cap = port->hook_cap ? port->hook_cap * 2 : 8;

		n = realloc(port->hook_eps, cap * sizeof(*n));
		if (!n) {
			fdp_unlock(&port->ep_lock);
			FDP_WARN(FI_LOG_EP_CTRL, "out of memory: endpoint timers will not run\n");
			return;
		}
		port->hook_eps = n;
		port->hook_cap = cap;
	}
	port->hook_eps[port->hook_count++] = ep;
	atomic_store(&port->hook_count_hint, port->hook_count);
	fdp_unlock(&port->ep_lock);
}

void fdp_port_detach(struct fdp_port *port, struct fdp_ep *ep)
{
	size_t i;

	fdp_lock(&port->ep_lock);
	for (i = 0; i < port->hook_count; i++) {
		if (port->hook_eps[i] == ep) {
			port->hook_eps[i] = port->hook_eps[--port->hook_count];
			break;
		}
	}
	atomic_store(&port->hook_count_hint, port->hook_count);
	fdp_unlock(&port->ep_lock);
}

/* ---------------------------------------------------------------- ARP */

static uint32_t arp_hash(uint32_t ip)
{
	return (uint32_t)((ip * 2654435761u) >> 24) & (ARP_SLOTS - 1);
}

/* tx_lock held */
static uint32_t arp_find(struct fdp_port *p, uint32_t ip, bool create)
{
	uint32_t h = arp_hash(ip), i, s;

	for (i = 0; i < ARP_SLOTS; i++) {
		s = (h + i) & (ARP_SLOTS - 1);
		if (p->arp[s].state == ARP_FREE) {
			if (!create)
				return UINT32_MAX;
			p->arp[s].ip = ip;
			p->arp[s].state = ARP_PENDING;
			p->arp[s].tries = 0;
			p->arp[s].next_ns = 0;
			p->arp[s].link_wait_end_ns = 0;
			return s;
		}
		if (p->arp[s].ip == ip)
			return s;
	}
	return UINT32_MAX;
}

uint32_t fdp_port_arp_slot(struct fdp_port *port, uint32_t ip)
{
	uint32_t s;

	fdp_lock(&port->tx_lock);
	s = arp_find(port, ip, true);
	fdp_unlock(&port->tx_lock);
	return s;
}

/* tx_lock held. Sends one frame right away (no fault injection). */
static void tx_raw(struct fdp_port *p, const uint8_t *frame, size_t len)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);

	if (!m)
		return;
	memcpy(rte_pktmbuf_mtod(m, uint8_t *), frame, len);
	m->data_len = (uint16_t)len;
	m->pkt_len = (uint32_t)len;
	if (rte_eth_tx_burst(p->port_id, 0, &m, 1) != 1)
		rte_pktmbuf_free(m);
}

/* tx_lock held */
static void arp_request(struct fdp_port *p, uint32_t ip)
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t zero[6];
	uint8_t frame[FDP_ETH_MIN_FRAME];
	size_t n = fdp_arp_build(frame, FDP_ARP_REQUEST, bcast, p->mac.addr_bytes,
				 fdp_params.addr.s_addr, zero, ip);

	tx_raw(p, frame, n);
	p->stats.arp_req_tx++;
}

/* Only on ARP's slow path (an unresolved peer): the link state is a read of
 * the port's data for the drivers used here, no system call. */
static bool link_down(struct fdp_port *p)
{
	struct rte_eth_link link;

	return rte_eth_link_get_nowait(p->port_id, &link) == 0 &&
	       link.link_status == RTE_ETH_LINK_DOWN;
}

/* tx_lock held: the MAC for slot, or NULL with the error to return. */
static const uint8_t *arp_resolve(struct fdp_port *p, uint32_t slot, int *err)
{
	struct arp_entry *e;
	uint64_t now;

	if (slot >= ARP_SLOTS) {
		*err = -FI_EHOSTUNREACH;
		return NULL;
	}
	e = &p->arp[slot];
	if (e->state == ARP_RESOLVED)
		return e->mac;
	now = fdp_now_ns();
	if (e->state == ARP_FAILED) {
		if (now < e->next_ns) {
			*err = -FI_EHOSTUNREACH;
			return NULL;
		}
		e->state = ARP_PENDING;
		e->tries = 0;
		e->next_ns = 0;
		e->link_wait_end_ns = 0;
	}
	if (now >= e->next_ns && link_down(p)) {
		if (!e->link_wait_end_ns)
			e->link_wait_end_ns = now + ARP_LINK_WAIT_NS;
		if (now < e->link_wait_end_ns) {
			e->next_ns = now + ARP_RETRY_FIRST_NS;
			*err = -FI_EAGAIN;
			return NULL;
		}
	}
	if (now >= e->next_ns) {
		if (e->tries >= ARP_TRIES) {
			char ip[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &e->ip, ip, sizeof(ip));
			FDP_WARN(FI_LOG_EP_DATA, "ARP: no answer from %s after %d requests\n",
				 ip, ARP_TRIES);
			e->state = ARP_FAILED;
			e->next_ns = now + ARP_HOLDDOWN_NS;
			*err = -FI_EHOSTUNREACH;
			return NULL;
		}
		arp_request(p, e->ip);
		e->next_ns = now + (ARP_RETRY_FIRST_NS << e->tries);
		e->tries++;
	}
	*err = -FI_EAGAIN;
	return NULL;
}

static bool in_subnet(uint32_t ip)
{
	return (ip & fdp_params.netmask) ==
	       (fdp_params.addr.s_addr & fdp_params.netmask);
}

/* rx path: learn and answer. */
static void arp_input(struct fdp_port *p, const struct fdp_frame_view *v)
{
	uint8_t frame[FDP_ETH_MIN_FRAME];
	uint32_t s;
	size_t n;

	fdp_lock(&p->tx_lock);
	p->stats.arp_rx++;
	if (in_subnet(v->arp_spa) && v->arp_spa != fdp_params.addr.s_addr) {
		/* learn only for peers we talk to or that talk to us */
		s = arp_find(p, v->arp_spa, v->arp_tpa == fdp_params.addr.s_addr);
		if (s != UINT32_MAX) {
			memcpy(p->arp[s].mac, v->arp_sha, RTE_ETHER_ADDR_LEN);
			p->arp[s].state = ARP_RESOLVED;
		}
	}
	if (v->arp_op == FDP_ARP_REQUEST && v->arp_tpa == fdp_params.addr.s_addr) {
		n = fdp_arp_build(frame, FDP_ARP_REPLY, v->arp_sha, p->mac.addr_bytes,
				  fdp_params.addr.s_addr, v->arp_sha, v->arp_spa);
		tx_raw(p, frame, n);
		p->stats.arp_rep_tx++;
	}
	fdp_unlock(&p->tx_lock);
}

/* ---------------------------------------------------------------- TX */

static uint64_t rng_next(struct fdp_port *p)
{
	uint64_t x = p->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	p->rng = x;
	return x;
}

static bool chance(struct fdp_port *p, double prob)
{
	if (prob <= 0)
		return false;
	return (double)(rng_next(p) >> 11) * (1.0 / 9007199254740992.0) < prob;
}

/* tx_lock held; consumes m. */
static int tx_mbuf(struct fdp_port *p, struct rte_mbuf *m)
{
	struct rte_mbuf *burst[3];
	uint16_t n = 0, sent;

	if (p->faults) {
		if (chance(p, fdp_params.drop)) {
			p->stats.inj_drop++;
			rte_pktmbuf_free(m);
			return 0;
		}
		if (!p->held && chance(p, fdp_params.reorder)) {
			p->stats.inj_reorder++;
			p->held = m;
			p->held_ns = fdp_now_ns();
			return 0;
		}
		burst[n++] = m;
		if (chance(p, fdp_params.dup)) {
			struct rte_mbuf *c = rte_pktmbuf_copy(m, p->pool, 0, UINT32_MAX);

			if (c) {
				p->stats.inj_dup++;
				burst[n++] = c;
			}
		}
		if (p->held) {
			burst[n++] = p->held;
			p->held = NULL;
		}
	} else {
		burst[n++] = m;
	}
	sent = rte_eth_tx_burst(p->port_id, 0, burst, n);
	p->stats.tx_frames += sent;
	p->last_tx_tsc = rte_rdtsc();
	if (sent == 0) {
		p->stats.tx_full++;
		rte_pktmbuf_free_bulk(burst, n);
		return -FI_EAGAIN;
	}
	/* The frame itself went (it is first); extra copies that did not fit
	 * are just lost, as on a real link. */
	if (sent < n)
		rte_pktmbuf_free_bulk(burst + sent, n - sent);
	return 0;
}

static int tx_frame(struct fdp_ep *ep, uint32_t dst_ip, uint16_t dst_port,
		    uint32_t arp_slot, const void *hdr, size_t hdr_len,
		    const struct iovec *payload, size_t iov_count)
{
	struct fdp_port *p = ep->domain->port;
	struct fdp_frame_addrs a;
	struct rte_mbuf *m;
	const uint8_t *mac;
	uint8_t *buf;
	size_t plen = fdp_iov_len(payload, iov_count), udp_len = hdr_len + plen, off;
	uint16_t be_len;
	int ret, err = 0;

	if (udp_len > ep->frame_payload_max || hdr_len < sizeof(struct fdp_hdr))
		return -FI_EINVAL;
	fdp_eal_thread();
	fdp_lock(&p->tx_lock);
	if (dst_ip == fdp_params.addr.s_addr) {
		mac = p->mac.addr_bytes; /* to ourselves: the device may loop it */
	} else {
		if (arp_slot == UINT32_MAX)
			arp_slot = arp_find(p, dst_ip, true);
		mac = arp_resolve(p, arp_slot, &err);
		if (!mac) {
			fdp_unlock(&p->tx_lock);
			return err;
		}
	}
	m = rte_pktmbuf_alloc(p->pool);
	if (!m) {
		p->stats.tx_full++;
		fdp_unlock(&p->tx_lock);
		return -FI_EAGAIN;
	}
	buf = rte_pktmbuf_mtod(m, uint8_t *);
	memcpy(a.src_mac, p->mac.addr_bytes, 6);
	memcpy(a.dst_mac, mac, 6);
	a.src_ip = fdp_params.addr.s_addr;
	a.dst_ip = dst_ip;
	a.src_port = ep->addr.sin_port;
	a.dst_port = dst_port;
	fdp_frame_build_hdrs(buf, &a, udp_len, p->ip_id++);
	off = FDP_L2L4_HLEN;
	memcpy(buf + off, hdr, hdr_len);
	be_len = htons((uint16_t)udp_len);
	memcpy(buf + off + offsetof(struct fdp_hdr, len), &be_len, 2);
	off += hdr_len;
	off += fdp_iov_to_buf(buf + off, plen, payload, iov_count);
	m->data_len = (uint16_t)off;
	m->pkt_len = (uint32_t)off;
	if (p->tx_udp_csum) {
		uint16_t phdr = htons(fdp_udp_phdr_sum(a.src_ip, a.dst_ip,
						       (uint16_t)(udp_len + FDP_UDP_HLEN)));

		m->l2_len = FDP_ETH_HLEN;
		m->l3_len = FDP_IPV4_HLEN;
		m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM |
			       RTE_MBUF_F_TX_UDP_CKSUM;
		memcpy(buf + FDP_ETH_HLEN + FDP_IPV4_HLEN + 6, &phdr, 2);
	} else {
		fdp_frame_csum(buf, true, !p->tx_udp_csum_none);
	}
	ret = tx_mbuf(p, m);
	fdp_unlock(&p->tx_lock);
	return ret;
}

int fdp_tx_frame(struct fdp_ep *ep, fi_addr_t dest, const void *hdr,
		 size_t hdr_len, const struct iovec *payload, size_t iov_count)
{
	struct fdp_av *av = ep->av;
	struct fdp_av_entry *e;

	if (!av || dest >= atomic_load_explicit(&av->count, memory_order_acquire))
		return -FI_EINVAL;
	e = &atomic_load_explicit(&av->entries, memory_order_acquire)[dest];
	if (e->addr.sin_family != AF_INET)
		return -FI_EINVAL;
	return tx_frame(ep, e->addr.sin_addr.s_addr, e->addr.sin_port,
			e->arp_slot, hdr, hdr_len, payload, iov_count);
}

int fdp_tx_frame_to(struct fdp_ep *ep, const struct sockaddr_in *dest,
		    const void *hdr, size_t hdr_len,
		    const struct iovec *payload, size_t iov_count)
{
	return tx_frame(ep, dest->sin_addr.s_addr, dest->sin_port, UINT32_MAX,
			hdr, hdr_len, payload, iov_count);
}

/* ---------------------------------------------------------------- RX */

/* rx_lock held. *held is the endpoint whose lock this burst holds (NULL:
 * none): consecutive frames for one endpoint, the common case, take its
 * lock once per burst instead of once per frame. */
static void rx_one(struct fdp_port *p, struct rte_mbuf *m, uint64_t now_ns, struct fdp_ep **held)
{
	struct fdp_frame_view v;
	struct sockaddr_in src;
	const uint8_t *data;
	struct fdp_ep *ep;
	unsigned int flags = 0;
	fi_addr_t src_addr;
	int reason;

	if (m->nb_segs > 1) {
		if (m->pkt_len > 65536) {
			p->stats.rx_drop[FDP_DROP_LEN]++;
			return;
		}
		data = rte_pktmbuf_read(m, 0, m->pkt_len, p->scratch);
	} else {
		data = rte_pktmbuf_mtod(m, const uint8_t *);
	}
	if (p->rx_csum) {
		if ((m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
			flags |= FDP_PARSE_IP_CSUM_OK;
		if ((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
			flags |= FDP_PARSE_UDP_CSUM_OK;
	}
	reason = fdp_frame_parse(data, m->pkt_len, flags, &v);
	if (reason != FDP_DROP_NONE) {
		p->stats.rx_drop[reason]++;
		return;
	}
	if (v.kind == FDP_FRAME_ARP) {
		arp_input(p, &v);
		return;
	}
	if (v.dst_ip != fdp_params.addr.s_addr ||
	    (memcmp(v.dst_mac, p->mac.addr_bytes, 6) != 0 && !(v.dst_mac[0] & 1))) {
		p->stats.rx_not_ours++;
		return;
	}
	ep = p->ep_by_port[ntohs(v.dst_port)];
	if (!ep) {
		p->stats.rx_no_ep++;
		return;
	}
	if (ep != *held) {
		if (*held)
			fdp_unlock(&(*held)->lock);
		fdp_lock(&ep->lock);
		*held = ep;
	}
	if (!ep->enabled) {
		p->stats.rx_no_ep++;
	} else if (v.type == FDP_TYPE_DGRAM) {
		if (ep->cls == &fdp_dgram_class)
			fdp_dgram_rx(ep, &v);
		else
			p->stats.rx_drop[FDP_DROP_TYPE]++;
	} else if (ep->hooks && ep->hooks->rx_rdm) {
		memset(&src, 0, sizeof(src));
		src.sin_family = AF_INET;
		src.sin_addr.s_addr = v.src_ip;
		src.sin_port = v.src_port;
		src_addr = ep->av ? fdp_av_reverse(ep->av, &src) : FI_ADDR_NOTAVAIL;
		ep->hooks->rx_rdm(ep, src_addr, &src, v.fdp, v.fdp_len, now_ns);
	} else {
		p->stats.rx_drop[FDP_DROP_TYPE]++;
	}
}

/* Endpoint timers. After frames arrived they run at once (acks may open a
 * window); on an idle poll at most every HOOK_IDLE_GAP_NS, so a thread
 * spinning on fi_cq_read does not pay clock_gettime and the endpoint locks
 * on every empty poll. */
static void run_hooks(struct fdp_port *p, bool received)
{
	uint64_t tsc;

	if (atomic_load_explicit(&p->hook_count_hint, memory_order_relaxed) == 0)
		return;
	tsc = rte_rdtsc();
	if (!received &&
	    tsc - atomic_load_explicit(&p->hook_last_tsc, memory_order_relaxed) < p->hook_gap_tsc)
		return;
	atomic_store_explicit(&p->hook_last_tsc, tsc, memory_order_relaxed);
	each_hook_ep(p, false, fdp_now_ns());
}

int fdp_port_progress(struct fdp_port *p)
{
	struct rte_mbuf *pkts[RX_BURST];
	uint16_t n, i;
	uint64_t now = 0;
	struct fdp_ep *held = NULL;
	int total = 0, b;

	fdp_eal_thread();
	if (fdp_trylock(&p->rx_lock)) {
		for (b = 0; b < RX_BURSTS_PER_CALL; b++) {
			n = rte_eth_rx_burst(p->port_id, 0, pkts, RX_BURST);
			if (n)
				now = fdp_now_ns();
			for (i = 0; i < n; i++)
				rx_one(p, pkts[i], now, &held);
			if (held) {
				fdp_unlock(&held->lock);
				held = NULL;
			}
			if (n)
				rte_pktmbuf_free_bulk(pkts, n);
			p->stats.rx_frames += n;
			total += n;
			if (n < RX_BURST)
				break;
		}
		fdp_unlock(&p->rx_lock);
	}
	if (p->held) {
		/* a reorder-held frame must not wait for a next frame forever */
		fdp_lock(&p->tx_lock);
		if (p->held && fdp_now_ns() - p->held_ns > REORDER_HOLD_NS) {
			struct rte_mbuf *m = p->held;

			p->held = NULL;
			if (rte_eth_tx_burst(p->port_id, 0, &m, 1) != 1)
				rte_pktmbuf_free(m);
		}
		fdp_unlock(&p->tx_lock);
	}
	run_hooks(p, total > 0);
	return total;
}

int fdp_domain_progress(struct fdp_domain *domain)
{
	return fdp_port_progress(domain->port);
}

void fdp_port_stats(struct fdp_port *port, struct fdp_port_stats *out)
{
	fdp_lock(&port->rx_lock);
	fdp_lock(&port->tx_lock);
	*out = port->stats;
	fdp_unlock(&port->tx_lock);
	fdp_unlock(&port->rx_lock);
}

/* progress thread bookkeeping lives in fdp_progress.c */
struct fdp_progress **fdp_port_progress_slot(struct fdp_port *port) FDP_HIDDEN;
struct fdp_progress **fdp_port_progress_slot(struct fdp_port *port)
{
	return &port->progress;
}
