/* epoll_wait over accelerated sockets and kernel fds: the exposure eventfd,
 * scans of the ready list, nested sets, sleeps. Locks: stk_epoll_int.h. */
#include "config.h"
#include "stack/stk_epoll_int.h"
#include "stack/stk_cork.h"
#include "stack/stk_time.h"

#include <string.h>
#include <sys/eventfd.h>

#define HARVEST_MAX 64
#define LIVENESS_EVERY 32u

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

/* ---- evaluation ---- */

static bool inner_pending(struct stk_epoll *inner);

/* What the item would report now (0 = nothing), without touching its state.
 * drive: progress the item's fabric first (the caller did not). */
uint32_t ep_item_events(struct ep_item *it, uint64_t *gen, bool drive)
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
			ep_migrate_to_kernel(ep, it); /* missed by stk_epoll_conn_changed */
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
			ep_note_fab(ep, it);
			uint64_t gen;
			r = ep_item_events(it, &gen, !fab_was_known);
			if (phase != STK_PHASE_FABRIC &&
			    stk_ready_phase(it->conn) == STK_PHASE_KERNEL) {
				/* the evaluation settled it (a client meeting a plain
				 * server): E reports it from now on. Reporting it here
				 * too would give an EPOLLET item a second edge when E
				 * takes it with its data still unread. */
				ep_migrate_to_kernel(ep, it);
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

/* Would a wait on inner report something (lock order: stk_epoll_int.h)? */
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
