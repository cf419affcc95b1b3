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
 *    aio: glibc's own code (and aio's own
 *    threads) read and write the fd. The connection moves to the kernel first
 *    (a negotiating one settles there, one on the fabric migrates,
 *    stk_migrate.h); bytes the stack received and the app has not read yet are
 *    handed over first (pushed back into the FILE, or completing the aio read).
 *  - syscall(SYS_read, ...) and the other socket and fd calls through libc's
 *    syscall(): dispatched to the wrappers.
 * What no interposer sees: system calls made without libc (io_uring, inline
 * assembly). fabsock(7) says what happens then. */
#include "config.h"
#include "preload/pl_wrap.h"
#include "stack/stk_accel.h"
#include "stack/stk_migrate.h"
#include "stack/stk_stream.h"

#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

extern int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt,
			   va_list ap);
int dprintf(int fd, const char *fmt, ...);
int __dprintf_chk(int fd, int flag, const char *fmt, ...);

/* The tracked socket behind fd when its data calls still go to the stack. */
static struct stk_sock *stack_sock(int fd)
{
	struct stk_sock *sock = pl_tracked(fd);
	return sock && stk_accel_conn(sock) ? sock : NULL;
}

/* ---- moving a connection to the kernel ---- */

/* Code we never see is about to use sock's fd: a negotiating connection
 * settles on the kernel, one on the fabric migrates. errno is preserved. */
static void to_kernel(struct stk_sock *sock)
{
	int saved_errno = errno;
	pl_enter();
	stk_accel_refuse(sock);
	struct stk_conn *conn = sock->conn;
	if (conn && stk_conn_on_fabric(conn) &&
	    !__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_BYPASS);
	pl_leave();
	errno = saved_errno;
}

/* Bytes of a migrated connection the stack still holds for the app. */
static size_t leftover_count(const struct stk_sock *sock)
{
	struct stk_conn *conn = sock->conn;
	if (!conn || !__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return 0;
	return stk_leftover_count(__atomic_load_n(&conn->left, __ATOMIC_ACQUIRE));
}

/* ---- stdio ---- */

/* Push the leftover bytes back into fp (glibc's ungetc takes any number), so
 * that stdio reads them before the kernel's. Returns true when all went. */
static bool leftover_to_file(struct stk_sock *sock, FILE *fp)
{
	size_t n = leftover_count(sock);
	if (n == 0)
		return true;
	unsigned char *buf = malloc(n);
	if (!buf)
		return false;
	n = stk_leftover_take(sock->conn->left, buf, n, true);
	size_t pushed = 0;
	while (pushed < n && ungetc(buf[n - 1 - pushed], fp) != EOF)
		pushed++;
	if (pushed == n) /* now the FILE's: taken from the stack */
		stk_leftover_take(sock->conn->left, buf, n, false);
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
	if (!sock || !sock->conn)
		return PL_REAL(fdopen)(fd, mode);
	to_kernel(sock);
	FILE *fp = PL_REAL(fdopen)(fd, mode);
	if (!fp)
		return NULL;
	int saved_errno = errno;
	bool reads = mode && (mode[0] == 'r' || strchr(mode, '+'));
	if (!stk_conn_on_fabric(sock->conn) ||
	    (reads ? leftover_to_file(sock, fp) : leftover_count(sock) == 0))
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
	if (!sock || !sock->conn)
		return;
	to_kernel(sock);
	int saved_errno = errno;
	if (!stk_conn_on_fabric(sock->conn) ||
	    (fd == 0 ? leftover_to_file(sock, stdin) : leftover_count(sock) == 0))
		pl_untrack(fd);
	errno = saved_errno;
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
	if (stack_sock(fd))
		return dprintf_accel(fd, -1, fmt, ap);
	return PL_REAL(vdprintf)(fd, fmt, ap);
}

PL_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	if (stack_sock(fd))
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
	struct stk_sock *in = stack_sock(fd_in), *out = stack_sock(fd_out);
	if (__builtin_expect(!in && !out, 1))
		return PL_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	/* one pipe, no offset on the socket side: else the kernel refuses it */
	if (in && !out && !off_in && is_pipe(fd_out))
		return splice_from_stack(fd_in, fd_out, len, flags);
	if (out && !in && !off_out && is_pipe(fd_in))
		return splice_to_stack(fd_in, fd_out, len, flags);
	return PL_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
}

/* ---- POSIX aio ---- */

/* glibc's aio_error/aio_return read these two fields of the request. */
static void *notify_thread(void *arg)
{
	struct sigevent *sev = arg;
	void (*fn)(union sigval) = sev->sigev_notify_function;
	union sigval value = sev->sigev_value;
	free(sev);
	fn(value);
	return NULL;
}

/* A read served from the stack's leftover, complete when aio_read returns:
 * the result where aio_error/aio_return find it, the notification the app
 * asked for. */
static void aio_complete(struct aiocb *cb, ssize_t ret)
{
	cb->__return_value = ret;
	__atomic_store_n(&cb->__error_code, 0, __ATOMIC_RELEASE);
	struct sigevent *sev = &cb->aio_sigevent;
	if (sev->sigev_notify == SIGEV_SIGNAL) {
		sigqueue(getpid(), sev->sigev_signo, sev->sigev_value);
	} else if (sev->sigev_notify == SIGEV_THREAD && sev->sigev_notify_function) {
		struct sigevent *copy = malloc(sizeof(*copy));
		pthread_t t;
		pthread_attr_t detached, *attr = sev->sigev_notify_attributes;
		if (!attr) {
			pthread_attr_init(&detached);
			pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
			attr = &detached;
		}
		if (copy) {
			*copy = *sev;
			if (pthread_create(&t, attr, notify_thread, copy) != 0)
				free(copy);
			else if (attr != &detached)
				pthread_detach(t);
		}
		if (attr == &detached)
			pthread_attr_destroy(&detached);
	}
}

/* Before glibc's aio touches fd: the connection moves to the kernel. A read
 * while the stack still holds unread bytes is served from them (true). */
static bool aio_prepare(struct aiocb *cb, bool read_op)
{
	struct stk_sock *sock = stack_sock(cb->aio_fildes);
	if (!sock)
		return false;
	to_kernel(sock);
	if (!read_op || leftover_count(sock) == 0)
		return false;
	size_t n = stk_leftover_take(sock->conn->left, (void *)cb->aio_buf, cb->aio_nbytes,
				     false);
	aio_complete(cb, (ssize_t)n);
	return true;
}

PL_EXPORT int aio_read(struct aiocb *cb)
{
	if (aio_prepare(cb, true))
		return 0;
	return PL_REAL(aio_read)(cb);
}

PL_EXPORT int aio_write(struct aiocb *cb)
{
	aio_prepare(cb, false);
	return PL_REAL(aio_write)(cb);
}

_Static_assert(sizeof(struct aiocb) == sizeof(struct aiocb64), "aiocb64 is aiocb on 64-bit");

PL_EXPORT int aio_read64(struct aiocb64 *cb)
{
	if (aio_prepare((struct aiocb *)cb, true))
		return 0;
	return PL_REAL(aio_read64)(cb);
}

PL_EXPORT int aio_write64(struct aiocb64 *cb)
{
	aio_prepare((struct aiocb *)cb, false);
	return PL_REAL(aio_write64)(cb);
}

/* Every socket of the list moves first; reads served from a leftover become
 * LIO_NOP for glibc for the duration of the call (it reads the opcodes while
 * queueing, before it returns). */
static void lio_prepare(struct aiocb *const list[], int n, bool *served)
{
	for (int i = 0; i < n; i++) {
		served[i] = false;
		if (!list[i] || list[i]->aio_lio_opcode == LIO_NOP)
			continue;
		served[i] = aio_prepare(list[i], list[i]->aio_lio_opcode == LIO_READ);
		if (served[i])
			list[i]->aio_lio_opcode = LIO_NOP;
	}
}

static void lio_restore(struct aiocb *const list[], int n, const bool *served)
{
	for (int i = 0; i < n; i++)
		if (served[i])
			list[i]->aio_lio_opcode = LIO_READ;
}

#define LIO_PREPARE_MAX 1024

PL_EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sev)
{
	bool served[LIO_PREPARE_MAX];
	bool any = n > 0 && n <= LIO_PREPARE_MAX;
	if (any)
		lio_prepare(list, n, served);
	int ret = PL_REAL(lio_listio)(mode, list, n, sev);
	if (any)
		lio_restore(list, n, served);
	return ret;
}

PL_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sev)
{
	bool served[LIO_PREPARE_MAX];
	bool any = n > 0 && n <= LIO_PREPARE_MAX;
	if (any)
		lio_prepare((struct aiocb *const *)list, n, served);
	int ret = PL_REAL(lio_listio64)(mode, list, n, sev);
	if (any)
		lio_restore((struct aiocb *const *)list, n, served);
	return ret;
}

/* ---- syscall() ---- */

/* The socket and fd calls an app may make through syscall(): the wrapper's
 * answer (the same -1/errno convention). Others go to libc. */
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
