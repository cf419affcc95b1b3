#include "config.h"
#include "stack/stk_stream.h"
#include "stack/stk_counters.h"
#include "stack/stk_leftover.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

/* ---- data calls after the fabric ---- */

ssize_t stk_migrated_recv(struct stk_conn *conn, void *buf, size_t len, int flags)
{
	struct stk_leftover *left = __atomic_load_n(&conn->left, __ATOMIC_ACQUIRE);
	size_t n = stk_leftover_take(left, buf, len, flags & MSG_PEEK);
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE) && stk_leftover_count(left) == 0 &&
	    !__atomic_exchange_n(&conn->kernel_only, true, __ATOMIC_ACQ_REL))
		stk_conn_changed(conn); /* epoll sets hand it to their kernel set */
	if (n && (n == len || !(flags & MSG_WAITALL) || (flags & MSG_PEEK)))
		return (ssize_t)n;
	ssize_t k = stk_sys.recv(conn->fd, (uint8_t *)buf + n, len - n, flags);
	if (k < 0)
		return n ? (ssize_t)n : -errno;
	return (ssize_t)n + k;
}

ssize_t stk_migrated_send(struct stk_conn *conn, const void *buf, size_t len, int flags)
{
	ssize_t k = stk_sys.send(conn->fd, buf, len, flags | MSG_NOSIGNAL);
	return k < 0 ? -errno : k;
}

short stk_migrated_events(struct stk_conn *conn, size_t extra_in)
{
	struct pollfd p = { .fd = conn->fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	short ev = stk_sys.poll(&p, 1, 0) > 0 ? p.revents : 0;
	if (extra_in)
		ev |= POLLIN;
	return ev;
}

/* ---- accounting ---- */

static const char *const reason_text[] = {
	[STK_MIGRATE_REASON_FORK] = "the process forks (connections existing at fork "
				    "continue on the kernel; new ones are accelerated)",
	[STK_MIGRATE_REASON_EXEC] = "it survives an exec (not close-on-exec)",
	[STK_MIGRATE_REASON_PASS] = "it is sent to another socket (SCM_RIGHTS)",
	[STK_MIGRATE_REASON_PEER] = "the peer process moved it (fork, exec or fd passing)",
	[STK_MIGRATE_REASON_BYPASS] = "the app uses it through calls libfabsock never sees "
				      "(stdio after fdopen, POSIX aio)",
	[STK_MIGRATE_REASON_ZEROCOPY] = "the app turned SO_ZEROCOPY on (MSG_ZEROCOPY "
					"completions come from the kernel socket)",
};
static const enum stk_counter reason_counter[] = {
	[STK_MIGRATE_REASON_FORK] = STK_C_MIGRATE_FORK,
	[STK_MIGRATE_REASON_EXEC] = STK_C_MIGRATE_EXEC,
	[STK_MIGRATE_REASON_PASS] = STK_C_MIGRATE_PASS,
	[STK_MIGRATE_REASON_PEER] = STK_C_MIGRATE_PEER,
	[STK_MIGRATE_REASON_BYPASS] = STK_C_MIGRATE_BYPASS,
	[STK_MIGRATE_REASON_ZEROCOPY] = STK_C_MIGRATE_ZEROCOPY,
};

void stk_migrate_note(struct stk_conn *conn, enum stk_migrate_reason why)
{
	static int logged[STK_MIGRATE_REASON_ZEROCOPY + 1]; /* atomic flags */
	stk_count(STK_C_MIGRATED_TO_KERNEL);
	stk_count(reason_counter[why]);
	if (__atomic_exchange_n(&logged[why], 1, __ATOMIC_RELAXED) == 0)
		FSK_INFO("fd %d: accelerated connection moved to the kernel: %s (logged once "
			 "per reason, counted in migrated_to_kernel)", conn->fd, reason_text[why]);
	else
		FSK_DBG("fd %d: accelerated connection moved to the kernel: %s", conn->fd,
			reason_text[why]);
}
