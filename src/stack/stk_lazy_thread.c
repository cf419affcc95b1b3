/* The lazy negotiation's thread: the warm-up of the providers, the registry
 * of pending conns, the negotiation thread that visits them (its queues,
 * wake-ups and the watch of conns on the fabric), and fork. Contracts in
 * stk_lazy.h. */
#include "config.h"
#include "stack/stk_lazy_int.h"
#include "stack/stk_log.h"
#include "stack/stk_thread.h"
#include "stack/stk_time.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

int lazy_providers_ready; /* atomic: this process opened its providers once */
static int warm_started;    /* atomic: the warm-up below was started (once) */
static int warm_running;    /* atomic: a warm-up thread is inside libfabric */
__thread bool lazy_thread_idle; /* the negotiation thread has no other conn to visit */

/* The warm-up: the first HELLO this process sees (a libfabsock peer, so the
 * fabric is about to be wanted) opens the providers on a thread of ours while
 * the app has not answered yet: a client that connects, pauses, then writes
 * (sockperf sleeps 2 s) does not pay libfabric's and DPDK's start-up (~0.4 s,
 * seconds on a loaded machine) inside its first write. Only the open moves:
 * the client still answers in a call of its own app, and a process that meets
 * only plain peers never loads libfabric. An app call that needs the providers
 * meanwhile waits for the same open (stk_fab_get serialises). */
#define WARM_EXIT_WAIT_NS 10000000000ull /* exit waits for a warm-up this long at most */

static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER; /* warm_done's */
static pthread_cond_t warm_done = PTHREAD_COND_INITIALIZER; /* warm_running fell to 0 */

static void *warm_main(void *arg)
{
	(void)arg;
	stk_conn_open_providers();
	__atomic_store_n(&lazy_providers_ready, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&warm_lock);
	__atomic_store_n(&warm_running, 0, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&warm_done);
	pthread_mutex_unlock(&warm_lock);
	return NULL;
}

/* atexit: libfabric's destructors must not run while the warm-up is inside
 * it (registered after the stack's own handlers: runs before them). The
 * condition uses the realtime clock (the default): the bound is a safety net,
 * not a measurement. */
static void warm_wait(void)
{
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += (time_t)(WARM_EXIT_WAIT_NS / 1000000000ull);
	pthread_mutex_lock(&warm_lock);
	while (__atomic_load_n(&warm_running, __ATOMIC_ACQUIRE) &&
	       pthread_cond_timedwait(&warm_done, &warm_lock, &end) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&warm_lock);
}

void lazy_warm_up(void)
{
	if (__atomic_load_n(&lazy_providers_ready, __ATOMIC_ACQUIRE) ||
	    __atomic_exchange_n(&warm_started, 1, __ATOMIC_ACQ_REL))
		return;
	__atomic_store_n(&warm_running, 1, __ATOMIC_RELEASE);
	if (atexit(warm_wait) != 0 || stk_thread_start(warm_main, NULL, 8u << 20) != 0) {
		__atomic_store_n(&warm_running, 0, __ATOMIC_RELEASE);
		return; /* the app's answer opens them, as without a warm-up */
	}
	STK_DBG("a libfabsock peer: opening the providers in the background");
}

/* ---- registry and negotiation thread ----
 * Every listed conn's private fd is in the thread's epoll set with the stk_lazy
 * as its data: a wake-up visits only the conns that have news, O(1) each, plus
 * the AGAIN queue (a handshake under way makes no kernel event; a conn an app
 * thread held when its news came must be looked at later). An stk_lazy that was
 * forgotten may still be named by an event the thread is taking: the thread
 * frees it (the graveyard) once it took the events of its epoll_wait. */

enum { Q_NONE, Q_TODO, Q_AGAIN, Q_TIMER, Q_COUNT };

static pthread_mutex_t nego_reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* all protected by nego_reg_lock */
static struct stk_lazy *reg_head;                  /* listed conns */
static struct stk_lazy *q_head[Q_COUNT], *q_tail[Q_COUNT]; /* Q_TODO, Q_AGAIN, Q_TIMER:
								* a record begun, due at
								* its timer_ns */
static struct stk_lazy *graveyard;                 /* forgotten, freed by the thread */
static int thread_epfd = -1;
static int thread_wakefd = -1;      /* eventfd: work was queued for a sleeping thread */
static pid_t thread_pid;            /* the process that owns the thread */
static unsigned thread_gen;         /* which thread is the current one (an fd number
				     * may come back, as a new epoll fd of ours) */
static __thread bool in_thread;     /* the calling thread is the negotiation thread */
/* Held by the negotiation thread while it works (not while it sleeps), and by
 * a forking thread across fork(): the child never inherits a lock or a heap
 * the thread held half-way (an allocator's lock under ASan, the log's lock). */
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;

/* nego_reg_lock held: the thread's fds are still ours. An app that closes every fd
 * above stderr (closefrom in a daemon) reuses the numbers at once, for a file, a
 * socket or an epoll set of its own, so the number being open proves nothing:
 * our epoll set holds our eventfd, which nobody else's does (EINVAL: not an
 * epoll fd, ENOENT: another set, EBADF: closed). A thread whose epoll fd was
 * closed sleeps on forever and is replaced; its fds are never touched again. */
static bool thread_fds_ours(void)
{
	if (thread_epfd < 0 || thread_wakefd < 0 || thread_pid != getpid())
		return false;
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = NULL };
	if (stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_MOD, thread_wakefd, &wev) == 0)
		return true;
	thread_epfd = thread_wakefd = -1; /* maybe the app's numbers by now */
	thread_pid = 0;
	return false;
}

static void q_remove(struct stk_lazy *l)
{
	int q = l->queue;
	if (q == Q_NONE)
		return;
	if (l->qprev)
		l->qprev->qnext = l->qnext;
	else
		q_head[q] = l->qnext;
	if (l->qnext)
		l->qnext->qprev = l->qprev;
	else
		q_tail[q] = l->qprev;
	l->qprev = l->qnext = NULL;
	l->queue = Q_NONE;
}

static void q_push(struct stk_lazy *l, int q)
{
	if (l->queue == q)
		return;
	q_remove(l);
	l->queue = q;
	l->qnext = NULL;
	l->qprev = q_tail[q];
	if (q_tail[q])
		q_tail[q]->qnext = l;
	else
		q_head[q] = l;
	q_tail[q] = l;
}

static struct stk_lazy *q_pop(int q)
{
	struct stk_lazy *l = q_head[q];
	if (l)
		q_remove(l);
	return l;
}

/* Tell the epoll layer about a phase change (the conn's lock held). */
static void notify(struct stk_lazy *l)
{
	if (!l->changed)
		return;
	l->changed = false;
	stk_conn_changed(l->conn);
}

/* Settled on the kernel and out of every epoll set of ours and of the thread's:
 * the private duplicate would only keep the socket open behind the app's back
 * (a close we do not see, such as stdio's fclose, must reach the peer). */
static void release_priv(struct stk_lazy *l)
{
	if (__atomic_load_n(&l->conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_KERNEL)
		return;
	bool ours = priv_same(l);
	pthread_mutex_lock(&l->fd_lock);
	int fd = __atomic_exchange_n(&l->conn->fd, -1, __ATOMIC_ACQ_REL);
	if (fd >= 0 && ours)
		stk_sys.close(fd);
	pthread_mutex_unlock(&l->fd_lock);
}

static void unlist_locked(struct stk_lazy *l)
{
	if (!l->listed)
		return;
	if (l->prev)
		l->prev->next = l->next;
	else
		reg_head = l->next;
	if (l->next)
		l->next->prev = l->prev;
	l->prev = l->next = NULL;
	q_remove(l);
	l->listed = false;
	l->watching = false;
	if (priv_same(l) && thread_fds_ours())
		stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_DEL, l->conn->fd, NULL);
}

static void unlist(struct stk_lazy *l)
{
	pthread_mutex_lock(&nego_reg_lock);
	unlist_locked(l);
	pthread_mutex_unlock(&nego_reg_lock);
}

/* The thread must look at l again soon although no kernel event may come (a
 * handshake under way, a step some app call made). */
void lazy_requeue(struct stk_lazy *l)
{
	/* an app thread drives it and requeues it when it leaves
	 * (lazy_app_leave), if it must */
	if (!in_thread && __atomic_load_n(&l->app_waiting, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&nego_reg_lock);
	if (l->listed && l->queue == Q_NONE) {
		bool idle = !q_head[Q_TODO] && !q_head[Q_AGAIN];
		q_push(l, Q_AGAIN);
		uint64_t one = 1;
		if (idle && !in_thread && thread_fds_ours() &&
		    stk_sys.write(thread_wakefd, &one, sizeof(one)) < 0)
			STK_DBG("negotiation thread not woken: %s", strerror(errno));
	}
	pthread_mutex_unlock(&nego_reg_lock);
}

/* A record begun and not whole (record_cut): the thread looks again at its
 * deadline although no kernel event may come. */
static void timer(struct stk_lazy *l)
{
	pthread_mutex_lock(&nego_reg_lock);
	if (l->listed && l->queue == Q_NONE) {
		l->timer_ns = l->cut_deadline;
		q_push(l, Q_TIMER);
		uint64_t one = 1;
		if (!in_thread && thread_fds_ours() &&
		    stk_sys.write(thread_wakefd, &one, sizeof(one)) < 0)
			STK_DBG("negotiation thread not woken: %s", strerror(errno));
	}
	pthread_mutex_unlock(&nego_reg_lock);
}

/* The fabric watch: a conn settled on the fabric stays in the thread's epoll
 * set until our MIGRATE is out, so that the peer's MIGRATE is answered while
 * our app makes no call (stk_migrate.h): the doorbell byte that precedes every
 * MIGRATE wakes the thread, whose progress delivers and answers it (the byte
 * comes first: until its message arrived, the thread looks again every
 * BUSY_POLL_NS, at most WATCH_SOON_MAX times in a row). Other doorbells wake
 * it too (only a peer that announced its sleep is rung: never on the busy
 * path); once migrated, the next event (the stream's bytes on the kernel
 * connection) ends the watch. l's lock held (the conn's is taken after it, as
 * in stk_conn_enter_fabric). Returns STK_WATCH_*. */
#define WATCH_SOON_MAX 1000
static int fabric_watch(const struct stk_lazy *l)
{
	if (l->stage != DONE || !stk_conn_on_fabric(l->conn) || l->pid != getpid())
		return STK_WATCH_DONE;
	return stk_conn_watch_state(l->conn);
}

/* l's lock held: register the private fd for the watch (once): incoming
 * bytes only (a writability event would come with every ACK of our own
 * doorbells). */
static void watch(struct stk_lazy *l)
{
	pthread_mutex_lock(&nego_reg_lock);
	if (l->listed && !l->watching && priv_same(l) && thread_fds_ours()) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = l };
		if (stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_MOD, l->conn->fd, &ev) == 0)
			l->watching = l->armed = true;
		else
			STK_DBG("fd %d: no fabric watch: %s", l->app_fd, strerror(errno));
	}
	pthread_mutex_unlock(&nego_reg_lock);
}

/* nego_reg_lock held: the timers that are due go to the TODO queue; returns the
 * time to the next one (0: none). O(timers): only records cut short wait
 * there. */
static uint64_t timers_due(void)
{
	uint64_t now = stk_now_ns(), next = 0;
	struct stk_lazy *l = q_head[Q_TIMER];
	while (l) {
		struct stk_lazy *n = l->qnext;
		if (l->timer_ns <= now)
			q_push(l, Q_TODO);
		else if (!next || l->timer_ns - now < next)
			next = l->timer_ns - now;
		l = n;
	}
	return next;
}

/* After steps, l's lock held (nego_reg_lock is taken after it: the registry side
 * only ever try-locks a conn): tell the epoll layer, and either leave the
 * registry or stay in view of the thread. */
void lazy_after_steps(struct stk_lazy *l)
{
	notify(l);
	if (settled(l)) {
		if (fabric_watch(l) != STK_WATCH_DONE) {
			watch(l);
		} else {
			unlist(l);
			release_priv(l);
		}
	} else if (l->stage == HANDSHAKE) {
		lazy_requeue(l);
	} else if (l->cut_deadline) {
		timer(l);
	}
}

void lazy_free(struct stk_lazy *l)
{
	pthread_mutex_destroy(&l->fd_lock);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* nego_reg_lock held: take the events of one epoll_wait (and the AGAIN queue, when
 * its time came) into the TODO queue; false when this thread was replaced. */
static bool take_events(int epfd, unsigned gen, const struct epoll_event *evs, int n,
			bool again, struct stk_lazy **dead)
{
	if (thread_epfd != epfd || thread_gen != gen)
		return false; /* replaced (our epoll fd was closed): touch nothing */
	for (int i = 0; i < n; i++) {
		struct stk_lazy *l = evs[i].data.ptr;
		if (!l) {
			uint64_t v;
			if (stk_sys.read(thread_wakefd, &v, sizeof(v)) < 0)
				STK_DBG("negotiation wake-up not read: %s", strerror(errno));
			again = true;
		} else if (l->listed) {
			q_push(l, Q_TODO);
		}
	}
	struct stk_lazy *l;
	while (again && (l = q_pop(Q_AGAIN)))
		q_push(l, Q_TODO);
	timers_due();
	/* every event naming them was just taken: nothing refers to them any more */
	*dead = graveyard;
	graveyard = NULL;
	return true;
}

/* Visit the TODO queue; returns how long to wait before the AGAIN queue is due
 * (0: nothing waits). */
static uint64_t visit_todo(void)
{
	bool hs = false;
	for (;;) {
		pthread_mutex_lock(&nego_reg_lock);
		struct stk_lazy *l = q_pop(Q_TODO);
		if (!l) {
			bool again = q_head[Q_AGAIN] != NULL;
			uint64_t timer_wait = timers_due();
			if (q_head[Q_TODO]) {
				pthread_mutex_unlock(&nego_reg_lock);
				continue; /* a timer came due */
			}
			pthread_mutex_unlock(&nego_reg_lock);
			if (!again)
				return timer_wait;
			return hs ? HS_POLL_NS : BUSY_POLL_NS;
		}
		if (__atomic_load_n(&l->app_waiting, __ATOMIC_ACQUIRE) ||
		    pthread_mutex_trylock(&l->lock) != 0) {
			q_push(l, Q_AGAIN); /* an app thread drives it; look again soon */
			pthread_mutex_unlock(&nego_reg_lock);
			continue;
		}
		lazy_thread_idle = !q_head[Q_TODO] && !q_head[Q_AGAIN];
		pthread_mutex_unlock(&nego_reg_lock);
		/* l's lock held: its close waits for this step */
		lazy_advance(l, BY_THREAD);
		bool soon = false;
		if (fabric_watch(l) != STK_WATCH_DONE) {
			stk_conn_progress(l->conn); /* maybe the peer's MIGRATE: answered */
			soon = fabric_watch(l) == STK_WATCH_SOON && ++l->watch_soon < WATCH_SOON_MAX;
			if (!soon)
				l->watch_soon = 0;
		}
		hs |= l->stage == HANDSHAKE;
		lazy_after_steps(l);
		if (soon)
			lazy_requeue(l);
		pthread_mutex_unlock(&l->lock);
	}
}

static void *thread_main(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg;
	int epfd = (int)(id & 0xffffffffu);
	unsigned gen = (unsigned)(id >> 32);
	in_thread = true;
	struct epoll_event evs[256];
	uint64_t wait_ns = 0;
	for (;;) {
		int timeout_ms = -1;
		if (wait_ns == HS_POLL_NS) {
			/* a handshake under way: finer than epoll_wait's milliseconds */
			struct timespec ts = { 0, (long)wait_ns };
			clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			timeout_ms = 0;
		} else if (wait_ns) {
			timeout_ms = (int)((wait_ns + 999999) / 1000000);
		}
		int n = stk_sys.epoll_wait(epfd, evs, 256, timeout_ms);
		if (n < 0 && errno != EINTR) {
			/* Our epoll fd was closed behind our back (closefrom in a daemon):
			 * the next negotiation starts a new thread. */
			pthread_mutex_lock(&nego_reg_lock);
			if (thread_epfd == epfd && thread_gen == gen) {
				thread_epfd = -1;
				thread_pid = 0;
			}
			pthread_mutex_unlock(&nego_reg_lock);
			return NULL;
		}
		struct stk_lazy *dead = NULL;
		pthread_mutex_lock(&work_lock);
		pthread_mutex_lock(&nego_reg_lock);
		/* the AGAIN queue is due when we slept for it */
		bool ok = take_events(epfd, gen, evs, n < 0 ? 0 : n, wait_ns != 0 || n <= 0,
				      &dead);
		pthread_mutex_unlock(&nego_reg_lock);
		if (!ok) {
			pthread_mutex_unlock(&work_lock);
			return NULL;
		}
		while (dead) {
			struct stk_lazy *l = dead;
			dead = l->qnext;
			lazy_free(l);
		}
		wait_ns = visit_todo();
		pthread_mutex_unlock(&work_lock);
	}
	return NULL;
}

/* What the thread watches: the peer's records and hang-ups, and the end of a
 * connect in progress. Not writability otherwise: an edge-triggered EPOLLOUT
 * fires at once for a connected socket and would wake the thread (and contend
 * for the conn's lock with the app) for nothing, once per connection. */
static uint32_t thread_events(const struct stk_lazy *l)
{
	return EPOLLIN | EPOLLRDHUP | EPOLLET | (l->stage == C_CONNECTING ? EPOLLOUT : 0);
}

/* nego_reg_lock held: the thread hears of l's fd when no app thread drives l,
 * and not while one does (a record the app waits for would wake both, the
 * thread for nothing: a context switch on the app's CPU, and the peer's send
 * pays a second wake-up). EPOLL_CTL_MOD looks at the fd again: bytes that came
 * meanwhile wake the thread at once. */
static void arm_locked(struct stk_lazy *l)
{
	bool want = !__atomic_load_n(&l->app_waiting, __ATOMIC_ACQUIRE);
	if (!l->listed || l->watching || l->armed == want || !priv_same(l) ||
	    !thread_fds_ours())
		return;
	struct epoll_event ev = { .events = want ? thread_events(l) : 0, .data.ptr = l };
	if (stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_MOD, l->conn->fd, &ev) == 0)
		l->armed = want;
}

void lazy_app_enter(struct stk_lazy *l)
{
	if (__atomic_fetch_add(&l->app_waiting, 1, __ATOMIC_ACQ_REL) != 0 ||
	    __atomic_load_n(&l->conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_PENDING)
		return;
	pthread_mutex_lock(&nego_reg_lock);
	arm_locked(l);
	pthread_mutex_unlock(&nego_reg_lock);
}

void lazy_app_leave(struct stk_lazy *l)
{
	if (__atomic_sub_fetch(&l->app_waiting, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	pthread_mutex_lock(&nego_reg_lock);
	bool rearm = l->listed && !l->armed;
	arm_locked(l);
	pthread_mutex_unlock(&nego_reg_lock);
	if (!rearm)
		return;
	/* what the thread skipped meanwhile (lazy_requeue) */
	pthread_mutex_lock(&l->lock);
	lazy_after_steps(l);
	pthread_mutex_unlock(&l->lock);
}

/* nego_reg_lock held. The thread of this process, created on first need (again in a
 * forked child: threads do not survive fork, and the parent's epoll set is
 * shared with it). Registering the listed conns anew is O(n), but only then. */
static int ensure_thread_locked(void)
{
	pid_t pid = getpid();
	if (thread_epfd >= 0 && thread_pid == pid && thread_fds_ours())
		return 0;
	if (thread_epfd >= 0)
		stk_sys.close(thread_epfd); /* the parent's, inherited */
	if (thread_wakefd >= 0 && thread_pid != pid)
		stk_sys.close(thread_wakefd);
	thread_wakefd = -1;
	thread_epfd = stk_sys.epoll_create1(EPOLL_CLOEXEC);
	if (thread_epfd < 0)
		return -errno;
	thread_wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event wev = { .events = EPOLLIN, .data.ptr = NULL };
	if (thread_wakefd < 0 ||
	    stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, thread_wakefd, &wev) != 0) {
		int err = errno;
		if (thread_wakefd >= 0)
			stk_sys.close(thread_wakefd);
		stk_sys.close(thread_epfd);
		thread_wakefd = thread_epfd = -1;
		return -err;
	}
	for (struct stk_lazy *l = reg_head; l; l = l->next) {
		if (!priv_same(l))
			continue; /* closed behind our back: its next step settles it */
		struct epoll_event ev = { .events = thread_events(l), .data.ptr = l };
		stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, l->conn->fd, &ev);
	}
	thread_gen++;
	uint64_t id = (uint64_t)thread_gen << 32 | (uint32_t)thread_epfd;
	int ret = stk_thread_start(thread_main, (void *)(uintptr_t)id, 256 * 1024);
	if (ret) {
		stk_sys.close(thread_wakefd);
		stk_sys.close(thread_epfd);
		thread_wakefd = thread_epfd = -1;
		return -ret;
	}
	thread_pid = pid;
	return 0;
}

/* A client waiting for its HELLO once this process opened its providers: its
 * app's next call answers it (the thread never does); the thread hears of the
 * fd only when a call of the app leaves it undecided (lazy_app_leave), so that
 * the HELLO of a client about to write wakes nobody. Until the providers are
 * open the thread hears of the HELLO at once (the warm-up). */
static bool enlist_disarmed(const struct stk_lazy *l)
{
	return l->client && l->stage == C_WAIT_HELLO &&
	       __atomic_load_n(&lazy_providers_ready, __ATOMIC_ACQUIRE);
}

void lazy_enlist(struct stk_lazy *l)
{
	pthread_mutex_lock(&nego_reg_lock);
	int ret = ensure_thread_locked();
	bool armed = !enlist_disarmed(l);
	if (ret == 0) {
		struct epoll_event ev = { .events = armed ? thread_events(l) : 0, .data.ptr = l };
		ret = stk_sys.epoll_ctl(thread_epfd, EPOLL_CTL_ADD, l->conn->fd, &ev) ? -errno : 0;
	}
	if (ret == 0) {
		l->prev = NULL;
		l->next = reg_head;
		if (reg_head)
			reg_head->prev = l;
		reg_head = l;
		l->listed = true;
		l->armed = armed;
	} else {
		/* No background progress: app calls still complete the negotiation. */
		static int warned;
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			STK_WARN("no negotiation thread (%s): negotiations progress only in "
				 "app calls", strerror(-ret));
	}
	pthread_mutex_unlock(&nego_reg_lock);
}

void stk_lazy_forget(struct stk_conn *conn)
{
	struct stk_lazy *l = conn->lazy;
	if (!l)
		return;
	pthread_mutex_lock(&nego_reg_lock);
	unlist_locked(l);
	/* an event the thread has not taken yet may name l: the thread frees it */
	bool defer = thread_epfd >= 0 && thread_pid == getpid();
	pthread_mutex_unlock(&nego_reg_lock);
	/* the thread or an app thread (settling on another fd of the same socket:
	 * the app's race, as with the kernel) may be in a step: wait for it */
	pthread_mutex_lock(&l->lock);
	pthread_mutex_unlock(&l->lock);
	if (!priv_same(l))
		conn->fd = -1; /* not ours any more: the close must not touch it */
	conn->lazy = NULL;
	if (!defer) {
		lazy_free(l);
		return;
	}
	pthread_mutex_lock(&nego_reg_lock);
	l->qnext = graveyard;
	graveyard = l;
	pthread_mutex_unlock(&nego_reg_lock);
}

void stk_lazy_atfork_prepare(void)
{
	pthread_mutex_lock(&work_lock);
}

void stk_lazy_atfork_parent(void)
{
	pthread_mutex_unlock(&work_lock);
}

void stk_lazy_atfork_child(void)
{
	pthread_mutex_init(&work_lock, NULL);
	pthread_mutex_init(&warm_lock, NULL);
	pthread_cond_init(&warm_done, NULL);
	/* a warm-up the parent had under way (between two providers: fork
	 * waits for the one being opened) did not follow: the child's exit
	 * must not wait for it, and the child may warm up on its own */
	if (__atomic_load_n(&warm_running, __ATOMIC_RELAXED)) {
		warm_running = 0;
		warm_started = 0;
	}
}
