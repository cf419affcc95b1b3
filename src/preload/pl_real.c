#include "config.h"
#include "preload/pl_real.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct pl_real pl_real;

/* ---- system-call fallbacks, used only while this thread resolves the table ----
 * Generic numbers only (ppoll, pselect6, dup3, epoll_pwait, accept4...) so the
 * fallbacks exist on every Linux architecture. fork and daemon have none: forking
 * from inside dlsym is not something any allocator does. */

#define KSIGSET_SIZE (_NSIG / 8)

static int raw_socket(int domain, int type, int protocol)
{
	return (int)pl_raw_syscall(SYS_socket, domain, type, protocol);
}
static int raw_socketpair(int domain, int type, int protocol, int sv[2])
{
	return (int)pl_raw_syscall(SYS_socketpair, domain, type, protocol, sv);
}
static int raw_bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	return (int)pl_raw_syscall(SYS_bind, fd, PL_SA(addr), len);
}
static int raw_listen(int fd, int backlog)
{
	return (int)pl_raw_syscall(SYS_listen, fd, backlog);
}
static int raw_accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	return (int)pl_raw_syscall(SYS_accept4, fd, PL_SA(addr), len, flags);
}
static int raw_accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return raw_accept4(fd, addr, len, 0);
}
static int raw_connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	return (int)pl_raw_syscall(SYS_connect, fd, PL_SA(addr), len);
}
static int raw_shutdown(int fd, int how)
{
	return (int)pl_raw_syscall(SYS_shutdown, fd, how);
}
static int raw_close(int fd)
{
	return (int)pl_raw_syscall(SYS_close, fd);
}
static ssize_t raw_read(int fd, void *buf, size_t len)
{
	return pl_raw_syscall(SYS_read, fd, buf, len);
}
static ssize_t raw_readv(int fd, const struct iovec *iov, int iovcnt)
{
	return pl_raw_syscall(SYS_readv, fd, iov, iovcnt);
}
static ssize_t raw_write(int fd, const void *buf, size_t len)
{
	return pl_raw_syscall(SYS_write, fd, buf, len);
}
static ssize_t raw_writev(int fd, const struct iovec *iov, int iovcnt)
{
	return pl_raw_syscall(SYS_writev, fd, iov, iovcnt);
}
static ssize_t raw_recvfrom(int fd, void *buf, size_t len, int flags, __SOCKADDR_ARG addr,
			    socklen_t *alen)
{
	return pl_raw_syscall(SYS_recvfrom, fd, buf, len, flags, PL_SA(addr), alen);
}
static ssize_t raw_recv(int fd, void *buf, size_t len, int flags)
{
	return pl_raw_syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}
static ssize_t raw_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return pl_raw_syscall(SYS_recvmsg, fd, msg, flags);
}
static int raw_recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *timeout)
{
	return (int)pl_raw_syscall(SYS_recvmmsg, fd, vec, vlen, flags, timeout);
}
static ssize_t raw_sendto(int fd, const void *buf, size_t len, int flags,
			  __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	return pl_raw_syscall(SYS_sendto, fd, buf, len, flags, PL_SA(addr), alen);
}
static ssize_t raw_send(int fd, const void *buf, size_t len, int flags)
{
	return pl_raw_syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}
static ssize_t raw_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return pl_raw_syscall(SYS_sendmsg, fd, msg, flags);
}
static int raw_sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	return (int)pl_raw_syscall(SYS_sendmmsg, fd, vec, vlen, flags);
}
static int raw_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	return (int)pl_raw_syscall(SYS_getsockopt, fd, level, name, val, len);
}
static int raw_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return (int)pl_raw_syscall(SYS_setsockopt, fd, level, name, val, len);
}
static int raw_getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return (int)pl_raw_syscall(SYS_getsockname, fd, PL_SA(addr), len);
}
static int raw_getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return (int)pl_raw_syscall(SYS_getpeername, fd, PL_SA(addr), len);
}
static int raw_fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return (int)pl_raw_syscall(SYS_fcntl, fd, cmd, arg);
}
static int raw_ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return (int)pl_raw_syscall(SYS_ioctl, fd, request, arg);
}
static int raw_dup(int fd)
{
	return (int)pl_raw_syscall(SYS_dup, fd);
}
static int raw_dup3(int fd, int fd2, int flags)
{
	return (int)pl_raw_syscall(SYS_dup3, fd, fd2, flags);
}
static int raw_dup2(int fd, int fd2)
{
	if (fd == fd2) /* dup3 refuses equal fds; dup2 checks validity */
		return raw_fcntl(fd, F_GETFD) < 0 ? -1 : fd;
	return raw_dup3(fd, fd2, 0);
}
static int raw_ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		     const sigset_t *mask)
{
	struct timespec copy, *ts = NULL;
	if (timeout) {
		copy = *timeout; /* the kernel writes back the time left */
		ts = &copy;
	}
	return (int)pl_raw_syscall(SYS_ppoll, fds, nfds, ts, mask, KSIGSET_SIZE);
}
static int raw_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000L };
	return raw_ppoll(fds, nfds, timeout < 0 ? NULL : &ts, NULL);
}
static int raw_pselect6(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timespec *ts,
			const sigset_t *mask)
{
	struct {
		const sigset_t *mask;
		size_t size;
	} sig = { mask, KSIGSET_SIZE };
	return (int)pl_raw_syscall(SYS_pselect6, nfds, r, w, e, ts, mask ? &sig : NULL);
}
static int raw_pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       const struct timespec *timeout, const sigset_t *mask)
{
	struct timespec copy, *ts = NULL;
	if (timeout) {
		copy = *timeout;
		ts = &copy;
	}
	return raw_pselect6(nfds, r, w, e, ts, mask);
}
static int raw_select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *timeout)
{
	struct timespec ts, *tsp = NULL;
	if (timeout) {
		ts.tv_sec = timeout->tv_sec;
		ts.tv_nsec = timeout->tv_usec * 1000L;
		tsp = &ts;
	}
	int ret = raw_pselect6(nfds, r, w, e, tsp, NULL);
	if (timeout) { /* Linux select reports the time left */
		timeout->tv_sec = ts.tv_sec;
		timeout->tv_usec = ts.tv_nsec / 1000L;
	}
	return ret;
}
static int raw_epoll_create1(int flags)
{
	return (int)pl_raw_syscall(SYS_epoll_create1, flags);
}
static int raw_epoll_create(int size)
{
	if (size <= 0) {
		errno = EINVAL;
		return -1;
	}
	return raw_epoll_create1(0);
}
static int raw_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	return (int)pl_raw_syscall(SYS_epoll_ctl, epfd, op, fd, ev);
}
static int raw_epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			   const sigset_t *mask)
{
	return (int)pl_raw_syscall(SYS_epoll_pwait, epfd, evs, max, timeout, mask, KSIGSET_SIZE);
}
static int raw_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	return raw_epoll_pwait(epfd, evs, max, timeout, NULL);
}
static int raw_epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			    const struct timespec *timeout, const sigset_t *mask)
{
#ifdef SYS_epoll_pwait2
	return (int)pl_raw_syscall(SYS_epoll_pwait2, epfd, evs, max, timeout, mask, KSIGSET_SIZE);
#else
	(void)epfd, (void)evs, (void)max, (void)timeout, (void)mask;
	errno = ENOSYS;
	return -1;
#endif
}
static pid_t raw_fork(void)
{
	errno = ENOSYS;
	return -1;
}
static int raw_daemon(int nochdir, int noclose)
{
	(void)nochdir, (void)noclose;
	errno = ENOSYS;
	return -1;
}
static void raw__exit(int status)
{
	pl_raw_syscall(SYS_exit_group, status);
	__builtin_unreachable();
}
static FILE *raw_fdopen(int fd, const char *mode)
{
	(void)fd, (void)mode;
	errno = ENOSYS; /* no system call: only before the table is filled */
	return NULL;
}
/* exec and spawn: nobody execs from inside dlsym either; the plain system call
 * where there is one. */
static int raw_execve(const char *path, char *const argv[], char *const envp[])
{
	return (int)pl_raw_syscall(SYS_execve, path, argv, envp);
}
static int raw_execv(const char *path, char *const argv[])
{
	return raw_execve(path, argv, environ);
}
static int raw_execvpe(const char *file, char *const argv[], char *const envp[])
{
	(void)file, (void)argv, (void)envp;
	errno = ENOSYS;
	return -1;
}
static int raw_execvp(const char *file, char *const argv[])
{
	return raw_execvpe(file, argv, environ);
}
static int raw_execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	return (int)pl_raw_syscall(SYS_execveat, dirfd, path, argv, envp, flags);
}
static int raw_fexecve(int fd, char *const argv[], char *const envp[])
{
	return raw_execveat(fd, "", argv, envp, AT_EMPTY_PATH);
}
static int raw_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	(void)pid, (void)path, (void)actions, (void)attr, (void)argv, (void)envp;
	return ENOSYS;
}
#define raw_posix_spawnp raw_posix_spawn
static int raw_posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *actions, int fd,
						int newfd)
{
	(void)actions, (void)fd, (void)newfd;
	return ENOSYS;
}
static ssize_t raw_sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	return pl_raw_syscall(SYS_sendfile, out_fd, in_fd, offset, count);
}
static ssize_t raw_sendfile64(int out_fd, int in_fd, off64_t *offset, size_t count)
{
	return pl_raw_syscall(SYS_sendfile, out_fd, in_fd, offset, count);
}
extern void __chk_fail(void) __attribute__((noreturn));
static ssize_t raw___read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return raw_read(fd, buf, len);
}
static ssize_t raw___recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
	if (len > buflen)
		__chk_fail();
	return raw_recv(fd, buf, len, flags);
}
static ssize_t raw___recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
				  __SOCKADDR_ARG addr, socklen_t *alen)
{
	if (len > buflen)
		__chk_fail();
	return raw_recvfrom(fd, buf, len, flags, addr, alen);
}
static int raw___poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return raw_poll(fds, nfds, timeout);
}
static int raw___ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
			   const sigset_t *mask, size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return raw_ppoll(fds, nfds, timeout, mask);
}

static ssize_t raw_splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			  unsigned int flags)
{
	return pl_raw_syscall(SYS_splice, fd_in, off_in, fd_out, off_out, len, flags);
}
/* offset as the low and high halves, as the generic entry point takes it */
static ssize_t raw_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	return pl_raw_syscall(SYS_preadv2, fd, iov, iovcnt, (long)offset,
			      (long)((unsigned long long)offset >> 32 >> 32), flags);
}
static ssize_t raw_pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t offset, int flags)
{
	return pl_raw_syscall(SYS_pwritev2, fd, iov, iovcnt, (long)offset,
			      (long)((unsigned long long)offset >> 32 >> 32), flags);
}
#define raw_preadv64v2 raw_preadv2 /* off64_t is off_t on every 64-bit ABI */
#define raw_pwritev64v2 raw_pwritev2
/* Library functions without a system call: only before the table is filled. */
static int raw_vdprintf(int fd, const char *fmt, va_list ap)
{
	(void)fd, (void)fmt, (void)ap;
	errno = ENOSYS;
	return -1;
}
static int raw___vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	(void)flag;
	return raw_vdprintf(fd, fmt, ap);
}
static int raw_aio_read(struct aiocb *cb)
{
	(void)cb;
	errno = ENOSYS;
	return -1;
}
#define raw_aio_write raw_aio_read
static int raw_aio_read64(struct aiocb64 *cb)
{
	(void)cb;
	errno = ENOSYS;
	return -1;
}
#define raw_aio_write64 raw_aio_read64
static int raw_lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	(void)mode, (void)list, (void)n, (void)sev;
	errno = ENOSYS;
	return -1;
}
static int raw_lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	(void)mode, (void)list, (void)n, (void)sev;
	errno = ENOSYS;
	return -1;
}

/* The kernel's system-call instruction: six arguments in registers, -errno back. */
static long raw_syscall6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	ret = x0;
#else
#error "pl_raw_syscall: no system-call sequence for this architecture"
#endif
	if ((unsigned long)ret > -4096UL) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* As musl's syscall(): always six arguments, whatever the call takes. */
long pl_raw_syscall(long number, ...)
{
	va_list ap;
	va_start(ap, number);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	return raw_syscall6(number, a, b, c, d, e, f);
}
#define raw_syscall pl_raw_syscall

#define raw_fcntl64 raw_fcntl /* same call on every 64-bit ABI */
#define PL_RAW_ENTRY(ret, name, params, args) .name = raw_##name,
const struct pl_real pl_raw = {
	PL_SYMBOLS(PL_RAW_ENTRY, PL_RAW_ENTRY)
};
#undef PL_RAW_ENTRY

/* ---- resolution ---- */

static void *lookup_next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

void *(*pl_real_lookup)(const char *name) = lookup_next;

static __thread int resolving __attribute__((tls_model("initial-exec")));
static int resolved; /* atomic */

__attribute__((noreturn)) static void missing_symbol(const char *name)
{
	char line[256];
	const char *why = dlerror();
	int n = snprintf(line, sizeof(line),
			 "fabsock[%d]: error: libc symbol '%s' not found (%s); cannot continue\n",
			 (int)getpid(), name, why ? why : "no error text");
	if (n > 0)
		raw_write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
	abort();
}

#define PL_RESOLVE_REQUIRED(ret, name, params, args) \
	{ \
		void *sym = pl_real_lookup(#name); \
		if (!sym) \
			missing_symbol(#name); \
		__atomic_store_n((void **)&pl_real.name, sym, __ATOMIC_RELEASE); \
	}
#define PL_RESOLVE_OPTIONAL(ret, name, params, args) \
	{ \
		void *sym = pl_real_lookup(#name); \
		__atomic_store_n((void **)&pl_real.name, sym ? sym : (void *)pl_raw.name, \
				 __ATOMIC_RELEASE); \
	}

void pl_real_resolve(void)
{
	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) || resolving)
		return;
	resolving = 1;
	PL_SYMBOLS(PL_RESOLVE_REQUIRED, PL_RESOLVE_OPTIONAL)
	resolving = 0;
	__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}
