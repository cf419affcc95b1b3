/* fd lifecycle wrappers: close, dup*, fcntl, ioctl. They keep the fd table equal
 * to the kernel's view: an entry is cleared before the real close (so a number
 * the kernel reuses is never shadowed) and copied on every duplication. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

PL_EXPORT int close(int fd)
{
	if (!pl_guarded() && pl_fdtab_get(&pl_fdtab, fd)) {
		int saved_errno = errno;
		struct stk_sock *sock = pl_fdtab_take(&pl_fdtab, fd);
		if (sock) {
			pl_enter();
			stk_sock_unref(sock); /* the last reference ends the connection */
			pl_leave();
		}
		errno = saved_errno;
	}
	return PL_REAL(close)(fd);
}

static void after_dup(int oldfd, int newfd)
{
	if (newfd < 0 || pl_guarded())
		return;
	int saved_errno = errno;
	pl_fdtab_dup(&pl_fdtab, oldfd, newfd);
	errno = saved_errno;
	if (__builtin_expect(newfd <= STDERR_FILENO, 0))
		pl_std_stream(newfd);
}

PL_EXPORT int dup(int fd)
{
	int newfd = PL_REAL(dup)(fd);
	after_dup(fd, newfd);
	return newfd;
}

PL_EXPORT int dup2(int fd, int fd2)
{
	int newfd = PL_REAL(dup2)(fd, fd2);
	after_dup(fd, newfd);
	return newfd;
}

PL_EXPORT int dup3(int fd, int fd2, int flags)
{
	int newfd = PL_REAL(dup3)(fd, fd2, flags);
	after_dup(fd, newfd);
	return newfd;
}

/* glibc reads fcntl's third argument as a pointer-sized value whatever the
 * command; doing the same passes ints and pointers through unchanged. */
static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
	int ret = real(fd, cmd, arg);
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		after_dup(fd, ret);
	} else if (cmd == F_SETFL && ret == 0) {
		struct stk_sock *sock = pl_tracked(fd);
		if (sock)
			stk_sock_set_nonblock(sock, ((long)arg & O_NONBLOCK) != 0);
	}
	return ret;
}

PL_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(PL_REAL(fcntl), fd, cmd, arg);
}

PL_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_common(PL_REAL(fcntl64), fd, cmd, arg);
}

PL_EXPORT int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct stk_sock *sock = pl_tracked(fd);
	if (sock) {
		int ret = stk_sock_ioctl(sock, request, arg);
		if (ret != STK_KERNEL)
			return (int)pl_ret(ret);
	}
	return PL_REAL(ioctl)(fd, request, arg);
}
