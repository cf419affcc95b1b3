#include "config.h"
#include "preload/pl_init.h"
#include "preload/pl_fdtab.h"
#include "preload/pl_guard.h"
#include "preload/pl_real.h"
#include "preload/pl_wrap.h"
#include "stack/stk_accel.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_epoll.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_ready.h"
#include "stack/stk_stream.h"
#include "stack/stk_sock.h"
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

/* The stack brackets its libfabric calls with these (stk_hooks.h). */
static void guard_enter(void)
{
	pl_enter();
}

static void guard_leave(void)
{
	pl_leave();
}

/* ... and which fds are epoll fds with an object (lock-free). */
static struct stk_epoll *ready_lookup_set(int fd)
{
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
	return sock ? sock->epoll : NULL;
}

/* The readiness layer asks which fds are accelerated (lock-free). */
static struct stk_conn *ready_lookup(int fd)
{
	struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
	struct stk_conn *conn = sock ? sock->conn : NULL;
	/* settled on the kernel, or migrated there with nothing left to read: a
	 * kernel fd for readiness; epoll sets still holding it hand it to their
	 * kernel set first (so the app's next epoll_ctl finds it there) */
	if (conn && stk_ready_phase(conn) == STK_PHASE_KERNEL) {
		int saved_errno = errno;
		pl_enter();
		stk_epoll_conn_changed(conn);
		pl_leave();
		errno = saved_errno;
		return NULL;
	}
	return conn;
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
	stk_hooks.enter = guard_enter;
	stk_hooks.leave = guard_leave;
	stk_ready_lookup = ready_lookup;
	stk_ready_lookup_set = ready_lookup_set;
	bool ok = stk_config_load(&stk_cfg, env_lookup, program_invocation_short_name) == 0;
	if (ok && stk_cfg.enabled && pl_fdtab_init(&pl_fdtab, 0) != 0) {
		FSK_ERR("cannot reserve the fd table: out of memory; libfabsock disabled, "
			"sockets use the kernel");
		ok = false;
	}
	if (ok && stk_cfg.enabled) {
		stk_sys_fd_table_reserve();
		pthread_atfork(pl_fdtab_lock, pl_fdtab_unlock, pl_fdtab_unlock);
		pthread_atfork(stk_migrate_atfork_prepare, stk_migrate_atfork_parent,
			       stk_migrate_atfork_child);
		FSK_INFO("libfabsock %s active: %zu rules, default %s, providers %s, profile %s, "
			 "spin %u us, fd table %d",
			 PACKAGE_VERSION, stk_cfg.rules.count,
			 stk_action_name((enum stk_action)stk_cfg.default_action),
			 stk_cfg.providers, stk_profile_name(stk_cfg.profile), stk_cfg.spin_us,
			 pl_fdtab.size);
		__atomic_store_n(&pl_enabled, true, __ATOMIC_RELEASE);
		pl_adopt_inherited();
	} else if (ok) {
		FSK_INFO("libfabsock %s loaded but disabled (FABSOCK_DISABLE=1)", PACKAGE_VERSION);
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
	if (pl_enabled && stk_log_level >= STK_LOG_INFO)
		stk_counters_log();
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
	return sock && sock->conn && stk_conn_on_fabric(sock->conn) &&
	       !__atomic_load_n(&sock->conn->migrated, __ATOMIC_ACQUIRE);
}

FSK_API int fsk_counter(const char *name, unsigned long long *value)
{
	uint64_t v;
	if (!name || !value || stk_counter_get(name, &v) != 0)
		return -1;
	*value = v;
	return 0;
}
