/* Process wrappers: fork, daemon, the exec family and posix_spawn. An accelerated
 * connection lives in this process's memory and endpoint; before another process
 * can use its socket, the connection moves back to the kernel socket
 * (stk.h, process events):
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

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void migrate_all(void)
{
	if (!pl_enabled || pl_guarded())
		return;
	int saved_errno = errno;
	pl_enter();
	stk_fork_migrate();
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

static void inherit_handed(void *ctx, int fd, int memfd)
{
	inherit_add(ctx, fd, memfd);
}

/* Before an exec: move the connections whose fds the new image inherits. */
static void migrate_inherited(struct inherit *in)
{
	if (!pl_enabled || pl_guarded())
		return; /* negotiating sockets are steered to the kernel: no shortcut */
	int saved_errno = errno;
	int pushed = pl_stdin_pushed_fd();
	if (pushed >= 0) {
		int fl = PL_REAL(fcntl)(0, F_GETFD);
		if (fl >= 0 && !(fl & FD_CLOEXEC))
			inherit_add(in, 0, pushed);
		PL_REAL(close)(pushed);
	}
	pl_enter();
	stk_exec_prepare(pl_fdtab.size, inherit_handed, in);
	pl_leave();
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

/* _exit skips atexit: the connections still end as at exit (what was sent,
 * then FIN, as the kernel's close of the process's sockets). */
PL_EXPORT void _exit(int status)
{
	if (pl_enabled && !pl_guarded())
		stk_exit_all();
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

/* ---- the exec family and posix_spawn: one path ---- */

enum exec_kind {
	EXEC_VE, EXEC_V, EXEC_VP, EXEC_VPE, EXEC_FVE, EXEC_VEAT, EXEC_SPAWN, EXEC_SPAWNP,
};

/* One exec or spawn call: its arguments, whichever the variant uses. */
struct exec_call {
	enum exec_kind kind;
	const char *path;     /* path or file */
	int fd;               /* fexecve, execveat: the fd or dirfd */
	int flags;            /* execveat */
	char *const *argv;
	char *const *envp;    /* the variants without one use environ */
	pid_t *pid;           /* posix_spawn* */
	const posix_spawn_file_actions_t *actions;
	const posix_spawnattr_t *attr;
};

static bool exec_has_envp(enum exec_kind kind)
{
	return kind != EXEC_V && kind != EXEC_VP;
}

static int exec_real(const struct exec_call *c, char *const *env)
{
	switch (c->kind) {
	case EXEC_VE:
		return PL_REAL(execve)(c->path, c->argv, env);
	case EXEC_V:
		return PL_REAL(execv)(c->path, c->argv);
	case EXEC_VP:
		return PL_REAL(execvp)(c->path, c->argv);
	case EXEC_VPE:
		return PL_REAL(execvpe)(c->path, c->argv, env);
	case EXEC_FVE:
		return PL_REAL(fexecve)(c->fd, c->argv, env);
	case EXEC_VEAT:
		return PL_REAL(execveat)(c->fd, c->path, c->argv, env, c->flags);
	case EXEC_SPAWN:
		return PL_REAL(posix_spawn)(c->pid, c->path, c->actions, c->attr, c->argv, env);
	case EXEC_SPAWNP:
		return PL_REAL(posix_spawnp)(c->pid, c->path, c->actions, c->attr, c->argv, env);
	}
	errno = EINVAL;
	return -1;
}

/* Move what the new image inherits, name its leftovers in its environment
 * (envp, or environ for the variants without one), run the call, undo when
 * it returns (a failed exec, or a spawn). */
static int exec_run(const struct exec_call *c)
{
	struct inherit in = { .nfds = 0 };
	migrate_inherited(&in);
	char *const *env = NULL;
	if (exec_has_envp(c->kind))
		env = inherit_envp(&in, c->envp);
	else
		inherit_environ(&in);
	int ret = exec_real(c, env);
	inherit_undo(&in);
	return ret;
}

PL_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_VE, .path = path, .argv = argv,
					     .envp = envp });
}

PL_EXPORT int execv(const char *path, char *const argv[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_V, .path = path, .argv = argv });
}

PL_EXPORT int execvp(const char *file, char *const argv[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_VP, .path = file, .argv = argv });
}

PL_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_VPE, .path = file, .argv = argv,
					     .envp = envp });
}

PL_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_FVE, .fd = fd, .argv = argv,
					     .envp = envp });
}

PL_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
		       int flags)
{
	return exec_run(&(struct exec_call){ .kind = EXEC_VEAT, .fd = dirfd, .path = path,
					     .argv = argv, .envp = envp, .flags = flags });
}

/* execl, execlp, execle: the list becomes a vector (glibc does the same on its
 * stack), then the vector call's path (execle's envp follows the NULL). */
#define ARGS_MAX 4096

static int exec_list(enum exec_kind kind, const char *path, const char *arg0, va_list ap)
{
	char *argv[ARGS_MAX];
	int n = 0;
	argv[n++] = (char *)arg0;
	while (argv[n - 1] != NULL) {
		if (n == ARGS_MAX) {
			errno = E2BIG;
			return -1;
		}
		argv[n++] = va_arg(ap, char *);
	}
	char *const *envp = kind == EXEC_VE ? va_arg(ap, char *const *) : NULL;
	return exec_run(&(struct exec_call){ .kind = kind, .path = path, .argv = argv,
					     .envp = envp });
}

#define PL_EXECL_WRAPPER(name, kind) \
	PL_EXPORT int name(const char *path, const char *arg, ...) \
	{ \
		va_list ap; \
		va_start(ap, arg); \
		int ret = exec_list(kind, path, arg, ap); \
		va_end(ap); \
		return ret; \
	}
PL_EXECL_WRAPPER(execl, EXEC_V)
PL_EXECL_WRAPPER(execlp, EXEC_VP)
PL_EXECL_WRAPPER(execle, EXEC_VE)

PL_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_SPAWN, .pid = pid, .path = path,
					     .actions = actions, .attr = attr, .argv = argv,
					     .envp = envp });
}

PL_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	return exec_run(&(struct exec_call){ .kind = EXEC_SPAWNP, .pid = pid, .path = file,
					     .actions = actions, .attr = attr, .argv = argv,
					     .envp = envp });
}

/* The spawned child will get fd (even a close-on-exec one) as newfd: the
 * connection moves now, while the app prepares the spawn (inetd style). */
PL_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *actions, int fd,
					       int newfd)
{
	struct stk_sock *sock = pl_tracked(fd);
	if (sock && pl_enabled) {
		int saved_errno = errno;
		pl_enter();
		stk_sock_leave(sock, STK_LEAVE_SPAWN);
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
		struct stk_sock *sock = stk_sock_adopt(fd, memfd);
		if (sock) {
			pl_fdtab_set(&pl_fdtab, fd, sock);
			stk_sock_unref(sock); /* the table holds it */
		}
	}
	free(copy);
}
