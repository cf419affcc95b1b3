#include "config.h"
#include "preload/pl_init.h"
#include "preload/pl_fdtab.h"
#include "preload/pl_guard.h"
#include "preload/pl_real.h"
#include "preload/pl_wrap.h"
#include "stack/stk.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fabsock/fabsock.h"

#define FSK_API __attribute__((visibility("default")))

__thread int pl_inside __attribute__((tls_model("initial-exec")));
bool pl_enabled;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void install_sys(void)
{
	const struct stk_sys real = {
		.read = pl_real.read,
		.write = pl_real.write,
		.close = pl_real.close,
		.socket = pl_real.socket,
		.bind = pl_real.bind,
		.listen = pl_real.listen,
		.accept4 = pl_real.accept4,
		.connect = pl_real.connect,
		.shutdown = pl_real.shutdown,
		.recv = pl_real.recv,
		.send = pl_real.send,
		.recvmsg = pl_real.recvmsg,
		.sendmsg = pl_real.sendmsg,
		.getsockopt = pl_real.getsockopt,
		.setsockopt = pl_real.setsockopt,
		.getsockname = pl_real.getsockname,
		.getpeername = pl_real.getpeername,
		.fcntl = pl_real.fcntl,
		.poll = pl_real.poll,
		.ppoll = pl_real.ppoll,
		.epoll_create1 = pl_real.epoll_create1,
		.epoll_ctl = pl_real.epoll_ctl,
		.epoll_wait = pl_real.epoll_wait,
		.ioctl = pl_real.ioctl,
	};
	stk_sys_install(&real);
}

/* The stack brackets its libfabric calls with the guard (stk_set_guard). */
static void guard_enter(void)
{
	pl_enter();
}

static void guard_leave(void)
{
	pl_leave();
}

/* The readiness code looks fds up in the table (lock-free). */
static struct stk_sock *table_get(int fd)
{
	return pl_fdtab_get(&pl_fdtab, fd);
}

static int table_set(int fd, struct stk_sock *sock)
{
	return pl_fdtab_set(&pl_fdtab, fd, sock);
}

static const char *env_lookup(const char *name)
{
	return getenv(name);
}

static void init_once_body(void)
{
	int saved_errno = errno;
	pl_enter();
	pl_real_resolve();
	install_sys();
	stk_set_guard(guard_enter, guard_leave);
	stk_set_fd_table(&(const struct stk_fd_table){ .get = table_get, .set = table_set });
	int started = stk_start(env_lookup, program_invocation_short_name);
	if (started > 0 && pl_fdtab_init(&pl_fdtab, 0) != 0) {
		stk_log_no_fd_table();
		started = -ENOMEM;
	}
	if (started > 0) {
		stk_sys_fd_table_reserve();
		pthread_atfork(pl_fdtab_lock, pl_fdtab_unlock, pl_fdtab_unlock);
		pthread_atfork(stk_fork_prepare, stk_fork_parent, stk_fork_child);
		stk_log_active(pl_fdtab.size);
		__atomic_store_n(&pl_enabled, true, __ATOMIC_RELEASE);
		pl_adopt_inherited();
	} else if (started == 0) {
		stk_log_disabled();
	}
	pl_leave();
	errno = saved_errno;
}

bool pl_init(void)
{
	pthread_once(&init_once, init_once_body);
	return __atomic_load_n(&pl_enabled, __ATOMIC_ACQUIRE);
}

__attribute__((constructor(101))) static void pl_constructor(void)
{
	pl_init();
}

__attribute__((destructor)) static void pl_destructor(void)
{
	if (pl_enabled)
		stk_log_exit();
}

/* ---- public extension API ---- */

FSK_API const char *fsk_version(void)
{
	return PACKAGE_VERSION;
}

FSK_API int fsk_active(void)
{
	return pl_init() ? 1 : 0;
}

FSK_API int fsk_fd_accelerated(int fd)
{
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
	unsigned want = STK_SOCK_CONN | STK_SOCK_FABRIC;
	return sock && (stk_sock_state(sock) & (want | STK_SOCK_MIGRATED)) == want;
}

FSK_API int fsk_counter(const char *name, unsigned long long *value)
{
	uint64_t v;
	if (!name || !value || stk_counter_get(name, &v) != 0)
		return -1;
	*value = v;
	return 0;
}
