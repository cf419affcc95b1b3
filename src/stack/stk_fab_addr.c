/* stk_fab's addresses: our name, the peers in the AV, and the shm
 * provider's regions. */
#include "config.h"
#include "stack/stk_fab_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>

/* ---- addresses ---- */

int stk_fab_getname(struct stk_fab *fab, const struct sockaddr *local_ip, void *addr,
		    size_t *len)
{
	size_t cap = *len;
	stk_fi_enter();
	int ret = fi_getname(&fab->ep->fid, addr, len);
	stk_fi_leave();
	if (ret)
		return ret == -FI_ETOOSMALL ? -ENOSPC : ret;
	if (*len > cap)
		return -ENOSPC;
	if (!local_ip)
		return 0;
	/* Socket-addressed providers bound to the wildcard: substitute the IP the
	 * kernel connection uses locally, which the peer can reach by construction. */
	/* addr may be unaligned (a byte array inside a wire struct): copy out. */
	if (fab->info->addr_format == FI_SOCKADDR_IN && *len >= sizeof(struct sockaddr_in) &&
	    local_ip->sa_family == AF_INET) {
		struct sockaddr_in sin, lin;
		memcpy(&sin, addr, sizeof(sin));
		memcpy(&lin, local_ip, sizeof(lin));
		if (sin.sin_addr.s_addr == htonl(INADDR_ANY)) {
			sin.sin_addr = lin.sin_addr;
			memcpy(addr, &sin, sizeof(sin));
		}
	} else if (fab->info->addr_format == FI_SOCKADDR_IN6 &&
		   *len >= sizeof(struct sockaddr_in6) && local_ip->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6, lin6;
		memcpy(&sin6, addr, sizeof(sin6));
		memcpy(&lin6, local_ip, sizeof(lin6));
		if (IN6_IS_ADDR_UNSPECIFIED(&sin6.sin6_addr)) {
			sin6.sin6_addr = lin6.sin6_addr;
			memcpy(addr, &sin6, sizeof(sin6));
		}
	}
	return 0;
}

#define SHM_DIR "/dev/shm"
#define SHM_ADDR_PREFIX "fi_shm://"

const char *fab_shm_region_of(const void *addr, size_t len)
{
	const char *a = addr;
	size_t plen = sizeof(SHM_ADDR_PREFIX) - 1;
	if (len <= plen || memchr(a, '\0', len) == NULL || strncmp(a, SHM_ADDR_PREFIX, plen) != 0)
		return NULL;
	const char *name = a + plen;
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return NULL;
	return name;
}

/* The owner of the region named, -errno when it cannot be looked at. */
static int shm_region_owner(const char *name, uid_t *owner)
{
	char path[sizeof(SHM_DIR) + STK_FAB_ADDR_MAX];
	snprintf(path, sizeof(path), SHM_DIR "/%s", name);
	struct stat st;
	if (fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*owner = st.st_uid;
	return 0;
}

/* shm: a peer whose region has our region's owner (the regions are 0600, so
 * only then can each side map the other's). 0 or -errno, logged at info the
 * first time (a peer of another user is a normal event, not a fault). */
static int shm_peer_allowed(const struct stk_fab *fab, const void *addr, size_t len)
{
	const char *name = fab_shm_region_of(addr, len);
	uid_t owner = 0;
	int ret = name ? shm_region_owner(name, &owner) : -EINVAL;
	if (ret == 0 && owner != fab->shm_owner)
		ret = -EPERM;
	if (ret == 0)
		return 0;
	static int logged;
	if (__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED) == 0)
		STK_INFO("shm: peer address not used: %s (logged once; its connections use "
			 "another provider or the kernel)",
			 ret == -EPERM ? "its region belongs to another user"
			 : ret == -EINVAL ? "not a region of this host's " SHM_DIR
			 : strerror(-ret));
	else
		STK_DBG("shm: peer address not used: %s", strerror(-ret));
	return ret;
}

int stk_fab_peer_allowed(struct stk_fab *fab, const void *addr, size_t len)
{
	if (len > STK_FAB_ADDR_MAX)
		return -EINVAL;
	return fab->is_shm ? shm_peer_allowed(fab, addr, len) : 0;
}

/* An entry leaves (av_lock held): its bell closes. */
static void entry_forget(struct stk_fab *fab, struct av_entry *e)
{
	if (e->fi < AV_CACHE_MAX && fab->ring_map[e->fi] == &e->bell)
		__atomic_store_n(&fab->ring_map[e->fi], NULL, __ATOMIC_RELEASE);
	fab_bell_close(&e->bell);
	e->len = 0;
}

/* A new peer in slot e (av_lock held; fi_av_insert succeeded): its bell
 * opened when it has one. 1, or -EPERM when its bell is unusable (it is
 * removed from the AV again: it would sleep without being woken). */
static int entry_fill(struct stk_fab *fab, struct av_entry *e, const void *addr, size_t len,
		      fi_addr_t fi)
{
	e->bell.fd = -1;
	e->bell.page = NULL;
	int bell = fab->bell_page ? fab_bell_open_peer(fab, addr, len, &e->bell) : 0;
	if (bell) {
		STK_INFO("shm: the wake-up channel of peer region %s is unusable (%s): its "
			 "connections use another provider or the kernel",
			 fab_shm_region_of(addr, len), strerror(-bell));
		stk_fi_enter();
		fi_av_remove(fab->av, &fi, 1, 0);
		stk_fi_leave();
		return -EPERM;
	}
	memcpy(e->addr, addr, len);
	e->len = (uint16_t)len;
	e->fi = fi;
	e->refs = 1;
	e->last_used = ++fab->av_clock;
	if (e->bell.fd >= 0) {
		if (fi < AV_CACHE_MAX)
			__atomic_store_n(&fab->ring_map[fi], &e->bell, __ATOMIC_RELEASE);
		__atomic_store_n(&fab->peer_bells, true, __ATOMIC_RELEASE);
	}
	return 1;
}

struct fab_bell *fab_bell_of_slow(struct stk_fab *fab, fi_addr_t dest)
{
	struct fab_bell *bell = NULL;
	pthread_mutex_lock(&fab->av_lock);
	for (unsigned i = 0; i < AV_CACHE_MAX && !bell; i++)
		if (fab->av_cache[i].len && fab->av_cache[i].fi == dest &&
		    fab->av_cache[i].bell.fd >= 0)
			bell = &fab->av_cache[i].bell;
	pthread_mutex_unlock(&fab->av_lock);
	return bell;
}

int stk_fab_av_insert(struct stk_fab *fab, const void *addr, size_t len, fi_addr_t *out)
{
	int allowed = stk_fab_peer_allowed(fab, addr, len);
	if (allowed)
		return allowed;
	pthread_mutex_lock(&fab->av_lock);
	struct av_entry *free_slot = NULL, *idle = NULL;
	for (unsigned i = 0; i < AV_CACHE_MAX; i++) {
		struct av_entry *e = &fab->av_cache[i];
		if (!e->len) {
			if (!free_slot)
				free_slot = e;
			continue;
		}
		if (e->len == len && memcmp(e->addr, addr, len) == 0) {
			e->refs++;
			e->last_used = ++fab->av_clock;
			*out = e->fi;
			pthread_mutex_unlock(&fab->av_lock);
			return 0;
		}
		if (!e->refs && (!idle || e->last_used < idle->last_used))
			idle = e;
	}
	if (!free_slot && idle) {
		/* full: the peer idle the longest leaves (its mapping too) */
		stk_fi_enter();
		fi_av_remove(fab->av, &idle->fi, 1, 0);
		stk_fi_leave();
		entry_forget(fab, idle);
		free_slot = idle;
	}
	stk_fi_enter();
	int ret = fi_av_insert(fab->av, addr, 1, out, 0, NULL);
	stk_fi_leave();
	struct av_entry *same = NULL;
	for (unsigned i = 0; ret == 1 && i < AV_CACHE_MAX && !same; i++)
		if (fab->av_cache[i].len && fab->av_cache[i].fi == *out)
			same = &fab->av_cache[i];
	if (same) {
		/* another byte form of a known peer: one entry, one removal */
		same->refs++;
		same->last_used = ++fab->av_clock;
	} else if (ret == 1 && free_slot) {
		ret = entry_fill(fab, free_slot, addr, len, *out);
	} else if (ret == 1 && fab->is_shm) {
		/* every peer in use: no entry for its bell; shm's AV is this size */
		stk_fi_enter();
		fi_av_remove(fab->av, out, 1, 0);
		stk_fi_leave();
		ret = -FI_ENOSPC;
	}
	pthread_mutex_unlock(&fab->av_lock);
	if (ret == -EPERM)
		return ret;
	if (ret != 1) {
		/* a peer's address: its connection goes to the kernel, said at
		 * info (the peer may be another user's, or gone) */
		STK_INFO("fi_av_insert on %s: %s", fab->name,
			 ret < 0 ? stk_fi.strerror(-ret) : "address rejected");
		return ret < 0 ? ret : -EINVAL;
	}
	return 0;
}

void stk_fab_av_release(struct stk_fab *fab, fi_addr_t addr)
{
	pthread_mutex_lock(&fab->av_lock);
	for (unsigned i = 0; i < AV_CACHE_MAX; i++) {
		struct av_entry *e = &fab->av_cache[i];
		if (!e->len || !e->refs || e->fi != addr)
			continue;
		/* kept when idle: the next connection to the same peer process reuses
		 * it (shm maps the peer's 16 MiB region once, not per connection) */
		e->refs--;
		break;
	}
	pthread_mutex_unlock(&fab->av_lock);
}

/* ---- shared-memory regions of the shm provider ----
 * libfabric's shm provider names an endpoint's region /dev/shm/<pid>:<n>:<m> and
 * unlinks it only when the endpoint is closed; a process that exits without
 * closing (every app: exit() does not close our endpoints) or is killed leaves
 * it behind (16 MiB of RAM each), and a later process that inherits the pid
 * cannot open its endpoint (EBUSY). So: our regions are unlinked at exit (the
 * mappings stay valid while threads finish), and before opening shm, regions of
 * processes that no longer exist — or of a previous owner of our pid — are
 * reclaimed. A pid in another pid namespace is not ours to judge: /dev/shm is
 * per mount, so only a shared /dev/shm across pid namespaces could mislead it. */

/* The pid of a region name "<pid>:<n>:<m>", or -1 for any other name. */
static long shm_region_pid(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);
	if (end == name || *end != ':' || pid <= 0)
		return -1;
	unsigned long a, b;
	char tail;
	if (sscanf(end, ":%lu:%lu%c", &a, &b, &tail) != 2)
		return -1;
	return pid;
}

void fab_shm_unlink_regions(bool ours_only)
{
	DIR *dir = opendir(SHM_DIR);
	if (!dir)
		return;
	long self = (long)getpid();
	unsigned reclaimed = 0;
	struct dirent *de;
	while ((de = readdir(dir)) != NULL) {
		const char *bell_region = fab_bell_region_of(de->d_name);
		long pid = shm_region_pid(bell_region ? bell_region : de->d_name);
		/* a bell keyed by an address: its page names the owner, and
		 * both files go together (the FIFO's owner is found by the page) */
		bool by_page = pid < 0 && bell_region;
		if (by_page)
			pid = fab_bell_page_pid(dirfd(dir), de->d_name);
		if (pid <= 0)
			continue;
		/* a region named with our pid before we opened one is a previous
		 * owner's; a page that names us is our own bell */
		bool mine = pid == self && (ours_only || !by_page);
		bool stale = mine || (!ours_only && pid != self && kill((pid_t)pid, 0) != 0 &&
				      errno == ESRCH);
		if (!stale)
			continue;
		if (by_page)
			reclaimed += fab_bell_unlink_at(dirfd(dir), bell_region);
		else if (unlinkat(dirfd(dir), de->d_name, 0) == 0)
			reclaimed++;
	}
	closedir(dir);
	if (reclaimed && !ours_only)
		STK_INFO("shm: reclaimed %u region(s) left in " SHM_DIR " by exited processes",
			 reclaimed);
}

void fab_shm_unlink_at_exit(void)
{
	fab_shm_unlink_regions(true);
}

/* shm: the owner of our own region (fi_getname names it). */
void fab_shm_note_owner(struct stk_fab *fab)
{
	fab->is_shm = true;
	fab->shm_owner = geteuid();
	uint8_t addr[STK_FAB_ADDR_MAX];
	size_t len = sizeof(addr);
	if (fi_getname(&fab->ep->fid, addr, &len) != 0 || len > sizeof(addr))
		return;
	const char *name = fab_shm_region_of(addr, len);
	uid_t owner;
	if (name && shm_region_owner(name, &owner) == 0)
		fab->shm_owner = owner;
}
