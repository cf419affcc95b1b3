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
#include "stack/stk_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Unread bytes of migrated connections handed down to the exec'd image: for
 * each inherited fd with a leftover, a duplicate of its memfd without
 * close-on-exec, named in FABSOCK_INHERIT=<fd>:<memfd>,... (read and removed by
 * the new image's libfabsock, pl_adopt_inherited). */
#define INHERIT_VAR "FABSOCK_INHERIT"
#define INHERIT_MAX 64
struct inherit {
	int nfds;
	int fds[INHERIT_MAX];      /* memfd duplicates to close if the exec fails */
	char entry[INHERIT_MAX * 24 + sizeof(INHERIT_VAR) + 2]; /* "VAR=a:b,c:d" */
	char **envp;               /* envp with the entry (malloc), or NULL */
	char *saved;               /* environ variant: the previous value (strdup) */
	bool set;                  /* environ variant: setenv done */
};

static void inherit_add(struct inherit *in, int fd, int memfd)
{
	if (memfd < 0 || in->nfds == INHERIT_MAX)
		return;
	int dup = PL_REAL(fcntl)(memfd, F_DUPFD, 0);
	if (dup < 0)
		return;
	size_t len = strlen(in->entry);
	if (len == 0)
		len = (size_t)snprintf(in->entry, sizeof(in->entry), "%s=", INHERIT_VAR);
	snprintf(in->entry + len, sizeof(in->entry) - len, "%s%d:%d",
		 in->nfds ? "," : "", fd, dup);
	in->fds[in->nfds++] = dup;
}

/* Before an exec: move the connections whose fds the new image inherits. */
static void migrate_inherited(struct inherit *in)
{
	if (!pl_enabled || pl_guarded())
		return; /* negotiating sockets are steered to the kernel: no shortcut */
	int saved_errno = errno;
	size_t n = 0, cap = 0;
	struct stk_sock **socks = NULL;
	int *fds = NULL;
	for (int fd = 0; fd < pl_fdtab.size; fd++) {
		struct stk_sock *sock = pl_fdtab_get(&pl_fdtab, fd);
		if (!sock || !sock->conn)
			continue;
		int fl = PL_REAL(fcntl)(fd, F_GETFD);
		if (fl < 0 || (fl & FD_CLOEXEC))
			continue;
		if (!stk_conn_on_fabric(sock->conn)) {
			pl_enter();
			stk_accel_refuse(sock); /* still negotiating: the kernel */
			pl_leave();
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
		socks[n++] = sock; /* the fd keeps it alive: we are about to exec */
	}
	int pushed = in ? pl_stdin_pushed_fd() : -1;
	if (pushed >= 0) {
		int fl = PL_REAL(fcntl)(0, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			inherit_add(in, 0, pushed);
		PL_REAL(close)(pushed);
	}
	if (n) {
		pl_enter();
		stk_accel_migrate(socks, n, STK_MIGRATE_REASON_EXEC);
		for (size_t i = 0; in && i < n; i++)
			inherit_add(in, fds[i], stk_accel_leftover_fd(socks[i]));
		pl_leave();
	}
	free(socks);
	free(fds);
	errno = saved_errno;
}

/* envp plus our entry (an inherited FABSOCK_INHERIT is replaced). */
static char *const *inherit_envp(struct inherit *in, char *const envp[])
{
	if (in->nfds == 0 || !envp)
		return envp;
	size_t n = 0;
	while (envp[n])
		n++;
	in->envp = malloc((n + 2) * sizeof(char *));
	if (!in->envp)
		return envp;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], INHERIT_VAR "=", sizeof(INHERIT_VAR)) != 0)
			in->envp[k++] = envp[i];
	in->envp[k++] = in->entry;
	in->envp[k] = NULL;
	return in->envp;
}

/* The same in environ, for the variants that use it. */
static void inherit_environ(struct inherit *in)
{
	if (in->nfds == 0)
		return;
	const char *old = getenv(INHERIT_VAR);
	in->saved = old ? strdup(old) : NULL;
	in->set = setenv(INHERIT_VAR, in->entry + sizeof(INHERIT_VAR), 1) == 0;
}

/* The exec failed (or posix_spawn returned): undo. */
static void inherit_undo(struct inherit *in)
{
	int saved_errno = errno;
	for (int i = 0; i < in->nfds; i++)
		PL_REAL(close)(in->fds[i]);
	free(in->envp);
	if (in->set) {
		if (in->saved)
			setenv(INHERIT_VAR, in->saved, 1);
		else
			unsetenv(INHERIT_VAR);
	}
	free(in->saved);
	errno = saved_errno;
}

/* _exit skips atexit: the connections still end as at exit (stk_conn_end_all:
 * what was sent, then FIN, as the kernel's close of the process's sockets). */
PL_EXPORT void _exit(int status)
{
	if (any_accel() && !pl_guarded())
		stk_conn_end_all();
	PL_REAL(_exit)(status);
	__builtin_unreachable();
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

#define EXEC_ENVP(call_real) \
	do { \
		struct inherit in = { .nfds = 0 }; \
		migrate_inherited(&in); \
		char *const *env = inherit_envp(&in, envp); \
		int ret = call_real; \
		inherit_undo(&in); \
		return ret; \
	} while (0)
#define EXEC_ENVIRON(call_real) \
	do { \
		struct inherit in = { .nfds = 0 }; \
		migrate_inherited(&in); \
		inherit_environ(&in); \
		int ret = call_real; \
		inherit_undo(&in); \
		return ret; \
	} while (0)

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	EXEC_ENVP(PL_REAL(execve)(path, argv, env));
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
	EXEC_ENVIRON(PL_REAL(execv)(path, argv));
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
	EXEC_ENVIRON(PL_REAL(execvp)(file, argv));
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	EXEC_ENVP(PL_REAL(execvpe)(file, argv, env));
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	EXEC_ENVP(PL_REAL(fexecve)(fd, argv, env));
}

PL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	EXEC_ENVP(PL_REAL(execveat)(dirfd, path, argv, env, flags));
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
	EXEC_ENVP(PL_REAL(posix_spawn)(pid, path, actions, attr, argv, env));
}

PL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	EXEC_ENVP(PL_REAL(posix_spawnp)(pid, file, actions, attr, argv, env));
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

void pl_adopt_inherited(void)
{
	const char *spec = getenv(INHERIT_VAR);
	if (!spec)
		return;
	char *copy = strdup(spec);
	unsetenv(INHERIT_VAR); /* for this image only */
	for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int fd, memfd;
		char tail;
		if (sscanf(tok, "%d:%d%c", &fd, &memfd, &tail) != 2 || fd < 0 || memfd < 0)
			continue;
		struct stk_sock *sock = stk_accel_adopt(fd, memfd);
		if (sock) {
			pl_fdtab_set(&pl_fdtab, fd, sock);
			stk_sock_unref(sock); /* the table holds it */
		}
	}
	free(copy);
}
