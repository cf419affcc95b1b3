/* stk_fab's same-host wake-up channel ("bell"): what lets a process sleep in
 * the kernel on its endpoint and be woken by a peer process on the same host
 * for the cost of one pipe write, only when it sleeps.
 *
 * Two providers have one:
 *  - shm, which has no CQ wait fd: the bell is how it sleeps at all;
 *  - dpdk: its CQ wait fd is signalled by the provider's progress thread,
 *    which polls a port without Rx interrupts with pauses that grow while
 *    the port is quiet (fi_dpdk(7)); a peer on the same host rings the bell
 *    instead, and the sleeper's own progress takes the frame at once. Peers
 *    on other hosts have no bell and wake it through the progress thread as
 *    before. The endpoint's wait fd is then an epoll set of both.
 *
 * Each such endpoint has two files in /dev/shm named after a key the peer
 * derives from the address the negotiation exchanges (fab_bell_key: shm's
 * region name; "dpdk-<ip>:<port>"), both 0600 and owned by the endpoint's
 * owner:
 *   fsk-bell.<key>  one page, mapped shared: struct fab_bell_page;
 *   fsk-ring.<key>  a FIFO. Its owner holds it open read-write and
 *                   non-blocking: the endpoint's wait fd, or part of it.
 * A peer process opens both once per peer (kept with the AV entry; read-write
 * too, so a write never meets a FIFO without reader: no SIGPIPE, no EPIPE).
 *
 * Protocol (Dekker on two words, both sides sequentially consistent):
 *  - the owner, before sleeping (stk_fab_trywait): drains the FIFO when
 *    `rung` says a byte may be there, stores armed = 1, then takes
 *    everything its CQ holds (blocking on the CQ lock: a progress running in
 *    another thread might have passed a message by); anything taken → do
 *    not sleep. Else it sleeps on the FIFO (and whatever else it waits on).
 *  - a sender, after each post to a peer with a bell: a full fence, then
 *    when the peer's armed is 1 and its exchange to 0 wins, one byte into
 *    the peer's FIFO, then rung = 1.
 * Either the sender's load sees armed = 1 (it rings), or the owner's look at
 * its CQ, which follows its store, sees the message. At most one byte per
 * sleep; a sender whose peer is awake pays one fence and one load.
 *
 * shm needs its bell: an endpoint whose bell files cannot be created does
 * not open (shm is not offered), and a peer whose bell cannot be opened or
 * is not what it must be (type, owner, size, magic) is refused
 * (stk_fab_av_insert fails: the connection uses another provider or the
 * kernel), since it would sleep unwoken. On dpdk the bell is a shortcut:
 * an endpoint whose bell cannot be made opens without one (logged), and a
 * peer without a usable bell (another host, another user) is used without
 * ringing.
 *
 * Reclaim: shm's files carry the owner's pid in the region name; the
 * others' page holds it (pid). Both are removed at exit and, when their pid
 * no longer runs, by the next process that opens such an endpoint
 * (fab_shm_unlink_regions). */
#ifndef STK_FAB_BELL_H
#define STK_FAB_BELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

struct stk_fab;

#define FAB_BELL_MAGIC "fskbell1"
#define FAB_BELL_KEY_MAX 128    /* a key's bytes, NUL included */

struct fab_bell_page {
	char magic[8];          /* FAB_BELL_MAGIC, written last at creation */
	uint32_t armed;         /* a thread of the owner is about to sleep, or sleeps */
	uint32_t rung;          /* a byte may be in the FIFO (the owner drains it) */
	int32_t pid;            /* the owner (reclaim of keys without a pid) */
};

/* A peer's bell as a sender holds it; fd -1: none. */
struct fab_bell {
	int fd;                         /* the peer's FIFO */
	struct fab_bell_page *page;     /* the peer's page, mapped */
};

/* Does provider name have a bell? */
bool fab_bell_wanted(const char *name);
/* The key of the bell of fab's peer (or of fab itself) at addr into out:
 * false when addr names none. */
bool fab_bell_key(const struct stk_fab *fab, const void *addr, size_t len, char *out,
		  size_t cap);
/* Create our bell (called once the endpoint is open): 0, and fab's wait fd
 * is the FIFO (no wait fd of the provider's) or an epoll set of the FIFO and
 * the provider's; or -errno (logged). */
int fab_bell_create(struct stk_fab *fab);
/* Open the bell of the peer at addr into *out: 0 (out->fd -1: the peer has
 * none it may use, allowed on dpdk) or -errno (shm: refuse the peer). */
int fab_bell_open_peer(struct stk_fab *fab, const void *addr, size_t len, struct fab_bell *out);
void fab_bell_close(struct fab_bell *bell);
/* The owner's half of the protocol (stk_fab_trywait for a bell). */
bool fab_bell_trywait(struct stk_fab *fab);

/* The sender's half: after a post to a peer that has a bell. */
/* Write the byte and set rung (the slow part of fab_bell_ring). */
void fab_bell_write(struct fab_bell *bell);
/* ThreadSanitizer does not model fences (GCC rejects them under
 * -fsanitize=thread): there a sequentially consistent read-modify-write
 * stands in for the full fence, and the others (ordering for another
 * process's reads only) are left out. */
#if defined(__SANITIZE_THREAD__)
#define FAB_BELL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FAB_BELL_TSAN 1
#endif
#endif

static inline void fab_bell_fence(int order)
{
#ifdef FAB_BELL_TSAN
	(void)order;
#else
	__atomic_thread_fence(order);
#endif
}

static inline void fab_bell_ring(struct fab_bell *bell)
{
#ifdef FAB_BELL_TSAN
	__atomic_fetch_add(&bell->page->armed, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
	if (__atomic_load_n(&bell->page->armed, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&bell->page->armed, 0, __ATOMIC_SEQ_CST))
		fab_bell_write(bell);
}

/* Names "fsk-bell.<key>" / "fsk-ring.<key>": the key, or NULL for any
 * other file name. They are reclaimed with the regions
 * (fab_shm_unlink_regions: at exit, and those of exited processes). */
const char *fab_bell_region_of(const char *file);
/* The owner pid of the bell files named file in dir (a key without a pid:
 * its page says), 0 when unknown (being created, or no page). */
long fab_bell_page_pid(int dirfd, const char *file);
/* Remove the two files of the bell key in dir: how many were removed. */
unsigned fab_bell_unlink_at(int dirfd, const char *key);

#endif
