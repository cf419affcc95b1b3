/* stk_fab's same-host wake-up channel ("bell") for a provider without a CQ
 * wait fd (shm): what lets a process sleep in the kernel on its shm endpoint
 * and be woken by a peer process for the cost of one pipe write, only when it
 * sleeps.
 *
 * Each shm endpoint has two files in /dev/shm named after its region (the
 * region name is in the address the negotiation exchanges, so a peer finds
 * them from that address alone), both 0600 and owned by the region's owner:
 *   fsk-bell.<region>  one page, mapped shared: struct fab_bell_page;
 *   fsk-ring.<region>  a FIFO. Its owner holds it open read-write and
 *                      non-blocking: it is the endpoint's wait fd.
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
 * kernel), since it would sleep unwoken. */
#ifndef STK_FAB_BELL_H
#define STK_FAB_BELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

struct stk_fab;

#define FAB_BELL_MAGIC "fskbell1"

struct fab_bell_page {
	char magic[8];          /* FAB_BELL_MAGIC, written last at creation */
	uint32_t armed;         /* a thread of the owner is about to sleep, or sleeps */
	uint32_t rung;          /* a byte may be in the FIFO (the owner drains it) */
};

/* A peer's bell as a sender holds it; fd -1: none. */
struct fab_bell {
	int fd;                         /* the peer's FIFO */
	struct fab_bell_page *page;     /* the peer's page, mapped */
};

/* Create our bell for fab's shm region (called once the endpoint is open):
 * 0, and fab's wait fd is the FIFO; or -errno (logged). */
int fab_bell_create(struct stk_fab *fab);
/* Open the bell of the shm peer at addr into *out: 0 or -errno. */
int fab_bell_open_peer(struct stk_fab *fab, const void *addr, size_t len, struct fab_bell *out);
void fab_bell_close(struct fab_bell *bell);
/* The owner's half of the protocol (stk_fab_trywait for a bell). */
bool fab_bell_trywait(struct stk_fab *fab);

/* The sender's half: after a post to a peer that has a bell. */
/* Write the byte and set rung (the slow part of fab_bell_ring). */
void fab_bell_write(struct fab_bell *bell);
static inline void fab_bell_ring(struct fab_bell *bell)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&bell->page->armed, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&bell->page->armed, 0, __ATOMIC_SEQ_CST))
		fab_bell_write(bell);
}

/* Names "fsk-bell.<region>" / "fsk-ring.<region>": the region's name, or
 * NULL for any other file name. They are reclaimed with the regions
 * (fab_shm_unlink_regions: at exit, and those of exited processes). */
const char *fab_bell_region_of(const char *file);

#endif
