/* epoll over accelerated sockets and kernel fds. Contracts in stk_epoll.h. */
#include "config.h"
#include "stack/stk_epoll.h"
#include "stack/stk_config.h"
#include "stack/stk_log.h"
#include "stack/stk_ready.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

/* data.u64 tags in the private set P (never visible to the app): */
#define TAG_APP 0u    /* E, the app's kernel epoll fd */
#define TAG_WAIT 2u   /* a fabric's wait fd */
/* otherwise: a connection pointer (liveness), or an inner stk_epoll | 1 */

#define EXCLUSIVE_OK (EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
		      EPOLLEXCLUSIVE)
/* event bits an item can report (the rest are flags) */
#define EVENT_BITS (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
		    EPOLLWRBAND | EPOLLMSG | EPOLLRDHUP)
#define LIVE_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) /* liveness fds in P */
#define HARVEST_MAX 64
#define LIVENESS_EVERY 32u

struct ep_item {
	int fd;                     /* the app's fd number (the key, as the kernel's) */
	struct stk_conn *conn;      /* accelerated socket, or NULL ... */
	struct stk_epoll *inner;    /* ... a nested set */
	int live_fd;                /* registered in P (liveness channel), or -1 */
	uint32_t events;            /* as the app gave them (flags included) */
	epoll_data_t data;
	bool disabled;              /* EPOLLONESHOT fired, waiting for MOD */
	bool fab_known;             /* its fabric is in ep->fabs */
	uint64_t gen;               /* EPOLLET: generation at the last evaluation */
	uint32_t last_ev;           /* EPOLLET: events at the last evaluation */
};

struct stk_epoll {
	pthread_mutex_t lock;
	int epfd;                   /* E (the app's) */
	int priv;                   /* P (ours) */
	/* protected by lock */
	int expose_fd;              /* eventfd in E, or -1 */
	bool expose_set;
	struct ep_item *items;
	unsigned n, cap;
	unsigned cursor;            /* rotation: the scan starts here */
	struct stk_ready_fabs fabs; /* fabrics of the items (wait fds are in P) */
	/* atomic */
	unsigned turn;              /* fairness: which side fills first */
	/* protected by registry_lock */
	struct stk_epoll *next;
};

/* Every object, for close() of a connection (rare) and nesting clean-up. Never
 * taken on the wait path. */
static struct stk_epoll *registry;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

static int sys_ctl(int epfd, int op, int fd, uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };
	return stk_sys.epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : -errno;
}

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
	for (unsigned i = 0; i < ep->n; i++)
		if (ep->items[i].fd == fd)
			return &ep->items[i];
	return NULL;
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

/* Remove item i (lock held), unregistering what it put in P. */
static void remove_item(struct stk_epoll *ep, unsigned i)
{
	struct ep_item *it = &ep->items[i];
	if (it->conn && it->live_fd >= 0) {
		bool shared = false;
		for (unsigned j = 0; j < ep->n; j++)
			if (j != i && ep->items[j].conn == it->conn)
				shared = true;
		if (!shared)
			sys_ctl(ep->priv, EPOLL_CTL_DEL, it->live_fd, 0, 0);
	}
	if (it->inner)
		sys_ctl(ep->priv, EPOLL_CTL_DEL, it->inner->priv, 0, 0);
	ep->items[i] = ep->items[--ep->n];
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
		if (ep->n == ep->cap) {
			unsigned cap = ep->cap ? ep->cap * 2 : 16;
			struct ep_item *items = realloc(ep->items, cap * sizeof(*items));
			if (!items) {
				ret = -ENOMEM;
				break;
			}
			ep->items = items;
			ep->cap = cap;
		}
		struct ep_item item = {
			.fd = fd, .conn = conn, .inner = inner, .live_fd = -1,
			.events = events, .data = ev->data,
		};
		if (conn) {
			int lf = stk_ready_ops.liveness_fd(conn);
			if (lf >= 0) {
				/* edge-triggered: a socket at EOF must not wake every sleep;
				 * OUT: after a migration to the kernel (stk_migrate.h) the
				 * socket's send buffer may fill and drain (before, nothing
				 * is written to it: one edge at most) */
				ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, lf, LIVE_EVENTS,
					      (uintptr_t)conn);
				if (ret == -EEXIST) /* the same connection under another fd */
					ret = 0;
				if (ret)
					break;
				item.live_fd = lf;
			}
		} else if (inner) {
			ret = sys_ctl(ep->priv, EPOLL_CTL_ADD, inner->priv, EPOLLIN | EPOLLET,
				      (uintptr_t)inner | 1u);
			if (ret)
				break;
		}
		ep->items[ep->n++] = item;
		note_fab(ep, &ep->items[ep->n - 1]);
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
		break;
	case EPOLL_CTL_DEL:
		if (!it) {
			ret = -ENOENT;
			break;
		}
		remove_item(ep, (unsigned)(it - ep->items));
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

int stk_epoll_expose(struct stk_epoll *ep)
{
	int ret = 0;
	pthread_mutex_lock(&ep->lock);
	if (ep->expose_fd < 0) {
		int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (efd < 0) {
			ret = -errno;
		} else {
			ret = sys_ctl(ep->epfd, EPOLL_CTL_ADD, efd, EPOLLIN, STK_EPOLL_EXPOSE_TAG);
			if (ret)
				stk_sys.close(efd);
			else
				ep->expose_fd = efd;
		}
	}
	pthread_mutex_unlock(&ep->lock);
	return ret;
}

/* Exposure eventfd follows the pending state, on transitions only (lock held). */
static void expose_update(struct stk_epoll *ep, bool pending)
{
	if (ep->expose_fd < 0 || pending == ep->expose_set)
		return;
	uint64_t v = 1;
	if (pending) {
		if (stk_sys.write(ep->expose_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			ep->expose_set = true;
	} else {
		if (stk_sys.read(ep->expose_fd, &v, sizeof(v)) >= 0 || errno == EAGAIN)
			ep->expose_set = false;
	}
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
	for (struct stk_epoll *o = registry; o; o = o->next) {
		pthread_mutex_lock(&o->lock);
		for (unsigned i = 0; i < o->n;) {
			if (o->items[i].inner == ep)
				remove_item(o, i);
			else
				i++;
		}
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&registry_lock);
	if (ep->expose_fd >= 0)
		stk_sys.close(ep->expose_fd);
	stk_sys.close(ep->priv);
	pthread_mutex_destroy(&ep->lock);
	free(ep->items);
	free(ep);
}

void stk_epoll_conn_closed(struct stk_conn *conn)
{
	pthread_mutex_lock(&registry_lock);
	for (struct stk_epoll *ep = registry; ep; ep = ep->next) {
		pthread_mutex_lock(&ep->lock);
		for (unsigned i = 0; i < ep->n;) {
			if (ep->items[i].conn == conn)
				remove_item(ep, i);
			else
				i++;
		}
		pthread_mutex_unlock(&ep->lock);
	}
	pthread_mutex_unlock(&registry_lock);
}

/* ---- evaluation ---- */

static bool inner_pending(struct stk_epoll *inner);

/* What the item would report now (0 = nothing), without touching its state. */
static uint32_t item_events(struct ep_item *it, uint64_t *gen)
{
	uint32_t want = it->events & EVENT_BITS;
	*gen = 0;
	if (it->conn) {
		/* events first, generation second: an arrival between the two is then
		 * either covered by this report or seen as a new edge by the next
		 * scan, never reported twice */
		short ev = stk_ready_ops.events(it->conn);
		*gen = stk_ready_ops.generation(it->conn);
		return (uint32_t)(uint16_t)stk_ready_revents(ev, (short)want);
	}
	return inner_pending(it->inner) ? (EPOLLIN | EPOLLRDNORM) & want : 0;
}

static bool is_edge(const struct ep_item *it, uint32_t r, uint64_t gen)
{
	return r && (gen != it->gen || (r & ~it->last_ev));
}

/* Would a wait on inner report something (lock order: outer, then inner)? Also
 * asked of a set itself (no lock held) before it sleeps. */
static bool inner_pending(struct stk_epoll *inner)
{
	bool pending = false;
	pthread_mutex_lock(&inner->lock);
	for (unsigned i = 0; i < inner->n && !pending; i++) {
		struct ep_item *it = &inner->items[i];
		if (it->disabled)
			continue;
		uint64_t gen;
		uint32_t r = item_events(it, &gen);
		pending = (it->events & EPOLLET) ? is_edge(it, r, gen) : r != 0;
	}
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
		if (tag == TAG_APP || tag == TAG_WAIT)
			continue; /* kernel fds are harvested from E; progress in the scan */
		if (tag & 1u) {
			struct stk_epoll *inner = (struct stk_epoll *)(uintptr_t)(tag & ~(uint64_t)1);
			pthread_mutex_lock(&inner->lock);
			harvest_priv(inner);
			pthread_mutex_unlock(&inner->lock);
		} else {
			stk_ready_ops.liveness((struct stk_conn *)(uintptr_t)tag);
		}
	}
}

/* Nested sets the scan reported in one collect: the kernel reports the same
 * nested epoll fd when its kernel part is ready, and a set must list an fd once. */
#define INNER_SEEN_MAX 8
struct inner_seen {
	unsigned n;                 /* > INNER_SEEN_MAX: too many to filter */
	uint64_t data[INNER_SEEN_MAX];
};

/* Scan the accelerated items from the rotation cursor (lock held). */
static int scan_accel(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      struct inner_seen *seen)
{
	int cnt = 0;
	bool pending = false;
	unsigned n = ep->n;
	unsigned start = n ? ep->cursor % n : 0, last = start;
	for (unsigned j = 0; j < n; j++) {
		unsigned idx = (start + j) % n;
		struct ep_item *it = &ep->items[idx];
		if (it->disabled)
			continue;
		note_fab(ep, it);
		if (cnt == max) {
			pending = true; /* maybe: the rest is reported next time */
			break;
		}
		uint64_t gen;
		uint32_t r = item_events(it, &gen);
		bool report;
		if (it->events & EPOLLET) {
			report = is_edge(it, r, gen);
			it->gen = gen;
			it->last_ev = r;
		} else {
			report = r != 0;
		}
		if (!report)
			continue;
		evs[cnt].events = r;
		evs[cnt].data = it->data;
		cnt++;
		if (it->inner) {
			if (seen->n < INNER_SEEN_MAX)
				seen->data[seen->n] = it->data.u64;
			seen->n++;
		}
		last = idx;
		if (it->events & EPOLLONESHOT)
			it->disabled = true;
		else if (!(it->events & EPOLLET))
			pending = true; /* level: still ready until consumed */
	}
	if (cnt)
		ep->cursor = last + 1;
	expose_update(ep, pending);
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
	return wait_until(ep, evs, max, stk_ready_deadline_ms(timeout_ms), sigmask);
}

int stk_epoll_wait_ts(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      const struct timespec *timeout, const sigset_t *sigmask)
{
	if (max <= 0 || (size_t)max > (size_t)INT32_MAX / sizeof(*evs))
		return -EINVAL;
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			timeout->tv_nsec >= 1000000000L))
		return -EINVAL;
	return wait_until(ep, evs, max, stk_ready_deadline_ts(timeout), sigmask);
}

static int wait_until(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      uint64_t deadline, const sigset_t *sigmask)
{
	struct stk_ready_sigs sigs = { .blocked = false };
	struct stk_ready_fabs wf = { .n = 0 };
	uint64_t spin_end = 0;
	bool priv_fresh = false;
	int ret;
	for (;;) {
		int n = collect(ep, evs, max, priv_fresh);
		priv_fresh = false;
		enum stk_ready_step step = stk_ready_spin_step(n, deadline, &spin_end, &sigs, &ret);
		if (step == STK_READY_STOP)
			break;
		if (step == STK_READY_SPIN)
			continue;
		pthread_mutex_lock(&ep->lock);
		memcpy(wf.fab, ep->fabs.fab, sizeof(wf.fab));
		wf.n = ep->fabs.n;
		pthread_mutex_unlock(&ep->lock);
		struct pollfd unused[STK_READY_FAB_MAX];
		uint64_t slice;
		int nw = stk_ready_fabs_prepare(&wf, unused, &slice);
		if (nw == -EAGAIN)
			continue; /* completions pending: the next scan drains them */
		if (nw > 0 && inner_pending(ep))
			continue; /* delivered by another thread before our trywait */
		uint64_t now = stk_ready_now_ns();
		uint64_t sleep = deadline == STK_READY_NEVER ? STK_READY_NEVER
				 : deadline > now       ? deadline - now
							 : 0;
		if (slice && slice < sleep)
			sleep = slice;
		struct timespec ts = { .tv_sec = (time_t)(sleep / 1000000000ull),
				       .tv_nsec = (long)(sleep % 1000000000ull) };
		struct pollfd pfd = { .fd = ep->priv, .events = POLLIN };
		n = stk_ready_sys_ppoll(&pfd, 1, sleep == STK_READY_NEVER ? NULL : &ts,
					stk_ready_sleep_mask(&sigs, sigmask));
		if (n < 0) {
			ret = n; /* -EINTR: a signal was delivered during the sleep */
			break;
		}
		stk_ready_fabs_backoff(&wf, n > 0);
		priv_fresh = n > 0;
	}
	stk_ready_restore_signals(&sigs);
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
	for (unsigned i = 0; i < ep->n; i++) {
		struct ep_item *it = &ep->items[i];
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
	}
	for (struct stk_epoll *ep = registry; ep; ep = ep->next) {
		refill_priv(ep);
		pthread_mutex_init(&ep->lock, NULL);
	}
	pthread_mutex_init(&registry_lock, NULL);
}
