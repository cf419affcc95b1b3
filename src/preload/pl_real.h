/* pl_real: the next definition (normally glibc's) of every name we interpose.
 *
 * Resolved with dlsym(RTLD_NEXT) at the first wrapper call or in our constructor,
 * whichever comes first: other libraries' constructors may open sockets before ours
 * runs. If resolution re-enters a wrapper on the same thread (an allocator that
 * dlsym calls may itself read or write), that call goes straight to the system call
 * (PL_REAL falls back to pl_raw), so there is no recursion and no deadlock.
 * A required symbol that cannot be found is fatal, with its name.
 *
 * glibc declares the sockaddr arguments of bind/connect/accept/... as transparent
 * unions (__SOCKADDR_ARG) under _GNU_SOURCE; the table uses the same types so the
 * wrappers pass them through untouched. */
#ifndef PL_REAL_H
#define PL_REAL_H

#include <aio.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <stdarg.h>
#include <time.h>

/* X(return type, name, (parameters), (arguments)) for names glibc must have;
 * XO(...) for names that may be absent from an older glibc.
 * CUSTOM: hand-written wrappers (they keep the fd table in step).
 * PASS: wrappers generated as a straight call of the real function; a name moves
 * to CUSTOM when it gains a dispatch to the stack. */
#define PL_SYMBOLS_CUSTOM(X, XO) \
	X(int, socket, (int domain, int type, int protocol), (domain, type, protocol)) \
	X(int, bind, (int fd, __CONST_SOCKADDR_ARG addr, socklen_t len), (fd, addr, len)) \
	X(int, listen, (int fd, int backlog), (fd, backlog)) \
	X(int, accept, (int fd, __SOCKADDR_ARG addr, socklen_t *len), (fd, addr, len)) \
	X(int, accept4, (int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags), \
	  (fd, addr, len, flags)) \
	X(int, connect, (int fd, __CONST_SOCKADDR_ARG addr, socklen_t len), (fd, addr, len)) \
	X(int, close, (int fd), (fd)) \
	X(ssize_t, sendto, (int fd, const void *buf, size_t len, int flags, \
			    __CONST_SOCKADDR_ARG addr, socklen_t alen), \
	  (fd, buf, len, flags, addr, alen)) \
	X(ssize_t, sendmsg, (int fd, const struct msghdr *msg, int flags), (fd, msg, flags)) \
	X(int, sendmmsg, (int fd, struct mmsghdr *vec, unsigned int vlen, int flags), \
	  (fd, vec, vlen, flags)) \
	X(int, fcntl, (int fd, int cmd, ...), (fd, cmd)) \
	X(int, ioctl, (int fd, unsigned long request, ...), (fd, request)) \
	X(int, dup, (int fd), (fd)) \
	X(int, dup2, (int fd, int fd2), (fd, fd2)) \
	X(int, dup3, (int fd, int fd2, int flags), (fd, fd2, flags)) \
	X(int, shutdown, (int fd, int how), (fd, how)) \
	X(int, getsockopt, (int fd, int level, int name, void *val, socklen_t *len), \
	  (fd, level, name, val, len)) \
	X(ssize_t, read, (int fd, void *buf, size_t len), (fd, buf, len)) \
	X(ssize_t, readv, (int fd, const struct iovec *iov, int iovcnt), (fd, iov, iovcnt)) \
	X(ssize_t, write, (int fd, const void *buf, size_t len), (fd, buf, len)) \
	X(ssize_t, writev, (int fd, const struct iovec *iov, int iovcnt), (fd, iov, iovcnt)) \
	X(FILE *, fdopen, (int fd, const char *mode), (fd, mode)) \
	X(void, _exit, (int status), (status)) \
	X(ssize_t, recv, (int fd, void *buf, size_t len, int flags), (fd, buf, len, flags)) \
	X(ssize_t, recvfrom, (int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr, \
			      socklen_t *alen), (fd, buf, len, flags, addr, alen)) \
	X(ssize_t, recvmsg, (int fd, struct msghdr *msg, int flags), (fd, msg, flags)) \
	X(int, recvmmsg, (int fd, struct mmsghdr *vec, unsigned int vlen, int flags, \
			  struct timespec *timeout), (fd, vec, vlen, flags, timeout)) \
	X(ssize_t, send, (int fd, const void *buf, size_t len, int flags), (fd, buf, len, flags)) \
	X(ssize_t, sendfile, (int out_fd, int in_fd, off_t *offset, size_t count), \
	  (out_fd, in_fd, offset, count)) \
	X(ssize_t, __read_chk, (int fd, void *buf, size_t len, size_t buflen), \
	  (fd, buf, len, buflen)) \
	X(ssize_t, __recv_chk, (int fd, void *buf, size_t len, size_t buflen, int flags), \
	  (fd, buf, len, buflen, flags)) \
	X(ssize_t, __recvfrom_chk, (int fd, void *buf, size_t len, size_t buflen, int flags, \
				    __SOCKADDR_ARG addr, socklen_t *alen), \
	  (fd, buf, len, buflen, flags, addr, alen)) \
	X(int, poll, (struct pollfd *fds, nfds_t nfds, int timeout), (fds, nfds, timeout)) \
	X(int, ppoll, (struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, \
		       const sigset_t *mask), (fds, nfds, timeout, mask)) \
	X(int, select, (int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, \
			struct timeval *timeout), (nfds, rfds, wfds, efds, timeout)) \
	X(int, pselect, (int nfds, fd_set *rfds, fd_set *wfds, fd_set *efds, \
			 const struct timespec *timeout, const sigset_t *mask), \
	  (nfds, rfds, wfds, efds, timeout, mask)) \
	X(int, epoll_create, (int size), (size)) \
	X(int, epoll_create1, (int flags), (flags)) \
	X(int, epoll_ctl, (int epfd, int op, int fd, struct epoll_event *ev), (epfd, op, fd, ev)) \
	X(int, epoll_wait, (int epfd, struct epoll_event *evs, int max, int timeout), \
	  (epfd, evs, max, timeout)) \
	X(int, epoll_pwait, (int epfd, struct epoll_event *evs, int max, int timeout, \
			     const sigset_t *mask), (epfd, evs, max, timeout, mask)) \
	X(int, __poll_chk, (struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen), \
	  (fds, nfds, timeout, fdslen)) \
	X(int, __ppoll_chk, (struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, \
			     const sigset_t *mask, size_t fdslen), \
	  (fds, nfds, timeout, mask, fdslen)) \
	XO(int, fcntl64, (int fd, int cmd, ...), (fd, cmd)) \
	XO(ssize_t, sendfile64, (int out_fd, int in_fd, off64_t *offset, size_t count), \
	   (out_fd, in_fd, offset, count)) \
	XO(int, epoll_pwait2, (int epfd, struct epoll_event *evs, int max, \
			       const struct timespec *timeout, const sigset_t *mask), \
	   (epfd, evs, max, timeout, mask)) \
	X(pid_t, fork, (void), ()) \
	X(int, daemon, (int nochdir, int noclose), (nochdir, noclose)) \
	X(int, execve, (const char *path, char *const argv[], char *const envp[]), \
	  (path, argv, envp)) \
	X(int, execv, (const char *path, char *const argv[]), (path, argv)) \
	X(int, execvp, (const char *file, char *const argv[]), (file, argv)) \
	X(int, execvpe, (const char *file, char *const argv[], char *const envp[]), \
	  (file, argv, envp)) \
	X(int, fexecve, (int fd, char *const argv[], char *const envp[]), (fd, argv, envp)) \
	XO(int, execveat, (int dirfd, const char *path, char *const argv[], \
			   char *const envp[], int flags), (dirfd, path, argv, envp, flags)) \
	X(int, posix_spawn, (pid_t *pid, const char *path, \
			     const posix_spawn_file_actions_t *actions, \
			     const posix_spawnattr_t *attr, char *const argv[], \
			     char *const envp[]), (pid, path, actions, attr, argv, envp)) \
	X(int, posix_spawnp, (pid_t *pid, const char *file, \
			      const posix_spawn_file_actions_t *actions, \
			      const posix_spawnattr_t *attr, char *const argv[], \
			      char *const envp[]), (pid, file, actions, attr, argv, envp)) \
	X(int, posix_spawn_file_actions_adddup2, (posix_spawn_file_actions_t *actions, \
						  int fd, int newfd), (actions, fd, newfd)) \
	X(ssize_t, splice, (int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, \
			    unsigned int flags), (fd_in, off_in, fd_out, off_out, len, flags)) \
	X(ssize_t, preadv2, (int fd, const struct iovec *iov, int iovcnt, off_t offset, \
			     int flags), (fd, iov, iovcnt, offset, flags)) \
	X(ssize_t, pwritev2, (int fd, const struct iovec *iov, int iovcnt, off_t offset, \
			      int flags), (fd, iov, iovcnt, offset, flags)) \
	XO(ssize_t, preadv64v2, (int fd, const struct iovec *iov, int iovcnt, off64_t offset, \
				 int flags), (fd, iov, iovcnt, offset, flags)) \
	XO(ssize_t, pwritev64v2, (int fd, const struct iovec *iov, int iovcnt, off64_t offset, \
				  int flags), (fd, iov, iovcnt, offset, flags)) \
	X(int, vdprintf, (int fd, const char *fmt, va_list ap), (fd, fmt, ap)) \
	X(int, __vdprintf_chk, (int fd, int flag, const char *fmt, va_list ap), \
	  (fd, flag, fmt, ap)) \
	X(int, aio_read, (struct aiocb *cb), (cb)) \
	X(int, aio_write, (struct aiocb *cb), (cb)) \
	XO(int, aio_read64, (struct aiocb64 *cb), (cb)) \
	XO(int, aio_write64, (struct aiocb64 *cb), (cb)) \
	X(int, lio_listio, (int mode, struct aiocb *const list[], int n, struct sigevent *sev), \
	  (mode, list, n, sev)) \
	XO(int, lio_listio64, (int mode, struct aiocb64 *const list[], int n, \
			       struct sigevent *sev), (mode, list, n, sev)) \
	X(long, syscall, (long number, ...), (number)) \
	X(int, setsockopt, (int fd, int level, int name, const void *val, socklen_t len), \
	  (fd, level, name, val, len))

#define PL_SYMBOLS_PASS(X, XO) \
	X(int, socketpair, (int domain, int type, int protocol, int sv[2]), \
	  (domain, type, protocol, sv)) \
	X(int, getsockname, (int fd, __SOCKADDR_ARG addr, socklen_t *len), (fd, addr, len)) \
	X(int, getpeername, (int fd, __SOCKADDR_ARG addr, socklen_t *len), (fd, addr, len))

#define PL_SYMBOLS(X, XO) PL_SYMBOLS_CUSTOM(X, XO) PL_SYMBOLS_PASS(X, XO)

/* glibc declares the fortified entry points only under _FORTIFY_SOURCE. */
#define PL_PROTO(ret, name, params, args) ret name params;
PL_SYMBOLS(PL_PROTO, PL_PROTO)
#undef PL_PROTO

#define PL_FIELD(ret, name, params, args) ret(*name) params;
struct pl_real {
	PL_SYMBOLS(PL_FIELD, PL_FIELD)
};
#undef PL_FIELD

/* The resolved table, and the system-call fallbacks used while it is being filled. */
extern struct pl_real pl_real;
extern const struct pl_real pl_raw;

/* A system call without libc's syscall(), which is interposed (pl_wrap_bypass.c):
 * the fallbacks above must never come back into a wrapper. -1 and errno on
 * failure, as syscall(). */
long pl_raw_syscall(long number, ...);

/* Resolve every symbol (idempotent, thread-safe, re-entrancy-safe). */
void pl_real_resolve(void);

/* The lookup used by pl_real_resolve: dlsym(RTLD_NEXT, name). Replaceable by unit
 * tests to simulate a lookup that re-enters the wrappers (an allocating dlsym). */
extern void *(*pl_real_lookup)(const char *name);

/* The function to call for `name`: resolved, or resolved now, or the raw fallback
 * when this thread is in the middle of resolving. One relaxed load when warm. */
#define PL_REAL(name) \
	(__builtin_expect(__atomic_load_n(&pl_real.name, __ATOMIC_RELAXED) != NULL, 1) \
		 ? pl_real.name \
		 : pl_real_slow_##name())

#define PL_SLOW_DECL(ret, name, params, args) \
	static inline ret(*pl_real_slow_##name(void)) params \
	{ \
		pl_real_resolve(); \
		ret(*fn) params = __atomic_load_n(&pl_real.name, __ATOMIC_ACQUIRE); \
		return fn ? fn : pl_raw.name; \
	}
PL_SYMBOLS(PL_SLOW_DECL, PL_SLOW_DECL)
#undef PL_SLOW_DECL

/* glibc's transparent sockaddr unions, as a plain pointer. */
#if defined(__USE_GNU) && !defined(__cplusplus)
#define PL_SA(arg) ((arg).__sockaddr__)
#else
#define PL_SA(arg) (arg)
#endif

#endif
