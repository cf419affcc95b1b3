/* stdio and dprintf on sockets (see pl_wrap_bypass.c): stdio's FILEs read and
 * write through libc's internal calls, so the connection moves to the kernel
 * before a FILE uses it; dprintf formats here and writes through our write. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt,
			   va_list ap);
int dprintf(int fd, const char *fmt, ...);
int __dprintf_chk(int fd, int flag, const char *fmt, ...);

/* Bytes pushed into stdin by pl_std_stream and not known to be read: an exec
 * hands down what stdin has not read of them (pl_stdin_pushed_fd). */
static size_t stdin_pushed;

/* Push the leftover bytes back into fp (glibc's ungetc takes any number), so
 * that stdio reads them before the kernel's. Returns true when all went. */
static bool leftover_to_file(struct stk_sock *sock, FILE *fp)
{
	size_t n = stk_sock_leftover_count(sock);
	if (n == 0)
		return true;
	unsigned char *buf = malloc(n);
	if (!buf)
		return false;
	n = stk_sock_leftover_take(sock, buf, n, true);
	size_t pushed = 0;
	while (pushed < n && ungetc(buf[n - 1 - pushed], fp) != EOF)
		pushed++;
	if (pushed == n) { /* now the FILE's: taken from the stack */
		stk_sock_leftover_take(sock, buf, n, false);
		if (fp == stdin)
			stdin_pushed = n;
	}
	else /* undo: the bytes stay readable through the fd */
		while (pushed-- > 0)
			fgetc(fp);
	free(buf);
	return pushed == n;
}

/* stdio reads and writes the socket with libc's internal calls: the
 * connection moves to the kernel first, then the fd is a plain kernel socket
 * for this process (forgotten here, so fclose's internal close ends the
 * connection as the kernel's close would). A write-only stream leaves unread
 * bytes readable through the fd, which stays tracked for them. */
PL_EXPORT FILE *fdopen(int fd, const char *mode)
{
	/* also a migrated connection with nothing left to read: its private
	 * duplicate of the socket would outlive fclose */
	struct stk_sock *sock = pl_tracked(fd);
	if (!sock || !(stk_sock_state(sock) & STK_SOCK_CONN))
		return PL_REAL(fdopen)(fd, mode);
	pl_to_kernel(sock);
	FILE *fp = PL_REAL(fdopen)(fd, mode);
	if (!fp)
		return NULL;
	int saved_errno = errno;
	bool reads = mode && (mode[0] == 'r' || strchr(mode, '+'));
	if (!(stk_sock_state(sock) & STK_SOCK_FABRIC) ||
	    (reads ? leftover_to_file(sock, fp) : stk_sock_leftover_count(sock) == 0))
		pl_untrack(fd);
	errno = saved_errno;
	return fp;
}

/* fd 0, 1 or 2 now names a socket (dup2 of an accepted connection, as an
 * inetd-style server does): stdio's stdin, stdout and stderr use it through
 * libc's internal calls, as after fdopen. A connection moves to the kernel;
 * unread bytes go into stdin. */
void pl_std_stream(int fd)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (!sock || !(stk_sock_state(sock) & STK_SOCK_CONN))
		return;
	pl_to_kernel(sock);
	int saved_errno = errno;
	if (!(stk_sock_state(sock) & STK_SOCK_FABRIC) ||
	    (fd == 0 ? leftover_to_file(sock, stdin) : stk_sock_leftover_count(sock) == 0))
		pl_untrack(fd);
	errno = saved_errno;
}

/* glibc keeps pushed-back bytes in a backup area: [_IO_read_ptr, _IO_read_end)
 * while _IO_IN_BACKUP is set (the FILE layout is glibc's public ABI). The
 * unread ones among those pl_std_stream pushed go to the exec'd image, as a
 * leftover handed down (FABSOCK_INHERIT) — an inetd-style server dup2s the
 * connection onto fd 0 and execs its handler. A memfd (close-on-exec) or -1. */
#define PL_IO_IN_BACKUP 0x100
int pl_stdin_pushed_fd(void)
{
	if (stdin_pushed == 0 || !(stdin->_flags & PL_IO_IN_BACKUP) ||
	    stdin->_IO_read_end <= stdin->_IO_read_ptr)
		return -1;
	size_t unread = (size_t)(stdin->_IO_read_end - stdin->_IO_read_ptr);
	if (unread > stdin_pushed)
		unread = stdin_pushed; /* more is the program's own push-back */
	pl_enter();
	int fd = stk_leftover_memfd(stdin->_IO_read_ptr, unread);
	pl_leave();
	return fd;
}

/* ---- dprintf ---- */

static int write_all(int fd, const char *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, buf + done, len - done);
		if (n < 0)
			return -1;
		done += (size_t)n;
	}
	return (int)len;
}

/* Format (as vsnprintf, or __vsnprintf_chk when flag >= 0) and write. */
static int dprintf_accel(int fd, int flag, const char *fmt, va_list ap)
{
	char small[1024];
	va_list again;
	va_copy(again, ap);
	int n = flag >= 0 ? __vsnprintf_chk(small, sizeof(small), flag, sizeof(small), fmt, ap)
			  : vsnprintf(small, sizeof(small), fmt, ap);
	char *buf = small;
	if (n >= (int)sizeof(small)) {
		buf = malloc((size_t)n + 1);
		if (!buf) {
			va_end(again);
			errno = ENOMEM;
			return -1;
		}
		n = flag >= 0 ? __vsnprintf_chk(buf, (size_t)n + 1, flag, (size_t)n + 1, fmt, again)
			      : vsnprintf(buf, (size_t)n + 1, fmt, again);
	}
	va_end(again);
	int ret = n < 0 ? n : write_all(fd, buf, (size_t)n);
	if (buf != small)
		free(buf);
	return ret;
}

PL_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	if (pl_stack_sock(fd))
		return dprintf_accel(fd, -1, fmt, ap);
	return PL_REAL(vdprintf)(fd, fmt, ap);
}

PL_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	if (pl_stack_sock(fd))
		return dprintf_accel(fd, flag < 0 ? 0 : flag, fmt, ap);
	return PL_REAL(__vdprintf_chk)(fd, flag, fmt, ap);
}

PL_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int ret = vdprintf(fd, fmt, ap);
	va_end(ap);
	return ret;
}

PL_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int ret = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return ret;
}
