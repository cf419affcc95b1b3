#include "config.h"
#include "stack/stk_fi.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

struct stk_fi stk_fi;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_result = -ENOENT;

/* The library's soname, the one the headers we build against describe. */
#define STK_FI_SONAME "libfabric.so.1"

/* The objects loaded before libfabric (their link maps): a handler that lives
 * in one of them is the application's, one elsewhere came with libfabric (its
 * providers, libinfinipath...). Without a complete list (pre_count < 0)
 * every changed handler is put back. */
#define PRE_MAX 1024
static const struct link_map *pre_maps[PRE_MAX];
static int pre_count = -1;

static void note_objects(void)
{
	void *self = dlopen(NULL, RTLD_NOW | RTLD_NOLOAD);
	struct link_map *map = NULL;
	if (!self)
		return;
	if (dlinfo(self, RTLD_DI_LINKMAP, &map) == 0 && map) {
		while (map->l_prev)
			map = map->l_prev;
		int n = 0;
		for (; map && n < PRE_MAX; map = map->l_next)
			pre_maps[n++] = map;
		if (!map)
			pre_count = n;
	}
	dlclose(self); /* the main program's handle: unloads nothing */
}

/* Whether handler h belongs to an object that was there before libfabric. */
static bool app_handler(void (*h)(int))
{
	Dl_info info;
	struct link_map *map = NULL;
	if (pre_count < 0 || !dladdr1((void *)h, &info, (void **)&map, RTLD_DL_LINKMAP) || !map)
		return false;
	for (int i = 0; i < pre_count; i++)
		if (pre_maps[i] == map)
			return true;
	return false;
}

/* libfabric reads its environment (FI_PROVIDER_PATH, each provider's
 * FI_<PROV>_* parameters) once, when it first initialises its providers:
 * that is done at load, in the environment of the process that loads it. A
 * pre-fork server's listener loads libfabric in the master, and its workers
 * may run with an environment of their own (nginx keeps TZ only). A
 * fi_getinfo for a provider name nobody has initialises them all and
 * returns no entry. */
static void init_providers(const struct stk_fi *t)
{
	struct fi_info *hints = t->dupinfo(NULL), *info = NULL;
	if (!hints)
		return;
	hints->fabric_attr->prov_name = strdup("fabsock-none");
	if (t->getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) == 0)
		t->freeinfo(info);
	t->freeinfo(hints);
}

static void load(void)
{
	note_objects();
	stk_fi_enter(); /* libfabric's constructors open files of their own */
	void *lib = dlopen(STK_FI_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();
		STK_WARN("cannot load %s (%s): TCP stays on the kernel", STK_FI_SONAME,
			 why ? why : "?");
		stk_fi_leave();
		return;
	}
	struct stk_fi table = {
		.getinfo = (int (*)(uint32_t, const char *, const char *, uint64_t,
				    const struct fi_info *, struct fi_info **))dlsym(lib, "fi_getinfo"),
		.freeinfo = (void (*)(struct fi_info *))dlsym(lib, "fi_freeinfo"),
		.dupinfo = (struct fi_info * (*)(const struct fi_info *))dlsym(lib, "fi_dupinfo"),
		.fabric = (int (*)(struct fi_fabric_attr *, struct fid_fabric **, void *))
			dlsym(lib, "fi_fabric"),
		.strerror = (const char *(*)(int))dlsym(lib, "fi_strerror"),
	};
	stk_fi_leave();
	if (!table.getinfo || !table.freeinfo || !table.dupinfo || !table.fabric ||
	    !table.strerror) {
		STK_WARN("%s lacks fi_getinfo/fi_freeinfo/fi_dupinfo/fi_fabric/fi_strerror: "
			 "TCP stays on the kernel", STK_FI_SONAME);
		return;
	}
	stk_fi_enter();
	init_providers(&table);
	stk_fi_leave();
	stk_fi = table;
	load_result = 0;
}

int stk_fi_load(void)
{
	pthread_once(&load_once, load);
	return load_result;
}

struct stk_fi_sigs {
	struct sigaction act[NSIG];
	sigset_t mask; /* the thread's, before the set-up */
};

struct stk_fi_sigs *stk_fi_sigs_save(void)
{
	struct stk_fi_sigs *saved = calloc(1, sizeof(*saved));
	if (!saved)
		return NULL;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, NULL, &saved->act[sig]);
	sigset_t async;
	sigfillset(&async);
	/* synchronous ones stay: blocking them would not defer a fault */
	sigdelset(&async, SIGSEGV);
	sigdelset(&async, SIGBUS);
	sigdelset(&async, SIGILL);
	sigdelset(&async, SIGFPE);
	sigdelset(&async, SIGTRAP);
	sigdelset(&async, SIGSYS);
	pthread_sigmask(SIG_BLOCK, &async, &saved->mask);
	return saved;
}

void stk_fi_sigs_restore(struct stk_fi_sigs *saved)
{
	if (!saved)
		return;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction now;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (sigaction(sig, NULL, &now) != 0 ||
		    (now.sa_handler == saved->act[sig].sa_handler &&
		     now.sa_flags == saved->act[sig].sa_flags))
			continue;
		/* the open may run on a thread of ours while the app's threads go
		 * on: a handler the app set meanwhile stays (libfabric's live in
		 * the objects it brought; none sets SIG_DFL or SIG_IGN) */
		if (now.sa_handler == SIG_DFL || now.sa_handler == SIG_IGN ||
		    app_handler(now.sa_handler)) {
			STK_DBG("signal %d: the app changed its handler during the open: kept",
				sig);
			continue;
		}
		STK_DBG("libfabric replaced the handler of signal %d: restored", sig);
		sigaction(sig, &saved->act[sig], NULL);
	}
	pthread_sigmask(SIG_SETMASK, &saved->mask, NULL); /* pending ones run the app's now */
	free(saved);
}
