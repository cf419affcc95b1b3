/* fdp_claim.c - a port of its own from a pool of vhost-user ports
 * (FI_DPDK_POOL, made by fabsock-ovs(1) on an Open vSwitch bridge).
 *
 * The pool directory holds "pool" (one line per port: "port I SOCKET IP/N
 * MAC") and portI.lock for each port. A process owns port I while it holds
 * a POSIX write lock on portI.lock: the kernel drops it when the process
 * dies, however (SIGKILL too), and a forked child does not inherit it: a
 * child that needs the fabric claims a port of its own (fdp_pool_port), and
 * its EAL is its own when its parent never started one (fdp_eal.c). The
 * lock's fd is close-on-exec: a program exec'd by the holder claims a port
 * of its own.
 *
 * The app's end of the port is net_virtio_user in server mode: OVS's
 * dpdkvhostuserclient connects to the socket and reconnects after a holder
 * dies. DPDK's probe of such a port waits in accept() without a time limit,
 * so before the EAL starts fdp_claim_ready listens on the socket itself and
 * waits a bounded time for OVS to connect: a bridge that is down then costs
 * one warning, not a hang. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#define CLAIM_MAX_PORTS 1024
/* OVS's vhost client retries a refused connection once a second */
#define CLAIM_OVS_WAIT_MS 5000

static char claim_device[PATH_MAX + 128];
static char claim_ip[64];
static char claim_sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int claim_fd = -1;
static int claim_index = -1;
static pid_t claim_pid;  /* the process holding the lock on claim_fd */

/* One "port I SOCKET IP MAC" line; 0, or -1 when it is not one. */
static int parse_line(const char *line, int *index, char *sock, size_t sock_cap, char *ip,
		      size_t ip_cap, char *mac, size_t mac_cap)
{
	char s[256], a[64], m[32];
	int i;

	if (sscanf(line, "port %d %255s %63s %31s", &i, s, a, m) != 4 || i < 0 ||
	    i >= CLAIM_MAX_PORTS || strlen(s) >= sock_cap || s[0] != '/' ||
	    strlen(a) >= ip_cap || strlen(m) >= mac_cap || strchr(s, ','))
		return -1;
	*index = i;
	strcpy(sock, s);
	strcpy(ip, a);
	strcpy(mac, m);
	return 0;
}

/* Try the lock of port index: the fd, or -1 (held by another process, or
 * not openable; *err tells which errno). */
static int try_lock(const char *pool, int index, int *err)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	char path[PATH_MAX], pid[32];
	int fd, n;

	snprintf(path, sizeof(path), "%s/port%d.lock", pool, index);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	if (fcntl(fd, F_SETLK, &fl) != 0) {
		*err = errno;
		close(fd);
		return -1;
	}
	/* the holder's pid, for fabsock-ovs status (the lock is the truth) */
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		FDP_DBG(FI_LOG_CORE, "%s: pid not recorded: %s\n", path, strerror(errno));
	return fd;
}

/* Take port index (its lock held on fd); false when a dead holder's socket
 * file cannot be removed (another user's, in the pool's sticky directory):
 * bind would fail on it, so the port is left to the next claimer. */
static bool take(int fd, int index, const char *sock, const char *ip, const char *mac)
{
	/* the path is ours now: nobody else uses it */
	if (unlink(sock) != 0 && errno != ENOENT) {
		FDP_INFO(FI_LOG_CORE, "FI_DPDK_POOL port %d passed over: %s left by a previous "
			 "holder: %s\n", index, sock, strerror(errno));
		close(fd);
		return false;
	}
	claim_fd = fd;
	claim_pid = getpid();
	claim_index = index;
	strcpy(claim_sock, sock);
	snprintf(claim_ip, sizeof(claim_ip), "%s", ip);
	snprintf(claim_device, sizeof(claim_device),
		 "net_virtio_user%d,path=%s,server=1,queues=1,mac=%s", index, sock, mac);
	fdp_params.device = claim_device;
	fdp_params.ip = claim_ip;
	return true;
}

/* No port: the reason becomes the device's (and domain's) name. */
static int refuse(const char *pool, const char *why, int ret)
{
	const char *slash = strrchr(pool, '/');

	snprintf(claim_device, sizeof(claim_device), "ovs pool %.16s: %s",
		 slash && slash[1] ? slash + 1 : pool, why);
	fdp_params.pool_error = claim_device;
	fdp_params.device = claim_device;
	return ret;
}

int fdp_claim(const char *pool)
{
	char path[PATH_MAX], line[512], sock[sizeof(claim_sock)], ip[64], mac[32];
	int index, fd, err = 0, ports = 0, lines = 0, denied = 0, passed = 0;
	FILE *f;

	if (claim_fd >= 0 && claim_pid == getpid())
		return 0;
	if (claim_fd >= 0) {
		/* the parent's: closing it releases no lock of the parent's */
		close(claim_fd);
		claim_fd = -1;
	}
	fdp_params.device = NULL;
	fdp_params.ip = NULL;
	snprintf(path, sizeof(path), "%s/pool", pool);
	f = fopen(path, "re");
	if (!f) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL=%s: cannot read %s: %s (is the pool up? "
			 "fabsock-ovs up); provider disabled\n", pool, path, strerror(errno));
		return refuse(pool, "no such pool", -FI_ENODEV);
	}
	while (fgets(line, sizeof(line), f) && lines++ < CLAIM_MAX_PORTS * 2) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (parse_line(line, &index, sock, sizeof(sock), ip, sizeof(ip), mac,
			       sizeof(mac)) != 0) {
			FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL=%s: bad line in %s: %.*s; provider "
				 "disabled\n", pool, path, (int)strcspn(line, "\n"), line);
			fclose(f);
			return refuse(pool, "bad pool file", -FI_EINVAL);
		}
		ports++;
		fd = try_lock(pool, index, &err);
		if (fd >= 0 && take(fd, index, sock, ip, mac)) {
			fclose(f);
			FDP_INFO(FI_LOG_CORE, "FI_DPDK_POOL=%s: port %d (%s, %s)\n", pool, index,
				 sock, ip);
			return 0;
		}
		if (fd >= 0)
			passed++;
		else if (err != EAGAIN && err != EACCES)
			denied++;
		else if (err == EACCES && access(pool, W_OK) != 0)
			denied++;
	}
	fclose(f);
	if (denied) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL=%s: cannot open the port locks (%s); "
			 "provider disabled\n", pool, strerror(err));
		return refuse(pool, "port locks not writable", -FI_EACCES);
	}
	if (passed)
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL=%s: all %d ports are taken (%d by a socket "
			 "file of another user); provider disabled\n", pool, ports, passed);
	else
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL=%s: all %d ports are taken; provider "
			 "disabled\n", pool, ports);
	return refuse(pool, ports ? "all ports taken" : "no ports", -FI_EBUSY);
}

/* A port this process cannot use goes back to the pool. */
static void release(void)
{
	close(claim_fd);
	claim_fd = -1;
}

int fdp_claim_ready(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct pollfd pfd;
	int fd, conn, ret;

	if (claim_fd < 0)
		return 0;
	strcpy(sa.sun_path, claim_sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL port %d: cannot listen on %s: %s; provider "
			 "disabled\n", claim_index, claim_sock, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(claim_sock);
		release();
		return -FI_ENODEV;
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	do
		ret = poll(&pfd, 1, CLAIM_OVS_WAIT_MS);
	while (ret < 0 && errno == EINTR);
	conn = ret > 0 ? accept4(fd, NULL, NULL, SOCK_CLOEXEC) : -1;
	if (conn >= 0)
		close(conn);
	close(fd);
	unlink(claim_sock);
	if (conn < 0) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_POOL port %d: Open vSwitch did not connect to %s "
			 "within %d ms (is the bridge up?); provider disabled\n", claim_index,
			 claim_sock, CLAIM_OVS_WAIT_MS);
		release();
		return -FI_ENODEV;
	}
	return 0;
}
