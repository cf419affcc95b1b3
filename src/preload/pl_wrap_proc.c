/* Process wrappers: fork, daemon, the exec family and posix_spawn. An accelerated
 * connection lives in this process's memory and endpoint; before another process
 * can use its socket, the connection moves back to the kernel socket
 * (stk_migrate.h):
 *  - fork/daemon: every accelerated connection, in the parent, before the real
 *    call; the child abandons the parent's endpoints (pthread_atfork handlers,
 *    registered in pl_init.c, so the fork inside daemon() is covered too).
 *  - exec*, posix_spawn*: connections whose fd survives the exec (no FD_CLOEXEC),
 *    and any fd given to posix_spawn_file_actions_adddup2 (the child gets it).
 * glibc's system() and popen() spawn through internal calls we cannot see: an
 * accelerated socket they hand down (not close-on-exec) is a kernel socket in the
 * child whose data still travels on the fabric. */
#include "config.h"
#include "preload/pl_wrap.h"
#include "stack/stk_accel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

/* Anything accelerated alive in this process (one relaxed load otherwise). */
static bool any_accel(void)
{
	return pl_enabled && __atomic_load_n(&stk_accel_live, __ATOMIC_RELAXED) > 0;
}

static bool needs_migration(const struct stk_sock *sock)
{
	return sock && sock->conn && !__atomic_load_n(&sock->conn->migrated, __ATOMIC_ACQUIRE);
}

static void migrate_all(void)
{
	if (!any_accel() || pl_guarded())
		return;
	int saved_errno = errno;
	pl_enter();
	stk_migrate_all(STK_MIGRATE_REASON_FORK);
	pl_leave();
	errno = saved_errno;
}

/* Before an exec: the connections whose fds the new image inherits. */
static void migrate_inherited(void)
{
	if (!pl_enabled || pl_guarded())
		return; /* fallback sockets may need a late HELLO removed: no shortcut */
	int saved_errno = errno;
	size_t n = 0, cap = 0;
	struct stk_sock **socks = NULL;
	for (int fd = 0; fd < pl_fdtab.size; fd++) {
		struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
		if (!sock || (!needs_migration(sock) && !sock->strip_pending))
			continue;
		int fl = PL_REAL(fcntl)(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (sock->strip_pending) {
			pl_enter();
			stk_accel_strip_now(sock, fd);
			pl_leave();
			continue;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct stk_sock **more = realloc(socks, ncap * sizeof(*socks));
			if (!more)
				break;
			socks = more;
			cap = ncap;
		}
		socks[n++] = sock; /* the fd keeps it alive: we are about to exec */
	}
	if (n) {
		pl_enter();
		stk_accel_migrate(socks, n, STK_MIGRATE_REASON_EXEC);
		pl_leave();
	}
	free(socks);
	errno = saved_errno;
}

PL_EXPORT pid_t fork(void)
{
	migrate_all();
	return PL_REAL(fork)();
}

PL_EXPORT int daemon(int nochdir, int noclose)
{
	migrate_all();
	return PL_REAL(daemon)(nochdir, noclose);
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	migrate_inherited();
	return PL_REAL(execve)(path, argv, envp);
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
	migrate_inherited();
	return PL_REAL(execv)(path, argv);
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
	migrate_inherited();
	return PL_REAL(execvp)(file, argv);
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	migrate_inherited();
	return PL_REAL(execvpe)(file, argv, envp);
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	migrate_inherited();
	return PL_REAL(fexecve)(fd, argv, envp);
}

PL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	migrate_inherited();
	return PL_REAL(execveat)(dirfd, path, argv, envp, flags);
}

/* execl, execlp, execle: the list becomes a vector (glibc does the same on its
 * stack), then the vector call above. */
#define ARGS_MAX 4096

static int collect_args(const char *arg0, va_list ap, char **argv)
{
	int n = 0;
	argv[n++] = (char *)arg0;
	while (argv[n - 1] != NULL) {
		if (n == ARGS_MAX) {
			errno = E2BIG;
			return -1;
		}
		argv[n++] = va_arg(ap, char *);
	}
	return n;
}

PL_EXPORT int execl(const char *path, const char *arg, ...)
{
	char *argv[ARGS_MAX];
	va_list ap;
	va_start(ap, arg);
	int n = collect_args(arg, ap, argv);
	va_end(ap);
	return n < 0 ? -1 : execv(path, argv);
}

PL_EXPORT int execlp(const char *file, const char *arg, ...)
{
	char *argv[ARGS_MAX];
	va_list ap;
	va_start(ap, arg);
	int n = collect_args(arg, ap, argv);
	va_end(ap);
	return n < 0 ? -1 : execvp(file, argv);
}

PL_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *argv[ARGS_MAX];
	va_list ap;
	va_start(ap, arg);
	int n = collect_args(arg, ap, argv);
	char *const *envp = n < 0 ? NULL : va_arg(ap, char *const *);
	va_end(ap);
	return n < 0 ? -1 : execve(path, argv, envp);
}

PL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	migrate_inherited();
	return PL_REAL(posix_spawn)(pid, path, actions, attr, argv, envp);
}

PL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	migrate_inherited();
	return PL_REAL(posix_spawnp)(pid, file, actions, attr, argv, envp);
}

/* The spawned child will get fd (even a close-on-exec one) as newfd: the
 * connection moves now, while the app prepares the spawn (inetd style). */
PL_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *actions, int fd,
					       int newfd)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (any_accel() && needs_migration(sock)) {
		int saved_errno = errno;
		pl_enter();
		stk_accel_migrate(&sock, 1, STK_MIGRATE_REASON_EXEC);
		pl_leave();
		errno = saved_errno;
	}
	return PL_REAL(posix_spawn_file_actions_adddup2)(actions, fd, newfd);
}
