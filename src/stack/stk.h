/* stk: the stack's interface to the interposition layer (src/preload), the only
 * stack header the preload includes (with stack/stk_sys.h, the real-symbol table).
 *
 * Shape: POSIX calls on an opaque socket handle. A struct stk_sock stands for
 * one open application socket the stack may accelerate (shared by every fd that
 * dup'ed it); the preload keeps fd -> handle in its fd table and never looks
 * inside. Each kind of socket has its own operations behind the handle (TCP
 * stream: stk_tcp.c; UDP on a dpdk port: stk_udp.c; other UDP sockets and
 * epoll objects: none, the kernel carries every call).
 *
 * Data-path contract: the wrapper looks its fd up once. An untracked fd goes to
 * the real call with no stack call at all. A tracked socket makes ONE call
 * below, which either performs the operation (result, or -errno) or returns
 * STK_KERNEL: the kernel carries this call, the wrapper calls the real
 * function. A connection still negotiating is settled inside that call (the
 * stack brackets its own work with the guard hooks, stk_set_guard, and keeps
 * errno as it found it). No lock, system call or allocation is added on an
 * accelerated connection's fast path.
 *
 * Errors: every int/ssize_t result below is >= 0 on success, -errno on failure,
 * or STK_KERNEL where a function says it may return it; errno is never read
 * across this boundary (the wrapper sets it once, from -ret).
 *
 * Thread-safety: every call may run on any thread at any time, except the
 * start-up calls (once, before any socket exists) and the fork hooks (from
 * pthread_atfork). A handle stays valid while its caller holds a reference: an
 * fd-table slot holds one, a call in progress on a handle found in the table
 * is covered by that slot (closing an fd another thread is using is the
 * application's race, as with the kernel, and never frees a handle in use:
 * blocking waits take their own reference). */
#ifndef STK_H
#define STK_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>

struct stk_sock;

/* "The kernel carries this call": outside the -errno range (-1..-4095). */
#define STK_KERNEL (-0x10000)

/* ---- start-up and exit ---- */

/* The guard that keeps the stack's own calls (libfabric, providers, DPDK) out
 * of the wrappers: called around every such call, nesting. Install once,
 * before any fabric opens. Defaults: no-ops. */
void stk_set_guard(void (*enter)(void), void (*leave)(void));

/* The preload's fd table, for the readiness code (fd -> handle): get must be
 * lock-free and cheap (called per fd per poll), set installs a handle at fd
 * (taking a new reference; NULL clears) and returns 0 or -EBADF. Install once
 * at start-up. Without it no fd is accelerated for readiness. */
struct stk_fd_table {
	struct stk_sock *(*get)(int fd);
	int (*set)(int fd, struct stk_sock *sock);
};
void stk_set_fd_table(const struct stk_fd_table *table);

/* Load the configuration (getenv_fn: the environment; program: for the rules).
 * Returns 1 when the stack is enabled, 0 when disabled (FABSOCK_DISABLE=1),
 * -errno when the configuration is unusable (already logged). */
int stk_start(const char *(*getenv_fn)(const char *name), const char *program);

/* Start-up outcome, logged once: active (fd_table_size: the preload's table) or
 * the fd table could not be reserved (the stack stays off). */
void stk_log_active(int fd_table_size);
void stk_log_no_fd_table(void);
void stk_log_disabled(void);

/* At process exit (a destructor): the counters, at info level and above. */
void stk_log_exit(void);

/* A counter by name (fabsock.h's fsk_counter): 0, or -1 when there is none. */
int stk_counter_get(const char *name, uint64_t *value);

/* Accelerated connections and epoll objects alive (atomic, read relaxed):
 * while both are 0, readiness and process events need nothing from the stack. */
extern int stk_accel_live;
extern int stk_epoll_live;

static inline bool stk_ready_involved(void)
{
	return (__atomic_load_n(&stk_accel_live, __ATOMIC_RELAXED) |
		__atomic_load_n(&stk_epoll_live, __ATOMIC_RELAXED)) != 0;
}

/* ---- socket life ----
 * Functions returning bool "keep" answer whether the fd stays tracked: false
 * means the kernel keeps the socket and the caller forgets the fd (drops the
 * table's reference). */

/* A handle for socket(domain, type, protocol) just created (one reference, the
 * caller's), or NULL when it is no candidate (not IPv4/IPv6 TCP or UDP) or
 * memory is short. */
struct stk_sock *stk_sock_new(int domain, int type, int protocol);
void stk_sock_ref(struct stk_sock *sock);
/* The last reference closes the connection (graceful, or abortive with
 * SO_LINGER 0) or destroys an epoll object. Call inside the guard. */
void stk_sock_unref(struct stk_sock *sock);

/* bind() on fd to addr failed with EADDRNOTAVAIL: when addr is the dpdk
 * port's IP (the kernel does not own it) and sock an undecided UDP socket,
 * the kernel socket is bound there with IP_FREEBIND (0, then call
 * stk_sock_bound); else -EADDRNOTAVAIL. */
int stk_sock_bind_port_ip(struct stk_sock *sock, int fd, const struct sockaddr *addr,
			  socklen_t len);
/* bind() on fd succeeded: an undecided UDP socket decides udp_receiver. */
bool stk_sock_bound(struct stk_sock *sock, int fd);
/* listen() on fd is about to run: an undecided TCP socket decides tcp_server
 * and, when accelerated, saves its clients' SYNs. */
bool stk_sock_listen(struct stk_sock *sock, int fd);
/* connect() on fd to addr is about to run. Returns STK_CONNECT_NEGOTIATE (call
 * stk_sock_connect_end after the kernel connect, whatever it returned),
 * STK_CONNECT_PLAIN (nothing more to do) or STK_CONNECT_FORGET (forget fd). */
enum { STK_CONNECT_PLAIN, STK_CONNECT_NEGOTIATE, STK_CONNECT_FORGET };
int stk_sock_connect_begin(struct stk_sock *sock, int fd, const struct sockaddr *addr,
			   socklen_t len);
/* kernel_ret: 0 or -errno of the kernel connect. Returns keep. */
bool stk_sock_connect_end(struct stk_sock *sock, int fd, int kernel_ret);
/* A datagram to an explicit destination (sendto/sendmsg/sendmmsg going to the
 * kernel): an undecided UDP socket decides udp_sender. */
bool stk_sock_send_to(struct stk_sock *sock, int fd, const struct sockaddr *dest,
		      socklen_t len);
/* newfd was accepted on listener: a new handle (one reference, the caller's)
 * whose connection negotiates lazily, or NULL (the kernel keeps it). */
struct stk_sock *stk_sock_accepted(struct stk_sock *listener, int newfd);
/* setsockopt(fd, level, name, val, len) on a tracked socket, before the real
 * call: performed here (0 or -errno) or STK_KERNEL (the real call, as asked).
 * An accelerated UDP socket joins and leaves multicast groups on its port,
 * and follows the options that change its datagrams (stk_udp.h). */
int stk_sock_setsockopt(struct stk_sock *sock, int fd, int level, int name, const void *val,
			socklen_t len);
/* setsockopt(SO_ZEROCOPY, 1) succeeded on fd: the kernel carries the socket
 * from now on (a connection migrates or settles there). Returns keep. */
bool stk_sock_zerocopy(struct stk_sock *sock, int fd);

/* What a handle is now (for the preload's bypass paths and fsk_fd_accelerated). */
#define STK_SOCK_CONN 0x1      /* has a connection (any phase) */
#define STK_SOCK_CARRIED 0x2   /* its data calls go to the stack */
#define STK_SOCK_FABRIC 0x4    /* negotiated onto a fabric */
#define STK_SOCK_MIGRATED 0x8  /* moved back to its kernel socket */
unsigned stk_sock_state(const struct stk_sock *sock);

/* ---- data calls (each may return STK_KERNEL; addr/alen as the POSIX call) ---- */
ssize_t stk_sock_recvfrom(struct stk_sock *sock, void *buf, size_t len, int flags,
			  struct sockaddr *addr, socklen_t *alen);
ssize_t stk_sock_sendto(struct stk_sock *sock, const void *buf, size_t len, int flags,
			const struct sockaddr *addr, socklen_t alen);
ssize_t stk_sock_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
ssize_t stk_sock_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
ssize_t stk_sock_recvmsg(struct stk_sock *sock, struct msghdr *msg, int flags);
ssize_t stk_sock_sendmsg(struct stk_sock *sock, const struct msghdr *msg, int flags);
int stk_sock_recvmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
		      struct timespec *timeout);
int stk_sock_sendmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags);
ssize_t stk_sock_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count);
int stk_sock_shutdown(struct stk_sock *sock, int how);
/* ioctl FIONREAD, SIOCATMARK: answered (0 with *(int *)arg set, or -EFAULT for
 * an argument outside user memory), or STK_KERNEL once the connection is the
 * kernel's. FIONBIO: noted, then STK_KERNEL (the kernel fd gets it too).
 * Anything else: STK_KERNEL. */
int stk_sock_ioctl(struct stk_sock *sock, unsigned long request, void *arg);
/* getsockopt(SO_ERROR): kernel_err is what the kernel socket just returned (and
 * cleared); the result is the error the application must see. */
int stk_sock_so_error(struct stk_sock *sock, int kernel_err);
/* O_NONBLOCK changed on the fd (fcntl F_SETFL). */
void stk_sock_set_nonblock(struct stk_sock *sock, bool nonblock);

/* ---- readiness (ppoll/select/pselect/epoll semantics; -errno; the stack
 * flushes coalesced sends before any wait of the process) ---- */
int stk_poll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
	     const sigset_t *sigmask);
int stk_select(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, struct timeval *timeout);
int stk_pselect(int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds,
		const struct timespec *timeout, const sigset_t *sigmask);
/* epoll_ctl(epfd, op, fd, ev) where fd is tracked (sock): performed (an
 * accelerated socket goes into the stack's object of epfd only, attached to
 * epfd through the fd table on first need; an epoll fd with an object of its
 * own is nested after the real epoll_ctl, done here), or STK_KERNEL. */
int stk_sock_epoll_ctl(int epfd, int op, int fd, struct stk_sock *sock, struct epoll_event *ev);
/* epoll_wait/epoll_pwait (timeout_ms) or epoll_pwait2 (ts, when use_ts) on
 * epfd, whose handle is epsock (NULL: untracked): STK_KERNEL when the real wait
 * must run (call stk_epoll_real_done with what it returned when > 0). */
int stk_sock_epoll_wait(struct stk_sock *epsock, struct epoll_event *evs, int max,
			int timeout_ms, const sigset_t *sigmask);
int stk_sock_epoll_wait_ts(struct stk_sock *epsock, struct epoll_event *evs, int max,
			   const struct timespec *ts, const sigset_t *sigmask);
/* The real wait on epfd returned n > 0 events: the stack's own tag removed;
 * when only the tag was there, the wait goes on in the stack. Count or -errno. */
int stk_epoll_real_done(int epfd, struct epoll_event *evs, int n, int max, int timeout_ms,
			const sigset_t *sigmask);

/* ---- process events ---- */

/* Before fork/daemon: every accelerated connection moves to its kernel socket. */
void stk_fork_migrate(void);
/* pthread_atfork handlers (register once, after the preload's own). */
void stk_fork_prepare(void);
void stk_fork_parent(void);
void stk_fork_child(void);
/* _exit: connections end as at exit (what was sent, then FIN). */
void stk_exit_all(void);

/* The socket leaves the process's control (STK_LEAVE_PASS: SCM_RIGHTS;
 * STK_LEAVE_SPAWN: posix_spawn dup2) or goes to code we never see
 * (STK_LEAVE_BYPASS: stdio, aio): a negotiating connection settles on the
 * kernel, one on the fabric migrates. */
enum stk_leave { STK_LEAVE_PASS, STK_LEAVE_SPAWN, STK_LEAVE_BYPASS };
void stk_sock_leave(struct stk_sock *sock, enum stk_leave why);

/* Before an exec: every fd below nfds that the new image inherits (no
 * FD_CLOEXEC) and is on the fabric migrates (negotiating ones settle on the
 * kernel); for each with unread bytes (or, for a UDP socket on the dpdk port,
 * unread datagrams), handed(ctx, fd, memfd) names the memfd holding them
 * (close-on-exec; the callee duplicates it). */
void stk_exec_prepare(int nfds, void (*handed)(void *ctx, int fd, int memfd), void *ctx);
/* In the new image: fd is an inherited socket whose unread bytes (or
 * datagrams) are in memfd (taken). A handle (one reference) or NULL (lost,
 * logged). */
struct stk_sock *stk_sock_adopt(int fd, int memfd);

/* Unread bytes of a migrated connection still held by the stack: count, and
 * take (or peek) up to len of them. */
size_t stk_sock_leftover_count(const struct stk_sock *sock);
size_t stk_sock_leftover_take(struct stk_sock *sock, void *dst, size_t len, bool peek);
/* A memfd (close-on-exec) holding a copy of len bytes, in the format an exec
 * hands down (stk_sock_adopt), or -1. */
int stk_leftover_memfd(const void *bytes, size_t len);

#endif
