/* stk_epoll: epoll over any mix of accelerated sockets and kernel fds.
 *
 * The application's epoll fd (E) stays a real kernel epoll fd: kernel fds are
 * added to it by the preload with the real epoll_ctl, exactly as the app asked.
 * A struct stk_epoll is attached to E (the preload keeps it in its fd table) the
 * first time the app adds an accelerated socket, and from then on the preload
 * sends every epoll_wait/epoll_pwait on E here.
 *
 * The object holds: the accelerated sockets registered in E (events, data,
 * EPOLLET, EPOLLONESHOT, EPOLLRDHUP, EPOLLEXCLUSIVE accepted), and a private
 * kernel epoll set P that is only ever used for sleeping: it contains E itself
 * (so kernel fds wake us), each accelerated socket's kernel connection (conn->fd,
 * the liveness channel, edge-triggered), the wait fd of every fabric in use, and
 * the P of nested stk_epoll objects. Nothing of ours is ever put in E, so the
 * app's data values are never ambiguous — except the optional "exposure" eventfd
 * (stk_epoll_expose), tagged STK_EPOLL_EXPOSE_TAG and never returned to the app.
 *
 * Readiness of accelerated sockets: a READY LIST, as the kernel's. Every change of
 * a connection that can raise a readiness bit (a delivered message, a reset, a
 * shutdown, provider room coming back) calls stk_watch_notify on the
 * connection's watcher list (stk_ready.h), which queues each item watching it at
 * the back of its set's ready list (and, through the set's own watcher list,
 * the items of sets that nest it). ADD and MOD queue an item that is ready at
 * once. A wait drives the fabrics of the set, then evaluates only the queued
 * items (stk_poll_events via stk_ready_ops), in queue order: O(ready), not
 * O(registered). An item that would not report leaves the list (unless a change
 * arrived while it was evaluated, or it waits for provider room: polled);
 * level-triggered items that reported go to the back and are re-reported while
 * ready; EPOLLET items report only on a new edge (the connection's generation
 * moved, or an event bit appeared that was absent at the previous evaluation);
 * EPOLLONESHOT items are disabled after one report until EPOLL_CTL_MOD. revents
 * are filtered to the requested events | EPOLLERR | EPOLLHUP, as the kernel
 * does. Items are found by fd in an array (ctl is O(1)); closing a connection
 * or a set visits only the items watching it. EPOLL_CTL_DEL of an accelerated
 * socket keeps its liveness fd in P (the item is "parked": never reported,
 * freed when the connection closes or leaves the fabric, or the set closes),
 * so an ADD of it again, as event loops that DEL and ADD around every request
 * do, makes no system call; a parked socket's liveness may wake a sleep in
 * vain (the wait sleeps again).
 *
 * Order and fairness: accelerated items are reported in the order they became
 * ready, a level-triggered reporter moving to the back (the kernel's rotation),
 * so with a short maxevents every ready socket gets its turn; when both
 * accelerated and kernel events are ready, successive waits alternate which side
 * fills the array first.
 *
 * Waiting: see stk_ready.h (spin stk_cfg.spin_us, then sleep in the kernel; shm
 * without a wait fd: slices of 50 µs doubling to 1 ms; signals and masks exactly
 * as epoll_pwait). A sleep is a ppoll on P followed by a zero-timeout harvest.
 * P also holds the set's wake eventfd: a thread that queues an item while
 * another sleeps on the set rings it (once per sleep), so a change made by
 * another thread's progress, a ctl or a shutdown wakes the sleeper at once.
 *
 * Threads: each object has its own mutex (no global lock on the wait path): any
 * number of threads may wait on one set concurrently (an edge-triggered or
 * one-shot report goes to one of them; level-triggered readiness may be reported
 * to several, as the kernel does); a socket may be in several sets; the lock is
 * held while the ready list is walked (and while a liveness check runs,
 * ≤ 20 ms). Lock order: stk_epoll_int.h.
 *
 * Lifetimes: the preload must call stk_epoll_conn_closed(conn) before it frees a
 * connection (stk_close), and stk_epoll_destroy(ep) when the app closes E (after
 * no thread is inside a call on ep any more). Errors are -errno. */
/* Use by stk_api_ready.c (stk.h's epoll calls; ep = the stk_epoll kept for an
 * epoll fd in its handle):
 *   epoll_ctl(epfd, op, fd, ev), fd accelerated (stk_ready_lookup(fd) = conn):
 *       ep = the object of epfd, created with stk_epoll_create(epfd, &ep) on the
 *       first ADD; stk_epoll_ctl(ep, op, fd, conn, ev). NOT the real epoll_ctl
 *       (the app's kernel socket only carries liveness; E must not report it).
 *       DEL/MOD with no object for epfd: -ENOENT.
 *   epoll_ctl(epfd, op, fd, ev), fd an epoll fd with an object `inner`: the real
 *       epoll_ctl first (it does the kernel's loop and depth checks); when it
 *       succeeded, stk_epoll_ctl_inner(ep of epfd (created if needed), op, fd,
 *       inner, ev).
 *   any other epoll_ctl: the real one, untouched (also when epfd has an object).
 *   epoll_wait / epoll_pwait on an epfd with an object: stk_epoll_wait(ep, evs,
 *       max, timeout, sigmask or NULL); epoll_pwait2: stk_epoll_wait_ts.
 *       Without an object: the real call.
 *   poll/select/ppoll/pselect given an epoll fd that has an object: nothing
 *       (stk_poll refreshes it through stk_ready_lookup_set, stk_ready.h);
 *       the real epoll_ctl(ADD) of it into a set without an object:
 *       stk_epoll_expose(ep).
 *   close(epfd) of an fd with an object: stk_epoll_destroy(ep), then the real
 *       close.
 *   the last close of an accelerated socket: stk_epoll_conn_closed(conn) before
 *       stk_close(conn) (requested in stk_accel_close).
 *   A socket still negotiating (its conn's phase is not FABRIC, stk_lazy.h) is
 *       registered here like an accelerated one; when it settles on the kernel
 *       the stack moves it to E itself (stk_epoll_conn_changed), and from then
 *       on the preload treats it as a kernel fd (stk_ready_lookup gives NULL). */
#ifndef STK_EPOLL_H
#define STK_EPOLL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/epoll.h>

struct stk_conn;
struct stk_epoll;

/* Epoll objects alive in the process (atomic): while 0, the poll family looks
 * at no epoll fd of its sets (stk_ready_lookup_set is not called). */
extern int stk_epoll_live;

/* data.u64 of the exposure eventfd in E; stripped from every result. */
#define STK_EPOLL_EXPOSE_TAG 0xfab50c4e5e7ea11dull

/* Attach an object to the app's kernel epoll fd epfd (not owned: the app closes
 * it). Returns 0 or -errno (-EBADF: epfd is not open, -EINVAL: not an epoll fd,
 * -ENOMEM, -EMFILE...). */
int stk_epoll_create(int epfd, struct stk_epoll **out);
/* The app closed E: free the object (also drops it from outer sets). */
void stk_epoll_destroy(struct stk_epoll *ep);
int stk_epoll_fd(const struct stk_epoll *ep);

/* EPOLL_CTL_ADD / MOD / DEL of the accelerated socket fd (conn its connection).
 * Errors as epoll_ctl(2): -EEXIST (ADD of a registered fd), -ENOENT (MOD/DEL of
 * an unregistered one), -EINVAL (bad op, EPOLLEXCLUSIVE with MOD or with bits
 * other than IN/OUT/ERR/HUP/WAKEUP/ET, MOD of an EPOLLEXCLUSIVE item), -EFAULT
 * (ev NULL for ADD/MOD), -ENOMEM. EPOLLERR|EPOLLHUP are always reported. */
int stk_epoll_ctl(struct stk_epoll *ep, int op, int fd, struct stk_conn *conn,
		  struct epoll_event *ev);

/* The app added (ADD/MOD/DEL) the epoll fd fd of another stk_epoll `inner` to ep's
 * set: ep then reports fd (EPOLLIN, the app's data) when an accelerated socket of
 * inner is ready, and sleeps on inner's sources too. The preload must also do the
 * real epoll_ctl on E (kernel readiness of inner, and the kernel's loop check,
 * first). Errors as stk_epoll_ctl. */
int stk_epoll_ctl_inner(struct stk_epoll *ep, int op, int fd, struct stk_epoll *inner,
			struct epoll_event *ev);

/* Make E readable to kernel observers (a plain kernel epoll set holding E, poll or
 * select on E) while accelerated readiness is pending in ep: an eventfd in E that
 * is raised whenever an item is queued (by any thread's delivery) and lowered by
 * a scan or a refresh that finds nothing to report. Call when the app passes E
 * to something other than epoll_wait (idempotent): it also refreshes the state.
 * Deliveries need someone to drive the fabrics (shm has no wait fd): a plain
 * kernel observer sleeping on E sees what arrived up to the last scan or
 * refresh and what other threads deliver; stk_poll refreshes the sets it is
 * given itself (stk_ready.h). Returns 0 or -errno. */
int stk_epoll_expose(struct stk_epoll *ep);

/* Expose, then refresh ep's state: drive its fabrics, look at its sleep set P
 * first when harvest (its liveness channels said something), and set the
 * exposure to whether a wait would report an accelerated item now (nested sets
 * included). Returns 1 (pending), 0, or -errno. Does not consume edges. */
int stk_epoll_refresh(struct stk_epoll *ep, bool harvest);

/* The object was just attached to E, which a thread may be waiting on with the
 * real epoll_wait (it had nothing of ours when the wait began): make that wait
 * return (exposure eventfd, signalled once), so its wrapper sees the tag and
 * continues in stk_epoll_wait. 0 or -errno. */
int stk_epoll_kick(struct stk_epoll *ep);

/* epoll_pwait semantics (sigmask NULL = epoll_wait): up to max events, the
 * accelerated sockets' and E's merged, waiting timeout_ms (-1 = forever).
 * Returns the count, 0 on timeout, or -errno (-EINVAL for max <= 0, -EINTR). */
int stk_epoll_wait(struct stk_epoll *ep, struct epoll_event *evs, int max, int timeout_ms,
		   const sigset_t *sigmask);

/* epoll_pwait2 semantics: as stk_epoll_wait with a timespec timeout (NULL =
 * forever); -EINVAL for a bad timeout. */
int stk_epoll_wait_ts(struct stk_epoll *ep, struct epoll_event *evs, int max,
		      const struct timespec *timeout, const sigset_t *sigmask);

/* Before a poll or select that was given E sleeps (stk_poll): trywait on the
 * fabrics of ep and of the sets it nests, then announce the sleep on each
 * accelerated socket (stk_ready_bells_add; send: announce). Returns
 * STK_READY_BELLS_SLEEP (covered: sleeping on *priv_fd, ep's sleep set P, is
 * woken by whatever changes ep), STK_READY_BELLS_SLICES (sleep in slices) or
 * STK_READY_BELLS_RECHECK (evaluate once more before sleeping). */
int stk_epoll_prepare_sleep(struct stk_epoll *ep, bool announce, int *priv_fd);

/* conn's negotiation ended (stk_lazy.h): on the fabric, sets holding it wake up
 * and report what it has as a new edge; on the kernel, its items move to the
 * app's kernel set (real EPOLL_CTL_ADD with the app's events and data) and leave
 * ours. A set also moves such items itself at its next scan. Call it after the
 * phase changed, and close the liveness fd (the private duplicate) only once it
 * returned: from then on no set holds that fd or will register it (an
 * EPOLL_CTL_ADD that races with the change either is seen here or sees the
 * kernel phase). */
void stk_epoll_conn_changed(struct stk_conn *conn);

/* Forget conn in every set (call before freeing it; close() semantics: the
 * kernel drops a closed socket from every epoll set). */
void stk_epoll_conn_closed(struct stk_conn *conn);

/* fork (stk_migrate.h): prepare holds the registry and every set's lock; child
 * forgets the parent's fabrics in every set and gives each set a private sleep
 * set P of its own (P is a kernel object the parent shares otherwise). */
void stk_epoll_atfork_prepare(void);
void stk_epoll_atfork_parent(void);
void stk_epoll_atfork_child(void);

#endif
