/* poll, ppoll, select and pselect over any mix of accelerated sockets and kernel
 * fds. The contracts are in stk_ready.h. */
#include "config.h"
#include "stack/stk_ready.h"
#include "stack/stk_time.h"
#include "stack/stk_wait.h"
#include "stack/stk_config.h"
#include "stack/stk_cork.h"
#include "stack/stk_counters.h"
#include "stack/stk_epoll.h"
#include "stack/stk_stream.h"
#include "stack/stk_wake.h"

#include <errno.h>
#include <string.h>
#include <sys/select.h>

#define STACK_FDS 32   /* entries handled without the thread-local scratch */
#define LIVENESS_EVERY 32u /* a busy set looks at the liveness channels this often */

static __thread unsigned mixed_calls;

/* poll_deadline's deadline argument: compute it from timeout when needed */
#define DEADLINE_FROM_TIMEOUT (STK_WAIT_NEVER - 1)

/* Accelerated sockets of the set: conns[i] for each entry, NULL for kernel fds.
 * Returns how many are accelerated. */
static nfds_t lookup_all(const struct pollfd *fds, nfds_t nfds, struct stk_conn **conns)
{
	nfds_t nacc = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		conns[i] = fds[i].fd >= 0 ? stk_ready_lookup(fds[i].fd) : NULL;
		nacc += conns[i] != NULL;
	}
	return nacc;
}

/* Epoll fds of the set that have an object (stk_ready_lookup_set). */
struct ready_sets {
	unsigned n;
	struct stk_epoll *ep[STK_READY_SET_MAX];
	uint64_t slice_ns;  /* the current slice of a sleep (0: none yet) */
};

static void lookup_sets(const struct pollfd *fds, nfds_t nfds, struct stk_conn **conns,
			struct ready_sets *sets)
{
	sets->n = 0;
	if (!stk_ready_lookup_set || !__atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED))
		return;
	for (nfds_t i = 0; i < nfds && sets->n < STK_READY_SET_MAX; i++) {
		struct stk_epoll *ep = fds[i].fd >= 0 && !conns[i] ? stk_ready_lookup_set(fds[i].fd)
								     : NULL;
		if (ep)
			sets->ep[sets->n++] = ep;
	}
}

/* Bring each set's exposure up to date (after a sleep, with its liveness
 * channels first): the kernel's answer for the set's fd is then right. */
static void refresh_sets(const struct ready_sets *sets, bool after_sleep)
{
	for (unsigned i = 0; i < sets->n; i++)
		stk_epoll_refresh(sets->ep[i], after_sleep);
}

static struct timespec ns_to_ts(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };
	return ts;
}

/* One evaluation of the accelerated entries. Returns how many are ready. */
static int eval_accel(struct pollfd *fds, nfds_t nfds, struct stk_conn **conns)
{
	int cnt = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		if (!conns[i])
			continue;
		fds[i].revents = stk_ready_revents(stk_ready_ops.events(conns[i]), fds[i].events);
		cnt += fds[i].revents != 0;
	}
	return cnt;
}

/* After a sleep that the safety cap ended (stk_sleep_cap): true when an
 * accelerated entry is ready, i.e. a wake-up was missed. On a fabric with a
 * wait fd, readiness as delivered so far, without driving the provider: what
 * that progress would receive now was still on its way, not missed (a
 * provider that polls its device for the wait fd, dpdk, signals a frame up to
 * its idle pause after it came, and a cap may fall inside that pause). On one
 * covered by doorbells, a message already in the provider was owed a ring. */
static bool missed_wake(const struct pollfd *fds, nfds_t nfds, struct stk_conn **conns)
{
	for (nfds_t i = 0; i < nfds; i++) {
		if (!conns[i] || stk_ready_phase(conns[i]) != STK_PHASE_FABRIC)
			continue;
		struct stk_fab *fab = stk_ready_ops.fab(conns[i]);
		bool waits = fab && stk_ready_ops.wait_fd(fab) >= 0 && stk_ready_ops.events_now;
		short ev = waits ? stk_ready_ops.events_now(conns[i]) : stk_ready_ops.events(conns[i]);
		if (stk_ready_revents(ev, fds[i].events))
			return true;
	}
	return false;
}

/* Kernel results in k (same indexes as fds; accelerated entries carry their
 * liveness channel): copy kernel revents, run liveness checks. Returns how many
 * entries became ready. */
static int take_kernel(struct pollfd *fds, nfds_t nfds, struct stk_conn **conns,
		       struct pollfd *k)
{
	int cnt = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		if (!conns[i]) {
			fds[i].revents = k[i].revents;
			cnt += fds[i].revents != 0;
		} else if (k[i].fd >= 0 && k[i].revents) {
			stk_ready_ops.liveness(conns[i]);
			bool was = fds[i].revents != 0;
			fds[i].revents = stk_ready_revents(stk_ready_ops.events(conns[i]),
							   fds[i].events);
			cnt += !was && fds[i].revents;
		}
	}
	return cnt;
}

/* Sleep on each accelerated socket's kernel connection; one still negotiating
 * (or settled on the kernel during this call) also for the POLLOUT asked for (a
 * non-blocking connect ends). Returns true when such a socket is in the set: its
 * move to the fabric makes no kernel event, so the sleep is sliced. */
static bool arm_liveness(const struct pollfd *fds, struct pollfd *k, nfds_t nfds,
			 struct stk_conn **conns)
{
	bool negotiating = false;
	for (nfds_t i = 0; i < nfds; i++) {
		if (!conns[i])
			continue;
		k[i].fd = stk_ready_ops.liveness_fd(conns[i]);
		k[i].events = POLLIN | POLLRDHUP;
		k[i].revents = 0;
		if (stk_ready_phase(conns[i]) != STK_PHASE_FABRIC) {
			k[i].events |= (short)(fds[i].events & POLLOUT);
			negotiating = true;
		}
	}
	return negotiating;
}

/* Count this thread in (n = 1) or out (-1) of the sleepers of every
 * accelerated socket of the set (stk_conn_sleepers_add). */
static void sleepers(struct stk_conn **conns, nfds_t nfds, int n)
{
	if (!stk_ready_ops.sleepers)
		return;
	for (nfds_t i = 0; i < nfds; i++)
		if (conns[i])
			stk_ready_ops.sleepers(conns[i], n);
}

/* Link (on) or unlink this thread's wake-up (stk_wake.h; proto, copied into
 * nodes[i]) on every accelerated socket of the set. */
static void wake_links(struct stk_conn **conns, nfds_t nfds, struct stk_wake_node *nodes,
		       const struct stk_wake_node *proto, bool on)
{
	for (nfds_t i = 0; i < nfds; i++) {
		if (!conns[i])
			continue;
		if (on)
			nodes[i] = *proto;
		stk_ready_ops.wake_link(conns[i], &nodes[i], on);
	}
}

/* Before a sleep with epoll fds in the set: bring their sleep sets in (k,
 * from index *nsleep) when every one is covered, else cap the sleep at the
 * next slice. Returns false when they must be evaluated again first. */
static bool sets_sleep(struct ready_sets *sets, struct pollfd *k, nfds_t *nsleep,
		       uint64_t *sleep, bool *covered)
{
	sets->slice_ns = !sets->slice_ns ? STK_READY_SLICE_MIN_NS
			 : sets->slice_ns >= STK_READY_SLICE_MAX_NS / 2 ? STK_READY_SLICE_MAX_NS
									 : sets->slice_ns * 2;
	*covered = sets->slice_ns >= STK_READY_ANNOUNCE_NS;
	nfds_t first = *nsleep;
	for (unsigned i = 0; i < sets->n && *covered; i++) {
		int priv = -1;
		int b = stk_epoll_prepare_sleep(sets->ep[i], true, &priv);
		if (b == STK_READY_BELLS_RECHECK)
			return false;
		*covered = b == STK_READY_BELLS_SLEEP;
		k[*nsleep].fd = priv;
		k[*nsleep].events = POLLIN;
		k[(*nsleep)++].revents = 0;
	}
	if (!*covered) {
		*nsleep = first;
		if (*sleep > sets->slice_ns)
			*sleep = sets->slice_ns;
	}
	return true;
}

/* Announce the coming sleep on every accelerated socket of the set (doorbells,
 * stk_ready_bells_add; this thread counted in their sleepers). Returns false
 * when one must be looked at once more before sleeping (counted out again);
 * *slice becomes UINT64_MAX when the doorbells cover the sleep. */
static bool announce_sleep(struct stk_conn **conns, nfds_t nfds, uint64_t *slice)
{
	struct stk_ready_bells bells = { .send = *slice >= STK_READY_ANNOUNCE_NS };
	sleepers(conns, nfds, 1);
	for (nfds_t i = 0; i < nfds; i++)
		if (conns[i])
			stk_ready_bells_add(&bells, conns[i]);
	int b = stk_ready_bells_result(&bells);
	if (b == STK_READY_BELLS_RECHECK) {
		sleepers(conns, nfds, -1);
		return false; /* announced: look once more before sleeping */
	}
	if (b == STK_READY_BELLS_SLEEP)
		*slice = UINT64_MAX; /* covered: the cap in mixed_sleep */
	return true;
}

/* One evaluation of the mixed set: the epoll sets' exposure, the accelerated
 * entries, then the kernel's answer (k as a sleep left it when kernel_fresh,
 * else asked now when there are kernel fds or check_live). Returns how many
 * entries are ready, or -errno. */
static int mixed_eval(struct pollfd *fds, nfds_t nfds, struct stk_conn **conns, nfds_t nkern,
		      struct ready_sets *sets, struct pollfd *k, bool kernel_fresh,
		      bool check_live)
{
	const struct timespec zero = { 0, 0 };
	if (sets->n) {
		refresh_sets(sets, kernel_fresh);
		kernel_fresh = false; /* ask the kernel again: the sets changed */
	}
	int cnt = eval_accel(fds, nfds, conns);
	if (kernel_fresh) {
		cnt += take_kernel(fds, nfds, conns, k);
	} else if (nkern || check_live) {
		arm_liveness(fds, k, nfds, conns);
		int n = stk_wait_sys_ppoll(k, nfds, &zero, NULL);
		if (n < 0)
			return n;
		cnt += take_kernel(fds, nfds, conns, k);
	}
	return cnt;
}

/* The mixed set has nothing to report: trywait on its fabrics, announce the
 * sleep, link this thread's wake-up, bring the epoll sets' sleep sets in, and
 * sleep on k until something changes or the deadline. Returns 1 after a sleep
 * (k holds its kernel results), 0 when the set must be evaluated again first,
 * or -errno (-EINTR: a signal was delivered during the sleep). */
static int mixed_sleep(struct pollfd *fds, nfds_t nfds, struct stk_conn **conns,
		       struct ready_sets *sets, struct pollfd *k, struct stk_wake_node *nodes,
		       struct stk_ready_fabs *fabs, uint64_t deadline, struct stk_wait_sigs *sigs,
		       const sigset_t *sigmask, bool want_out)
{
	for (nfds_t i = 0; i < nfds; i++) /* a negotiation may have ended */
		if (conns[i])
			stk_ready_fabs_add(fabs, conns[i]);
	uint64_t slice;
	int nw = stk_ready_fabs_prepare(fabs, k + nfds, &slice);
	if (nw == -EAGAIN)
		return 0; /* completions pending: the next evaluation drains them */
	if (nw > 0 && eval_accel(fds, nfds, conns) > 0)
		return 0; /* delivered by another thread before our trywait */
	bool bells_on = slice != 0;
	if (bells_on && !announce_sleep(conns, nfds, &slice))
		return 0;
	bool negotiating = arm_liveness(fds, k, nfds, conns);
	/* from here on any change of an accelerated socket, made by any
	 * thread, wakes us */
	struct stk_wake_node proto;
	nfds_t nsleep = nfds + (nfds_t)nw, wake_idx = 0;
	bool woken = stk_ready_ops.wake_link && stk_wake_prepare(&proto);
	if (woken) {
		wake_links(conns, nfds, nodes, &proto, true);
		if (eval_accel(fds, nfds, conns) > 0) {
			wake_links(conns, nfds, nodes, &proto, false);
			if (bells_on)
				sleepers(conns, nfds, -1);
			return 0; /* delivered by another thread meanwhile */
		}
		wake_idx = nsleep;
		k[nsleep].fd = stk_wake_fd(&proto);
		k[nsleep].events = POLLIN;
		k[nsleep++].revents = 0;
	}
	uint64_t now = stk_now_ns();
	uint64_t sleep = deadline == STK_WAIT_NEVER ? STK_WAIT_NEVER
			 : deadline > now       ? deadline - now
						 : 0;
	if (slice && slice < sleep)
		sleep = slice;
	if (negotiating && sleep > STK_READY_SLICE_MAX_NS)
		sleep = STK_READY_SLICE_MAX_NS;
	bool sets_covered = false;
	if (sets->n && !sets_sleep(sets, k, &nsleep, &sleep, &sets_covered)) {
		if (woken)
			wake_links(conns, nfds, nodes, &proto, false);
		if (bells_on)
			sleepers(conns, nfds, -1);
		return 0; /* a set has something (or completions) already */
	}
	/* Covered by doorbells or a wait fd: both are shared by every
	 * thread of the process (another one may consume what was ours):
	 * the wake-up above is exact, the cap a safety net (stk_stream.h) */
	uint64_t cap = stk_sleep_cap(woken, want_out);
	if ((nw > 0 || slice == UINT64_MAX || sets_covered) && sleep > cap)
		sleep = cap;
	bool capped = sleep == cap && deadline - now > cap;
	struct timespec ts = ns_to_ts(sleep);
	int n = stk_wait_sys_ppoll(k, nsleep, sleep == STK_WAIT_NEVER ? NULL : &ts,
				    stk_wait_sleep_mask(sigs, sigmask));
	if (woken) {
		wake_links(conns, nfds, nodes, &proto, false);
		if (n > 0 && k[wake_idx].revents)
			stk_wake_drain(&proto);
	}
	if (bells_on)
		sleepers(conns, nfds, -1);
	if (n == 0 && capped && missed_wake(fds, nfds, conns))
		stk_count(STK_C_SLEEP_LATE_WAKES);
	if (n < 0)
		return n; /* -EINTR: a signal was delivered during the sleep */
	stk_ready_fabs_backoff(fabs, n > 0);
	if (n > 0)
		sets->slice_ns = 0; /* activity: look closely again */
	return 1;
}

/* The mixed case. k has room for nfds + STK_READY_FAB_MAX + 1 +
 * STK_READY_SET_MAX entries, nodes for nfds. */
static int poll_mixed(struct pollfd *fds, nfds_t nfds, struct stk_conn **conns, nfds_t nacc,
		      struct ready_sets *sets, struct pollfd *k, struct stk_wake_node *nodes,
		      uint64_t deadline, const sigset_t *sigmask)
{
	struct stk_ready_fabs fabs = { .n = 0 };
	struct stk_wait_sigs sigs = { .blocked = false };
	nfds_t nkern = nfds - nacc;
	bool kernel_fresh = false; /* k holds results of a sleep that just returned */
	/* Ready sockets return at once, so the liveness channels of the others are
	 * only looked at when sleeping or when kernel fds are polled: with only
	 * accelerated fds, check them every LIVENESS_EVERY calls too. */
	bool check_live = (++mixed_calls % LIVENESS_EVERY) == 0;
	uint64_t spin_end = 0;
	int ret;

	for (nfds_t i = 0; i < nfds; i++) {
		if (conns[i]) {
			stk_ready_fabs_add(&fabs, conns[i]);
		} else {
			k[i] = fds[i];
			k[i].revents = 0;
		}
	}
	bool want_out = false;
	for (nfds_t i = 0; i < nfds; i++)
		want_out |= conns[i] && (fds[i].events & POLLOUT);
	for (;;) {
		int cnt = mixed_eval(fds, nfds, conns, nkern, sets, k, kernel_fresh, check_live);
		if (cnt < 0) {
			ret = cnt;
			break;
		}
		kernel_fresh = false;
		check_live = false;
		enum stk_wait_step step = stk_wait_spin_step(cnt, deadline, &spin_end, &sigs, &ret);
		if (step == STK_WAIT_STOP)
			break;
		if (step == STK_WAIT_SPIN)
			continue;
		int slept = mixed_sleep(fds, nfds, conns, sets, k, nodes, &fabs, deadline, &sigs,
					sigmask, want_out);
		if (slept < 0) {
			ret = slept;
			break;
		}
		kernel_fresh = slept > 0;
	}
	stk_wait_restore_signals(&sigs);
	if (ret <= 0)
		for (nfds_t i = 0; i < nfds; i++)
			fds[i].revents = 0;
	return ret;
}

static int poll_deadline(struct pollfd *fds, nfds_t nfds, uint64_t deadline,
			 const struct timespec *timeout, const sigset_t *sigmask)
{
	struct stk_conn *small_conns[STACK_FDS];
	struct pollfd small_k[STACK_FDS + STK_READY_FAB_MAX + 1 + STK_READY_SET_MAX];
	struct stk_wake_node small_nodes[STACK_FDS];
	struct stk_conn **conns = small_conns;
	struct pollfd *k = small_k;
	struct stk_wake_node *nodes = small_nodes;
	stk_cork_before_wait();
	if (nfds > STACK_FDS) {
		if (nfds > (1u << 20))
			return -EINVAL;
		conns = stk_wait_scratch(0, nfds * sizeof(*conns));
		k = stk_wait_scratch(1, (nfds + STK_READY_FAB_MAX + 1 + STK_READY_SET_MAX) *
					     sizeof(*k));
		nodes = stk_wait_scratch(3, nfds * sizeof(*nodes));
		if (!conns || !k || !nodes)
			return -ENOMEM;
	}
	nfds_t nacc = lookup_all(fds, nfds, conns);
	struct ready_sets sets;
	lookup_sets(fds, nfds, conns, &sets);
	if (!nacc && !sets.n)
		return stk_wait_sys_ppoll(fds, nfds, timeout, sigmask);
	if (deadline == DEADLINE_FROM_TIMEOUT) /* only now: no clock read when all-kernel */
		deadline = stk_wait_deadline_ts(timeout);
	sets.slice_ns = 0;
	return poll_mixed(fds, nfds, conns, nacc, &sets, k, nodes, deadline, sigmask);
}

static bool timespec_valid(const struct timespec *ts)
{
	return !ts || (ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000L);
}

int stk_poll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *sigmask)
{
	if (!timespec_valid(timeout))
		return -EINVAL;
	if (nfds <= (1u << 20) && stk_wait_bad_user_range(fds, nfds * sizeof(*fds)))
		return -EFAULT;
	return poll_deadline(fds, nfds, DEADLINE_FROM_TIMEOUT, timeout, sigmask);
}

/* ---- select ---- */

#define POLLIN_SET (POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR)
#define POLLOUT_SET (POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR)
#define POLLEX_SET (POLLPRI)

static int select_core(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		       const struct timespec *timeout, const sigset_t *sigmask,
		       uint64_t *deadline_out)
{
	if (nfds < 0 || !timespec_valid(timeout))
		return -EINVAL;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	stk_cork_before_wait();
	uint64_t deadline = stk_wait_deadline_ts(timeout);
	*deadline_out = deadline;
	struct pollfd small[STACK_FDS];
	struct pollfd *pfds = small;
	nfds_t n = 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;
		if (rfds && FD_ISSET(fd, rfds))
			ev |= POLLIN | POLLRDNORM | POLLRDBAND;
		if (wfds && FD_ISSET(fd, wfds))
			ev |= POLLOUT | POLLWRNORM | POLLWRBAND;
		if (efds && FD_ISSET(fd, efds))
			ev |= POLLPRI;
		if (!ev)
			continue;
		if (n == STACK_FDS && pfds == small) {
			/* scratch slot 2: slots 0 and 1 are the poll core's */
			pfds = stk_wait_scratch(2, FD_SETSIZE * sizeof(*pfds));
			if (!pfds)
				return -ENOMEM;
			memcpy(pfds, small, sizeof(small));
		}
		pfds[n].fd = fd;
		pfds[n].events = ev;
		pfds[n].revents = 0;
		n++;
	}
	/* An fd asked only for exceptional conditions may report POLLHUP/POLLERR,
	 * which select ignores for it: such entries are dropped and the wait goes
	 * on for the remaining time, as the kernel's select would sleep on. */
	int ret, bits;
	for (;;) {
		struct timespec left, *leftp = NULL;
		if (deadline != STK_WAIT_NEVER) {
			uint64_t now = stk_now_ns();
			uint64_t ns = deadline > now ? deadline - now : 0;
			left.tv_sec = (time_t)(ns / 1000000000ull);
			left.tv_nsec = (long)(ns % 1000000000ull);
			leftp = &left;
		}
		ret = poll_deadline(pfds, n, deadline, leftp, sigmask);
		if (ret < 0)
			return ret;
		bits = 0;
		for (nfds_t i = 0; i < n; i++) {
			short rev = pfds[i].revents;
			if (rev & POLLNVAL)
				return -EBADF;
			bool any = ((pfds[i].events & POLLIN) && (rev & POLLIN_SET)) ||
				   ((pfds[i].events & POLLOUT) && (rev & POLLOUT_SET)) ||
				   ((pfds[i].events & POLLPRI) && (rev & POLLEX_SET));
			if (rev && !any)
				pfds[i].fd = -1;
			bits += any;
		}
		if (ret == 0 || bits)
			break;
	}
	if (rfds)
		FD_ZERO(rfds);
	if (wfds)
		FD_ZERO(wfds);
	if (efds)
		FD_ZERO(efds);
	bits = 0;
	for (nfds_t i = 0; ret > 0 && i < n; i++) {
		short rev = pfds[i].revents;
		int fd = pfds[i].fd;
		if (fd < 0)
			continue;
		if (rfds && (pfds[i].events & POLLIN) && (rev & POLLIN_SET)) {
			FD_SET(fd, rfds);
			bits++;
		}
		if (wfds && (pfds[i].events & POLLOUT) && (rev & POLLOUT_SET)) {
			FD_SET(fd, wfds);
			bits++;
		}
		if (efds && (pfds[i].events & POLLPRI) && (rev & POLLEX_SET)) {
			FD_SET(fd, efds);
			bits++;
		}
	}
	return bits;
}

int stk_select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *timeout)
{
	struct timespec ts, *tsp = NULL;
	if (timeout) {
		if (timeout->tv_sec < 0 || timeout->tv_usec < 0 || timeout->tv_usec >= 1000000)
			return -EINVAL;
		ts.tv_sec = timeout->tv_sec;
		ts.tv_nsec = timeout->tv_usec * 1000;
		tsp = &ts;
	}
	uint64_t deadline = STK_WAIT_NEVER;
	int ret = select_core(nfds, rfds, wfds, efds, tsp, NULL, &deadline);
	if (timeout && ret != -EINVAL) {
		/* Linux writes the time not slept back (also on EINTR). */
		uint64_t now = stk_now_ns();
		uint64_t left = deadline > now ? deadline - now : 0;
		if (deadline == STK_WAIT_NEVER)
			left = 0;
		timeout->tv_sec = (time_t)(left / 1000000000ull);
		timeout->tv_usec = (suseconds_t)(left % 1000000000ull / 1000);
	}
	return ret;
}

int stk_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		const struct timespec *timeout, const sigset_t *sigmask)
{
	uint64_t deadline;
	return select_core(nfds, rfds, wfds, efds, timeout, sigmask, &deadline);
}
