/* epoll over accelerated sockets and kernel fds: the objects, their registry,
 * the watchers' handlers (stk_watch_ops) and fork. Contracts in stk_epoll.h,
 * the module's locks in stk_epoll_int.h. */
#include "config.h"
#include "stack/stk_epoll_int.h"
#include "stack/stk_log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

int stk_epoll_live;

/* Every object (epoll_registry_lock: stk_epoll_int.h). */
static struct stk_epoll *registry;
static pthread_mutex_t epoll_registry_lock = PTHREAD_MUTEX_INITIALIZER;

/* stk_watch_ops.notify: someone watches w (stk_watch_notify checked). */
static void watch_notify(struct stk_watch *w)
{
	spin_lock(&w->lock);
	for (struct ep_item *it = w->first; it; it = it->w_next)
		enqueue(it);
	spin_unlock(&w->lock);
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
		STK_WARN("epoll_create1 for epoll fd %d: %s", epfd, strerror(-err));
		return err;
	}
	int ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, epfd, EPOLLIN, TAG_APP);
	if (ret) {
		STK_WARN("epoll fd %d: cannot watch it: %s", epfd, strerror(-ret));
		stk_sys.close(ep->priv);
		free(ep);
		return ret;
	}
	ep->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ret = ep->wake_fd < 0 ? -errno : sys_ctl(ep->priv, EPOLL_CTL_ADD, ep->wake_fd, EPOLLIN,
						  TAG_WAKE);
	if (ret) {
		STK_WARN("epoll fd %d: wake eventfd: %s", epfd, strerror(-ret));
		if (ep->wake_fd >= 0)
			stk_sys.close(ep->wake_fd);
		stk_sys.close(ep->priv);
		free(ep);
		return ret;
	}
	pthread_mutex_init(&ep->lock, NULL);
	pthread_mutex_lock(&epoll_registry_lock);
	ep->next = registry;
	registry = ep;
	pthread_mutex_unlock(&epoll_registry_lock);
	*out = ep;
	return 0;
}

int stk_epoll_fd(const struct stk_epoll *ep)
{
	return ep->epfd;
}

/* Apply fn (ep_remove_item or ep_migrate_to_kernel: both take the item off w)
 * under its set's lock to one item watching w (epoll_registry_lock held, so the set
 * cannot be destroyed meanwhile). False when none is left. */
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
	pthread_mutex_lock(&epoll_registry_lock);
	while (drop_one_watcher(w, ep_migrate_to_kernel))
		; /* E wakes its waiters when the socket is ready */
	pthread_mutex_unlock(&epoll_registry_lock);
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
	pthread_mutex_lock(&epoll_registry_lock);
	for (struct stk_epoll **p = &registry; *p; p = &(*p)->next) {
		if (*p == ep) {
			*p = ep->next;
			break;
		}
	}
	/* outer sets that hold this one forget it (as the kernel does on close) */
	while (drop_one_watcher(&ep->watch, ep_remove_item))
		;
	/* our items leave their watcher lists; still under epoll_registry_lock, so a
	 * concurrent stk_epoll_conn_closed cannot reach this set afterwards */
	pthread_mutex_lock(&ep->lock);
	for (unsigned fd = 0; fd < ep->by_fd_cap; fd++)
		if (ep->by_fd[fd])
			ep_remove_item(ep, ep->by_fd[fd]);
	while (ep->parked)
		ep_remove_item(ep, ep->parked);
	pthread_mutex_unlock(&ep->lock);
	pthread_mutex_unlock(&epoll_registry_lock);
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
	pthread_mutex_lock(&epoll_registry_lock);
	while (drop_one_watcher(w, ep_remove_item))
		;
	pthread_mutex_unlock(&epoll_registry_lock);
}

/* ---- fork ---- */

void stk_epoll_atfork_prepare(void)
{
	pthread_mutex_lock(&epoll_registry_lock);
	for (struct stk_epoll *ep = registry; ep; ep = ep->next)
		pthread_mutex_lock(&ep->lock);
}

void stk_epoll_atfork_parent(void)
{
	for (struct stk_epoll *ep = registry; ep; ep = ep->next)
		pthread_mutex_unlock(&ep->lock);
	pthread_mutex_unlock(&epoll_registry_lock);
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
		ep_remove_item(ep, ep->parked);
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
	pthread_mutex_init(&epoll_registry_lock, NULL);
}
