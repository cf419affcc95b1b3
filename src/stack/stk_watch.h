/* stk_watch: who watches a connection (or a nested epoll object) for
 * readiness changes.
 *
 * The list lives in the watched object; the readiness layer (stk_epoll) links
 * its items into it and installs the handlers (stk_watch_install) before the
 * first link, so the layers below only announce changes. Lock: the watch's
 * spin lock is a leaf (stk_epoll_int.h has the module's lock order). */
#ifndef STK_WATCH_H
#define STK_WATCH_H

#include <stddef.h>

/* The epoll items that must hear of the object's changes, so that epoll_wait
 * looks only at its READY LIST (O(ready), not O(registered)). Embedded in every
 * connection and epoll object, zero-initialised; list and lock belong to
 * stk_epoll. */
struct stk_watch {
	int lock;        /* spin lock, held only to walk or change the list */
	void *first;     /* stk_epoll's items; atomic: NULL = nobody watches */
};

/* Something changed for the watched object (data, credit, FIN, reset, state):
 * put every item watching it on its set's ready list (and wake nested sets).
 * One atomic load when nobody watches. Callable from any thread, with the
 * connection's lock held (it takes only stk_epoll's leaf spin locks). The
 * caller must have made the change visible first (a scan that starts after
 * this call sees it). */
static inline void stk_watch_notify(struct stk_watch *w);

/* What the readiness layer does for a change (notify: put the watchers on
 * their sets' ready lists) and for a connection that is on the kernel now
 * (kernel: its watchers hand the socket to their sets' kernel epoll fds). */
struct stk_watch_ops {
	void (*notify)(struct stk_watch *w);
	void (*kernel)(struct stk_watch *w);
};
void stk_watch_install(const struct stk_watch_ops *ops);
extern const struct stk_watch_ops *stk_watch_ops; /* set before the first link */

static inline void stk_watch_notify(struct stk_watch *w)
{
	if (__atomic_load_n(&w->first, __ATOMIC_ACQUIRE))
		stk_watch_ops->notify(w);
}

/* The watched object became a plain kernel socket: its watchers hand it over
 * to the kernel. Nothing when nobody watches. */
void stk_watch_kernel(struct stk_watch *w);

#endif
