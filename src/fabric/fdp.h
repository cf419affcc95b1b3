/* fdp.h - internal object framework of the libfabric "dpdk" provider.
 *
 * Everything in src/fabric/ shares this header. It knows nothing of DPDK types
 * (those stay in fdp_port*.c / fdp_eal*.c) so engines such as fdp_rel*.c and
 * fdp_msg*.c can include it and be unit-tested without an EAL.
 *
 * Object model (each struct embeds its libfabric fid first, so a fid pointer
 * converts to the provider object with a cast or container_of):
 *
 *   fdp_fabric ── fdp_domain ──┬── fdp_av
 *   (1 per open)   (refs the   ├── fdp_cq, fdp_cntr
 *                  process's   ├── fdp_mr   (mr_mode 0: a key and nothing else)
 *                  one port)   └── fdp_ep ── class (DGRAM built in, RDM from fdp_rdm.c)
 *   fdp_eq hangs off the fabric.
 *
 * The DPDK port (one per process, FI_DPDK_DEVICE) is opened at the first
 * fi_domain and shared by every domain; frames are demultiplexed to endpoints
 * by UDP destination port.
 *
 * LOCKING (the same rules for FI_THREAD_SAFE and FI_THREAD_DOMAIN: a progress
 * thread may run concurrently with the application, so objects are always
 * locked; an uncontended fdp_lock is one atomic exchange):
 *   - port rx lock (internal): held while a burst is received and dispatched;
 *     progress callers take it with trylock, so two pollers never wait on
 *     each other.
 *   - ep->lock: protects the endpoint's queues and its class state
 *     (hook_ctx). Taken by the framework around every hook call (rx_rdm,
 *     progress, enable, cancel) and by data-path ops (the class takes it in
 *     its own fi_ops_msg/fi_ops_tagged functions with fdp_lock()).
 *   - cq->lock, eq->lock: leaves; fdp_cq_write() takes it internally.
 *     A CQ's or counter's wait object (struct fdp_wait) is lock-free.
 *   - port tx lock: a leaf taken inside fdp_tx_frame().
 *   - port ep lock (internal): the list of endpoints whose progress hook
 *     runs; held while hooks run, ordered before ep->lock.
 *   Order: port rx lock or port ep lock -> ep->lock -> cq->lock / port tx
 *   lock. The framework never holds ep->lock while calling
 *   fdp_domain_progress, and neither may an engine.
 *   Never call into the application (there are no callbacks) with a lock held.
 *   Counters are lock-free atomics.
 *
 * ERRORS: every internal function returns 0 or a negative -FI_E* value.
 */
#ifndef FDP_H
#define FDP_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#define FDP_PROV_NAME "dpdk"
#define FDP_PROV_VERSION FI_VERSION(0, 1)
#define FDP_FI_VERSION FI_VERSION(1, 17)

#define FDP_HIDDEN __attribute__((visibility("hidden")))

#ifndef container_of
#define container_of(ptr, type, field) \
	((type *)((char *)(ptr) - offsetof(type, field)))
#endif

extern struct fi_provider fdp_prov;

#define FDP_WARN(subsys, ...) FI_WARN(&fdp_prov, subsys, __VA_ARGS__)
#define FDP_INFO(subsys, ...) FI_INFO(&fdp_prov, subsys, __VA_ARGS__)
#define FDP_DBG(subsys, ...) FI_LOG(&fdp_prov, FI_LOG_DEBUG, subsys, __VA_ARGS__)

/* ---------------------------------------------------------------- params */

/* Default MTU on net_memif: a shared-memory link, whose driver copies a
 * frame of any length through a chain of its ring buffers; the limit it
 * reports (1518-byte frames) is nominal. Large frames divide the per-frame
 * work (headers, reliability bookkeeping, one burst per frame) of a bulk
 * transfer by six. */
#define FDP_MEMIF_MTU 9000

/* True when FI_DPDK_DEVICE names a net_memif port. */
bool fdp_device_is_memif(void) FDP_HIDDEN;
/* net_memif's packet buffer size (devargs bsize): what FI_DPDK_DEVICE
 * says, else what fdp_params.devargs adds (a frame of the MTU, rounded up
 * to KiB), else the driver's 2048. A frame longer than one buffer would
 * travel as a chain of them, which costs an mbuf per buffer and a copy to
 * linearise (and has had bugs in the driver): the port's MTU stays within
 * one buffer. */
size_t fdp_memif_bsize(void) FDP_HIDDEN;

/* Provider parameters, read once in fi_prov_ini (fdp_init.c) from
 * FI_DPDK_* through fi_param_get_*. Strings are owned by libfabric or NULL. */
struct fdp_params {
	const char *device;    /* FI_DPDK_DEVICE: devargs (vdev spec or PCI address) */
	const char *devargs;   /* what the EAL is given: device, plus a net_memif
	                        * bsize for the MTU when device has none */
	const char *ip;        /* FI_DPDK_IP: "a.b.c.d/prefix" */
	const char *eal_args;  /* FI_DPDK_EAL_ARGS: appended to the EAL argv */
	const char *pool;      /* FI_DPDK_POOL: directory of a port pool; device and
	                        * ip are then the port's (fdp_pool_port) */
	size_t mtu;            /* FI_DPDK_MTU: IP MTU, default 1500 (FDP_MEMIF_MTU on
	                        * net_memif) */
	bool mtu_bad;          /* FI_DPDK_MTU set but not in 576..9000 */
	double drop;           /* FI_DPDK_DROP: probability 0..1 of dropping a TX frame */
	double dup;            /* FI_DPDK_DUP: probability 0..1 of sending a TX frame twice */
	double reorder;        /* FI_DPDK_REORDER: probability 0..1 of holding a TX frame back
	                        * and sending it after the next one */
	uint64_t seed;         /* FI_DPDK_SEED: fault injection PRNG seed, 0 = from time/pid */
	bool rxd;              /* FI_DPDK_RXD: offer DGRAM to ofi_rxd layering */
	size_t idle_max_ms;    /* FI_DPDK_IDLE_MAX_MS: longest idle pause of the
	                        * progress thread, 1..1000, default 32 */
	bool eal_early;        /* FI_DPDK_EAL_EARLY: start the EAL in the background
	                        * from fi_prov_ini (default yes; fdp_eal.c) */
	const char *pool_error; /* FI_DPDK_POOL gave no port: why, in a few words;
	                        * device is then that text (the domain name
	                        * fi_getinfo offers) and fi_fabric fails, so the
	                        * application's one line says it */
	/* Derived from ip (valid when ip_ok): */
	bool ip_ok;
	struct in_addr addr;   /* our IPv4 address, network order */
	uint32_t netmask;      /* network order */
	unsigned int prefix;
};
extern struct fdp_params fdp_params;

/* fdp_init.c: with FI_DPDK_POOL, point fdp_params.device and .ip (and what
 * derives from them) at a port of the process's own. The first call in each
 * process claims it (fdp_claim): not fi_prov_ini, which a pre-fork server
 * runs in its master at listen(), but fi_getinfo and fi_fabric, so that a
 * worker forked before it claims a port of its own. Later calls in the
 * process return the first one's result. 0 without a pool, else as
 * fdp_claim. Thread-safe. */
int fdp_pool_port(void) FDP_HIDDEN;

/* fdp_claim.c: FI_DPDK_POOL, a pool of vhost-user ports (fabsock-ovs(1)).
 * fdp_claim takes the first free port of the pool in pool_dir (a lock held
 * for the process's life) and points fdp_params.device and .ip at it;
 * 0, or -FI_E* after one FDP_WARN line (no pool, all ports taken). A
 * process forked from a holder holds no lock (fcntl locks are per process):
 * its call claims another port (the parent's stays the parent's). A port
 * whose socket file a process of another user left behind (a sticky pool
 * directory: not removable here) is passed over.
 * fdp_claim_ready, before the EAL starts: a bounded wait for Open vSwitch
 * to connect to the claimed port's socket (DPDK's own wait has no bound);
 * 0 when it did or no port was claimed, else -FI_ENODEV after one line. */
int fdp_claim(const char *pool_dir) FDP_HIDDEN;
int fdp_claim_ready(void) FDP_HIDDEN;

/* ---------------------------------------------------------------- locks */

/* A test-and-test-and-set spinlock that yields the CPU after a short spin:
 * critical sections here are a few hundred ns, an uncontended acquire is
 * one atomic exchange and a release one store (a pthread mutex costs two
 * locked instructions and showed as ~15 % of a polling loop's profile);
 * yielding keeps a preempted holder from costing the spinner a whole time
 * slice on a machine with few cores. Not recursive. */
struct fdp_lock {
	atomic_bool held;
};

void fdp_lock_slow(struct fdp_lock *l) FDP_HIDDEN;

static inline void fdp_lock_init(struct fdp_lock *l)
{
	atomic_init(&l->held, false);
}
static inline void fdp_lock_destroy(struct fdp_lock *l)
{
	(void)l;
}
static inline bool fdp_trylock(struct fdp_lock *l)
{
	return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&l->held, true, memory_order_acquire);
}
static inline void fdp_lock(struct fdp_lock *l)
{
	if (!atomic_exchange_explicit(&l->held, true, memory_order_acquire))
		return;
	fdp_lock_slow(l);
}
static inline void fdp_unlock(struct fdp_lock *l)
{
	atomic_store_explicit(&l->held, false, memory_order_release);
}

/* Monotonic time in ns (vDSO clock_gettime, no syscall). */
uint64_t fdp_now_ns(void) FDP_HIDDEN;

/* ---------------------------------------------------------------- objects */

struct fdp_port;   /* opaque: the DPDK port, fdp_port_dev.h */
struct fdp_ep;

struct fdp_fabric {
	struct fid_fabric fabric_fid;   /* first */
	atomic_int ref;                 /* domains + eqs open on it */
	char name[64];
};

struct fdp_domain {
	struct fid_domain domain_fid;   /* first */
	struct fdp_fabric *fabric;
	struct fdp_port *port;          /* shared, refcounted by fdp_port_get/put */
	struct fi_info *info;           /* fi_dupinfo of the info it was opened with */
	enum fi_threading threading;
	atomic_int ref;                 /* avs, cqs, cntrs, mrs, eps open on it */
	struct fdp_lock lock;           /* reserved for domain-wide state */
	atomic_uint_fast64_t next_mr_key;
};

/* AV: fi_addr_t values are dense indices 0..count-1 for both FI_AV_TABLE and
 * FI_AV_MAP, so engines may keep per-peer state in arrays indexed by fi_addr.
 * An entry holds the peer's IPv4 address and UDP port (network order) and a
 * handle into the port's ARP cache that resolves its MAC. Entries are never
 * moved; removed entries are marked invalid and not reused. */
struct fdp_av_entry {
	struct sockaddr_in addr;        /* sin_family == 0: removed */
	uint32_t arp_slot;              /* index in the port's ARP cache */
	uint32_t hash_next;             /* reverse-lookup chain, UINT32_MAX = end */
};

struct fdp_av {
	struct fid_av av_fid;           /* first */
	struct fdp_domain *domain;
	enum fi_av_type type;
	struct fdp_lock lock;           /* writers; readers on the data path read
	                                 * entries below count without it (entries
	                                 * are only appended, the array is replaced
	                                 * RCU-free by never freeing old arrays
	                                 * until close) */
	struct fdp_av_entry *_Atomic entries;
	atomic_size_t count;
	size_t cap;
	uint32_t *hash;                 /* protected by lock; bucket heads */
	size_t hash_size;
	void **old_arrays;              /* superseded entry arrays, freed at close */
	size_t old_count;
	atomic_int ref;                 /* eps bound */
	bool async;                     /* opened with FI_EVENT: inserts complete
	                                 * on the bound EQ (fi_av(3)) */
	struct fdp_eq *eq;              /* bound EQ, set before any insert */
};

/* Peer lookup for engines. 0 or -FI_EINVAL for an unknown/removed fi_addr. */
int fdp_av_lookup(struct fdp_av *av, fi_addr_t fi_addr, struct sockaddr_in *out) FDP_HIDDEN;
/* Reverse lookup by IPv4+UDP port; FI_ADDR_NOTAVAIL when not inserted. */
fi_addr_t fdp_av_reverse(struct fdp_av *av, const struct sockaddr_in *sa) FDP_HIDDEN;

/* The wait object of a CQ, counter or EQ (fdp_wait.h). */
struct fdp_wait {
	int fd;                         /* eventfd, -1 without a wait object */
	atomic_bool armed;              /* fi_trywait said the reader will sleep
	                                 * (CQs and counters) */
};

#define FDP_CQ_ERR_DATA_MAX 32

/* A completion as stored in a CQ ring (superset of every format). */
struct fdp_cq_slot {
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};

struct fdp_cq_err_node {
	struct fi_cq_err_entry e;
	struct fdp_cq_err_node *next;
	size_t err_data_size;
	uint8_t err_data[FDP_CQ_ERR_DATA_MAX];
};

struct fdp_cq {
	struct fid_cq cq_fid;           /* first */
	struct fdp_domain *domain;
	enum fi_cq_format format;
	size_t entry_size;              /* bytes per entry for this format */
	enum fi_wait_obj wait_obj;
	struct fdp_lock lock;
	struct fdp_cq_slot *ring;       /* protected by lock; grows, never overflows */
	size_t ring_cap, head, count;   /* protected by lock */
	struct fdp_cq_err_node *err_head, *err_tail; /* protected by lock */
	struct fdp_wait wait;
	uint8_t err_data[FDP_CQ_ERR_DATA_MAX]; /* the last fi_cq_readerr's err_data
	                                 * when the caller gave no buffer (valid
	                                 * until the next read, fi_cq(3)) */
	atomic_bool signaled;           /* fi_cq_signal: the next (or current)
	                                 * fi_cq_sread that finds nothing returns
	                                 * -FI_EAGAIN at once */
	atomic_int ref;                 /* eps bound */
};

/* Append a completion. flags: FI_SEND/FI_RECV | FI_MSG/FI_TAGGED |
 * FI_REMOTE_CQ_DATA ...; buf is the buffer the data landed in (FI_RECV) or
 * NULL; src is the source fi_addr for fi_cq_readfrom (FI_ADDR_NOTAVAIL when
 * unknown). Takes cq->lock. Never fails: the ring grows (an allocation only
 * when more completions are outstanding than ever before). Wakes a sleeping
 * reader (one eventfd write, only when fi_trywait armed it). */
void fdp_cq_write(struct fdp_cq *cq, void *context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src) FDP_HIDDEN;
/* Append an error completion: err is a positive FI_E* value (FI_ETRUNC,
 * FI_EHOSTUNREACH, FI_ECANCELED, FI_EIO...), olen the truncated length. */
void fdp_cq_write_err(struct fdp_cq *cq, void *context, uint64_t flags, int err,
		      int prov_errno, size_t len, void *buf, uint64_t data,
		      uint64_t tag, size_t olen) FDP_HIDDEN;
/* The same with err_data (at most FDP_CQ_ERR_DATA_MAX bytes, copied): what
 * fi_cq_readerr hands back in err_data / err_data_size (FI_SOURCE_ERR:
 * the unknown source's struct sockaddr_in). */
void fdp_cq_write_err_data(struct fdp_cq *cq, void *context, uint64_t flags,
			   int err, size_t len, void *buf, size_t olen,
			   const void *err_data, size_t err_data_size) FDP_HIDDEN;

struct fdp_cntr {
	struct fid_cntr cntr_fid;       /* first */
	struct fdp_domain *domain;
	atomic_uint_fast64_t value;
	atomic_uint_fast64_t errors;
	enum fi_wait_obj wait_obj;
	struct fdp_wait wait;
	atomic_int ref;
};

/* Bump a counter (NULL is allowed and ignored). Lock-free. */
void fdp_cntr_inc(struct fdp_cntr *cntr) FDP_HIDDEN;
void fdp_cntr_inc_err(struct fdp_cntr *cntr) FDP_HIDDEN;

struct fdp_eq_node;
struct fdp_eq {
	struct fid_eq eq_fid;           /* first */
	struct fdp_fabric *fabric;
	struct fdp_lock lock;
	struct fdp_eq_node *head, *tail;       /* protected by lock */
	struct fdp_eq_node *err_head, *err_tail; /* protected by lock */
	struct fdp_wait wait;           /* never armed */
};

/* AV insert events (fdp_av.c, on an AV opened with FI_EVENT): one error
 * entry per failed address (err a positive FI_E* value, data its index in
 * the insert's vector), then the insert's FI_AV_COMPLETE with the number of
 * addresses inserted; context is the insert's. fdp_eq_av_error returns 0 or
 * -FI_ENOMEM. */
void fdp_eq_av_complete(struct fdp_eq *eq, fid_t fid, void *context, uint64_t count) FDP_HIDDEN;
int fdp_eq_av_error(struct fdp_eq *eq, fid_t fid, void *context, uint64_t index,
		    int err) FDP_HIDDEN;
/* fi_join completed: FI_JOIN_COMPLETE with fid (the fid_mc) and context. */
void fdp_eq_join_complete(struct fdp_eq *eq, fid_t fid, void *context) FDP_HIDDEN;

struct fdp_mr {
	struct fid_mr mr_fid;           /* first */
	struct fdp_domain *domain;
	uint64_t access;
};

/* ---------------------------------------------------------------- endpoints */

/* Hooks an endpoint class gives the framework. Every hook is called with
 * ep->lock held. Any hook may be NULL. */
struct fdp_ep_hooks {
	/* A provider frame of an RDM type (FDP_TYPE_RDM_FIRST..LAST, see
	 * fdp_proto.h) arrived for this endpoint. frame starts at the common
	 * provider header (struct fdp_hdr) and len covers the whole UDP payload;
	 * the framework has checked the Ethernet/IPv4/UDP headers and
	 * checksums, the fdp_hdr magic/version/length, and that type is in the
	 * RDM range. src is the sender's fi_addr in the bound AV
	 * (FI_ADDR_NOTAVAIL if not inserted), src_addr its IPv4+UDP port.
	 * The memory is valid only during the call (copy what you keep).
	 * now_ns: fdp_now_ns() read once per received burst (a clock read
	 * per frame costs a tenth of a receiver's cycles).
	 * Called from whichever thread drives progress. */
	void (*rx_rdm)(struct fdp_ep *ep, fi_addr_t src,
		       const struct sockaddr_in *src_addr,
		       const void *frame, size_t len, uint64_t now_ns);
	/* Timers: called by every progress call (CQ read, cntr read, the
	 * progress thread) that received frames, and by idle ones at most
	 * every 2 µs; while the application only sleeps on a wait fd, the
	 * progress thread calls it at least every ~1 ms. Between application
	 * calls with no wait fd armed, it runs only for classes with a
	 * next_deadline hook, when a deadline is due (see below).
	 * now_ns from fdp_now_ns(). */
	void (*progress)(struct fdp_ep *ep, uint64_t now_ns);
	/* Timers without the application: the earliest fdp_now_ns() at which
	 * progress must run; now_ns (or earlier) when the endpoint saw traffic
	 * recently and wants the port polled at a low rate (frames for it may
	 * arrive while the application is away: peers expect acks);
	 * UINT64_MAX when it needs nothing until the application calls in.
	 * *last_ns: when progress last ran. Cheap (reads cached state). Only
	 * called for endpoints attached with fdp_progress_timers_attach. */
	uint64_t (*next_deadline)(struct fdp_ep *ep, uint64_t now_ns, uint64_t *last_ns);
	/* fi_enable after the framework checked the bindings and registered
	 * the UDP port: allocate what needs the CQs/AV. */
	int (*enable)(struct fdp_ep *ep);
	/* fi_cancel: return 0 if an operation with this context was cancelled
	 * (and an FI_ECANCELED error completion written), -FI_ENOENT if not. */
	int (*cancel)(struct fdp_ep *ep, void *context);
	/* fi_close, after the endpoint stopped receiving: free hook_ctx. */
	void (*close)(struct fdp_ep *ep);
	/* fi_close, and provider shutdown (the process exits with the
	 * endpoint open) after a last poll of the port: send the peers what
	 * they are owed now (delayed acks), since no timer will run again.
	 * May be NULL. */
	void (*flush)(struct fdp_ep *ep, uint64_t now_ns);
	/* True while data this endpoint sent (or queued) is not yet
	 * acknowledged by its peer, or given up as unreachable. fi_close and
	 * provider shutdown keep driving progress while it says so, for at
	 * most FDP_CLOSE_LINGER_NS: a send completed at copy time
	 * (FI_INJECT_COMPLETE, fi_inject) must not be lost because the
	 * application closed right after its completion. May be NULL. */
	bool (*tx_pending)(struct fdp_ep *ep);
	/* fi_rx_size_left / fi_tx_size_left (may be NULL: -FI_ENOSYS). */
	ssize_t (*rx_size_left)(struct fdp_ep *ep);
	ssize_t (*tx_size_left)(struct fdp_ep *ep);
};

/* An endpoint type offered by fi_getinfo and built by fi_endpoint. DGRAM is
 * built in (fdp_dgram.c). The native RDM class is defined by fdp_rdm.c as
 * `const struct fdp_ep_class fdp_rdm_class`; the framework references it
 * weakly, so without fdp_rdm.c the provider offers DGRAM only. */
struct fdp_ep_class {
	enum fi_ep_type type;
	uint64_t caps;              /* FI_MSG|FI_TAGGED|FI_SEND|FI_RECV|FI_SOURCE|... */
	uint64_t mode;              /* mode bits the class requires (usually 0) */
	uint64_t msg_order;         /* tx/rx msg_order (FI_ORDER_SAS ...) */
	uint64_t comp_order;
	size_t max_msg_size;        /* 0 = one frame: fdp_frame_payload_max() - hdr */
	size_t inject_size;         /* 0 = like max_msg_size */
	size_t tx_size, rx_size;    /* queue depths advertised */
	size_t iov_limit;
	size_t mem_tag_format_bits; /* 0 = no tags; else bits usable in tags */
	uint32_t protocol_version;
	uint32_t protocol;          /* ep_attr->protocol: FI_PROTO_UNSPEC (our
	                             * provider header) or FI_PROTO_UDP (raw UDP:
	                             * the frame's UDP payload is the message) */
	size_t wire_hdr_len;        /* provider header bytes in front of one
	                             * frame's message (max_msg_size 0) */
	/* fi_endpoint: the framework has built ep (domain, UDP port, address,
	 * every fid_ep ops table pointing at -FI_ENOSYS stubs, cm ops working).
	 * Set ep->hooks and ep->hook_ctx, and ep->ep_fid.msg / .tagged to the
	 * class's ops tables. Return 0 or -FI_E*; on failure the framework frees
	 * ep and does not call hooks->close. */
	int (*open)(struct fdp_ep *ep, const struct fi_info *info);
};

extern const struct fdp_ep_class fdp_dgram_class FDP_HIDDEN;
/* FI_EP_DGRAM with FI_PROTO_UDP (fdp_dgram.c): raw UDP datagrams, no
 * provider header; FI_SOURCE_ERR and FI_MULTICAST (fdp_mcast.c). */
extern const struct fdp_ep_class fdp_udp_class FDP_HIDDEN;
extern const struct fdp_ep_class fdp_rdm_class __attribute__((weak, visibility("hidden")));

struct fdp_ep {
	struct fid_ep ep_fid;           /* first */
	struct fdp_domain *domain;
	const struct fdp_ep_class *cls;
	struct fi_info *info;           /* fi_dupinfo of the info it was opened with */
	uint64_t caps;
	uint64_t tx_op_flags, rx_op_flags; /* defaults from tx/rx attr and fi_control */
	struct fdp_lock lock;
	bool enabled;                   /* protected by lock */

	/* Bindings, set before fi_enable, immutable afterwards. */
	struct fdp_av *av;
	struct fdp_cq *tx_cq, *rx_cq;
	bool tx_selective, rx_selective; /* bound with FI_SELECTIVE_COMPLETION */
	struct fdp_cntr *send_cntr, *recv_cntr;
	struct fdp_eq *eq;

	/* Our address: the port's IPv4 + this endpoint's UDP port (network
	 * order). Assigned at fi_endpoint (from info->src_addr's port, or an
	 * ephemeral one), changeable with fi_setname before fi_enable. */
	struct sockaddr_in addr;
	/* Largest UDP payload one frame can carry (provider header included):
	 * port MTU - 20 (IPv4) - 8 (UDP). Engines segment to this. */
	size_t frame_payload_max;

	const struct fdp_ep_hooks *hooks;
	void *hook_ctx;                 /* class state, protected by lock */
	size_t min_multi_recv;          /* FI_OPT_MIN_MULTI_RECV */

	/* Multicast groups joined with fi_join (struct fdp_mc, fdp_mcast.c),
	 * protected by lock. */
	struct fdp_mc *mcs;

	/* Statistics, protected by lock. */
	uint64_t rx_dropped_no_buffer;
};

/* fi_join on an FI_PROTO_UDP endpoint (fdp_mcast.c), and fi_close of the
 * endpoint leaving the groups it still belongs to (no lock held). */
int fdp_ep_join(struct fid_ep *ep, const void *addr, uint64_t flags,
		struct fid_mc **mc, void *context) FDP_HIDDEN;
void fdp_ep_leave_all(struct fdp_ep *ep) FDP_HIDDEN;

/* An AV entry for the provider's own use (a multicast group's fi_addr),
 * and its removal. */
int fdp_av_insert_one(struct fdp_av *av, const struct sockaddr_in *sa,
		      fi_addr_t *out) FDP_HIDDEN;
void fdp_av_remove_one(struct fdp_av *av, fi_addr_t fi_addr) FDP_HIDDEN;

/* Completion helpers honouring FI_SELECTIVE_COMPLETION, the bound CQs and
 * counters. op_flags are the operation's flags (FI_COMPLETION etc.). Call
 * with ep->lock held (they only take the CQ's leaf lock). */
void fdp_ep_tx_done(struct fdp_ep *ep, void *context, uint64_t op_flags,
		    uint64_t cq_flags, size_t len) FDP_HIDDEN;
void fdp_ep_tx_error(struct fdp_ep *ep, void *context, uint64_t cq_flags,
		     int err, size_t len) FDP_HIDDEN;
void fdp_ep_rx_done(struct fdp_ep *ep, void *context, uint64_t op_flags,
		    uint64_t cq_flags, size_t len, void *buf, uint64_t data,
		    uint64_t tag, fi_addr_t src) FDP_HIDDEN;
void fdp_ep_rx_error(struct fdp_ep *ep, void *context, uint64_t cq_flags,
		     int err, size_t len, void *buf, uint64_t data,
		     uint64_t tag, size_t olen) FDP_HIDDEN;

/* Send one frame: Ethernet/IPv4/UDP headers built by the framework from
 * ep->addr and the AV entry of dest, then hdr (hdr_len bytes: the provider
 * header, struct fdp_hdr first, its len field is filled in by this function)
 * then the payload iov, all copied into one mbuf, so every buffer may be
 * reused when it returns; hdr_len 0 sends the payload alone (raw UDP,
 * FI_PROTO_UDP). A multicast destination (224.0.0.0/4) goes to the group's
 * MAC with TTL 1, no ARP. hdr_len + payload bytes must be <=
 * ep->frame_payload_max. Fault injection (FI_DPDK_DROP/DUP/REORDER) is
 * applied here. Takes the port tx lock; call with or without ep->lock.
 * Returns:
 *   0               the frame was handed to the device (or dropped on
 *                   purpose by fault injection);
 *   -FI_EAGAIN      TX ring or mbuf pool full, or the peer's MAC is still
 *                   being resolved (an ARP request is on its way): retry
 *                   after progress;
 *   -FI_EHOSTUNREACH ARP gave up on the peer (10 requests over ~0.5 s, after
 *                   waiting up to 3 s for the port's link if it was down);
 *                   the entry is retried again after a hold-down;
 *   -FI_EINVAL      unknown fi_addr, oversize frame. */
int fdp_tx_frame(struct fdp_ep *ep, fi_addr_t dest, const void *hdr,
		 size_t hdr_len, const struct iovec *payload,
		 size_t iov_count) FDP_HIDDEN;
/* The same to an address not in an AV (replies to unknown peers). */
int fdp_tx_frame_to(struct fdp_ep *ep, const struct sockaddr_in *dest,
		    const void *hdr, size_t hdr_len,
		    const struct iovec *payload, size_t iov_count) FDP_HIDDEN;

/* Drive progress for the domain of ep: receive bursts of up to 32 frames
 * on the port (trylock: returns at once if another thread is receiving),
 * dispatch them, then run every endpoint's progress hook. Call with no
 * lock held. Returns the number of frames received. */
int fdp_domain_progress(struct fdp_domain *domain) FDP_HIDDEN;

/* Timer progress without the application (fdp_progress.c). An endpoint
 * whose class has a next_deadline hook attaches itself (hook enable, with
 * ep->lock held) and detaches in hook close. While no wait fd is armed, the
 * progress thread then sleeps until the earliest due deadline of the
 * attached endpoints (passes that find no frame back off from 50 µs to
 * 20 ms; the RDM endpoint asks for polls for 30 s after its last traffic),
 * and runs fdp_domain_progress only when no application thread
 * progressed the endpoint within the last 10 ms; with every endpoint idle
 * (UINT64_MAX) it blocks until kicked. fdp_progress_timers_kick tells a
 * blocked thread that ep now has timers pending: call it with ep->lock held
 * (no lost wake-up: the thread raises its flag before it trylocks the
 * endpoints) whenever next_deadline may have become finite; it costs one
 * load unless the thread is blocked. */
int fdp_progress_timers_attach(struct fdp_ep *ep) FDP_HIDDEN;
void fdp_progress_timers_detach(struct fdp_ep *ep) FDP_HIDDEN;
void fdp_progress_timers_kick(struct fdp_ep *ep) FDP_HIDDEN;

/* Longest fi_close / process exit waits for unacknowledged sends (hook
 * tx_pending) before it drops them: 1 s, well above any retransmission a
 * live peer needs (RTO floor 250 us, cap 100 ms) and short enough for an
 * application whose peer is gone. */
#define FDP_CLOSE_LINGER_NS (1000ull * 1000 * 1000)

/* Drive progress while ep's hook tx_pending says so, at most
 * FDP_CLOSE_LINGER_NS (fdp_ep.c). Call with no lock held. */
void fdp_ep_linger(struct fdp_ep *ep) FDP_HIDDEN;

/* Framework internals shared between fdp_*.c files. */
int fdp_ep_open(struct fid_domain *domain, struct fi_info *info,
		struct fid_ep **ep, void *context) FDP_HIDDEN;
int fdp_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		struct fid_av **av, void *context) FDP_HIDDEN;
int fdp_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **cq, void *context) FDP_HIDDEN;
int fdp_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context) FDP_HIDDEN;
int fdp_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		struct fid_eq **eq, void *context) FDP_HIDDEN;
int fdp_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		    struct fid_domain **domain, void *context) FDP_HIDDEN;
int fdp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context) FDP_HIDDEN;
int fdp_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints,
		struct fi_info **info) FDP_HIDDEN;
int fdp_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
	       uint64_t offset, uint64_t requested_key, uint64_t flags,
	       struct fid_mr **mr, void *context) FDP_HIDDEN;
int fdp_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		uint64_t access, uint64_t offset, uint64_t requested_key,
		uint64_t flags, struct fid_mr **mr, void *context) FDP_HIDDEN;
int fdp_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		   uint64_t flags, struct fid_mr **mr) FDP_HIDDEN;
int fdp_cq_trywait(struct fdp_cq *cq) FDP_HIDDEN;
int fdp_cntr_trywait(struct fdp_cntr *cntr) FDP_HIDDEN;

/* Copy len bytes from an iov array into buf (at most buf_len);
 * returns bytes copied. */
size_t fdp_iov_to_buf(void *buf, size_t buf_len, const struct iovec *iov,
		      size_t count) FDP_HIDDEN;
size_t fdp_buf_to_iov(const struct iovec *iov, size_t count, const void *buf,
		      size_t len) FDP_HIDDEN;
size_t fdp_iov_len(const struct iovec *iov, size_t count) FDP_HIDDEN;

#endif /* FDP_H */
