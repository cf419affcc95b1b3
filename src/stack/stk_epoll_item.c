/* epoll items: the watch lists they link into, their fabrics, their removal,
 * parking and hand-over to the kernel set. Locks: stk_epoll_int.h. */
#include "config.h"
#include "stack/stk_epoll_int.h"
#include "stack/stk_log.h"

#include <stdlib.h>
#include <string.h>

static struct stk_watch *watch_of(struct ep_item *it)
{
	return it->conn ? stk_ready_ops.watch(it->conn) : &it->inner->watch;
}

void ep_watch_link(struct ep_item *it)
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
struct ep_item *ep_watched_by(struct stk_epoll *ep, struct ep_item *it)
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

void ep_note_fab(struct stk_epoll *ep, struct ep_item *it)
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
			STK_WARN("epoll fd %d: fabric wait fd %d: %s", ep->epfd, wfd,
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
void ep_remove_item(struct stk_epoll *ep, struct ep_item *it)
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
 * alone put in P (see struct ep_item in stk_epoll_int.h), free any other. */
void ep_del_item(struct stk_epoll *ep, struct ep_item *it)
{
	if (!it->conn || it->live_fd < 0 || stk_ready_phase(it->conn) != STK_PHASE_FABRIC ||
	    watch_shared(it)) {
		ep_remove_item(ep, it);
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
void ep_unpark_item(struct stk_epoll *ep, struct ep_item *it, int fd, uint32_t events,
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
	ep_note_fab(ep, it);
}

/* The item's connection settled on the kernel (stk_lazy.h): the app's kernel
 * set E watches its socket from now on, with the events and data the app gave
 * (ep->lock held). */
void ep_migrate_to_kernel(struct stk_epoll *ep, struct ep_item *it)
{
	if (it->parked) { /* the app removed it: not for E */
		ep_remove_item(ep, it);
		return;
	}
	uint32_t events = it->events;
	if (it->disabled)
		events &= ~(uint32_t)EVENT_BITS; /* one-shot already fired: stays disarmed */
	struct epoll_event ev = { .events = events, .data = it->data };
	if (stk_sys.epoll_ctl(ep->epfd, EPOLL_CTL_ADD, it->fd, &ev) != 0 && errno != EEXIST)
		STK_DBG("epoll fd %d: fd %d back to the kernel set: %s", ep->epfd, it->fd,
			strerror(errno));
	ep_remove_item(ep, it);
}
