/* stk_udp: UDP sockets carried by the stack over the dpdk provider's raw UDP
 * endpoint (FI_EP_DGRAM, FI_PROTO_UDP: the frame's UDP payload is the
 * datagram, the address a sockaddr_in), so a launched program speaks plain
 * UDP/IPv4 with any kernel peer through its DPDK port.
 *
 * Objects: one process-wide fabric, domain, AV and completion queue (struct
 * stk_udp_fab, opened on the first accelerated UDP socket, never closed), and
 * per accelerated socket (struct stk_udp) one endpoint bound to the socket's
 * UDP port on the port's IP, with receive buffers always posted: one per
 * KiB of the kernel socket's SO_RCVBUF when the socket is attached (a power
 * of 2 from STK_UDP_SLOTS_MIN to STK_UDP_SLOTS_MAX). A completion fills the next slot of its socket (the provider
 * consumes an endpoint's receives in posting order); the reader copies it out
 * and posts the slot again.
 *
 * The kernel socket stays: the app's fd is the kernel UDP socket, bound to
 * the same port (getsockname, setsockopt, everything not listed here is the
 * kernel's). Datagrams that reach it (loopback, another interface) are read
 * too: a receive takes the fabric's datagram unless the fabric has none or
 * every STK_UDP_KERNEL_EVERY-th receive, when the kernel socket is tried
 * first (MSG_DONTWAIT on a private duplicate), so neither side starves.
 * Datagrams to destinations outside the port's subnet (or larger than the
 * port's MTU allows) go out through the kernel socket.
 *
 * Threads: any number of threads may receive and send on one socket; the
 * receive side takes the socket's rx_lock, the send side no lock (the
 * provider's endpoint is thread-safe); draining the completion queue takes
 * the fabric's cq_lock (a trylock: a second drainer returns at once).
 *
 * Errors: -errno, as the stack everywhere. */
#ifndef STK_UDP_H
#define STK_UDP_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/fabric.h>

#include "stack/stk_sock.h"
#include "stack/stk_watch.h"

#define STK_UDP_SLOTS_MIN 64     /* posted receives per socket, at least */
#define STK_UDP_SLOTS_MAX 4096   /* and at most */
#define STK_UDP_KERNEL_EVERY 16  /* a receive looks at the kernel socket first this often */
#define STK_UDP_TX_RETRY_NS 200000000ull /* a send waits this long for ARP or room */
#define STK_UDP_MC_MAX 20        /* memberships per socket (the kernel's IP_MAX_MEMBERSHIPS) */

/* What recvmsg adds to a datagram of the port (options of the socket). */
#define STK_UDP_CMSG_PKTINFO 0x1      /* IP_PKTINFO */
#define STK_UDP_CMSG_TIMESTAMP 0x2    /* SO_TIMESTAMP */
#define STK_UDP_CMSG_TIMESTAMPNS 0x4  /* SO_TIMESTAMPNS */

/* One posted receive. ctx first: libfabric gets the slot as the context. */
struct stk_udp_slot {
	struct fi_context2 ctx;
	struct stk_udp *owner;
	uint8_t *data;            /* slot_size bytes */
	uint32_t len;             /* the datagram's length (filled by progress) */
	struct sockaddr_in src;   /* its source */
	struct timespec stamp;    /* CLOCK_REALTIME when progress took it */
};

struct stk_udp {
	struct stk_watch watch;   /* epoll items watching the socket */
	int kfd;                  /* private duplicate of the kernel socket (cloexec) */
	struct fid_ep *ep;
	struct sockaddr_in local; /* the port's IP, the socket's UDP port */
	struct stk_udp_slot *slots;
	uint8_t *mem;
	size_t slot_size;
	unsigned nslots;          /* a power of 2 */
	pthread_mutex_t rx_lock;
	unsigned head;            /* protected by rx_lock: next slot to read */
	unsigned done;            /* atomic (written under cq_lock): completions taken */
	unsigned rx_turn;         /* protected by rx_lock: receives since the kernel's turn */
	enum stk_udp_seen {       /* protected by rx_lock: the side a MSG_PEEK or
				   * FIONREAD saw, which the next receive takes */
		STK_UDP_SEEN_NONE,
		STK_UDP_SEEN_FABRIC,
		STK_UDP_SEEN_KERNEL,
	} seen;
	uint64_t generation;      /* atomic: moves with every arrival */
	uint64_t peer;            /* atomic: connected peer (stk_udp_key), 0: none */
	uint64_t tx_cache;        /* atomic: last destination key << 16 | AV index + 1 */
	bool nonblock;            /* atomic */
	bool dead;                /* set under cq_lock at close: completions dropped */
	unsigned cmsgs;           /* atomic: STK_UDP_CMSG_* */
	int mc_ttl;               /* atomic: IP_MULTICAST_TTL */
	uint32_t mc_if;           /* atomic: IP_MULTICAST_IF (network order, 0: any) */
	/* groups joined on the port, protected by rx_lock */
	struct stk_udp_mc {
		uint32_t group;       /* network order */
		struct fid_mc *mc;
	} mcs[STK_UDP_MC_MAX];
	unsigned nmcs;
	bool orphan;              /* a fork's child: the port is the parent's, the
				   * kernel carries the data calls, readiness is
				   * the kernel socket's (through kfd) */
	struct stk_sock *sock;    /* the socket carried (registry, for fork) */
	struct stk_udp *next, *prev; /* protected by the registry's lock */
};

/* (IPv4 address, port) in one word, both in network order; 0 for none. */
static inline uint64_t stk_udp_key(const struct sockaddr_in *sa)
{
	return (uint64_t)sa->sin_addr.s_addr << 16 | sa->sin_port;
}

/* ---- stk_udp.c: the socket ---- */

/* The rules chose to accelerate sock (a UDP socket, fd its kernel socket):
 * attach it to the dpdk port (binding the kernel socket to a port first when
 * it has none). NULL when attached, else why the kernel keeps it: no dpdk in
 * the provider list, the port cannot open, an IPv6 socket, a local address
 * that is neither the wildcard nor the port's IP, the port taken. */
const char *stk_udp_accelerate(struct stk_sock *sock, int fd);
/* bind() of fd to addr failed with EADDRNOTAVAIL: when addr is the dpdk
 * port's IP (FI_DPDK_IP) and UDP acceleration may apply, bind with
 * IP_FREEBIND. 0 or -errno (-EADDRNOTAVAIL when it is not the port's). */
int stk_udp_bind_port_ip(int fd, const struct sockaddr *addr, socklen_t len);
/* connect() on the kernel socket returned kernel_ret (0 or -errno): the
 * socket's peer follows the kernel's (getpeername; AF_UNSPEC disconnects). */
void stk_udp_connected(struct stk_sock *sock, int fd, int kernel_ret);
/* The last reference: the endpoint closes, unread datagrams are dropped. */
void stk_udp_close(struct stk_sock *sock);
/* The socket's operations (stk_sock.h). */
extern const struct stk_sock_ops stk_udp_ops;
/* An object with nslots slots of slot_size bytes (no endpoint, kfd -1), or
 * NULL; its free (closes kfd). */
struct stk_udp *stk_udp_alloc(size_t slot_size, unsigned nslots);
void stk_udp_free(struct stk_udp *udp);
/* sock (its kernel socket fd) is carried by udp from now on. */
void stk_udp_carry(struct stk_sock *sock, struct stk_udp *udp, int fd);
/* fork: the child's accelerated UDP sockets become kernel sockets (orphan:
 * the port and every datagram the fabric took stay the parent's); epoll
 * sets holding one keep it, their readiness now the kernel socket's alone
 * (handing it to the app's kernel epoll set would change the parent's too:
 * a fork shares it). The child accelerates no UDP socket of its own.
 * prepare/parent hold the registry's lock. */
void stk_udp_atfork_prepare(void);
void stk_udp_atfork_parent(void);
void stk_udp_atfork_child(void);

/* ---- stk_udp_fab.c: the process's fabric ---- */

struct stk_udp_fab;
/* The fabric, opened on first use (a failure is cached). 0 or -errno. */
int stk_udp_fab_get(struct stk_udp_fab **out);
/* The port's IP and subnet mask (network order). */
void stk_udp_fab_subnet(const struct stk_udp_fab *fab, uint32_t *ip, uint32_t *mask);
/* Largest datagram the port carries in one frame. */
size_t stk_udp_fab_max_msg(const struct stk_udp_fab *fab);
/* Receives an endpoint may have posted at once (its rx_attr size). */
unsigned stk_udp_fab_rx_max(const struct stk_udp_fab *fab);
/* Open udp's endpoint on udp->local (port set) with its slots posted. */
int stk_udp_fab_open_ep(struct stk_udp_fab *fab, struct stk_udp *udp);
/* Join group (network order) on udp's endpoint for its own UDP port; leave
 * it. -errno. */
int stk_udp_fab_join(struct stk_udp_fab *fab, struct stk_udp *udp, uint32_t group,
		     struct fid_mc **out);
void stk_udp_fab_leave(struct stk_udp_fab *fab, struct fid_mc *mc);
/* Close udp's endpoint; no completion for it is delivered after this. */
void stk_udp_fab_close_ep(struct stk_udp_fab *fab, struct stk_udp *udp);
/* Post slot again after its datagram was read. */
int stk_udp_fab_repost(struct stk_udp *udp, struct stk_udp_slot *slot);
/* Drain the completion queue (trylock): the number of completions taken. */
int stk_udp_fab_progress(struct stk_udp_fab *fab);
/* Send one datagram (iov, at most 4 entries after merging) to dest: its
 * length, -EAGAIN (no room within STK_UDP_TX_RETRY_NS when dontwait is
 * false, at once otherwise), -EMSGSIZE, -EHOSTUNREACH, -ENOBUFS (AV full). */
ssize_t stk_udp_fab_send(struct stk_udp_fab *fab, struct stk_udp *udp,
			 const struct sockaddr_in *dest, const struct iovec *iov, int iovcnt,
			 bool dontwait);
/* Sleeping: the completion queue's wait fd (-1: none), fi_trywait, and a
 * grace period after which no drain that began before is still delivering. */
int stk_udp_fab_wait_fd(const struct stk_udp_fab *fab);
bool stk_udp_fab_trywait(struct stk_udp_fab *fab);
void stk_udp_fab_quiesce(struct stk_udp_fab *fab);
/* The process's fabric once opened, or NULL. */
struct stk_udp_fab *stk_udp_fab_current(void);
/* fork child: forget the parent's fabric without touching it; no UDP
 * socket of the child is accelerated. */
void stk_udp_fab_atfork_child(void);

/* ---- stk_udp_opt.c: socket options and multicast membership ---- */

/* At attach: the options already set on the kernel socket fd. */
void stk_udp_opts_load(struct stk_udp *udp, int fd);
/* setsockopt on an accelerated socket (stk.h's stk_sock_setsockopt). */
int stk_udp_setsockopt(struct stk_sock *sock, int fd, int level, int name, const void *val,
		       socklen_t len);
/* Does a datagram to group leave through the port (IP_MULTICAST_TTL 1, the
 * default, and IP_MULTICAST_IF the wildcard or the port's IP)? */
bool stk_udp_mc_via_port(struct stk_udp *udp, uint32_t port_ip);
/* The ancillary data of slot's datagram into msg (msg_controllen set;
 * MSG_CTRUNC in msg_flags when it did not fit). */
void stk_udp_cmsgs(struct stk_udp *udp, const struct stk_udp_slot *slot, struct msghdr *msg);
/* Leave every group (at close). */
void stk_udp_mc_leave_all(struct stk_udp *udp);

/* ---- stk_udp_exec.c: datagrams handed down through an exec ---- */

/* Before an exec that keeps the socket: a memfd (close-on-exec) with the
 * datagrams the port took and the app did not read (copies: if the exec
 * fails they are still here), or -1 when there are none. */
int stk_udp_exec_memfd(struct stk_udp *udp);
/* In the new image: memfd, handed down for the kernel UDP socket fd. 0: not
 * a UDP hand-down (memfd untouched); 1: it was (memfd closed), *out the
 * socket that serves those datagrams before its kernel socket's, or NULL
 * (they are lost, logged). */
int stk_udp_adopt(int fd, int memfd, struct stk_sock **out);

/* ---- stk_udp_rx.c: receiving ---- */

/* Datagrams of the fabric waiting in udp (progress first when none). */
unsigned stk_udp_rx_pending(struct stk_udp *udp, bool progress);
/* The receive calls of stk_udp_ops. */
ssize_t stk_udp_recvmsg(struct stk_sock *sock, struct msghdr *msg, int flags);
ssize_t stk_udp_recvfrom(struct stk_sock *sock, void *buf, size_t len, int flags,
			 struct sockaddr *addr, socklen_t *alen);
ssize_t stk_udp_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
int stk_udp_recvmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
		     struct timespec *timeout);
/* FIONREAD: the length of the next datagram (fabric or kernel), 0 for none. */
int stk_udp_next_len(struct stk_udp *udp);

/* ---- stk_udp_ready.c: readiness ---- */

/* What stands for udp where readiness code expects a connection. */
struct stk_conn *stk_udp_ready_obj(struct stk_udp *udp);
/* Install the readiness operations of UDP sockets (stk_ready.h); once. */
void stk_udp_ready_install(void);
/* udp closes: every epoll set forgets it. */
void stk_udp_ready_closed(struct stk_udp *udp);

#endif
