/* stk_fi: libfabric, loaded on first use.
 *
 * Debian's libfabric links the PSM/PSM2/EFA/verbs libraries directly, and PSM's
 * constructor alone costs ~0.2 s (hundreds of nanosleeps, CPU-affinity changes)
 * in every process that loads it. Linking libfabsock.so against libfabric would
 * make every launched process pay that at start-up, pass-through or not; so the
 * stack dlopen()s libfabric when it opens its first fabric and calls the few
 * exported entry points through this table (everything else in the libfabric
 * API is inline calls through the objects' ops tables).
 *
 * stk_fi_load() is idempotent and thread-safe; the table is read-only after. */
#ifndef STK_FI_H
#define STK_FI_H

#include <rdma/fabric.h>

struct stk_fi {
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	const char *(*strerror)(int errnum);
};

extern struct stk_fi stk_fi;

/* 0 when libfabric is usable, -ENOENT (with one log line) when it cannot be
 * loaded: the caller then falls back to the kernel. */
int stk_fi_load(void);

/* Signal handlers are the application's. Loading libfabric and opening a
 * provider install handlers of their own that end the process without
 * running the application's (libinfinipath, linked into Debian's libfabric
 * for PSM, takes SIGINT/SIGTERM and more in its constructor; the shm
 * provider takes SIGINT/SIGTERM/SIGBUS/SIGSEGV to unlink its regions, which
 * the stack reclaims itself): redis-server then exits 1 on SIGTERM without
 * its shutdown. stk_fi_sigs_save() snapshots every handler before such
 * set-up calls (NULL without memory: nothing is restored), and
 * stk_fi_sigs_restore() puts back each one that changed to a handler living
 * in an object libfabric brought in (one in an object loaded before
 * libfabric, or SIG_DFL/SIG_IGN, is the app's, set while the open ran in the
 * background: it stays) and frees the snapshot. Set-up only: two sigaction(2) calls per signal. In between, the
 * calling thread blocks the asynchronous signals: one that arrives during the
 * set-up (a DPDK port takes a second) waits for the application's handler
 * instead of running a provider's (libinfinipath's calls exit() from inside
 * the interrupted set-up). */
struct stk_fi_sigs;
struct stk_fi_sigs *stk_fi_sigs_save(void);
void stk_fi_sigs_restore(struct stk_fi_sigs *saved);

#endif
