#include "config.h"
#include "stack/stk_accel.h"
#include "stack/stk_config.h"
#include "stack/stk_conn.h"
#include "stack/stk_counters.h"
#include "stack/stk_epoll.h"
#include "stack/stk_lazy.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_ready.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stk_accel_live;

/* Log a reason the first time it is seen (P4), count it every time. */
static void fallback(enum stk_counter counter, int fd, const char *reason)
{
	static int logged[STK_C_COUNT]; /* atomic flags */
	stk_count(counter);
	if (__atomic_exchange_n(&logged[counter], 1, __ATOMIC_RELAXED) == 0)
		STK_INFO("fd %d: TCP connection stays on the kernel: %s (logged once per reason, "
			 "counted)", fd, reason);
	else
		STK_DBG("fd %d: TCP connection stays on the kernel: %s", fd, reason);
}

static bool fd_nonblocking(int fd)
{
	int flags = stk_sys.fcntl(fd, F_GETFL);
	return flags >= 0 && (flags & O_NONBLOCK);
}

/* The connection's own duplicate of fd (close-on-exec): the negotiation and
 * liveness channel, which outlives whatever the app does with its fd numbers. */
static int private_dup(int fd)
{
	int priv = stk_sys_dup_high(fd);
	if (priv < 0)
		fallback(STK_C_FALLBACK_NO_FD, fd, "no free fd for the liveness channel");
	return priv;
}

static void adopt(struct stk_sock *sock, int fd, struct stk_conn *conn)
{
	__atomic_store_n(&conn->nonblock, fd_nonblocking(fd), __ATOMIC_RELAXED);
	sock->conn = conn;
	__atomic_fetch_add(&stk_accel_live, 1, __ATOMIC_RELAXED);
	stk_stat_conn_open(conn, fd);
}

bool stk_accel_connect_begin(struct stk_sock *sock, int fd)
{
	if (stk_nego_mark_syn(fd, sock->domain) != 0) {
		fallback(STK_C_FALLBACK_PROV_INIT, fd, "cannot mark the SYN (IP_TOS/TCP_MAXSEG)");
		return false;
	}
	sock->syn_marked = true;
	return true;
}

void stk_accel_connect_end(struct stk_sock *sock, int fd, int kernel_ret)
{
	if (!sock->syn_marked)
		return;
	sock->syn_marked = false;
	/* A non-blocking connect (or one a signal interrupted) goes on in the
	 * kernel: the negotiation starts when it is done. */
	bool connecting = kernel_ret == -EINPROGRESS || kernel_ret == -EINTR;
	int priv = kernel_ret == 0 || connecting ? private_dup(fd) : -1;
	struct stk_conn *conn = NULL;
	int ret = priv >= 0 ? stk_lazy_client(priv, fd, connecting, &conn) : -EBADF;
	if (ret == 0) {
		adopt(sock, fd, conn);
		return;
	}
	if (priv >= 0) {
		stk_sys.close(priv);
		fallback(STK_C_FALLBACK_IO, fd, "cannot start the negotiation");
	}
	stk_nego_unmark(fd, sock->domain);
}

bool stk_accel_listen_begin(struct stk_sock *sock, int fd)
{
	int ret = stk_accel_listen(fd);
	if (ret != 0) {
		fallback(STK_C_FALLBACK_PROV_INIT, fd, "cannot save SYNs on the listener");
		return false;
	}
	sock->accel_listener = true;
	stk_stat_orphan(fd, STK_STAT_LISTENING, NULL);
	return true;
}

struct stk_sock *stk_accel_accepted(struct stk_sock *listener, int newfd)
{
	int priv = private_dup(newfd);
	if (priv < 0)
		return NULL;
	struct stk_conn *conn = NULL;
	int ret = stk_lazy_server(priv, newfd, &conn);
	struct stk_sock *sock = ret == 0 ? stk_sock_new(listener->domain, SOCK_STREAM, IPPROTO_TCP)
					 : NULL;
	if (!sock) {
		if (ret == 0) { /* out of memory: nothing of the connection can go on */
			stk_accel_close_conn(conn);
			return NULL;
		}
		if (ret < 0)
			fallback(STK_C_FALLBACK_IO, newfd, "cannot start the negotiation");
		else
			stk_stat_orphan(newfd, STK_STAT_KERNEL, stk_stat_take_fallback());
		stk_sys.close(priv);
		return NULL;
	}
	sock->decided = true;
	adopt(sock, newfd, conn);
	return sock;
}

int stk_accel_settle(struct stk_sock *sock, bool for_write, int flags)
{
	struct stk_conn *conn = sock->conn;
	/* recv(MSG_OOB) never waits, as tcp_recv_urg */
	bool oob_read = !for_write && (flags & MSG_OOB);
	bool nonblock = __atomic_load_n(&conn->nonblock, __ATOMIC_RELAXED) ||
			(flags & MSG_DONTWAIT) || oob_read;
	int phase = stk_lazy_settle(conn, for_write, nonblock);
	/* Not decided yet: no byte of the app has arrived, so none is urgent
	 * (the kernel's answer with no urgent data: EINVAL, not EAGAIN). */
	if (oob_read && phase == -EAGAIN)
		return -EINVAL;
	return phase;
}

void stk_accel_refuse(struct stk_sock *sock)
{
	if (sock->conn && !stk_conn_on_fabric(sock->conn))
		stk_lazy_refuse(sock->conn);
}

bool stk_accel_zerocopy(struct stk_sock *sock, int fd)
{
	struct stk_conn *conn = sock->conn;
	if (!conn) {
		/* a listener too: accepted sockets inherit the option */
		fallback(STK_C_FALLBACK_ZEROCOPY, fd, "the app turned SO_ZEROCOPY on (its "
			 "MSG_ZEROCOPY completions come from the kernel socket)");
		return true;
	}
	stk_accel_refuse(sock);
	if (stk_conn_on_fabric(conn) && !__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_ZEROCOPY);
	return false;
}

/* Several non-empty elements whose total fits here go as one stk_send, as the
 * kernel puts one sendmsg into one segment: a reader never sees a part of
 * the call without the rest (libvma's tcp_send.null_iov_elements reads the
 * second half together with the next write). Larger calls go per element. */
#define SENDV_GATHER_MAX 16384

static ssize_t sendv_gathered(struct stk_sock *sock, const struct iovec *iov, int iovcnt,
			      size_t total, int flags)
{
	uint8_t buf[SENDV_GATHER_MAX];
	size_t off = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len == 0)
			continue;
		if (stk_wait_bad_user_range(iov[i].iov_base, iov[i].iov_len))
			return -EFAULT; /* as the kernel: nothing sent */
		memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return stk_send(sock->conn, buf, total, flags);
}

ssize_t stk_accel_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	size_t total = 0;
	int nonempty = 0, last = -1; /* MSG_OOB: only the call's last byte is urgent */
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len == 0)
			continue;
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return -EINVAL; /* as the kernel */
		nonempty++;
		last = i;
		total += iov[i].iov_len;
	}
	if (nonempty == 0)
		return 0;
	if (nonempty == 1)
		return stk_send(sock->conn, iov[last].iov_base, iov[last].iov_len, flags);
	if (total <= SENDV_GATHER_MAX)
		return sendv_gathered(sock, iov, iovcnt, total, flags);
	ssize_t sent = 0;
	stk_fab_batch_begin(); /* one ring for the whole call */
	for (int i = 0; i <= last; i++) {
		if (iov[i].iov_len == 0)
			continue;
		int f = i == last ? flags : flags & ~MSG_OOB;
		ssize_t n = stk_send(sock->conn, iov[i].iov_base, iov[i].iov_len, f);
		if (n < 0) {
			if (!sent)
				sent = n;
			break;
		}
		sent += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	stk_fab_batch_end();
	return sent;
}

/* Peeking into several buffers: peek once into one, then scatter. */
static ssize_t peekv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	size_t want = 0;
	for (int i = 0; i < iovcnt; i++)
		want += iov[i].iov_len;
	char small[4096];
	char *tmp = want <= sizeof(small) ? small : malloc(want); /* no allocation when small */
	if (!tmp)
		return -ENOMEM;
	ssize_t n = stk_recv(sock->conn, tmp, want, flags);
	size_t off = 0;
	for (int i = 0; n > 0 && i < iovcnt && off < (size_t)n; i++) {
		size_t part = iov[i].iov_len < (size_t)n - off ? iov[i].iov_len : (size_t)n - off;
		memcpy(iov[i].iov_base, tmp + off, part);
		off += part;
	}
	if (tmp != small)
		free(tmp);
	return n;
}

ssize_t stk_accel_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	if (flags & MSG_TRUNC) { /* TCP discards: the buffers are never written */
		size_t want = 0;
		for (int i = 0; i < iovcnt; i++)
			want += iov[i].iov_len;
		return stk_recv(sock->conn, NULL, want, flags);
	}
	if ((flags & MSG_PEEK) && iovcnt > 1)
		return peekv(sock, iov, iovcnt, flags);
	ssize_t total = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len == 0)
			continue;
		/* After the first bytes, take only what is already there (like the
		 * kernel), unless the caller asked for all of it. */
		int f = total && !(flags & MSG_WAITALL) ? flags | MSG_DONTWAIT : flags;
		ssize_t n = stk_recv(sock->conn, iov[i].iov_base, iov[i].iov_len, f);
		if (n <= 0)
			return total ? total : n;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	return total;
}

/* The checks sendfile(2) makes on its input before moving a byte, in the
 * kernel's order: readable (EBADF), an offset only on a file that supports
 * pread (ESPIPE), a non-negative offset (EINVAL), a regular file or block
 * device (EINVAL: splice's direct path takes nothing else). */
static int sendfile_check_input(int in_fd, const off_t *offset)
{
	int fl = stk_sys.fcntl(in_fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY || (fl & O_PATH))
		return -EBADF;
	struct stat st;
	if (fstat(in_fd, &st) != 0)
		return -EBADF;
	bool seekable = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
	if (offset && !seekable && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return -ESPIPE;
	if (offset && *offset < 0)
		return -EINVAL;
	if (!seekable)
		return -EINVAL;
	return 0;
}

/* sendfile's bounce buffer: one per thread, allocated at its first sendfile
 * and freed at its exit. A file moves in chunks of up to SENDFILE_CHUNK bytes,
 * one read and one stk_send each (which posts them as stream segments): the
 * per-chunk costs (a system call, the connection's lock) are then small beside
 * the copies, and the buffer stays in the cache between its two copies. The
 * file is read, not mapped: a mapping of a file that another process truncates
 * meanwhile raises SIGBUS, where the kernel's sendfile returns a short count.
 * A sendfile that finds the buffer in use (a signal handler's, inside a
 * sendfile of the same thread) uses SENDFILE_SMALL bytes of its stack. */
#define SENDFILE_CHUNK (64u * 1024)
#define SENDFILE_SMALL 16384u

static pthread_key_t sendfile_key;
static pthread_once_t sendfile_once = PTHREAD_ONCE_INIT;
static __thread uint8_t *sendfile_buf;
static __thread bool sendfile_busy;

static void sendfile_key_init(void)
{
	pthread_key_create(&sendfile_key, free);
}

static uint8_t *sendfile_buf_take(void)
{
	if (sendfile_busy)
		return NULL;
	if (!sendfile_buf) {
		pthread_once(&sendfile_once, sendfile_key_init);
		sendfile_buf = malloc(SENDFILE_CHUNK);
		if (!sendfile_buf)
			return NULL;
		pthread_setspecific(sendfile_key, sendfile_buf);
	}
	sendfile_busy = true;
	return sendfile_buf;
}

/* How much the next chunk reads: a non-blocking socket takes no more than the
 * peer's credit (a read of what cannot go is given back: wasted copies), but
 * at least SENDFILE_SMALL, so that a socket without credit answers EAGAIN as
 * stk_send does. */
static size_t sendfile_chunk(struct stk_conn *conn, size_t count, size_t cap)
{
	size_t chunk = count < cap ? count : cap;
	if (!__atomic_load_n(&conn->nonblock, __ATOMIC_RELAXED))
		return chunk;
	size_t room = stk_conn_tx_room(conn);
	if (room < SENDFILE_SMALL)
		room = SENDFILE_SMALL;
	return chunk < room ? chunk : room;
}

bool stk_accel_sendfile_to_kernel(struct stk_sock *sock, size_t count)
{
	struct stk_conn *conn = sock->conn;
	unsigned min = stk_cfg.sendfile_kernel;
	if (!min || count < min || __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return false;
	stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_SENDFILE);
	return __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE);
}

ssize_t stk_accel_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count)
{
	int bad = sendfile_check_input(in_fd, offset);
	if (bad)
		return bad;
	uint8_t small[SENDFILE_SMALL];
	uint8_t *buf = sendfile_buf_take();
	size_t cap = buf ? SENDFILE_CHUNK : sizeof(small);
	if (!buf)
		buf = small;
	ssize_t total = 0;
	stk_fab_batch_begin(); /* one ring for the whole call */
	while (count > 0) {
		size_t chunk = sendfile_chunk(sock->conn, count, cap);
		ssize_t got = offset ? pread(in_fd, buf, chunk, *offset)
				     : stk_sys.read(in_fd, buf, chunk);
		if (got < 0) {
			if (total == 0)
				total = -errno;
			break;
		}
		if (got == 0)
			break;
		ssize_t sent = stk_send(sock->conn, buf, (size_t)got, 0);
		size_t unsent = sent < 0 ? (size_t)got : (size_t)(got - sent);
		if (!offset && unsent)
			lseek(in_fd, -(off_t)unsent, SEEK_CUR); /* give back what did not go */
		if (sent < 0) {
			if (total == 0)
				total = sent;
			break;
		}
		total += sent;
		if (offset)
			*offset += sent;
		if (sent < got)
			break;
		count -= (size_t)sent;
	}
	stk_fab_batch_end();
	if (buf != small)
		sendfile_busy = false;
	return total;
}

int stk_accel_shutdown(struct stk_sock *sock, int how)
{
	return stk_shutdown(sock->conn, how);
}

int stk_accel_readable(struct stk_sock *sock)
{
	size_t n = stk_conn_readable(sock->conn);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int stk_accel_atmark(struct stk_sock *sock)
{
	return stk_conn_atmark(sock->conn);
}

int stk_accel_so_error(struct stk_sock *sock, int kernel_err)
{
	struct stk_conn *conn = sock->conn;
	/* The kernel saw the connection end: let the stack decide how first. */
	if (kernel_err)
		stk_conn_check_liveness(conn);
	int err = stk_conn_take_error(conn);
	if (err || !kernel_err)
		return err;
	/* a reset the app already saw through recv/send: taken, as the kernel */
	return (stk_poll_events(conn) & POLLERR) ? 0 : kernel_err;
}

void stk_accel_set_nonblock(struct stk_sock *sock, bool nonblock)
{
	__atomic_store_n(&sock->conn->nonblock, nonblock, __ATOMIC_RELAXED);
}

void stk_accel_close_conn(struct stk_conn *conn)
{
	stk_lazy_forget(conn);
	stk_epoll_conn_closed(conn); /* the kernel drops closed sockets from sets */
	/* Nothing went over the fabric: closing the kernel socket tells the peer
	 * (the private fd is gone already when it settled on the kernel). */
	if (conn->fd >= 0)
		stk_sys.close(conn->fd);
	stk_conn_destroy(conn);
}

void stk_accel_close(struct stk_sock *sock)
{
	if (__atomic_load_n(&sock->conn->phase, __ATOMIC_ACQUIRE) != STK_PHASE_FABRIC) {
		stk_accel_close_conn(sock->conn);
		sock->conn = NULL;
		__atomic_fetch_sub(&stk_accel_live, 1, __ATOMIC_RELAXED);
		return;
	}
	stk_lazy_forget(sock->conn);
	struct linger linger = { 0, 0 };
	socklen_t len = sizeof(linger);
	bool abortive = stk_sys.getsockopt(sock->conn->fd, SOL_SOCKET, SO_LINGER, &linger,
					   &len) == 0 && linger.l_onoff && linger.l_linger == 0;
	stk_epoll_conn_closed(sock->conn); /* the kernel drops closed sockets from sets */
	stk_close(sock->conn, abortive);
	sock->conn = NULL;
	__atomic_fetch_sub(&stk_accel_live, 1, __ATOMIC_RELAXED);
}

unsigned stk_accel_migrate(struct stk_sock **socks, size_t n, enum stk_migrate_reason why)
{
	struct stk_conn *small[16];
	struct stk_conn **conns = n <= 16 ? small : calloc(n, sizeof(*conns));
	if (!conns)
		return 0;
	for (size_t i = 0; i < n; i++)
		conns[i] = socks[i] ? socks[i]->conn : NULL;
	unsigned late = stk_migrate_conns(conns, n, why);
	for (size_t i = 0; why != STK_MIGRATE_REASON_FORK && i < n; i++) {
		struct stk_conn *conn = socks[i] ? socks[i]->conn : NULL;
		size_t left = conn ? stk_leftover_count(conn->left) : 0;
		if (left == 0 || (why == STK_MIGRATE_REASON_EXEC && conn->left_fd >= 0) ||
		    why == STK_MIGRATE_REASON_BYPASS || why == STK_MIGRATE_REASON_ZEROCOPY ||
		    why == STK_MIGRATE_REASON_SENDFILE)
			continue; /* none, handed down with the exec (FABSOCK_INHERIT), or
				   * still this process's to read (the caller's business) */
		/* The other image / process reads the kernel socket only. */
		stk_count_add(STK_C_MIGRATE_LEFTOVER_LOST, left);
		STK_WARN("fd %d: %zu byte(s) received before the %s and not read yet stay in "
			 "this process (readable through its fd only)", conn->fd, left,
			 why == STK_MIGRATE_REASON_EXEC ? "exec" : "fd passing");
	}
	if (conns != small)
		free(conns);
	return late;
}

int stk_accel_leftover_fd(struct stk_sock *sock)
{
	struct stk_conn *conn = sock->conn;
	if (!conn || !__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE) ||
	    stk_leftover_count(conn->left) == 0)
		return -1;
	return conn->left_fd;
}

struct stk_sock *stk_accel_adopt(int fd, int memfd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct stk_leftover *left = NULL;
	struct stk_sock *sock = NULL;
	int priv = -1;
	if (stk_sys.getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		goto fail;
	sock = stk_sock_new(ss.ss_family, SOCK_STREAM, IPPROTO_TCP);
	left = stk_leftover_open(memfd);
	priv = stk_sys_dup_high(fd);
	if (!sock || !left || priv < 0)
		goto fail;
	stk_sys.fcntl(memfd, F_SETFD, FD_CLOEXEC); /* kept: handed down again if needed */
	struct stk_conn *conn;
	if (stk_conn_create_migrated(priv, left, memfd, &conn) != 0)
		goto fail;
	__atomic_store_n(&conn->nonblock, fd_nonblocking(fd), __ATOMIC_RELAXED);
	sock->decided = true;
	sock->conn = conn;
	__atomic_fetch_add(&stk_accel_live, 1, __ATOMIC_RELAXED);
	STK_DBG("fd %d: inherited through exec with %zu unread byte(s)", fd,
		stk_leftover_count(left));
	return sock;
fail:
	STK_WARN("fd %d: the unread bytes handed down by the exec (memfd %d) cannot be "
		 "used; they are lost", fd, memfd);
	if (left) {
		stk_count_add(STK_C_MIGRATE_LEFTOVER_LOST, stk_leftover_count(left));
		stk_leftover_free(left);
	}
	if (priv >= 0)
		stk_sys.close(priv);
	if (sock)
		stk_sock_unref(sock);
	stk_sys.close(memfd);
	return NULL;
}
