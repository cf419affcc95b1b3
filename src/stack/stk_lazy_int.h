/* stk_lazy's private header: the negotiation's state (struct stk_lazy) and
 * what its files share: the state machine (stk_lazy_step.c), the negotiation
 * thread and its registry (stk_lazy_thread.c), the app-facing calls
 * (stk_lazy.c). Contracts in stk_lazy.h, protocol in stk_nego.h. */
#ifndef STK_LAZY_INT_H
#define STK_LAZY_INT_H

#include "stack/stk_lazy.h"
#include "stack/stk_conn.h"
#include "stack/stk_nego.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define HS_SPIN_NS 200000ull     /* handshake: spin this long for the peer's message */
#define HS_POLL_NS 100000ull     /* handshake in progress: look again after 100 µs */
#define BUSY_POLL_NS 1000000ull  /* a conn another thread drives: look again in 1 ms */
#define SETTLE_SLICE_NS 1000000ull
#define NEGO_SPIN_NS 300000ull   /* an app call spins this long for the peer's records */

enum stage {
	C_CONNECTING,   /* client: kernel connect in progress */
	C_WAIT_HELLO,   /* client: connected, the server's first record decides */
	HANDSHAKE,      /* client: fabric message and REPLY sent, the server decides;
			 * server: usable REPLY, waits for the client's fabric message */
	S_WAIT_REPLY,   /* server: HELLO sent, the client's first record decides */
	STRIP_HELLO,    /* client fell back by writing: remove a late HELLO (then CANCEL) */
	STRIP_CANCEL,   /* client fell back after a HELLO: remove a CANCEL */
	STRIP_REPLY,    /* server cancelled: remove a REPLY that crossed the CANCEL */
	DONE,
};

struct stk_lazy {
	pthread_mutex_t lock;     /* the driver's: held while advancing (never blocks) */
	/* A leaf lock (nothing is taken under it): release_priv closes conn->fd
	 * under it, and stk_lazy_events, which may hold no lock of this file,
	 * uses conn->fd under it, so that it never asks the kernel about a number
	 * closed meanwhile (POLLNVAL for the app's valid fd) or reused (another
	 * socket's readiness). */
	pthread_mutex_t fd_lock;
	struct stk_conn *conn;
	int app_fd;               /* the log; readiness once priv is released */
	pid_t pid;                /* the process that created it */
	bool client;
	/* protected by lock */
	enum stage stage;
	bool addrs;               /* peer/local known */
	struct sockaddr_storage peer, local;
	struct stk_nego_msg hello;            /* server: what we offered */
	struct stk_fab *fabs[STK_NEGO_PROV_MAX];
	bool hs_posted;
	uint64_t deadline;        /* server in HANDSHAKE: CANCEL after */
	bool changed;             /* phase changed: tell the epoll layer (once) */
	bool priv_lost;           /* the app closed our fd number behind our back */
	ino_t priv_ino;           /* the socket our private fd is (immutable) */
	bool held;                /* server: the client sent HOLD */
	uint64_t cut_deadline;    /* a record begun must be whole by then (0: none begun) */
	unsigned watch_soon;      /* fabric watch: looks again in a row (bounded) */
	int app_waiting;          /* atomic: an app thread drives it now (the thread
				   * keeps off: taking the records it waits for
				   * would leave it asleep) */
	/* protected by nego_reg_lock */
	bool listed;              /* in the registry and the thread's epoll set */
	bool watching;            /* registered for the fabric watch (stk_lazy_thread.c) */
	bool armed;               /* the thread's epoll set reports its fd (not while
				   * an app thread drives it: lazy_app_enter) */
	struct stk_lazy *prev, *next;   /* registry */
	int queue;                /* Q_NONE, Q_TODO, Q_AGAIN or Q_TIMER */
	uint64_t timer_ns;        /* Q_TIMER: visit then (a copy of cut_deadline) */
	struct stk_lazy *qprev, *qnext; /* that queue; qnext: the graveyard once forgotten */
};

extern int lazy_providers_ready; /* atomic: this process opened its providers once */
extern __thread bool lazy_thread_idle; /* the negotiation thread has no other conn to visit */

static inline int phase_of(enum stage st)
{
	switch (st) {
	case STRIP_HELLO:
	case STRIP_CANCEL:
	case STRIP_REPLY:
		return STK_PHASE_STRIP;
	case DONE:
		return STK_PHASE_KERNEL; /* FABRIC is set explicitly */
	default:
		return STK_PHASE_PENDING;
	}
}

/* Is the private fd still the socket it was? An app that closed it behind our
 * back (closefrom, close_range) may have the number again for a socket or file
 * of its own: never read, register or close that one. Sockets have inodes of
 * their own. No lock needed (an fstat). */
static inline bool priv_same(const struct stk_lazy *l)
{
	int fd = __atomic_load_n(&l->conn->fd, __ATOMIC_ACQUIRE);
	return !l->priv_lost && stk_sys_fd_is(fd, l->priv_ino);
}

static inline bool settled(const struct stk_lazy *l)
{
	return l->stage == DONE;
}

/* Who drives a step. The thread never answers a HELLO: a client commits to the
 * fabric only in a call of its app (a data call, poll/epoll, see stk_lazy.h), so
 * that an app that never touches its socket through us (stdio's internal reads)
 * is left on the kernel by the server's CANCEL. REFUSE: the app is about to use
 * the socket through a path we cannot follow: answer with a REJECT. */
enum driver { BY_THREAD, BY_APP, BY_REFUSE };

/* ---- the state machine (stk_lazy_step.c); l's lock held ---- */
void lazy_set_stage(struct stk_lazy *l, enum stage st);
bool lazy_get_addrs(struct stk_lazy *l);  /* peer and local addresses known */
void lazy_send_or_fail(struct stk_lazy *l, const struct stk_nego_msg *msg);
bool lazy_step(struct stk_lazy *l, enum driver by); /* true: the stage changed */
void lazy_advance(struct stk_lazy *l, enum driver by); /* steps while they change it */

/* ---- the negotiation thread and its registry (stk_lazy_thread.c) ---- */
void lazy_warm_up(void);                      /* open the providers in the background */
void lazy_requeue(struct stk_lazy *l);        /* the thread looks at l again soon */
void lazy_after_steps(struct stk_lazy *l);    /* l's lock held */
void lazy_enlist(struct stk_lazy *l);         /* in view of the thread */
/* An app thread drives l from here to lazy_app_leave (no lock held): the
 * thread keeps off it and is not woken by its records meanwhile. */
void lazy_app_enter(struct stk_lazy *l);
void lazy_app_leave(struct stk_lazy *l);
void lazy_free(struct stk_lazy *l);

#endif
