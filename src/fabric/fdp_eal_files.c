/* fdp_eal_files.c - what the EAL and its devices leave in the file system.
 *
 * A process killed with SIGKILL runs no cleanup, so the provider keeps
 * nothing on disk while it runs and reclaims what older or killed processes
 * left when it starts:
 * - the EAL runtime directory <base>/dpdk/fdp<pid>-<random>: with
 *   --no-shconf and --no-telemetry (and --in-memory or --no-huge) DPDK 22.11
 *   writes no file in it and never uses it again after rte_eal_init, so it
 *   is removed right after the EAL starts; empty ones left by dead
 *   processes are removed before it starts;
 * - a memif server's socket file (only with socket-abstract=no; abstract
 *   sockets die with their process): a socket file nobody listens on would
 *   make the next server's bind fail, so it is unlinked before the EAL
 *   starts;
 * - hugepage files: none, the provider uses --in-memory (memfd) when
 *   hugepages are reserved and --no-huge otherwise. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <rte_eal.h>

/* <base>/dpdk as DPDK 22.11 computes it (eal_create_runtime_dir). */
static void runtime_base(char *out, size_t cap)
{
	const char *base = "/var/run";
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (getuid() != 0)
		base = xdg ? xdg : "/tmp";
	snprintf(out, cap, "%s/dpdk", base);
}

/* "fdp<pid>-<hex>" -> pid, else 0. */
static pid_t prefix_pid(const char *name)
{
	char *end;
	long pid;

	if (strncmp(name, "fdp", 3) != 0)
		return 0;
	errno = 0;
	pid = strtol(name + 3, &end, 10);
	if (errno || end == name + 3 || *end != '-' || pid <= 0)
		return 0;
	return (pid_t)pid;
}

/* Remove every file in dir, then dir (only names our prefixes use). */
static void remove_dir(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	d = opendir(dir);
	if (d) {
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) <
			    (int)sizeof(path))
				unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

void fdp_files_runtime_dir_remove(void)
{
	const char *dir = rte_eal_get_runtime_dir();
	const char *slash;

	if (!dir || !*dir)
		return;
	slash = strrchr(dir, '/');
	if (!slash || prefix_pid(slash + 1) != getpid())
		return;
	remove_dir(dir);
}

/* Runtime directories of dead provider processes. Only empty ones are
 * removed (rmdir): a directory with files belongs to a DPDK we do not know,
 * and a live process in another PID namespace may share the pid; an empty
 * one is never used after its owner's rte_eal_init. */
static void reclaim_runtime_dirs(void)
{
	char base[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	unsigned int n = 0;
	DIR *d;
	pid_t pid;

	runtime_base(base, sizeof(base));
	d = opendir(base);
	if (!d)
		return;
	while ((de = readdir(d))) {
		pid = prefix_pid(de->d_name);
		if (!pid || pid == getpid())
			continue;
		if (kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", base, de->d_name) >= (int)sizeof(path))
			continue;
		if (rmdir(path) == 0)
			n++;
	}
	closedir(d);
	if (n)
		FDP_INFO(FI_LOG_CORE, "removed %u runtime directories of dead processes from %s\n",
			 n, base);
}

/* The value of key in a devargs string ("net_memif0,role=server,..."),
 * copied to out; false when absent. */
static bool devarg(const char *dev, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key), n;
	const char *p = strchr(dev, ',');

	while (p) {
		p++;
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			p += klen + 1;
			n = strcspn(p, ",");
			if (n >= cap)
				return false;
			memcpy(out, p, n);
			out[n] = '\0';
			return true;
		}
		p = strchr(p, ',');
	}
	return false;
}

/* A memif server's socket file that nobody listens on (its server was
 * killed) is unlinked; DPDK would fail to bind it. */
static void reclaim_memif_socket(const char *dev)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char val[16];
	struct stat st;
	int fd, ret, err;

	if (strncmp(dev, "net_memif", 9) != 0)
		return;
	if (devarg(dev, "role", val, sizeof(val)) && strcmp(val, "server") != 0)
		return;                         /* default role: server */
	if (!devarg(dev, "socket-abstract", val, sizeof(val)) || strcmp(val, "no") != 0)
		return;                         /* default: abstract, no file */
	if (!devarg(dev, "socket", sun.sun_path, sizeof(sun.sun_path)))
		strcpy(sun.sun_path, "/run/memif.sock");   /* DPDK's default */
	if (lstat(sun.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode))
		return;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	ret = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	err = errno;
	close(fd);
	if (ret != 0 && err == ECONNREFUSED && unlink(sun.sun_path) == 0)
		FDP_INFO(FI_LOG_CORE, "removed stale memif socket %s (no listener)\n",
			 sun.sun_path);
}

void fdp_files_reclaim(const char *device)
{
	reclaim_runtime_dirs();
	if (device)
		reclaim_memif_socket(device);
}
