/* stk_sys: the system calls the stack makes, as a table of function pointers.
 *
 * Contract: code under src/stack/ never calls an interposed libc name directly;
 * it calls stk_sys.<name>. Without LD_PRELOAD (unit tests, the stk_ API used as a
 * library) the table points at libc. Under the preload, src/preload installs the
 * real (next-in-chain) symbols once, before any stack code runs, so the stack's
 * own I/O never re-enters the wrappers. The table is written once at start-up and
 * read-only afterwards: no lock. */
#ifndef STK_SYS_H
#define STK_SYS_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/types.h>

struct stk_sys {
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*write)(int fd, const void *buf, size_t len);
	int (*close)(int fd);
	int (*socket)(int domain, int type, int protocol);
	int (*bind)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*listen)(int fd, int backlog);
	int (*accept4)(int fd, struct sockaddr *addr, socklen_t *len, int flags);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*shutdown)(int fd, int how);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	ssize_t (*send)(int fd, const void *buf, size_t len, int flags);
	/* an accelerated UDP socket's kernel side (stk_udp.h) */
	ssize_t (*recvmsg)(int fd, struct msghdr *msg, int flags);
	ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
	int (*getsockopt)(int fd, int level, int name, void *val, socklen_t *len);
	int (*setsockopt)(int fd, int level, int name, const void *val, socklen_t len);
	int (*getsockname)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*getpeername)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*fcntl)(int fd, int cmd, ...);
	int (*poll)(struct pollfd *fds, nfds_t nfds, int timeout);
	int (*epoll_create1)(int flags);
	int (*epoll_ctl)(int epfd, int op, int fd, struct epoll_event *ev);
	int (*epoll_wait)(int epfd, struct epoll_event *evs, int max, int timeout);
	int (*ppoll)(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		     const sigset_t *sigmask);
	/* FIONREAD of a migrated connection */
	int (*ioctl)(int fd, unsigned long request, ...);
};

extern struct stk_sys stk_sys;

/* Replace the table (called once by the preload at start-up). */
void stk_sys_install(const struct stk_sys *real);

/* A close-on-exec duplicate of fd for the stack's own use, placed in the upper
 * half of RLIMIT_NOFILE (from 64 Ki at most) when there is room: the app gets the lowest free number
 * as on the kernel (POSIX), however the stack's fds come and go (a negotiation
 * settling on the kernel releases one at any time). -1 (errno) on failure. */
int stk_sys_dup_high(int fd);
/* Grow the fd table now to where stk_sys_dup_high puts its duplicates (fd:
 * any open descriptor; the duplicate is closed at once, the table stays). The
 * kernel waits for an RCU grace period (~10 ms) when it grows the table of a
 * process with threads: a server calls this at listen, before its providers
 * start threads, so that the duplicate at accept is not 10 ms late for the
 * client's HELLO wait (FABSOCK_NEGO_WAIT_MS, 5 ms). */
void stk_sys_dup_high_reserve(int fd);
/* fd still names the socket or file whose inode is ino (not closed behind our
 * back, nor reused by the app for something else). */
bool stk_sys_fd_is(int fd, ino_t ino);
/* The same at start-up, before the app has threads (the preload's
 * constructor): no grace period to wait for then. */
void stk_sys_fd_table_reserve(void);

#endif
