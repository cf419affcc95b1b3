/* fdp_port.h - the process's DPDK port: queues, ARP, frame TX/RX, endpoint
 * demultiplexing by UDP port, fault injection and the progress thread
 * (fdp_port*.c, fdp_progress.c). DPDK-free interface. */
#ifndef FDP_PORT_H
#define FDP_PORT_H

#include "fabric/fdp.h"
#include "fabric/fdp_frame.h"

/* Open (first call: start the EAL, configure and start the device) or
 * reference the port. -FI_ENODEV/-FI_EINVAL after one FDP_WARN line. */
int fdp_port_get(struct fdp_port **out) FDP_HIDDEN;
void fdp_port_put(struct fdp_port *port) FDP_HIDDEN;
/* IP MTU in effect (FI_DPDK_MTU capped by the device). */
size_t fdp_port_mtu(const struct fdp_port *port) FDP_HIDDEN;
/* Provider cleanup: stop the progress thread and forget the port (objects
 * still open are the application's leak; libfabric calls this at exit). */
void fdp_port_shutdown(void) FDP_HIDDEN;

/* Claim a UDP port (network order; 0 = pick an ephemeral one, written back)
 * for ep so received frames reach it. -FI_EADDRINUSE if taken. */
int fdp_port_bind(struct fdp_port *port, struct fdp_ep *ep, uint16_t *udp_port) FDP_HIDDEN;
void fdp_port_unbind(struct fdp_port *port, uint16_t udp_port) FDP_HIDDEN;
/* Deliver frames to ep (after fi_enable) and run its progress hook. */
void fdp_port_attach(struct fdp_port *port, struct fdp_ep *ep) FDP_HIDDEN;
void fdp_port_detach(struct fdp_port *port, struct fdp_ep *ep) FDP_HIDDEN;

/* The ARP cache slot for an IPv4 address (network order), created on first
 * use. UINT32_MAX if the cache is full. */
uint32_t fdp_port_arp_slot(struct fdp_port *port, uint32_t ip) FDP_HIDDEN;

/* Receive and dispatch up to a few bursts, flush held frames, run progress
 * hooks. Returns frames received. No lock may be held by the caller. */
int fdp_port_progress(struct fdp_port *port) FDP_HIDDEN;

/* Sleeping readers: a CQ/counter armed by fi_trywait registers here so the
 * progress thread polls the device for it; unregisters when woken. */
void fdp_port_waiter_add(struct fdp_port *port) FDP_HIDDEN;
void fdp_port_waiter_del(struct fdp_port *port) FDP_HIDDEN;
/* Progress thread lifetime (fdp_progress.c). */
int fdp_progress_start(struct fdp_port *port) FDP_HIDDEN;
void fdp_progress_stop(struct fdp_port *port) FDP_HIDDEN;
/* The port's slot for the progress thread's state (fdp_progress.c). */
struct fdp_progress;
struct fdp_progress **fdp_port_progress_slot(struct fdp_port *port) FDP_HIDDEN;

/* DGRAM class receive (fdp_dgram.c), called with ep->lock held; v is a
 * FDP_FRAME_FDP view. fdp_udp_rx: the FI_PROTO_UDP class, v a
 * FDP_FRAME_UDP view (the UDP payload is the message). */
void fdp_dgram_rx(struct fdp_ep *ep, const struct fdp_frame_view *v) FDP_HIDDEN;
void fdp_udp_rx(struct fdp_ep *ep, const struct fdp_frame_view *v) FDP_HIDDEN;

/* Multicast membership (fdp_port_mc.c): datagrams to group:udp_port (both
 * network order) reach ep (an FI_PROTO_UDP endpoint) until it leaves. The
 * first member of a group makes the port accept the group's MAC and sends
 * an IGMPv2 membership report; the last one to leave sends an IGMPv2
 * leave. Several endpoints may join one group. Call with no lock held.
 * join: 0, -FI_EALREADY (ep is a member already), -FI_ENOSPC (table full). */
#define FDP_MC_MEMBERS 64
int fdp_port_mc_join(struct fdp_port *port, struct fdp_ep *ep, uint32_t group,
		     uint16_t udp_port) FDP_HIDDEN;
void fdp_port_mc_leave(struct fdp_port *port, struct fdp_ep *ep, uint32_t group,
		       uint16_t udp_port) FDP_HIDDEN;

/* Statistics of the port, for logs and tests. */
struct fdp_port_stats {
	uint64_t rx_frames, tx_frames;
	uint64_t rx_drop[FDP_DROP__COUNT];
	uint64_t rx_not_ours;       /* wrong MAC or IP */
	uint64_t rx_no_ep;          /* no endpoint on the UDP port */
	uint64_t tx_full;           /* TX ring or pool full */
	uint64_t inj_drop, inj_dup, inj_reorder;
	uint64_t arp_req_tx, arp_rep_tx, arp_rx;
	uint64_t igmp_tx, igmp_query_rx;
	uint64_t rx_mc_delivered;   /* multicast datagram copies handed to members */
};
void fdp_port_stats(struct fdp_port *port, struct fdp_port_stats *out) FDP_HIDDEN;

#endif /* FDP_PORT_H */
