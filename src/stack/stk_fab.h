/* stk_fab: one libfabric RDM endpoint per process per provider, shared by every
 * accelerated connection of the process.
 *
 * Objects: fabric, domain, AV (FI_AV_TABLE), one CQ (FI_CQ_FORMAT_MSG), one RDM
 * endpoint (FI_MSG, send-after-send ordering), and one registered slab split in
 * fixed-size segments: STK_FAB_RX_BUFS receive buffers always posted, and
 * STK_FAB_TX_BUFS send buffers on a lock-free free list (no malloc per message).
 * Messages up to the provider's inject size go out with fi_inject or a gathered
 * fi_sendmsg(FI_INJECT) (no buffer, no completion: the transmit side is bound
 * with FI_SELECTIVE_COMPLETION where gathering is used).
 *
 * Lifetime: opened lazily by stk_fab_get() on first use, never closed before the
 * process exits (connections come and go; the endpoint stays).
 *
 * Threads: every function is safe from any thread. The CQ is drained by whichever
 * thread calls stk_fab_progress(); a trylock makes concurrent callers return at
 * once instead of queueing. Received messages are handed to stk_stream_deliver()
 * while that lock is held (so stk_fab_quiesce() is a grace period: after it, no
 * thread is still inside a delivery that started before). Sends take no fab-wide
 * lock (the domain is opened FI_THREAD_SAFE).
 *
 * Errors: -errno (libfabric's -FI_E* codes are errno values). */
#ifndef STK_FAB_H
#define STK_FAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/fabric.h>

#define STK_FAB_NAME_MAX 24   /* provider name incl. NUL, e.g. "tcp;ofi_rxm" */
#define STK_FAB_ADDR_MAX 128  /* fabric address bytes (fi_getname) */
#define STK_FAB_SEG_MAX (64u * 1024)
#define STK_FAB_RX_BUFS 64
#define STK_FAB_TX_BUFS 128

struct stk_fab;

/* A send buffer from the registered slab. ctx must stay first: libfabric gets
 * the descriptor itself as the operation context (FI_CONTEXT/FI_CONTEXT2). */
struct stk_fab_buf {
	struct fi_context2 ctx;
	void *data;             /* STK_FAB seg bytes, registered */
	uint32_t index;
	uint32_t next;          /* free-list link (index + 1; 0 = end) */
	bool is_rx;
	int *outstanding;       /* decremented (atomic) when the send completes; may be NULL */
};

/* The endpoint for provider name (a cfg name: "shm", "tcp", ...), opened on first
 * use. The result is cached, failures too (a provider that failed once is not
 * retried in this process). Returns 0 or -errno (logged once).
 * A per-address provider (stk_fab_per_address) has one endpoint per local IP:
 * local is the local address of the kernel connection that wants it, and the
 * endpoint listens on that IP only (an ephemeral port), so a process never
 * listens where its app did not communicate; -EADDRNOTAVAIL when local is
 * NULL or not IPv4/IPv6. Other providers ignore local. */
int stk_fab_get(const char *prov, const struct sockaddr *local, struct stk_fab **out);
/* Load libfabric (once per process), as an open does: 0 or -errno. */
int stk_fab_load(void);
/* The same without waiting: when the endpoint is not open yet, -EAGAIN, and
 * its open starts on a thread of ours (once per endpoint; the next caller
 * finds it open or failed). For the server's HELLO: the client waits for it
 * a few milliseconds only, and opening tcp takes longer. */
int stk_fab_get_ready(const char *prov, const struct sockaddr *local, struct stk_fab **out);
/* True for the providers that listen on IP ports (tcp, sockets, udp, verbs):
 * opened per local address, when a connection chooses or is offered them. */
bool stk_fab_per_address(const char *prov);
/* True for a provider a listener leaves closed until its first accepted
 * connection offers it: dpdk on a port pool (stk_cfg.dpdk_pool), whose port
 * and DPDK belong to the process that opens it and cannot be used by a
 * forked child. Opened by a listener, a pre-fork server's master would own
 * them and its workers could not open their own. */
bool stk_fab_opens_at_accept(const char *prov);

const char *stk_fab_name(const struct stk_fab *fab);   /* cfg name, e.g. "tcp" */
/* The provider's fi_info addr_format (FI_SOCKADDR_IN, FI_ADDR_STR, ...): how a
 * peer's address for it must look (stk_peer.h). */
uint32_t stk_fab_addr_format(const struct stk_fab *fab);
/* Our own address, with a wildcard IP replaced by local_ip when given (the tcp
 * provider may report 0.0.0.0; the peer needs an address it can reach). */
int stk_fab_getname(struct stk_fab *fab, const struct sockaddr *local_ip, void *addr,
		    size_t *len);
/* Peers are inserted once and shared: each successful insert takes a reference
 * that stk_fab_av_release gives back. Idle peers stay in the AV (reused by the
 * next connection to the same address) until 256 are known; then the one idle
 * the longest is removed. A new process at an idle peer's exact address (pid or
 * port reuse) would inherit its provider state: a known limit. Two byte forms
 * of one peer that the provider maps to the same fi_addr share one entry (a
 * removal of one would unmap the other's peer under its sends). Callers pass
 * only addresses stk_peer_check() accepted. */
int stk_fab_av_insert(struct stk_fab *fab, const void *addr, size_t len, fi_addr_t *out);
/* Can a peer's address be used (stk_fab_av_insert checks it first)? 0 or
 * -errno. shm: the address must name a region in /dev/shm owned by our own
 * region's owner (a peer of another user cannot map our 0600 region, nor we
 * its; libfabric would fail the insert half-way). Logged at info, once. */
int stk_fab_peer_allowed(struct stk_fab *fab, const void *addr, size_t len);
void stk_fab_av_release(struct stk_fab *fab, fi_addr_t addr);
size_t stk_fab_seg_size(const struct stk_fab *fab);     /* max bytes per message */
/* Max bytes per stream DATA message (header included): the segment, or the
 * inject size for a provider that moves large messages in one piece between
 * memories (max_msg_size unbounded: no wire framing, shm) with an inject size
 * of at least STK_FAB_STREAM_INJECT_MIN. Such a provider sends a registered
 * message by having the receiver copy it out of the sender's memory later
 * (shm: process_vm_readv while holding the region lock the sender needs), so
 * a bulk sender waits on the reader's copies and on its own progress for the
 * completions; an injected message is copied at once (the receiver then
 * copies from shared memory, no system call) and needs nothing more from the
 * sender. A provider with framing (dpdk, tcp) keeps its large segments: its
 * per-message cost is on the wire. */
#define STK_FAB_STREAM_INJECT_MIN 4096u
size_t stk_fab_stream_seg(const struct stk_fab *fab);
size_t stk_fab_inject_size(const struct stk_fab *fab);

struct stk_fab_buf *stk_fab_buf_get(struct stk_fab *fab);  /* NULL when all in flight */
void stk_fab_buf_put(struct stk_fab *fab, struct stk_fab_buf *buf);
/* True when a send buffer is free right now (a hint for readiness). */
bool stk_fab_tx_available(struct stk_fab *fab);

/* Post len bytes of buf to dest; the buffer returns to the free list when the
 * send completes. -EAGAIN: provider queue full, progress and retry (buf is still
 * the caller's). */
int stk_fab_send(struct stk_fab *fab, struct stk_fab_buf *buf, size_t len, fi_addr_t dest);
/* Send len ≤ stk_fab_inject_size() bytes from any memory; -EAGAIN as above. */
int stk_fab_inject(struct stk_fab *fab, const void *msg, size_t len, fi_addr_t dest);

/* Send one message made of hdr (hlen bytes) then payload (plen, may be 0 with
 * payload NULL), hlen + plen ≤ min(stk_fab_inject_size(), STK_FAB_STAGE_MAX);
 * no completion, both buffers are the caller's again on return. When the
 * provider takes two iovecs (fi_info tx iov_limit) and the payload is at
 * least STK_FAB_GATHER_MIN bytes, it gathers them itself (fi_sendmsg with
 * FI_INJECT: one copy, into the provider's buffer); otherwise they are staged
 * on the stack first (small messages: one call cheaper than the gather).
 * -EAGAIN as above, -EMSGSIZE when too large. */
#define STK_FAB_STAGE_MAX 4096u
#define STK_FAB_GATHER_MIN 512u
int stk_fab_inject2(struct stk_fab *fab, const void *hdr, size_t hlen, const void *payload,
		    size_t plen, fi_addr_t dest);

/* A batch of posts by this thread (a send call's messages): between
 * stk_fab_batch_begin and stk_fab_batch_end, a shm peer's bell (stk_fab_bell.h)
 * that a post would ring is rung once, at the end, so that a sleeping reader
 * wakes to the whole batch instead of once per message (each wake-up would
 * find one message, sleep again and cost the sender another ring). Nests;
 * the outermost end rings. A thread that waits for anything the peer does
 * (credit, room) inside a batch flushes it first (stk_fab_batch_flush: rings
 * what is deferred so far, the batch goes on). */
void stk_fab_batch_begin(void);
void stk_fab_batch_end(void);
void stk_fab_batch_flush(void);

/* Drain up to stk_cfg.batch completions. Returns the number handled (0 when the
 * CQ was empty or another thread held it). */
/* The receiver of every message that progress takes: the stream layer
 * installs it (stk_stream.c, at load time) before any fabric opens; it runs
 * with the fabric's completion lock held. */
typedef void stk_fab_deliver_fn(struct stk_fab *fab, const void *msg, size_t len);
void stk_fab_set_deliver(stk_fab_deliver_fn *fn);
int stk_fab_progress(struct stk_fab *fab);
/* Drain the CQ: batches until one is not full (or the CQ is another thread's
 * now), max_batches at most. */
void stk_fab_progress_all(struct stk_fab *fab, unsigned max_batches);
/* Wait until no thread is inside a delivery that began before this call. */
void stk_fab_quiesce(struct stk_fab *fab);

/* Sleep support: the CQ wait fd, or -1 when the provider has none (shm). Before
 * sleeping on it, stk_fab_trywait() must return true (fi_trywait). */
int stk_fab_wait_fd(const struct stk_fab *fab);
bool stk_fab_trywait(struct stk_fab *fab);

/* For each cfg provider name successfully opened so far or now: call fn. */
void stk_fab_foreach_open(void (*fn)(struct stk_fab *fab, void *arg), void *arg);

/* fork (stk_migrate.h): prepare holds the table lock (no endpoint is half open
 * in the child); child forgets every endpoint of the parent WITHOUT touching it
 * (no libfabric call, no shm unlink: the parent still uses them), so that the
 * child's next stk_fab_get() opens its own. */
void stk_fab_atfork_prepare(void);
void stk_fab_atfork_parent(void);
void stk_fab_atfork_child(void);

#endif
