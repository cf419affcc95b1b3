/* fdp_port_dev.h - the process's DPDK port as its files see it
 * (fdp_port.c: set-up and shutdown; fdp_port_rx.c: endpoints, receive and
 * progress; fdp_port_tx.c: transmit and fault injection; fdp_port_arp.c: the
 * ARP cache). DPDK types; the rest of the provider uses fdp_port.h.
 *
 * Locks (the provider's order is in fdp.h): rx_lock covers receiving and
 * the UDP port table, taken with trylock by whichever thread drives
 * progress; ep_lock covers the list of endpoints whose hooks run; tx_lock
 * (a leaf) covers transmitting, the ARP cache and fault injection.
 *
 * TX burst contract (rte_eth_tx_burst): mbufs not accepted stay ours; they
 * are freed and reported as -FI_EAGAIN. */
#ifndef FDP_PORT_DEV_H
#define FDP_PORT_DEV_H

#include "fabric/fdp.h"
#include "fabric/fdp_port.h"

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#define FDP_ARP_SLOTS 256       /* power of two */
#define FDP_EPHEMERAL_FIRST 49152 /* first UDP port given to an unbound endpoint */

enum fdp_arp_state { FDP_ARP_FREE = 0, FDP_ARP_PENDING, FDP_ARP_RESOLVED, FDP_ARP_FAILED };

struct fdp_arp_entry {
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
	bool tx_udp_csum_none;              /* send UDP checksum 0 (see port_choose_offloads) */
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
	struct fdp_arp_entry arp[FDP_ARP_SLOTS]; /* tx_lock */
	uint64_t rng;                       /* tx_lock: fault injection xorshift */
	bool faults;
	uint64_t last_tx_tsc;               /* tx_lock: rte_rdtsc() of the last TX (a
	                                     * clock_gettime per frame showed in profiles) */
	struct rte_mbuf *held;              /* tx_lock: frame held back (reorder) */
	uint64_t held_ns;

	/* Multicast memberships (fdp_port_mc.c): written under rx_lock and
	 * read by the receive path, which holds it. */
	struct fdp_mc_member {
		uint32_t group;             /* network order */
		uint16_t udp_port;          /* network order */
		struct fdp_ep *ep;
	} mc[FDP_MC_MEMBERS];
	size_t mc_count;                    /* rx_lock */
	bool mc_allmulti;                   /* rx_lock: the device lacks an MC filter list */

	struct fdp_port_stats stats;        /* rx_* under rx_lock, tx_* under tx_lock */
	struct fdp_progress *progress;
};

/* Run every enabled endpoint's progress hook (flush: its flush hook
 * instead), each under its lock; takes ep_lock (fdp_port_rx.c). */
void fdp_port_each_hook_ep(struct fdp_port *p, bool flush, uint64_t now) FDP_HIDDEN;

/* ARP cache (fdp_port_arp.c). With tx_lock held: the slot of ip, created
 * when create is set (UINT32_MAX: absent or cache full); the MAC of slot,
 * or NULL with the error to return (-FI_EAGAIN while a request is on its
 * way, -FI_EHOSTUNREACH after ARP gave up). Without tx_lock, on the rx
 * path: learn from and answer an ARP frame. */
uint32_t fdp_port_arp_find(struct fdp_port *p, uint32_t ip, bool create) FDP_HIDDEN;
const uint8_t *fdp_port_arp_resolve(struct fdp_port *p, uint32_t slot, int *err) FDP_HIDDEN;
void fdp_port_arp_input(struct fdp_port *p, const struct fdp_frame_view *v) FDP_HIDDEN;

/* rx_lock held (the receive path): deliver a multicast datagram to every
 * member of its group and port, switching *held (the endpoint lock the
 * burst holds) as it goes; returns the copies delivered, -1 when no
 * endpoint of this process joined the group. igmp_input answers an IGMP
 * query with a report per group joined. */
int fdp_port_mc_rx(struct fdp_port *p, const struct fdp_frame_view *v,
		   struct fdp_ep **held) FDP_HIDDEN;
void fdp_port_igmp_input(struct fdp_port *p, const struct fdp_frame_view *v) FDP_HIDDEN;

/* tx_lock held. Send one frame right away, no fault injection
 * (fdp_port_tx.c). */
void fdp_port_tx_raw(struct fdp_port *p, const uint8_t *frame, size_t len) FDP_HIDDEN;
/* Send the frame fault injection holds back (reorder) once it has waited
 * long enough: it must not wait for a next frame forever. Takes tx_lock. */
void fdp_port_tx_release_held(struct fdp_port *p) FDP_HIDDEN;

#endif /* FDP_PORT_DEV_H */
