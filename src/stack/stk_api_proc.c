/* stk.h's process events: fork, exec, fd passing, the paths glibc takes
 * around the wrappers, exit. Connections move to their kernel socket
 * (stk_migrate.h) before another process or unseen code uses them. */
#include "config.h"
#include "stack/stk.h"
#include "stack/stk_accel.h"
#include "stack/stk_counters.h"
#include "stack/stk_migrate.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_sock.h"
#include "stack/stk_stream.h"
#include "stack/stk_sys.h"
#include "stack/stk_udp.h"

#include <fcntl.h>
#include <stdlib.h>

static bool any_accel(void)
{
	return __atomic_load_n(&stk_accel_live, __ATOMIC_RELAXED) > 0;
}

static bool migrated(const struct stk_conn *conn)
{
	return __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE);
}

void stk_fork_migrate(void)
{
	if (any_accel())
		stk_migrate_all(STK_MIGRATE_REASON_FORK);
}

void stk_fork_prepare(void)
{
	stk_migrate_atfork_prepare();
	stk_udp_atfork_prepare();
}

void stk_fork_parent(void)
{
	stk_udp_atfork_parent();
	stk_migrate_atfork_parent();
}

void stk_fork_child(void)
{
	stk_counters_set_mirror(NULL); /* the parent's segment is not ours to count in */
	/* before the epoll sets refill their sleep sets: the parent's UDP
	 * fabric is not the child's to wait on */
	stk_udp_atfork_child();
	stk_migrate_atfork_child();
	stk_stat_conn_atfork_child();
}

void stk_exit_all(void)
{
	stk_stat_exit();
	if (any_accel())
		stk_conn_end_all();
}

void stk_sock_leave(struct stk_sock *sock, enum stk_leave why)
{
	struct stk_conn *conn = sock->conn;
	if (!conn)
		return;
	switch (why) {
	case STK_LEAVE_PASS:
		stk_accel_refuse(sock); /* still negotiating: the kernel */
		if (!migrated(conn))
			stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_PASS);
		break;
	case STK_LEAVE_SPAWN:
		if (!migrated(conn))
			stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_EXEC);
		break;
	case STK_LEAVE_BYPASS:
		stk_accel_refuse(sock);
		if (stk_conn_on_fabric(conn) && !migrated(conn))
			stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_BYPASS);
		break;
	}
}

void stk_exec_prepare(int nfds, void (*handed)(void *ctx, int fd, int memfd), void *ctx)
{
	stk_stat_exit(); /* the new image makes its own at its first socket */
	size_t n = 0, cap = 0;
	struct stk_sock **socks = NULL;
	int *fds = NULL;
	for (int fd = 0; fd < nfds; fd++) {
		struct stk_sock *sock = stk_fds.get(fd);
		if (!sock || (!sock->conn && !sock->udp))
			continue;
		int fl = stk_sys.fcntl(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (sock->udp) { /* its unread datagrams go along */
			int memfd = stk_udp_exec_memfd(sock->udp);
			if (memfd >= 0) {
				handed(ctx, fd, memfd);
				stk_sys.close(memfd);
			}
			continue;
		}
		if (!stk_conn_on_fabric(sock->conn)) {
			stk_accel_refuse(sock); /* still negotiating: the kernel */
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct stk_sock **more = realloc(socks, ncap * sizeof(*socks));
			int *morefd = more ? realloc(fds, ncap * sizeof(*fds)) : NULL;
			if (more)
				socks = more;
			if (!morefd)
				break;
			fds = morefd;
			cap = ncap;
		}
		fds[n] = fd;
		socks[n++] = sock; /* the fd keeps it alive: the caller is about to exec */
	}
	if (n) {
		stk_accel_migrate(socks, n, STK_MIGRATE_REASON_EXEC);
		for (size_t i = 0; i < n; i++)
			handed(ctx, fds[i], stk_accel_leftover_fd(socks[i]));
	}
	free(socks);
	free(fds);
}

struct stk_sock *stk_sock_adopt(int fd, int memfd)
{
	struct stk_sock *sock;
	if (stk_udp_adopt(fd, memfd, &sock))
		return sock;
	return stk_accel_adopt(fd, memfd);
}

size_t stk_sock_leftover_count(const struct stk_sock *sock)
{
	struct stk_conn *conn = sock->conn;
	if (!conn || !migrated(conn))
		return 0;
	return stk_leftover_count(__atomic_load_n(&conn->left, __ATOMIC_ACQUIRE));
}

size_t stk_sock_leftover_take(struct stk_sock *sock, void *dst, size_t len, bool peek)
{
	struct stk_conn *conn = sock->conn;
	if (!conn || !migrated(conn))
		return 0;
	return stk_leftover_take(__atomic_load_n(&conn->left, __ATOMIC_ACQUIRE), dst, len, peek);
}

int stk_leftover_memfd(const void *bytes, size_t len)
{
	int fd = -1;
	struct stk_leftover *left = stk_leftover_new(bytes, len, 0, len, &fd);
	stk_leftover_free(left); /* the memfd keeps the bytes */
	return fd;
}
