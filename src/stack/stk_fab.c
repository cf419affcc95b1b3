/* stk_fab's table of open fabrics: one entry per provider (per local IP for
 * a per-address provider), opened on first use or in the background, and
 * forgotten in a forked child. */
#include "config.h"
#include "stack/stk_fab_int.h"
#include "stack/stk_config.h"
#include "stack/stk_stat.h"
#include "stack/stk_counters.h"
#include "stack/stk_thread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FAB_MAX 16
#define FAB_KEY_MAX (STK_FAB_NAME_MAX + INET6_ADDRSTRLEN + 16) /* "tcp@<local ip>[%scope]" */

/* Opening endpoints (slow path). open_lock is held for a whole open (one
 * libfabric open at a time); fab_table_lock only for short looks at the table
 * (never while opening: a HELLO must not wait for an open of another
 * provider). Order: open_lock, then fab_table_lock. Entries are only appended
 * (their index is stable), until a fork's child forgets them all. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* protected by fab_table_lock */
static pthread_mutex_t fab_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char key[FAB_KEY_MAX];  /* the cfg name, "name@ip" for per-address providers */
	char prov[STK_FAB_NAME_MAX];
	struct fab_src src;     /* where a per-address provider listens */
	bool pending;           /* not opened yet: the next stk_fab_get opens it */
	bool bg_started;        /* a background open was started for it */
	struct stk_fab *fab;    /* NULL with err set: failed, not retried */
	int err;
} table[FAB_MAX];
static unsigned table_count;

static void fab_src_of(const struct sockaddr *local, struct fab_src *src)
{
	memset(src, 0, sizeof(*src));
	if (!local)
		return;
	struct sockaddr_in *sin = (struct sockaddr_in *)&src->addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&src->addr;
	if (local->sa_family == AF_INET) {
		memcpy(sin, local, sizeof(*sin));
	} else if (local->sa_family == AF_INET6) {
		memcpy(sin6, local, sizeof(*sin6));
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			struct in_addr v4;
			memcpy(&v4, &sin6->sin6_addr.s6_addr[12], sizeof(v4));
			memset(&src->addr, 0, sizeof(src->addr));
			sin->sin_family = AF_INET;
			sin->sin_addr = v4;
		}
	} else {
		return;
	}
	if (src->addr.ss_family == AF_INET) {
		sin->sin_port = 0;
		src->len = sizeof(*sin);
		src->format = FI_SOCKADDR_IN;
	} else {
		sin6->sin6_port = 0;
		sin6->sin6_flowinfo = 0;
		src->len = sizeof(*sin6);
		src->format = FI_SOCKADDR_IN6;
	}
}

/* "name@ip" (a scoped IPv6 address with its interface index). */
static void fab_key(const char *name, const struct fab_src *src, char key[FAB_KEY_MAX])
{
	char ip[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&src->addr;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&src->addr;
	if (src->addr.ss_family == AF_INET)
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
	if (src->addr.ss_family == AF_INET6 && sin6->sin6_scope_id)
		snprintf(key, FAB_KEY_MAX, "%s@%s%%%u", name, ip, (unsigned)sin6->sin6_scope_id);
	else
		snprintf(key, FAB_KEY_MAX, "%s@%s", name, ip);
}

bool stk_fab_per_address(const char *prov)
{
	static const char *const ip_listeners[] = { "tcp", "sockets", "udp", "verbs" };
	for (size_t i = 0; i < sizeof(ip_listeners) / sizeof(ip_listeners[0]); i++)
		if (strcmp(prov, ip_listeners[i]) == 0)
			return true;
	return false;
}

bool stk_fab_opens_at_accept(const char *prov)
{
	return stk_cfg.dpdk_pool && strcmp(prov, "dpdk") == 0;
}

/* The table key and source address of prov for a connection whose local
 * address is local. 0 or -errno. */
static int fab_lookup_key(const char *prov, const struct sockaddr *local, struct fab_src *src,
			  char key[FAB_KEY_MAX])
{
	if (strlen(prov) >= STK_FAB_NAME_MAX)
		return -ENOSPC;
	memset(src, 0, sizeof(*src));
	if (!stk_fab_per_address(prov)) {
		snprintf(key, FAB_KEY_MAX, "%s", prov);
		return 0;
	}
	fab_src_of(local, src);
	if (!src->len)
		return -EADDRNOTAVAIL;
	fab_key(prov, src, key);
	return 0;
}

/* The entry for key, appended (pending) when absent; -1 when the table is full.
 * Called with fab_table_lock held. */
static int entry_of(const char *key, const char *prov, const struct fab_src *src)
{
	for (unsigned i = 0; i < table_count; i++)
		if (strcmp(table[i].key, key) == 0)
			return (int)i;
	if (table_count == FAB_MAX)
		return -1;
	unsigned i = table_count++;
	memset(&table[i], 0, sizeof(table[i]));
	snprintf(table[i].key, FAB_KEY_MAX, "%s", key);
	snprintf(table[i].prov, STK_FAB_NAME_MAX, "%s", prov);
	table[i].src = *src;
	table[i].pending = true;
	return (int)i;
}

static bool exiting;            /* protected by open_lock: no open starts after */

/* Open entry i if it is still pending. Called with neither lock held. */
static void entry_open(unsigned i)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&fab_table_lock);
	bool pending = i < table_count && table[i].pending && !exiting;
	char prov[STK_FAB_NAME_MAX], key[FAB_KEY_MAX];
	struct fab_src src = table[i].src;
	memcpy(prov, table[i].prov, sizeof(prov));
	memcpy(key, table[i].key, sizeof(key));
	pthread_mutex_unlock(&fab_table_lock);
	if (!pending) {
		pthread_mutex_unlock(&open_lock);
		return;
	}
	if (fab_bell_wanted(prov)) {
		/* once per process, before its first such endpoint: files named
		 * with our pid then are a previous owner's, later they are ours
		 * (open_lock held) */
		static bool exit_hook;
		static pid_t reclaimed_by;
		if (reclaimed_by != getpid()) {
			fab_shm_unlink_regions(false);
			reclaimed_by = getpid();
		}
		if (!exit_hook)
			exit_hook = atexit(fab_shm_unlink_at_exit) == 0;
	}
	struct stk_fab *fab = NULL;
	struct stk_fi_sigs *sigs = stk_fi_sigs_save();
	stk_fi_enter();
	int ret = fab_open(prov, &src, key, &fab);
	stk_fi_leave();
	stk_fi_sigs_restore(sigs);
	pthread_mutex_lock(&fab_table_lock);
	table[i].fab = ret ? NULL : fab;
	table[i].err = ret;
	table[i].pending = false;
	pthread_mutex_unlock(&fab_table_lock);
	pthread_mutex_unlock(&open_lock);
	if (ret)
		stk_count(STK_C_FAB_OPEN_FAILED);
	else
		stk_stat_provider_open(prov);
}

int stk_fab_load(void)
{
	/* the same guard as an open: libfabric's constructors and providers
	 * install signal handlers (stk_fi.h) */
	struct stk_fi_sigs *sigs = stk_fi_sigs_save();
	stk_fi_enter();
	int ret = stk_fi_load();
	stk_fi_leave();
	stk_fi_sigs_restore(sigs);
	return ret;
}

/* The table entry of prov for local (created pending when new), with
 * fab_table_lock held on success (*i < 0: the table is full). key receives the
 * entry's name. 0 or -errno (fab_table_lock not held). */
static int lookup_locked(const char *prov, const struct sockaddr *local, char key[FAB_KEY_MAX],
			 int *i)
{
	struct fab_src src;
	int ret = fab_lookup_key(prov, local, &src, key);
	if (ret)
		return ret;
	pthread_mutex_lock(&fab_table_lock);
	*i = entry_of(key, prov, &src);
	return 0;
}

int stk_fab_get(const char *prov, const struct sockaddr *local, struct stk_fab **out)
{
	*out = NULL;
	char key[FAB_KEY_MAX];
	int i;
	int ret = lookup_locked(prov, local, key, &i);
	if (ret)
		return ret;
	bool pending = i >= 0 && table[i].pending;
	pthread_mutex_unlock(&fab_table_lock);
	if (i < 0)
		return -ENOSPC;
	if (pending)
		entry_open((unsigned)i);
	pthread_mutex_lock(&fab_table_lock);
	*out = table[i].fab;
	ret = table[i].pending ? -ESHUTDOWN : table[i].err;
	pthread_mutex_unlock(&fab_table_lock);
	return ret;
}

/* ---- opening in the background (stk_fab_get_ready) ---- */

static void *bg_open_main(void *arg)
{
	entry_open((unsigned)(uintptr_t)arg);
	return NULL;
}

/* atexit: libfabric's destructors must not run while a background open is
 * inside it; the open holds open_lock, so taking it waits for its end (10 s
 * at most, a safety net: an open takes well under a second). */
#define BG_EXIT_WAIT_S 10

static void bg_open_exit(void)
{
	struct timespec end;
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += BG_EXIT_WAIT_S;
	if (pthread_mutex_timedlock(&open_lock, &end) != 0)
		return;
	exiting = true;
	pthread_mutex_unlock(&open_lock);
}

int stk_fab_get_ready(const char *prov, const struct sockaddr *local, struct stk_fab **out)
{
	*out = NULL;
	char key[FAB_KEY_MAX];
	int i;
	int ret = lookup_locked(prov, local, key, &i);
	if (ret)
		return ret;
	bool start = false;
	if (i < 0) {
		ret = -ENOSPC;
	} else if (table[i].pending) {
		start = !table[i].bg_started;
		table[i].bg_started = true;
		ret = -EAGAIN;
	} else {
		*out = table[i].fab;
		ret = table[i].err;
	}
	static bool exit_hook;
	if (start && !exit_hook)
		exit_hook = atexit(bg_open_exit) == 0;
	pthread_mutex_unlock(&fab_table_lock);
	if (start && (!exit_hook ||
		      stk_thread_start(bg_open_main, (void *)(uintptr_t)i, 8u << 20) != 0))
		STK_DBG("%s: no background open (the next connection that needs it opens it)",
			key);
	return ret;
}

void stk_fab_foreach_open(void (*fn)(struct stk_fab *fab, void *arg), void *arg)
{
	struct stk_fab *open[FAB_MAX];
	unsigned n = 0;
	pthread_mutex_lock(&fab_table_lock);
	for (unsigned i = 0; i < table_count; i++)
		if (table[i].fab)
			open[n++] = table[i].fab;
	pthread_mutex_unlock(&fab_table_lock);
	for (unsigned i = 0; i < n; i++)
		fn(open[i], arg);
}

void stk_fab_atfork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&fab_table_lock);
}

void stk_fab_atfork_parent(void)
{
	pthread_mutex_unlock(&fab_table_lock);
	pthread_mutex_unlock(&open_lock);
}

void stk_fab_atfork_child(void)
{
	/* The parent's objects stay allocated (a bounded leak per fork): freeing
	 * them would run libfabric close paths on state shared with the parent.
	 * The shm exit hook unlinks regions named after getpid() only, so it never
	 * removes the parent's. */
	table_count = 0;
	memset(table, 0, sizeof(table));
	pthread_mutex_init(&fab_table_lock, NULL);
	pthread_mutex_init(&open_lock, NULL);
}
