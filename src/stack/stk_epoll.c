/* epoll over accelerated sockets and kernel fds. Contracts in stk_epoll.h. */
#include "config.h"
#include "stack/stk_epoll.h"
#include "stack/stk_config.h"
#include "stack/stk_cork.h"
#include "stack/stk_log.h"
#include "stack/stk_ready.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

int stk_epoll_live;

/* data.u64 tags in the private set P (never visible to the app): */
#define TAG_APP 0u    /* E, the app's kernel epoll fd */
#define TAG_WAIT 2u   /* a fabric's wait fd */
#define TAG_WAKE 4u   /* our wake eventfd */
/* otherwise: a connection pointer (liveness), or an inner stk_epoll | 1 */

#define EXCLUSIVE_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		      EPOLLEXCLUSIVE)
/* event bits an item can report (the rest are flags) */
#define EVENT_BITS (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
		    EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP)
#define LIVE_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) /* liveness fds in P */
#define HARVEST_MAX 64
#define LIVENESS_EVERY 32u

/* Locks, in the order they nest (never the other way):
 *   registry_lock → ep->lock (outer set before inner set) → connection lock →
 *   watch spin lock (connection's, then inner set's, then outer set's) →
 *   ep->rdl spin lock.
 * ep->lock serialises ctl and scans of one set and owns the items' settings;
 * the spin locks guard only list links (held for a few instructions, never
 * across a call into the stream), so a delivery in any thread can queue an
 * item while a scan of its set is running. */

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
	/* protected by registry_lock */
	struct stk_epoll *next;
};

/* Every object: destroy and close of a connection hold registry_lock so that
 * the sets they visit cannot be destroyed under them. Never taken on the wait
 * path. */
static struct stk_epoll *registry;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static void spin_lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(l, __ATOMIC_RELAXED))
			stk_wait_cpu_relax();
}

static void spin_unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

/* ---- the ready list (ep->rdl held) ---- */

static void rdl_append(struct stk_epoll *ep, struct ep_item *it)
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

static void rdl_unlink(struct stk_epoll *ep, struct ep_item *it)
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

/* Queue an item (any thread, no lock held but the watch lock), then tell the
 * sets that hold its set. */
static void expose_raise(struct stk_epoll *ep);

static void enqueue(struct ep_item *it)
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

/* stk_watch_ops.notify: someone watches w (stk_watch_notify checked). */
static void watch_notify(struct stk_watch *w)
{
	spin_lock(&w->lock);
	for (struct ep_item *it = w->first; it; it = it->w_next)
		enqueue(it);
	spin_unlock(&w->lock);
}

static struct stk_watch *watch_of(struct ep_item *it)
{
	return it->conn ? stk_ready_ops.watch(it->conn) : &it->inner->watch;
}

static void watch_link(struct ep_item *it)
{
	struct stk_watch *w = watch_of(it);
	spin_lock(&w->lock);
	struct ep_item *first = w->first;
	it->w_prev = NULL;
	it->w_next = first;
	if (first)
		first->w_prev = it;
	__atomic_store_n(&w->first, it, __ATOMIC_RELEASE);
	spin_unlock(&w->lock);
}

/* Unlink; returns true when another item of the same set still watches the
 * same object (the same socket under two fds: its liveness fd stays in P). */
static bool watch_unlink(struct ep_item *it)
{
	struct stk_watch *w = watch_of(it);
	spin_lock(&w->lock);
	if (it->w_prev)
		it->w_prev->w_next = it->w_next;
	else
		__atomic_store_n(&w->first, it->w_next, __ATOMIC_RELEASE);
	if (it->w_next)
		it->w_next->w_prev = it->w_prev;
	bool shared = false;
	for (struct ep_item *o = w->first; o && !shared; o = o->w_next)
		shared = o->ep == it->ep;
	spin_unlock(&w->lock);
	return shared;
}

/* An item of ep that already watches the object of it (before linking), or
 * NULL. A parked one is the only item of ep watching its connection. */
static struct ep_item *watched_by(struct stk_epoll *ep, struct ep_item *it)
{
	struct stk_watch *w = watch_of(it);
	struct ep_item *found = NULL;
	spin_lock(&w->lock);
	for (struct ep_item *o = w->first; o && !found; o = o->w_next)
		if (o->ep == ep)
			found = o;
	spin_unlock(&w->lock);
	return found;
}

/* Does an item of ep other than it watch its object (it linked)? */
static bool watch_shared(struct ep_item *it)
{
	struct stk_watch *w = watch_of(it);
	bool shared = false;
	spin_lock(&w->lock);
	for (struct ep_item *o = w->first; o && !shared; o = o->w_next)
		shared = o != it && o->ep == it->ep;
	spin_unlock(&w->lock);
	return shared;
}

/* ---- objects ---- */

static int sys_ctl(int epfd, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	return stk_sys.epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

static const struct stk_watch_ops watch_ops;

int stk_epoll_create(int epfd, struct stk_epoll **out)
{
	/* epfd must be an epoll fd, as epoll_ctl(2) checks: removing a file that is
	 * not in it answers ENOENT from an epoll fd, EINVAL from any other file,
	 * EBADF when epfd is not open. The file asked about is a fresh epoll fd of
	 * ours, so it can never be in the app's set. */
	int probe = stk_sys.epoll_create1(EPOLL_CLOEXEC);
	if (probe < 0)
		return -errno;
	struct epoll_event none = { 0 };
	int pr = stk_sys.epoll_ctl(epfd, EPOLL_CTL_DEL, probe, &none) == 0 ? 0 : errno;
	stk_sys.close(probe);
	if (pr == EBADF || pr == EINVAL)
		return -pr;
	struct stk_epoll *ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	stk_watch_install(&watch_ops); /* before any item links into a watch */
	ep->epfd = epfd;
	ep->expose_fd = -1;
	ep->priv = stk_sys.epoll_create1(EPOLL_CLOEXEC);
	if (ep->priv < 0) {
		int err = -errno;
		free(ep);
		FSK_WARN("epoll_create1 for epoll fd %d: %s", epfd, strerror(-err));
		return err;
	}
	int ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, epfd, EPOLLIN, TAG_APP);
	if (ret) {
		FSK_WARN("epoll fd %d: cannot watch it: %s", epfd, strerror(-ret));
		stk_sys.close(ep->priv);
		free(ep);
		return ret;
	}
	ep->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ret = ep->wake_fd < 0 ? -errno : sys_ctl(ep->priv, EPOLL_CTL_ADD, ep->wake_fd, EPOLLIN,
						  TAG_WAKE);
	if (ret) {
		FSK_WARN("epoll fd %d: wake eventfd: %s", epfd, strerror(-ret));
		if (ep->wake_fd >= 0)
			stk_sys.close(ep->wake_fd);
		stk_sys.close(ep->priv);
		free(ep);
		return ret;
	}
	pthread_mutex_init(&ep->lock, NULL);
	pthread_mutex_lock(&registry_lock);
	ep->next = registry;
	registry = ep;
	pthread_mutex_unlock(&registry_lock);
	*out = ep;
	return 0;
}

int stk_epoll_fd(const struct stk_epoll *ep)
{
	return ep->epfd;
}

static struct ep_item *find(struct stk_epoll *ep, int fd)
{
	return fd >= 0 && (unsigned)fd < ep->by_fd_cap ? ep->by_fd[fd] : NULL;
}

static int reserve(struct stk_epoll *ep, int fd)
{
	if ((unsigned)fd < ep->by_fd_cap)
		return 0;
	unsigned cap = ep->by_fd_cap ? ep->by_fd_cap : 64;
	while (cap <= (unsigned)fd)
		cap *= 2;
	struct ep_item **a = realloc(ep->by_fd, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	memset(a + ep->by_fd_cap, 0, (cap - ep->by_fd_cap) * sizeof(*a));
	ep->by_fd = a;
	ep->by_fd_cap = cap;
	return 0;
}

static void note_fab(struct stk_epoll *ep, struct ep_item *it)
{
	if (it->fab_known || !it->conn)
		return;
	struct stk_fab *fab = stk_ready_ops.fab(it->conn);
	if (!fab)
		return;
	it->fab_known = true;
	unsigned before = ep->fabs.n;
	stk_ready_fabs_add(&ep->fabs, it->conn);
	for (unsigned i = 0; i < ep->fabs.n; i++)
		if (ep->fabs.fab[i] == fab)
			ep->fab_refs[i]++;
	if (ep->fabs.n == before)
		return;
	int wfd = stk_ready_ops.wait_fd(fab);
	if (wfd >= 0) {
		int ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, wfd, EPOLLIN, TAG_WAIT);
		if (ret && ret != -EEXIST)
			FSK_WARN("epoll fd %d: fabric wait fd %d: %s", ep->epfd, wfd,
				 strerror(-ret));
	}
}

/* The item leaves (lock held): its fabric too when no other item uses it, so
 * that a set whose connections all left the fabric (migrated to the kernel)
 * neither progresses it nor sleeps in slices for it. */
static void forget_fab(struct stk_epoll *ep, struct ep_item *it)
{
	if (!it->fab_known)
		return;
	struct stk_fab *fab = stk_ready_ops.fab(it->conn);
	for (unsigned i = 0; i < ep->fabs.n; i++) {
		if (ep->fabs.fab[i] != fab || --ep->fab_refs[i] > 0)
			continue;
		int wfd = stk_ready_ops.wait_fd(fab);
		if (wfd >= 0)
			sys_ctl(ep->priv, EPOLL_CTL_DEL, wfd, 0, 0);
		ep->fabs.n--;
		ep->fabs.fab[i] = ep->fabs.fab[ep->fabs.n];
		ep->fab_refs[i] = ep->fab_refs[ep->fabs.n];
		return;
	}
}

static void parked_unlink(struct stk_epoll *ep, struct ep_item *it)
{
	if (it->pk_prev)
		it->pk_prev->pk_next = it->pk_next;
	else
		ep->parked = it->pk_next;
	if (it->pk_next)
		it->pk_next->pk_prev = it->pk_prev;
	it->pk_prev = it->pk_next = NULL;
}

/* Remove and free an item, parked or not (lock held), unregistering what it
 * put in P. */
static void remove_item(struct stk_epoll *ep, struct ep_item *it)
{
	if (it->parked) {
		parked_unlink(ep, it);
	} else {
		ep->by_fd[it->fd] = NULL;
		ep->n--;
	}
	if (it->conn)
		forget_fab(ep, it);
	/* off the watch first: a delivery in another thread (the negotiation
	 * thread, the cork flusher) may be queueing it under the watch lock, and
	 * would put a freed item back on the ready list */
	bool shared = watch_unlink(it);
	spin_lock(&ep->rdl);
	rdl_unlink(ep, it);
	spin_unlock(&ep->rdl);
	if (it->conn && it->live_fd >= 0 && !shared)
		sys_ctl(ep->priv, EPOLL_CTL_DEL, it->live_fd, 0, 0);
	if (it->inner) {
		sys_ctl(ep->priv, EPOLL_CTL_DEL, it->inner->priv, 0, 0);
		if (it->in_prev)
			it->in_prev->in_next = it->in_next;
		else
			ep->inners = it->in_next;
		if (it->in_next)
			it->in_next->in_prev = it->in_prev;
	}
	free(it);
}

/* EPOLL_CTL_DEL (lock held): park an item whose connection's liveness fd it
 * alone put in P (see struct ep_item), free any other. */
static void del_item(struct stk_epoll *ep, struct ep_item *it)
{
	if (!it->conn || it->live_fd < 0 || stk_ready_phase(it->conn) != STK_PHASE_FABRIC ||
	    watch_shared(it)) {
		remove_item(ep, it);
		return;
	}
	/* its fabric leaves the set's sleeps if no other item uses it (an idle
	 * set must not keep a provider polling for it) */
	forget_fab(ep, it);
	it->fab_known = false;
	spin_lock(&ep->rdl);
	rdl_unlink(ep, it);
	it->parked = true;
	it->notified = false;
	spin_unlock(&ep->rdl);
	ep->by_fd[it->fd] = NULL;
	ep->n--;
	it->pk_prev = NULL;
	it->pk_next = ep->parked;
	if (ep->parked)
		ep->parked->pk_prev = it;
	ep->parked = it;
}

/* EPOLL_CTL_ADD of a parked item's connection (lock held): the item is the
 * app's again under fd, as a fresh one would be (its liveness fd is in P). */
static void unpark_item(struct stk_epoll *ep, struct ep_item *it, int fd, uint32_t events,
			epoll_data_t data)
{
	parked_unlink(ep, it);
	it->fd = fd;
	it->events = events;
	it->data = data;
	it->disabled = false;
	it->gen = 0;
	it->last_ev = 0;
	ep->by_fd[fd] = it;
	ep->n++;
	spin_lock(&ep->rdl);
	it->parked = false;
	spin_unlock(&ep->rdl);
	note_fab(ep, it);
}

static uint32_t item_events(struct ep_item *it, uint64_t *gen, bool drive);

/* After ADD or MOD (lock held): queue the item when it is ready now, as the
 * kernel's ep_insert / ep_modify do (its later changes queue it themselves). */
static void queue_if_ready(struct ep_item *it)
{
	uint64_t gen;
	if (it->disabled)
		return;
	if (item_events(it, &gen, false) || (it->conn && !it->fab_known))
		enqueue(it);
}

static void migrate_to_kernel(struct stk_epoll *ep, struct ep_item *it);

/* A new item of a connection, already linked on its watch (lock held): the
 * connection's liveness fd goes into P, unless the connection settled on the
 * kernel. That fd is, while the connection negotiates, its private duplicate
 * (stk_lazy.h), which the negotiation thread closes once the connection
 * settled on the kernel and stk_epoll_conn_changed moved the items watching
 * it. Here: linked under the watch's spin lock, then the phase; there: the
 * phase, then the watchers under the same lock (the lock orders the two, as a
 * pair of full fences would; ThreadSanitizer sees a lock, not a fence). So
 * either conn_changed finds this item, and it
 * waits for ep->lock, the fd open until it moved the item; or this sees the
 * kernel phase and never touches the fd, which may be closed by now or even be
 * another connection's (the item goes to E at once). Without this order the
 * app's epoll_ctl could fail with EBADF for a socket it had just accepted, or
 * P keep a closed socket under a connection's tag that outlives it. 1:
 * settled on the kernel, 0: done, -errno. */
static int watch_liveness(struct stk_epoll *ep, struct ep_item *it, bool known)
{
	if (stk_ready_phase(it->conn) == STK_PHASE_KERNEL)
		return 1;
	int lf = stk_ready_ops.liveness_fd(it->conn);
	if (lf < 0)
		return 0;
	if (!known) {
		/* edge-triggered: a socket at EOF must not wake every sleep; OUT:
		 * while negotiating, the end of a non-blocking connect; after a
		 * migration to the kernel (stk_migrate.h) the send buffer filling
		 * and draining */
		int ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, lf, LIVE_EVENTS, (uintptr_t)it->conn);
		if (ret && ret != -EEXIST) /* EEXIST: the same connection under another fd */
			return ret;
	}
	it->live_fd = lf;
	return 0;
}

static int ctl_common(struct stk_epoll *ep, int op, int fd, struct stk_conn *conn,
		      struct stk_epoll *inner, struct epoll_event *ev)
{
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return -EINVAL;
	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	uint32_t events = op == EPOLL_CTL_DEL ? 0 : ev->events;
	if (events & EPOLLEXCLUSIVE) {
		if (op == EPOLL_CTL_MOD || (events & ~(uint32_t)EXCLUSIVE_OK) || inner)
			return -EINVAL;
	}
	if (inner == ep)
		return -EINVAL;
	int ret = 0;
	pthread_mutex_lock(&ep->lock);
	struct ep_item *it = find(ep, fd);
	switch (op) {
	case EPOLL_CTL_ADD: {
		if (it) {
			ret = -EEXIST;
			break;
		}
		if (fd < 0) {
			ret = -EBADF;
			break;
		}
		ret = reserve(ep, fd);
		if (ret)
			break;
		struct ep_item *known = NULL;
		if (conn) {
			struct ep_item probe = { .conn = conn };
			known = watched_by(ep, &probe);
			if (known && known->parked) {
				unpark_item(ep, known, fd, events, ev->data);
				queue_if_ready(known);
				break;
			}
		}
		it = calloc(1, sizeof(*it));
		if (!it) {
			ret = -ENOMEM;
			break;
		}
		*it = (struct ep_item){
			.ep = ep, .fd = fd, .conn = conn, .inner = inner, .live_fd = -1,
			.events = events, .data = ev->data,
		};
		if (inner) {
			ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, inner->priv, EPOLLIN | EPOLLET,
				      (uintptr_t)inner | 1u);
			if (ret) {
				free(it);
				break;
			}
			it->in_next = ep->inners;
			if (ep->inners)
				ep->inners->in_prev = it;
			ep->inners = it;
		}
		ep->by_fd[fd] = it;
		ep->n++;
		watch_link(it);
		if (conn) {
			int settled = watch_liveness(ep, it, known != NULL);
			if (settled < 0) {
				ret = settled;
				remove_item(ep, it);
				break;
			}
			if (settled) {
				migrate_to_kernel(ep, it);
				break;
			}
		}
		note_fab(ep, it);
		queue_if_ready(it);
		break;
	}
	case EPOLL_CTL_MOD:
		if (!it) {
			ret = -ENOENT;
			break;
		}
		if (it->events & EPOLLEXCLUSIVE) {
			ret = -EINVAL;
			break;
		}
		it->events = events;
		it->data = ev->data;
		it->disabled = false;
		it->last_ev = 0; /* re-armed: an edge is reported again if ready */
		queue_if_ready(it);
		break;
	case EPOLL_CTL_DEL:
		if (!it) {
			ret = -ENOENT;
			break;
		}
		del_item(ep, it);
		break;
	}
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

int stk_epoll_ctl(struct stk_epoll *ep, int op, int fd, struct stk_conn *conn,
		  struct epoll_event *ev)
{
	if (!conn && op != EPOLL_CTL_DEL)
		return -EINVAL;
	return ctl_common(ep, op, fd, conn, NULL, ev);
}

int stk_epoll_ctl_inner(struct stk_epoll *ep, int op, int fd, struct stk_epoll *inner,
			struct epoll_event *ev)
{
	if (!inner && op != EPOLL_CTL_DEL)
		return -EINVAL;
	return ctl_common(ep, op, fd, NULL, inner, ev);
}

/* Create the exposure eventfd (lock held). */
static int expose_locked(struct stk_epoll *ep)
{
	int ret = 0;
	if (ep->expose_fd < 0) {
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd < 0) {
			ret = -errno;
		} else {
			ret = sys_ctl(ep->epfd, EPOLL_CTL_ADD, efd, EPOLLIN, STK_EPOLL_EXPOSE_TAG);
			if (ret)
				stk_sys.close(efd);
			else
				__atomic_store_n(&ep->expose_fd, efd, __ATOMIC_RELEASE);
		}
	}
	return ret;
}

/* Make E readable (any thread, any lock): once until the next lowering. */
static void expose_raise(struct stk_epoll *ep)
{
	int efd = __atomic_load_n(&ep->expose_fd, __ATOMIC_ACQUIRE);
	if (efd < 0 || __atomic_exchange_n(&ep->expose_set, true, __ATOMIC_ACQ_REL))
		return;
	uint64_t v = 1;
	if (stk_sys.write(efd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		__atomic_store_n(&ep->expose_set, false, __ATOMIC_RELEASE);
}

/* The exposure follows pending, the state a walk found (lock held); appends is
 * ep->appends as read before that walk: an item queued since (enqueue appends,
 * then raises) raises it again after a lowering. */
static void expose_update(struct stk_epoll *ep, bool pending, unsigned appends)
{
	if (ep->expose_fd < 0)
		return;
	if (pending) {
		if (__atomic_load_n(&ep->expose_wanted, __ATOMIC_RELAXED))
			expose_raise(ep);
		return;
	}
	if (!__atomic_load_n(&ep->expose_set, __ATOMIC_ACQUIRE))
		return;
	uint64_t v;
	if (stk_sys.read(ep->expose_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	__atomic_store_n(&ep->expose_set, false, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&ep->appends, __ATOMIC_SEQ_CST) != appends)
		expose_raise(ep);
}

int stk_epoll_kick(struct stk_epoll *ep)
{
	pthread_mutex_lock(&ep->lock);
	int ret = expose_locked(ep);
	if (!ret)
		expose_raise(ep); /* the next scan or refresh lowers it */
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

struct inner_seen;
static int walk_ready(struct stk_epoll *ep, struct epoll_event *evs, int max, bool report,
		      struct inner_seen *seen);
static void harvest_priv(struct stk_epoll *ep);

int stk_epoll_refresh(struct stk_epoll *ep, bool harvest)
{
	pthread_mutex_lock(&ep->lock);
	int ret = expose_locked(ep);
	if (!ret) {
		__atomic_store_n(&ep->expose_wanted, true, __ATOMIC_RELAXED);
		if (harvest)
			harvest_priv(ep);
		/* E as the kernel sees it must say now what a wait would say, not a
		 * stale state (the kick, an item read since the last scan) */
		unsigned appends = __atomic_load_n(&ep->appends, __ATOMIC_SEQ_CST);
		ret = walk_ready(ep, NULL, 0, false, NULL) > 0;
		expose_update(ep, ret, appends);
	}
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

int stk_epoll_expose(struct stk_epoll *ep)
{
	int ret = stk_epoll_refresh(ep, false);
	return ret < 0 ? ret : 0;
}

/* Apply fn (remove_item or migrate_to_kernel: both take the item off w) under
 * its set's lock to one item watching w (registry_lock held, so the set cannot
 * be destroyed meanwhile). False when none is left. */
static bool drop_one_watcher(struct stk_watch *w,
			     void (*fn)(struct stk_epoll *ep, struct ep_item *it))
{
	spin_lock(&w->lock);
	struct ep_item *first = w->first;
	struct stk_epoll *set = first ? first->ep : NULL;
	spin_unlock(&w->lock);
	if (!set)
		return false;
	pthread_mutex_lock(&set->lock);
	/* under set->lock its items stay put: find one of them again */
	struct ep_item *it = NULL;
	spin_lock(&w->lock);
	for (struct ep_item *o = w->first; o && !it; o = o->w_next)
		if (o->ep == set)
			it = o;
	spin_unlock(&w->lock);
	if (it)
		fn(set, it);
	pthread_mutex_unlock(&set->lock);
	return true;
}

/* The item's connection settled on the kernel (stk_lazy.h): the app's kernel
 * set E watches its socket from now on, with the events and data the app gave
 * (ep->lock held). */
static void migrate_to_kernel(struct stk_epoll *ep, struct ep_item *it)
{
	if (it->parked) { /* the app removed it: not for E */
		remove_item(ep, it);
		return;
	}
	uint32_t events = it->events;
	if (it->disabled)
		events &= ~(uint32_t)EVENT_BITS; /* one-shot already fired: stays disarmed */
	struct epoll_event ev = { .events = events, .data = it->data };
	if (stk_sys.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, it->fd, &ev) != 0 && errno != EEXIST)
		FSK_DBG("epoll fd %d: fd %d back to the kernel set: %s", ep->epfd, it->fd,
			strerror(errno));
	remove_item(ep, it);
}

/* stk_watch_ops.kernel: the watched connection settled on the kernel (or
 * migrated with nothing left to read): every set watching it hands it to its
 * kernel set E. */
static void watch_kernel(struct stk_watch *w)
{
	/* the watch's lock orders this with an EPOLL_CTL_ADD's link
	 * (watch_liveness): a set adding conn meanwhile is seen here, or sees
	 * the kernel phase itself */
	spin_lock(&w->lock);
	bool watched = w->first != NULL;
	spin_unlock(&w->lock);
	if (!watched)
		return;
	pthread_mutex_lock(&registry_lock);
	while (drop_one_watcher(w, migrate_to_kernel))
		; /* E wakes its waiters when the socket is ready */
	pthread_mutex_unlock(&registry_lock);
}

static const struct stk_watch_ops watch_ops = {
	.notify = watch_notify,
	.kernel = watch_kernel,
};

void stk_epoll_conn_changed(struct stk_conn *conn)
{
	struct stk_watch *w = stk_ready_ops.watch(conn);
	if (stk_ready_phase(conn) != STK_PHASE_KERNEL)
		stk_watch_notify(w); /* on the fabric: its generation moved: a new edge */
	else
		watch_kernel(w);
}

void stk_epoll_destroy(struct stk_epoll *ep)
{
	pthread_mutex_lock(&registry_lock);
	for (struct stk_epoll **p = &registry; *p; p = &(*p)->next) {
		if (*p == ep) {
			*p = ep->next;
			break;
		}
	}
	/* outer sets that hold this one forget it (as the kernel does on close) */
	while (drop_one_watcher(&ep->watch, remove_item))
		;
	/* our items leave their watcher lists; still under registry_lock, so a
	 * concurrent stk_epoll_conn_closed cannot reach this set afterwards */
	pthread_mutex_lock(&ep->lock);
	for (unsigned fd = 0; fd < ep->by_fd_cap; fd++)
		if (ep->by_fd[fd])
			remove_item(ep, ep->by_fd[fd]);
	while (ep->parked)
		remove_item(ep, ep->parked);
	pthread_mutex_unlock(&ep->lock);
	pthread_mutex_unlock(&registry_lock);
	if (ep->expose_fd >= 0)
		stk_sys.close(ep->expose_fd);
	stk_sys.close(ep->wake_fd);
	stk_sys.close(ep->priv);
	pthread_mutex_destroy(&ep->lock);
	free(ep->by_fd);
	free(ep);
}

void stk_epoll_conn_closed(struct stk_conn *conn)
{
	struct stk_watch *w = stk_ready_ops.watch(conn);
	if (!__atomic_load_n(&w->first, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&registry_lock);
	while (drop_one_watcher(w, remove_item))
		;
	pthread_mutex_unlock(&registry_lock);
}

/* ---- evaluation ---- */

static bool inner_pending(struct stk_epoll *inner);

/* What the item would report now (0 = nothing), without touching its state.
 * drive: progress the item's fabric first (the caller did not). */
static uint32_t item_events(struct ep_item *it, uint64_t *gen, bool drive)
{
	uint32_t want = it->events & EVENT_BITS;
	*gen = 0;
	if (it->conn) {
		/* events first, generation second: an arrival between the two is then
		 * either covered by this report or seen as a new edge by the next
		 * scan, never reported twice */
		/* the scan progressed the set's fabrics just before (walk_ready);
		 * an item whose fabric was not known then drives its own */
		short ev = stk_ready_ops.events_now && it->fab_known && !drive &&
				   stk_ready_phase(it->conn) == STK_PHASE_FABRIC
				   ? stk_ready_ops.events_now(it->conn)
				   : stk_ready_ops.events(it->conn);
		*gen = stk_ready_ops.generation(it->conn);
		return (uint32_t)(uint16_t)stk_ready_revents(ev, (short)want);
	}
	return inner_pending(it->inner) ? (EPOLLIN | EPOLLRDNORM) & want : 0;
}

static bool is_edge(const struct ep_item *it, uint32_t r, uint64_t gen)
{
	return r && (gen != it->gen || (r & ~it->last_ev));
}

/* Nested sets the scan reported in one collect: the kernel reports the same
 * nested epoll fd when its kernel part is ready, and a set must list an fd once. */
#define INNER_SEEN_MAX 8
struct inner_seen {
	unsigned n;                 /* > INNER_SEEN_MAX: too many to filter */
	uint64_t data[INNER_SEEN_MAX];
};

/* Walk the ready list (lock held): drive the set's fabrics first (deliveries
 * queue items), then take at most the items queued when the walk starts,
 * each evaluated without any spin lock held. report: fill evs (up to max),
 * update edge and one-shot state, send level-triggered reporters to the back.
 * !report (max 0): stop at the first item that would report, leave it. Items
 * that would not report leave the list, unless a change arrived meanwhile or
 * they wait for provider room. Returns the count (report) or 1/0 (pending). */
static int walk_ready(struct stk_epoll *ep, struct epoll_event *evs, int max, bool report,
		      struct inner_seen *seen)
{
	int cnt = 0;
	for (unsigned i = 0; i < ep->fabs.n; i++)
		stk_ready_ops.progress(ep->fabs.fab[i]); /* deliveries queue items */
	spin_lock(&ep->rdl);
	/* A nested set's changes reach us only through deliveries on its own
	 * fabrics, which no one drives while the app waits here: evaluate every
	 * nested set (its evaluation drives them; rare, and few per set). */
	for (struct ep_item *in = ep->inners; in; in = in->in_next)
		if (!in->on_rdl && !in->disabled)
			rdl_append(ep, in);
	struct ep_item *it = ep->rd_first;
	unsigned todo = ep->rd_count;
	spin_unlock(&ep->rdl);
	for (; it && todo; todo--) {
		if (report && cnt == max)
			break;
		spin_lock(&ep->rdl);
		struct ep_item *next = it->rd_next;
		it->notified = false;
		spin_unlock(&ep->rdl);
		int phase = it->conn ? stk_ready_phase(it->conn) : STK_PHASE_FABRIC;
		if (phase == STK_PHASE_KERNEL) {
			migrate_to_kernel(ep, it); /* missed by stk_epoll_conn_changed */
			it = next;
			continue;
		}
		bool fire = false, keep = false;
		uint32_t r = 0;
		if (!it->disabled) {
			/* a fabric learnt only now was not progressed above: the
			 * item drives it itself this once (a conn that just left
			 * the negotiation may have its first bytes waiting) */
			bool fab_was_known = it->fab_known;
			note_fab(ep, it);
			uint64_t gen;
			r = item_events(it, &gen, !fab_was_known);
			if (phase != STK_PHASE_FABRIC &&
			    stk_ready_phase(it->conn) == STK_PHASE_KERNEL) {
				/* the evaluation settled it (a client meeting a plain
				 * server): E reports it from now on. Reporting it here
				 * too would give an EPOLLET item a second edge when E
				 * takes it with its data still unread. */
				migrate_to_kernel(ep, it);
				it = next;
				continue;
			}
			if (it->events & EPOLLET) {
				fire = is_edge(it, r, gen);
				if (report) {
					it->gen = gen;
					it->last_ev = r;
				}
			} else {
				fire = r != 0;
			}
			/* no message will announce provider room: poll such items
			 * (and one on the fabric whose fabric we cannot name yet); a
			 * negotiating conn is announced by its kernel socket (in P)
			 * and its phase changes: keeping it would hold the set ready
			 * (E readable) and every sleep would return at once */
			keep = it->conn && ((!it->fab_known &&
					     stk_ready_phase(it->conn) == STK_PHASE_FABRIC) ||
					    ((it->events & EPOLLOUT) && !(r & EPOLLOUT) &&
					     stk_ready_ops.tx_blocked &&
					     stk_ready_ops.tx_blocked(it->conn)));
		}
		if (fire && !report)
			return 1;
		if (fire) {
			evs[cnt].events = r;
			evs[cnt].data = it->data;
			cnt++;
			if (it->inner) {
				if (seen->n < INNER_SEEN_MAX)
					seen->data[seen->n] = it->data.u64;
				seen->n++;
			}
			if (it->events & EPOLLONESHOT)
				it->disabled = true;
			else if (!(it->events & EPOLLET))
				keep = true; /* level: still ready until consumed */
		}
		spin_lock(&ep->rdl);
		if (keep || (it->notified && !it->disabled)) {
			rdl_unlink(ep, it);
			rdl_append(ep, it);
		} else {
			rdl_unlink(ep, it);
		}
		spin_unlock(&ep->rdl);
		it = next;
	}
	return cnt;
}

/* Would a wait on inner report something (lock order: outer, then inner)? */
static bool inner_pending(struct stk_epoll *inner)
{
	pthread_mutex_lock(&inner->lock);
	unsigned appends = __atomic_load_n(&inner->appends, __ATOMIC_SEQ_CST);
	bool pending = walk_ready(inner, NULL, 0, false, NULL) > 0;
	/* the outer set also harvests inner's fd from its kernel set E: the
	 * exposure there must agree (a stale one would report inner twice or
	 * when it has nothing) */
	expose_update(inner, pending, appends);
	pthread_mutex_unlock(&inner->lock);
	return pending;
}

/* P said something: run the liveness checks it asks for (lock held). */
static void harvest_priv(struct stk_epoll *ep)
{
	struct epoll_event pev[HARVEST_MAX];
	int n = stk_sys.epoll_wait(ep->priv, pev, HARVEST_MAX, 0);
	for (int i = 0; i < n; i++) {
		uint64_t tag = pev[i].data.u64;
		if (tag == TAG_WAKE) {
			/* drain first, then allow the next ring: a ring in between finds
			 * its item seen by the scan that follows (appends moved) */
			uint64_t v;
			ssize_t r = stk_sys.read(ep->wake_fd, &v, sizeof(v));
			(void)r; /* EAGAIN: another thread drained it */
			__atomic_store_n(&ep->wake_pending, 0, __ATOMIC_RELEASE);
			continue;
		}
		if (tag == TAG_APP || tag == TAG_WAIT)
			continue; /* kernel fds are harvested from E; progress in the scan */
		if (tag & 1u) {
			struct stk_epoll *inner = (struct stk_epoll *)(uintptr_t)(tag & ~(uint64_t)1);
			pthread_mutex_lock(&inner->lock);
			harvest_priv(inner);
			pthread_mutex_unlock(&inner->lock);
		} else {
			struct stk_conn *conn = (struct stk_conn *)(uintptr_t)tag;
			/* negotiating: its bytes or the end of a connect; migrated: kernel
			 * data; else the peer's end: evaluate the items either way */
			if (stk_ready_phase(conn) == STK_PHASE_FABRIC)
				stk_ready_ops.liveness(conn);
			stk_watch_notify(stk_ready_ops.watch(conn));
		}
	}
}

/* Report from the ready list (lock held). */
static int scan_accel(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      struct inner_seen *seen)
{
	unsigned appends = __atomic_load_n(&ep->appends, __ATOMIC_SEQ_CST);
	int cnt = walk_ready(ep, evs, max, true, seen);
	spin_lock(&ep->rdl);
	bool pending = ep->rd_count != 0;
	spin_unlock(&ep->rdl);
	expose_update(ep, pending, appends);
	return cnt;
}

/* Zero-timeout harvest of E, without our exposure eventfd. */
static int harvest_kernel(struct stk_epoll *ep, struct epoll_event *evs, int max)
{
	int n = stk_sys.epoll_wait(ep->epfd, evs, max, 0);
	if (n < 0)
		return -errno;
	int out = 0;
	for (int i = 0; i < n; i++)
		if (evs[i].data.u64 != STK_EPOLL_EXPOSE_TAG)
			evs[out++] = evs[i];
	return out;
}

/* Drop from evs[0..n) the kernel's reports of nested sets the scan already
 * reported; returns the new count. */
static int drop_seen(struct epoll_event *evs, int n, const struct inner_seen *seen)
{
	if (seen->n == 0 || seen->n > INNER_SEEN_MAX)
		return n;
	int out = 0;
	for (int i = 0; i < n; i++) {
		bool dup = false;
		for (unsigned j = 0; j < seen->n && !dup; j++)
			dup = evs[i].data.u64 == seen->data[j];
		if (!dup)
			evs[out++] = evs[i];
	}
	return out;
}

static int collect(struct stk_epoll *ep, struct epoll_event *evs, int max, bool priv_fresh)
{
	struct inner_seen seen = { .n = 0 };
	unsigned turn = __atomic_fetch_add(&ep->turn, 1, __ATOMIC_RELAXED);
	bool kernel_first = turn & 1;
	/* Liveness edges wait in P until a sleep; a set that is always busy never
	 * sleeps, so look at P now and then too (a dead peer is found within
	 * LIVENESS_EVERY waits). */
	priv_fresh |= (turn % LIVENESS_EVERY) == 0;
	int cnt = 0;
	if (kernel_first) {
		cnt = harvest_kernel(ep, evs, max);
		if (cnt < 0)
			return cnt;
	}
	int kcnt = cnt;
	pthread_mutex_lock(&ep->lock);
	if (priv_fresh)
		harvest_priv(ep);
	int acc = cnt < max ? scan_accel(ep, evs + cnt, max - cnt, &seen) : 0;
	pthread_mutex_unlock(&ep->lock);
	if (kernel_first) {
		int kept = drop_seen(evs, kcnt, &seen);
		if (kept < kcnt)
			memmove(evs + kept, evs + kcnt, (size_t)acc * sizeof(*evs));
		return kept + acc;
	}
	cnt += acc;
	if (cnt < max) {
		int k = harvest_kernel(ep, evs + cnt, max - cnt);
		if (k < 0)
			return cnt ? cnt : k;
		cnt += drop_seen(evs + cnt, k, &seen);
	}
	return cnt;
}

static int wait_until(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      uint64_t deadline, const sigset_t *sigmask);

int stk_epoll_wait(struct stk_epoll *ep, struct epoll_event *evs, int max, int timeout_ms,
		   const sigset_t *sigmask)
{
	if (max <= 0 || (size_t)max > (size_t)INT32_MAX / sizeof(*evs))
		return -EINVAL;
	return wait_until(ep, evs, max, stk_wait_deadline_ms(timeout_ms), sigmask);
}

int stk_epoll_wait_ts(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      const struct timespec *timeout, const sigset_t *sigmask)
{
	if (max <= 0 || (size_t)max > (size_t)INT32_MAX / sizeof(*evs))
		return -EINVAL;
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			timeout->tv_nsec >= 1000000000L))
		return -EINVAL;
	return wait_until(ep, evs, max, stk_wait_deadline_ts(timeout), sigmask);
}

/* Doorbells for every accelerated item of ep and of the sets it nests
 * (stk_ready_bells_add): their doorbells ring on liveness channels in their
 * P, which ours holds. */
static void bells_add(struct stk_epoll *ep, struct stk_ready_bells *b)
{
	pthread_mutex_lock(&ep->lock);
	unsigned seen = 0;
	for (unsigned fd = 0; fd < ep->by_fd_cap && seen < ep->n; fd++) {
		struct ep_item *it = ep->by_fd[fd];
		if (!it)
			continue;
		seen++;
		if (it->conn)
			stk_ready_bells_add(b, it->conn);
		else if (it->inner)
			bells_add(it->inner, b);
		if (b->uncovered && !b->send)
			break;
	}
	pthread_mutex_unlock(&ep->lock);
}

static int bells(struct stk_epoll *ep, bool send)
{
	struct stk_ready_bells b = { .send = send };
	bells_add(ep, &b);
	return stk_ready_bells_result(&b);
}

/* The fabrics a sleep on ep must cover: its own and those of the sets it
 * nests (lock held), deduplicated, at most STK_READY_FAB_MAX. */
static void sleep_fabs(struct stk_epoll *ep, struct stk_ready_fabs *f)
{
	for (unsigned i = 0; i < ep->fabs.n; i++) {
		unsigned j = 0;
		while (j < f->n && f->fab[j] != ep->fabs.fab[i])
			j++;
		if (j == f->n && f->n < STK_READY_FAB_MAX)
			f->fab[f->n++] = ep->fabs.fab[i];
	}
	for (struct ep_item *in = ep->inners; in; in = in->in_next) {
		pthread_mutex_lock(&in->inner->lock);
		sleep_fabs(in->inner, f);
		pthread_mutex_unlock(&in->inner->lock);
	}
}

int stk_epoll_prepare_sleep(struct stk_epoll *ep, bool announce, int *priv_fd)
{
	struct stk_ready_fabs wf = { .n = 0 };
	pthread_mutex_lock(&ep->lock);
	sleep_fabs(ep, &wf);
	pthread_mutex_unlock(&ep->lock);
	struct pollfd unused[STK_READY_FAB_MAX];
	uint64_t slice;
	int nw = stk_ready_fabs_prepare(&wf, unused, &slice);
	if (nw == -EAGAIN)
		return STK_READY_BELLS_RECHECK; /* completions pending */
	int b = slice ? bells(ep, announce) : STK_READY_BELLS_SLEEP;
	if (b == STK_READY_BELLS_SLEEP && nw > 0 && stk_epoll_refresh(ep, false) > 0)
		return STK_READY_BELLS_RECHECK; /* delivered before our trywait */
	*priv_fd = ep->priv;
	return b;
}

static int wait_until(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      uint64_t deadline, const sigset_t *sigmask)
{
	struct stk_wait_sigs sigs = { .blocked = false };
	struct stk_ready_fabs wf = { .n = 0 };
	uint64_t spin_end = 0;
	bool priv_fresh = false;
	int ret;
	stk_cork_before_wait();
	for (;;) {
		unsigned appends = __atomic_load_n(&ep->appends, __ATOMIC_SEQ_CST);
		int n = collect(ep, evs, max, priv_fresh);
		priv_fresh = false;
		enum stk_wait_step step = stk_wait_spin_step(n, deadline, &spin_end, &sigs, &ret);
		if (step == STK_WAIT_STOP)
			break;
		if (step == STK_WAIT_SPIN)
			continue;
		pthread_mutex_lock(&ep->lock);
		wf.n = 0;
		sleep_fabs(ep, &wf);
		pthread_mutex_unlock(&ep->lock);
		struct pollfd unused[STK_READY_FAB_MAX];
		uint64_t slice;
		int nw = stk_ready_fabs_prepare(&wf, unused, &slice);
		if (nw == -EAGAIN)
			continue; /* completions pending: the next scan drains them */
		if (slice) {
			int b = bells(ep, slice >= STK_READY_ANNOUNCE_NS);
			if (b == STK_READY_BELLS_RECHECK)
				continue; /* announced: scan once more before sleeping */
			if (b == STK_READY_BELLS_SLEEP)
				slice = 0;
		}
		/* something queued since our scan began (a delivery by another
		 * thread before our trywait, a ctl...): look again; from now on any
		 * queueing rings wake_fd */
		__atomic_add_fetch(&ep->sleepers, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&ep->appends, __ATOMIC_SEQ_CST) != appends) {
			__atomic_sub_fetch(&ep->sleepers, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		uint64_t now = stk_now_ns();
		uint64_t sleep = deadline == STK_WAIT_NEVER ? STK_WAIT_NEVER
				 : deadline > now       ? deadline - now
							 : 0;
		if (slice && slice < sleep)
			sleep = slice;
		struct timespec ts = { .tv_sec = (time_t)(sleep / 1000000000ull),
				       .tv_nsec = (long)(sleep % 1000000000ull) };
		struct pollfd pfd = { .fd = ep->priv, .events = POLLIN };
		n = stk_wait_sys_ppoll(&pfd, 1, sleep == STK_WAIT_NEVER ? NULL : &ts,
					stk_wait_sleep_mask(&sigs, sigmask));
		__atomic_sub_fetch(&ep->sleepers, 1, __ATOMIC_SEQ_CST);
		if (n < 0) {
			ret = n; /* -EINTR: a signal was delivered during the sleep */
			break;
		}
		stk_ready_fabs_backoff(&wf, n > 0);
		priv_fresh = n > 0;
	}
	stk_wait_restore_signals(&sigs);
	return ret;
}

/* ---- fork ---- */

void stk_epoll_atfork_prepare(void)
{
	pthread_mutex_lock(&registry_lock);
	for (struct stk_epoll *ep = registry; ep; ep = ep->next)
		pthread_mutex_lock(&ep->lock);
}

void stk_epoll_atfork_parent(void)
{
	for (struct stk_epoll *ep = registry; ep; ep = ep->next)
		pthread_mutex_unlock(&ep->lock);
	pthread_mutex_unlock(&registry_lock);
}

/* Fill a fresh P for ep (the items' connections no longer have a fabric here). */
static void refill_priv(struct stk_epoll *ep)
{
	if (ep->priv < 0)
		return;
	sys_ctl(ep->priv, EPOLL_CTL_ADD, ep->epfd, EPOLLIN, TAG_APP);
	if (ep->wake_fd >= 0)
		sys_ctl(ep->priv, EPOLL_CTL_ADD, ep->wake_fd, EPOLLIN, TAG_WAKE);
	/* the fresh P does not hold the parked items' fds: they go */
	while (ep->parked)
		remove_item(ep, ep->parked);
	for (unsigned fd = 0; fd < ep->by_fd_cap; fd++) {
		struct ep_item *it = ep->by_fd[fd];
		if (!it)
			continue;
		it->fab_known = false;
		if (it->conn && it->live_fd >= 0) {
			int ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, it->live_fd, LIVE_EVENTS,
					  (uintptr_t)it->conn);
			if (ret && ret != -EEXIST)
				it->live_fd = -1;
		} else if (it->inner && it->inner->priv >= 0) {
			sys_ctl(ep->priv, EPOLL_CTL_ADD, it->inner->priv, EPOLLIN | EPOLLET,
				(uintptr_t)it->inner | 1u);
		}
		if (!it->disabled && !it->on_rdl)
			rdl_append(ep, it); /* evaluate everything once in the child */
	}
}

void stk_epoll_atfork_child(void)
{
	/* P is shared with the parent after fork: changing it would change the
	 * parent's. Each set gets its own, first all of them (nesting refers to
	 * inner sets' P), then their contents. */
	for (struct stk_epoll *ep = registry; ep; ep = ep->next) {
		stk_sys.close(ep->priv);
		ep->priv = stk_sys.epoll_create1(EPOLL_CLOEXEC);
		ep->fabs.n = 0;
		memset(ep->fab_refs, 0, sizeof(ep->fab_refs));
		/* the wake eventfd too: rings must not cross between the processes;
		 * spin locks and sleeper counts belonged to threads that are gone */
		stk_sys.close(ep->wake_fd);
		ep->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		ep->rdl = 0;
		ep->watch.lock = 0;
		ep->sleepers = 0;
		ep->wake_pending = 0;
	}
	for (struct stk_epoll *ep = registry; ep; ep = ep->next) {
		refill_priv(ep);
		pthread_mutex_init(&ep->lock, NULL);
	}
	pthread_mutex_init(&registry_lock, NULL);
}
