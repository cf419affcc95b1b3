/* stk_accel: each step of a TCP socket's life on a fabric provider, and the
 * data calls on its connection, under stk.h's socket calls (stk_api.c,
 * stk_tcp.c). All protocol decisions live here and below.
 *
 * Phases: a candidate TCP connection has a conn from connect()/accept() on, which
 * negotiates lazily (stk_lazy.h); a data call goes to the stream when the conn
 * is on the fabric (stk_conn_on_fabric), to the kernel when it settled there,
 * and asks stk_accel_settle first otherwise (stk_tcp.c).
 *
 * Kernel fds: an accelerated connection keeps a PRIVATE duplicate of the app's
 * kernel socket (close-on-exec) as its liveness channel, so the app may close,
 * dup2 over or hand around its own fd numbers freely; the connection ends (FIN
 * or RST over the fabric, then the kernel socket) when the last app fd referring
 * to it is closed (stk_sock_unref).
 *
 * Return values: -errno, as everywhere in the stack. */
#ifndef STK_ACCEL_H
#define STK_ACCEL_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "stack/stk_migrate.h"
#include "stack/stk_sock.h"
#include "stack/stk_stream.h"

/* stk_accel_live, stk_epoll_live: stk.h. */

/* connect(): call before the kernel connect (the rules already chose to
 * accelerate this destination). Returns true when the socket stays a candidate
 * (its SYN is marked: call stk_accel_connect_end after the kernel connect
 * whatever it returned). */
bool stk_accel_connect_begin(struct stk_sock *sock, int fd);
/* kernel_ret: 0, or -errno of the kernel connect. When it succeeded or goes on
 * (EINPROGRESS, EINTR) the socket gets a conn that negotiates lazily
 * (stk_lazy.h); otherwise sock->conn stays NULL and the kernel keeps it. */
void stk_accel_connect_end(struct stk_sock *sock, int fd, int kernel_ret);

/* listen(): before the kernel listen. Returns true when accepted connections
 * are candidates (the listener keeps its stk_sock). */
bool stk_accel_listen_begin(struct stk_sock *sock, int fd);

/* accept(): newfd was accepted on an accelerating listener. Returns a new stk_sock
 * whose conn negotiates lazily (the HELLO is sent, nothing waited for), or NULL
 * when the connection stays on the kernel (plain client). */
struct stk_sock *stk_accel_accepted(struct stk_sock *listener, int newfd);

/* A data call is about to run on sock, whose conn is not on the fabric yet
 * (phase != STK_PHASE_FABRIC): see stk_lazy_settle. flags: the call's
 * (MSG_DONTWAIT makes it non-blocking; a receive with MSG_OOB never waits and
 * gets -EINVAL while undecided: no urgent byte can have come yet). Returns the
 * phase to use, -EAGAIN or -EINVAL. */
int stk_accel_settle(struct stk_sock *sock, bool for_write, int flags);

/* The connection the data calls and poll must go through, or NULL when the
 * socket is (again) a plain kernel socket: never accelerated, or migrated with
 * no leftover bytes (stk_migrate.h). One load more than sock->conn. */
static inline struct stk_conn *stk_accel_conn(const struct stk_sock *sock)
{
	struct stk_conn *conn = sock->conn;
	if (conn && __atomic_load_n(&conn->kernel_only, __ATOMIC_RELAXED))
		return NULL;
	return conn;
}

/* Migrate the accelerated connections of socks (n entries, NULL skipped) to
 * their kernel socket (stk_migrate.h) and return how many peers did not
 * answer. For exec and fd passing, unread bytes that stay behind in this
 * process are counted and logged. */
unsigned stk_accel_migrate(struct stk_sock **socks, size_t n, enum stk_migrate_reason why);

/* The socket leaves this process's control (exec, fd passing) or goes to a
 * path we never see (stdio after fdopen): a connection still negotiating is
 * steered to the kernel (stk_lazy_refuse); one on the fabric is left alone. */
void stk_accel_refuse(struct stk_sock *sock);

/* SO_ZEROCOPY was turned on for sock's kernel socket (fd): MSG_ZEROCOPY and its
 * completions on the error queue are the kernel's, so the kernel carries the
 * socket from now on. A connection on the fabric migrates (stk_migrate.h; its
 * unread bytes stay readable through the stack first), one still negotiating
 * is steered to the kernel. Returns true when sock has no connection (not
 * connected yet, or a listener, whose accepted sockets inherit the option):
 * counted as a fallback, and the caller forgets the socket. */
bool stk_accel_zerocopy(struct stk_sock *sock, int fd);

/* exec hand-down of unread bytes: the memfd holding the leftover of sock's
 * migrated connection when bytes remain (close-on-exec; the caller passes a
 * duplicate), else -1. */
int stk_accel_leftover_fd(struct stk_sock *sock);
/* In the new image: fd is an inherited kernel TCP socket whose connection was
 * migrated with unread bytes in memfd (both named in FABSOCK_INHERIT). Returns
 * a socket object whose connection serves those bytes before the kernel's, or
 * NULL (memfd is then not one of ours; bytes lost, logged). Takes memfd. */
struct stk_sock *stk_accel_adopt(int fd, int memfd);

/* Data calls on an accelerated socket (sock->conn != NULL). */
ssize_t stk_accel_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
ssize_t stk_accel_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
ssize_t stk_accel_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count);
/* A sendfile of count bytes on a connection on the fabric: true when the
 * connection moved to the kernel for it (count at least
 * stk_cfg.sendfile_kernel: the kernel sends page-cache pages without copying
 * them, where the fabric path copies each byte three times more), so that the
 * caller runs the kernel's sendfile. Migrated connections stay on the kernel. */
bool stk_accel_sendfile_to_kernel(struct stk_sock *sock, size_t count);
int stk_accel_shutdown(struct stk_sock *sock, int how);
/* FIONREAD / SIOCINQ. */
int stk_accel_readable(struct stk_sock *sock);
/* SIOCATMARK. */
int stk_accel_atmark(struct stk_sock *sock);
/* getsockopt(SO_ERROR): kernel_err is what the kernel socket just returned (and
 * cleared); the result is the error the app must see: the connection's reset
 * once (then 0, as the kernel), else kernel_err. */
int stk_accel_so_error(struct stk_sock *sock, int kernel_err);
/* Close the connection (called with the last reference). */
void stk_accel_close(struct stk_sock *sock);
/* Close a conn that never reached the fabric (no message sent on it). */
void stk_accel_close_conn(struct stk_conn *conn);

/* O_NONBLOCK / FIONBIO changed on the app's fd. */
void stk_accel_set_nonblock(struct stk_sock *sock, bool nonblock);

#endif
