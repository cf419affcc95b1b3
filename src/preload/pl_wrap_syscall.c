/* syscall() (see pl_wrap_bypass.c): a program that calls libc's syscall()
 * for a socket or descriptor call gets the wrapper's answer. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The socket and fd calls an app may make through syscall(): the wrapper's
 * answer (the same -1/errno convention). Others go to libc. Six arguments are
 * always taken, as libc's syscall() takes them whatever the call: past the
 * fifth that reads the caller's stack beyond what it passed (not a fault,
 * but ASan reports it: not instrumented). */
__attribute__((no_sanitize_address))
PL_EXPORT long syscall(long number, ...)
{
	va_list ap;
	va_start(ap, number);
	long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long);
	long d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
	va_end(ap);
	if (pl_guarded())
		return PL_REAL(syscall)(number, a, b, c, d, e, f);
	int fd = (int)a;
	switch (number) {
	case SYS_read:
		return read(fd, (void *)b, (size_t)c);
	case SYS_write:
		return write(fd, (const void *)b, (size_t)c);
	case SYS_readv:
		return readv(fd, (const struct iovec *)b, (int)c);
	case SYS_writev:
		return writev(fd, (const struct iovec *)b, (int)c);
	case SYS_recvfrom:
		return recvfrom(fd, (void *)b, (size_t)c, (int)d, (struct sockaddr *)e,
				(socklen_t *)f);
	case SYS_sendto:
		return sendto(fd, (const void *)b, (size_t)c, (int)d, (const struct sockaddr *)e,
			      (socklen_t)f);
	case SYS_recvmsg:
		return recvmsg(fd, (struct msghdr *)b, (int)c);
	case SYS_sendmsg:
		return sendmsg(fd, (const struct msghdr *)b, (int)c);
	case SYS_recvmmsg:
		return recvmmsg(fd, (struct mmsghdr *)b, (unsigned int)c, (int)d,
				(struct timespec *)e);
	case SYS_sendmmsg:
		return sendmmsg(fd, (struct mmsghdr *)b, (unsigned int)c, (int)d);
	case SYS_preadv2:
		return preadv2(fd, (const struct iovec *)b, (int)c, (off_t)d, (int)f);
	case SYS_pwritev2:
		return pwritev2(fd, (const struct iovec *)b, (int)c, (off_t)d, (int)f);
	case SYS_sendfile:
		return sendfile(fd, (int)b, (off_t *)c, (size_t)d);
	case SYS_splice:
		return splice(fd, (loff_t *)b, (int)c, (loff_t *)d, (size_t)e, (unsigned int)f);
	case SYS_shutdown:
		return shutdown(fd, (int)b);
	case SYS_close:
		return close(fd);
	case SYS_dup:
		return dup(fd);
#ifdef SYS_dup2
	case SYS_dup2:
		return dup2(fd, (int)b);
#endif
	case SYS_dup3:
		return dup3(fd, (int)b, (int)c);
	case SYS_fcntl:
		return fcntl(fd, (int)b, (void *)c);
	case SYS_ioctl:
		return ioctl(fd, (unsigned long)b, (void *)c);
	case SYS_socket:
		return socket(fd, (int)b, (int)c);
	case SYS_connect:
		return connect(fd, (const struct sockaddr *)b, (socklen_t)c);
	case SYS_bind:
		return bind(fd, (const struct sockaddr *)b, (socklen_t)c);
	case SYS_listen:
		return listen(fd, (int)b);
	case SYS_accept:
		return accept(fd, (struct sockaddr *)b, (socklen_t *)c);
	case SYS_accept4:
		return accept4(fd, (struct sockaddr *)b, (socklen_t *)c, (int)d);
	default:
		return PL_REAL(syscall)(number, a, b, c, d, e, f);
	}
}
