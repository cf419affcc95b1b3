/* stk_epoll_int.h: what the epoll module's files (stk_epoll.c: objects,
 * registry, watcher hand-over, fork; stk_epoll_item.c: items and watch lists;
 * stk_epoll_ctl.c: epoll_ctl; stk_epoll_wait.c: exposure, scans, sleeps)
 * share. Private to them; the contracts are in stk_epoll.h.
 *
 * Locks of the module (their order is written here only; other comments refer
 * to this one):
 *   - epoll_registry_lock (stk_epoll.c): the list of every set (registry). Held by
 *     stk_epoll_destroy, stk_epoll_conn_closed and the hand-over of a
 *     connection to the kernel set (stk_watch_ops.kernel), so that the sets
 *     they visit cannot be destroyed under them; held with every set's lock
 *     across fork. Never taken on the wait path.
 *   - ep->lock (a mutex per set): serialises ctl and scans of one set and owns
 *     the items' settings and the set's tables (the fields marked "protected
 *     by ep->lock" or "by lock" below).
 *   - the connection lock (the stream's): held by the deliveries that call
 *     stk_watch_notify.
 *   - the watch spin lock (struct stk_watch, in every connection and set): the
 *     links of the items watching that object (w_prev, w_next, first).
 *   - ep->rdl (a spin lock per set): the set's ready list (rd_prev, rd_next,
 *     on_rdl, notified; parked is written under it too).
 * Order, in which they nest (never the other way):
 *   epoll_registry_lock → ep->lock (outer set before inner set) → connection lock →
 *   watch spin lock (connection's, then inner set's, then outer set's) →
 *   ep->rdl spin lock.
 * The spin locks guard only list links (held for a few instructions, never
 * across a call into the stream), so a delivery in any thread can queue an
 * item while a scan of its set is running. */
#ifndef STK_EPOLL_INT_H
#define STK_EPOLL_INT_H

#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_wait.h"
#include "stack/stk_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* data.u64 tags in the private set P (never visible to the app): */
#define TAG_APP 0u    /* E, the app's kernel epoll fd */
#define TAG_WAIT 2u   /* a fabric's wait fd */
#define TAG_WAKE 4u   /* our wake eventfd */
/* otherwise: a connection pointer (liveness), or an inner stk_epoll | 1 */

/* event bits an item can report (the rest are flags) */
#define EVENT_BITS (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
		    EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP)
#define LIVE_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) /* liveness fds in P */

struct ep_item {
	struct stk_epoll *ep;       /* the set holding the item */
	int fd;                     /* the app's fd number (the key, as the kernel's) */
	struct stk_conn *conn;      /* accelerated socket, or NULL ... */
	struct stk_epoll *inner;    /* ... a nested set */
	int live_fd;                /* registered in P (liveness channel), or -1 */
	/* protected by ep->lock */
	uint32_t events;            /* as the app gave them (flags included) */
	epoll_data_t data;
	bool disabled;              /* EPOLLONESHOT fired, waiting for MOD */
	bool fab_known;             /* its fabric is in ep->fabs */
	uint64_t gen;               /* EPOLLET: generation at the last evaluation */
	uint32_t last_ev;           /* EPOLLET: events at the last evaluation */
	/* protected by ep->rdl: the ready list */
	struct ep_item *rd_prev, *rd_next;
	bool on_rdl;
	bool notified;              /* a change arrived since the scan took it */
	/* protected by the watched object's watch lock */
	struct ep_item *w_prev, *w_next;
	/* Parked (set under ep->lock and ep->rdl, read under either): the app
	 * removed the item (EPOLL_CTL_DEL) but its liveness fd stays in P and the
	 * item stays on the connection's watch list, so that the app adding the
	 * connection again costs no system call (event loops that DEL and ADD a
	 * socket around every request, as redis-benchmark does, paid two
	 * epoll_ctl on P per request). A parked item is in no by_fd slot, never
	 * on the ready list, never reported; it is freed when the connection
	 * closes or leaves the fabric, or the set is destroyed. */
	bool parked;
	struct ep_item *pk_prev, *pk_next; /* ep->parked list, protected by ep->lock */
	struct ep_item *in_prev, *in_next; /* ep->inners list, protected by ep->lock */
};

struct stk_epoll {
	pthread_mutex_t lock;
	int epfd;                   /* E (the app's) */
	int priv;                   /* P (ours) */
	/* Exposure (stk_epoll_expose): set under lock, read by enqueue without it */
	int expose_fd;              /* eventfd in E, or -1 */
	bool expose_set;            /* atomic: expose_fd is readable */
	/* atomic: E is watched by the kernel (poll, select, a kernel set): the
	 * exposure follows the ready list. Otherwise (created for a kick only)
	 * it is only ever lowered: no system call on the wait path. */
	bool expose_wanted;
	/* protected by lock */
	struct ep_item **by_fd;     /* items by the app's fd number */
	struct ep_item *inners;     /* items that are nested sets */
	unsigned by_fd_cap, n;
	struct ep_item *parked;     /* parked items (see struct ep_item) */
	struct stk_ready_fabs fabs; /* fabrics of the items (wait fds are in P) */
	unsigned fab_refs[STK_READY_FAB_MAX]; /* items with fab_known per fabs.fab[i]: a
					       * fabric leaves with its last item */
	/* the ready list: items that may report (kernel order: in the order they
	 * became ready; a level-triggered item that reported goes to the back) */
	int rdl;                    /* spin lock */
	struct ep_item *rd_first, *rd_last;
	unsigned rd_count;
	/* outer sets' items watching this set */
	struct stk_watch watch;
	/* waking sleepers: a thread that queues an item while another sleeps on P
	 * (its change may have come through no fd P holds: another thread's
	 * progress, a ctl, a shutdown) rings wake_fd, once per sleep */
	int wake_fd;                /* eventfd in P */
	unsigned appends;           /* atomic: items queued so far */
	int sleepers;               /* atomic: threads asleep (or about to be) on P */
	int wake_pending;           /* atomic: wake_fd was rung, not drained yet */
	/* atomic */
	unsigned turn;              /* fairness: which side fills first */
	/* protected by epoll_registry_lock */
	struct stk_epoll *next;
};

static inline void spin_lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(l, __ATOMIC_RELAXED))
			stk_wait_cpu_relax();
}

static inline void spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* ---- the ready list (ep->rdl held) ---- */

static inline void rdl_append(struct stk_epoll *ep, struct ep_item *it)
{
	it->rd_next = NULL;
	it->rd_prev = ep->rd_last;
	if (ep->rd_last)
		ep->rd_last->rd_next = it;
	else
		ep->rd_first = it;
	ep->rd_last = it;
	it->on_rdl = true;
	__atomic_store_n(&ep->rd_count, ep->rd_count + 1, __ATOMIC_RELAXED); /* read unlocked */
}

static inline void rdl_unlink(struct stk_epoll *ep, struct ep_item *it)
{
	if (!it->on_rdl)
		return;
	if (it->rd_prev)
		it->rd_prev->rd_next = it->rd_next;
	else
		ep->rd_first = it->rd_next;
	if (it->rd_next)
		it->rd_next->rd_prev = it->rd_prev;
	else
		ep->rd_last = it->rd_prev;
	it->on_rdl = false;
	__atomic_store_n(&ep->rd_count, ep->rd_count - 1, __ATOMIC_RELAXED);
}

/* Make E readable (any thread, any lock): once until the next lowering. */
static inline void expose_raise(struct stk_epoll *ep)
{
	int efd = __atomic_load_n(&ep->expose_fd, __ATOMIC_ACQUIRE);
	if (efd < 0 || __atomic_exchange_n(&ep->expose_set, true, __ATOMIC_ACQ_REL))
		return;
	uint64_t v = 1;
	if (stk_sys.write(efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		__atomic_store_n(&ep->expose_set, false, __ATOMIC_RELEASE);
}

/* Queue an item (any thread, no lock held but the watch lock), then tell the
 * sets that hold its set. */
static inline void enqueue(struct ep_item *it)
{
	struct stk_epoll *ep = it->ep;
	bool appended = false;
	spin_lock(&ep->rdl);
	if (it->parked) { /* removed by the app: nothing to report, no one to wake */
		spin_unlock(&ep->rdl);
		return;
	}
	it->notified = true;
	if (!it->on_rdl) {
		rdl_append(ep, it);
		appended = true;
	}
	spin_unlock(&ep->rdl);
	/* appends then sleepers here, sleepers then appends in the sleeper
	 * (wait_until): one of the two sees the other */
	if (appended && __atomic_add_fetch(&ep->appends, 1, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&ep->sleepers, __ATOMIC_SEQ_CST) &&
	    !__atomic_exchange_n(&ep->wake_pending, 1, __ATOMIC_ACQ_REL)) {
		uint64_t one = 1;
		if (stk_sys.write(ep->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			__atomic_store_n(&ep->wake_pending, 0, __ATOMIC_RELEASE);
	}
	/* E is readable to the kernel as soon as something is queued: a poll or a
	 * kernel set sleeping on E wakes (the next scan or refresh lowers it) */
	if (appended && __atomic_load_n(&ep->expose_wanted, __ATOMIC_RELAXED))
		expose_raise(ep);
	stk_watch_notify(&ep->watch);
}

static inline int sys_ctl(int epfd, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	return stk_sys.epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

/* ---- stk_epoll_item.c: items and the watch lists (ep->lock held) ---- */

void ep_watch_link(struct ep_item *it);
struct ep_item *ep_watched_by(struct stk_epoll *ep, struct ep_item *it);
void ep_note_fab(struct stk_epoll *ep, struct ep_item *it);
void ep_remove_item(struct stk_epoll *ep, struct ep_item *it);
void ep_del_item(struct stk_epoll *ep, struct ep_item *it);
void ep_unpark_item(struct stk_epoll *ep, struct ep_item *it, int fd, uint32_t events,
		    epoll_data_t data);
void ep_migrate_to_kernel(struct stk_epoll *ep, struct ep_item *it);

/* ---- stk_epoll_wait.c: evaluation ---- */

uint32_t ep_item_events(struct ep_item *it, uint64_t *gen, bool drive);

#endif
