/* The ways glibc moves bytes through a socket without calling the socket
 * wrappers (its internal calls never reach an interposer), and what each does
 * with an accelerated connection:
 *  - splice: carried by the stack (through a bounce buffer: the connection
 *    stays accelerated). tee and vmsplice take pipes only, copy_file_range
 *    regular files only: the kernel refuses a socket before moving a byte, so
 *    the plain call is right.
 *  - dprintf/vdprintf (and the fortified __dprintf_chk/__vdprintf_chk): glibc
 *    writes through its internal write; the text is formatted here and goes
 *    through our write.
 *  - stdio on an fdopen'ed socket or on a socket made fd 0, 1 or 2, POSIX
 *    aio: glibc's own code (and aio's own threads) read and write the fd. The
 *    connection moves to the kernel first (a negotiating one settles there,
 *    one on the fabric migrates: stk_sock_leave); bytes the stack received and
 *    the app has not read yet are handed over first (pushed back into the
 *    FILE, or completing the aio read). Limit: a connection that settled on
 *    the kernel while a late negotiation record may still come has that
 *    record removed by our reads only.
 *  - syscall(SYS_read, ...) and the other socket and fd calls through libc's
 *    syscall(): dispatched to the wrappers. preadv2/pwritev2 (pl_wrap_io.c)
 *    with offset -1 are readv/writev; every other positioned call is refused
 *    by the kernel for a socket.
 * What no interposer sees: system calls made without libc (io_uring, inline
 * assembly). fabsock(7) says what happens then.
 *
 * This file: the helpers the others share, and splice. stdio and dprintf:
 * pl_wrap_stdio.c; aio: pl_wrap_aio.c; syscall(): pl_wrap_syscall.c. */
#include "config.h"
#include "preload/pl_wrap.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct stk_sock *pl_stack_sock(int fd)
{
	struct stk_sock *sock = pl_tracked(fd);
	return sock && (stk_sock_state(sock) & STK_SOCK_CARRIED) ? sock : NULL;
}

void pl_to_kernel(struct stk_sock *sock)
{
	int saved_errno = errno;
	pl_enter();
	stk_sock_leave(sock, STK_LEAVE_BYPASS);
	pl_leave();
	errno = saved_errno;
}

/* ---- splice ---- */

#define SPLICE_CHUNK 16384

static bool is_pipe(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* Socket to pipe: peek, write what the pipe takes, then take exactly that
 * from the socket, so nothing is lost when the pipe is full. The socket side
 * waits as its own mode says (SPLICE_F_NONBLOCK is about the pipe, as the
 * kernel's tcp_splice_read). With SPLICE_F_NONBLOCK a full pipe is EAGAIN and
 * at most PIPE_BUF bytes go (a pipe that polls writable takes that many
 * without blocking). */
static ssize_t splice_from_stack(int sock_fd, int pipe_fd, size_t len, unsigned int flags)
{
	char buf[SPLICE_CHUNK];
	if (len == 0)
		return 0;
	size_t want = len < sizeof(buf) ? len : sizeof(buf);
	if (flags & SPLICE_F_NONBLOCK) {
		struct pollfd p = { .fd = pipe_fd, .events = POLLOUT };
		if (PL_REAL(poll)(&p, 1, 0) == 0) {
			errno = EAGAIN;
			return -1;
		}
		if (want > PIPE_BUF)
			want = PIPE_BUF;
	}
	ssize_t n = recv(sock_fd, buf, want, MSG_PEEK);
	if (n <= 0)
		return n;
	ssize_t w = PL_REAL(write)(pipe_fd, buf, (size_t)n);
	if (w <= 0)
		return w;
	return recv(sock_fd, buf, (size_t)w, 0);
}

/* Pipe to socket: what is taken from the pipe is sent in full (a non-blocking
 * socket waits for room for the rest: the bytes have no other place to go),
 * so only a connection error loses them, as it loses everything after it.
 * Nothing is taken while a non-blocking socket has no room. */
static ssize_t splice_to_stack(int pipe_fd, int sock_fd, size_t len, unsigned int flags)
{
	char buf[SPLICE_CHUNK];
	if (len == 0)
		return 0;
	struct pollfd p = { .fd = sock_fd, .events = POLLOUT };
	int fl = PL_REAL(fcntl)(sock_fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK) && poll(&p, 1, 0) == 1 && !(p.revents & POLLOUT)) {
		errno = EAGAIN;
		return -1;
	}
	if (flags & SPLICE_F_NONBLOCK) {
		struct pollfd in = { .fd = pipe_fd, .events = POLLIN };
		if (PL_REAL(poll)(&in, 1, 0) == 0) {
			errno = EAGAIN;
			return -1;
		}
	}
	ssize_t n = PL_REAL(read)(pipe_fd, buf, len < sizeof(buf) ? len : sizeof(buf));
	if (n <= 0)
		return n;
	int msg = (flags & SPLICE_F_MORE) ? MSG_MORE : 0;
	size_t sent = 0;
	while (sent < (size_t)n) {
		ssize_t k = send(sock_fd, buf + sent, (size_t)n - sent, msg);
		if (k < 0 && errno == EAGAIN) {
			p.revents = 0;
			poll(&p, 1, -1);
			continue;
		}
		if (k < 0)
			return sent ? (ssize_t)sent : -1;
		sent += (size_t)k;
	}
	return (ssize_t)sent;
}

PL_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			 unsigned int flags)
{
	struct stk_sock *in = pl_stack_sock(fd_in), *out = pl_stack_sock(fd_out);
	if (__builtin_expect(!in && !out, 1))
		return PL_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	/* one pipe, no offset on the socket side: else the kernel refuses it */
	if (in && !out && !off_in && is_pipe(fd_out))
		return splice_from_stack(fd_in, fd_out, len, flags);
	if (out && !in && !off_out && is_pipe(fd_in))
		return splice_to_stack(fd_in, fd_out, len, flags);
	return PL_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
}
