/* epoll_ctl over accelerated sockets and nested sets. Locks: stk_epoll_int.h. */
#include "config.h"
#include "stack/stk_epoll_int.h"

#include <stdlib.h>
#include <string.h>

#define EXCLUSIVE_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		      EPOLLEXCLUSIVE)

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

/* After ADD or MOD (lock held): queue the item when it is ready now, as the
 * kernel's ep_insert / ep_modify do (its later changes queue it themselves). */
static void queue_if_ready(struct ep_item *it)
{
	uint64_t gen;
	if (it->disabled)
		return;
	if (ep_item_events(it, &gen, false) || (it->conn && !it->fab_known))
		enqueue(it);
}

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

/* EPOLL_CTL_ADD of fd (lock held; it: the item already under fd, or NULL). */
static int ctl_add(struct stk_epoll *ep, struct ep_item *it, int fd, struct stk_conn *conn,
		   struct stk_epoll *inner, uint32_t events, epoll_data_t data)
{
	if (it)
		return -EEXIST;
	if (fd < 0)
		return -EBADF;
	int ret = reserve(ep, fd);
	if (ret)
		return ret;
	struct ep_item *known = NULL;
	if (conn) {
		struct ep_item probe = { .conn = conn };
		known = ep_watched_by(ep, &probe);
		if (known && known->parked) {
			ep_unpark_item(ep, known, fd, events, data);
			queue_if_ready(known);
			return 0;
		}
	}
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	*it = (struct ep_item){
		.ep = ep, .fd = fd, .conn = conn, .inner = inner, .live_fd = -1,
		.events = events, .data = data,
	};
	if (inner) {
		ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, inner->priv, EPOLLIN | EPOLLET,
			      (uintptr_t)inner | 1u);
		if (ret) {
			free(it);
			return ret;
		}
		it->in_next = ep->inners;
		if (ep->inners)
			ep->inners->in_prev = it;
		ep->inners = it;
	}
	ep->by_fd[fd] = it;
	ep->n++;
	ep_watch_link(it);
	if (conn) {
		int settled = watch_liveness(ep, it, known != NULL);
		if (settled < 0) {
			ep_remove_item(ep, it);
			return settled;
		}
		if (settled) {
			ep_migrate_to_kernel(ep, it);
			return 0;
		}
	}
	ep_note_fab(ep, it);
	queue_if_ready(it);
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
	case EPOLL_CTL_ADD:
		ret = ctl_add(ep, it, fd, conn, inner, events, ev->data);
		break;
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
		ep_del_item(ep, it);
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
