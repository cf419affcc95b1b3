/* fdp_eal.h - the DPDK EAL inside someone else's process (fdp_eal.c). */
#ifndef FDP_EAL_H
#define FDP_EAL_H

#include "fabric/fdp.h"

/* Start the EAL once, lazily (first fi_fabric/fi_domain). Later calls
 * return the first call's result. Leaves the calling thread's CPU affinity
 * and the process's signal handlers as they were. Returns 0, or
 * -FI_ENODEV (device not found/not startable) / -FI_EINVAL (bad
 * FI_DPDK_EAL_ARGS or parameters) after one FDP_WARN line. Thread-safe. */
int fdp_eal_start(void) FDP_HIDDEN;
/* From fi_prov_ini, when the provider is configured (device, IP, MTU valid)
 * and FI_DPDK_EAL_EARLY is not 0: run fdp_eal_start's work on a thread of
 * its own at once (born with every signal blocked), so that the EAL's ~0.15 s
 * (PMD plugins, TSC calibration) overlaps what libfabric does after loading
 * us (other providers' start-up, fi_getinfo); fdp_eal_start then waits for
 * it and returns its result, and its failure line is the same. A process
 * forked while it runs is foreign (fdp_eal_foreign). Cleanup joins it. */
void fdp_eal_start_early(void) FDP_HIDDEN;
/* Provider cleanup (process exit), after fdp_port_shutdown: stop and close
 * the port, free its mbuf pool, then rte_eal_cleanup when we started the
 * EAL (not with net_memif: a DPDK 22.11 bug, see fdp_eal.c). DPDK log
 * lines are dropped from then on. */
void fdp_eal_cleanup(void) FDP_HIDDEN;
/* True in a process forked from the one that started DPDK: the port, its
 * queues and its shared memory are the parent's; a child must neither use
 * them (getinfo and fabric fail, -FI_ENODATA / -FI_ENODEV) nor tear them
 * down at its exit (cleanup does nothing). */
bool fdp_eal_foreign(void) FDP_HIDDEN;
/* Call before touching the port's pool or queues from a thread (progress,
 * transmit). The first call in a thread gives it an EAL lcore id
 * (rte_thread_register; released at thread exit), so its mbuf allocations
 * and frees, ours and the PMD's, go through a per-lcore mempool cache
 * instead of the pool's shared ring: a ring operation per frame, with a
 * second thread of the process (progress thread, application threads) on
 * the same ring, costs a fifth of a receiver's cycles. A thread that cannot
 * get one (more than RTE_MAX_LCORE threads, a forked child) works
 * uncached. Afterwards: one thread-local load. */
extern __thread bool fdp_eal_thread_ready FDP_HIDDEN;
void fdp_eal_thread_slow(void) FDP_HIDDEN;
static inline void fdp_eal_thread(void)
{
	if (__builtin_expect(!fdp_eal_thread_ready, 0))
		fdp_eal_thread_slow();
}
/* Name of the port's mbuf pool (created by fdp_port.c, freed at cleanup). */
void fdp_eal_pool_name(uint16_t port, char *out, size_t cap) FDP_HIDDEN;
/* fdp_pool.c: create a pktmbuf pool of n mbufs (with a per-lcore cache,
 * see fdp_eal_thread).
 * packed: objects back to back in one memory chunk, as net_af_xdp needs
 * (it registers the pool as one UMEM region, see there); else DPDK's
 * default layout. NULL with rte_errno set (and one FDP_WARN line when the
 * pool could not be packed into one chunk). */
struct rte_mempool;
struct rte_mempool *fdp_pool_create(const char *name, unsigned int n, uint16_t data_room,
				    int socket, bool packed) FDP_HIDDEN;

/* fdp_eal_files.c: files outside the process (see there). Before
 * rte_eal_init: remove empty runtime directories of dead provider
 * processes and a stale memif server socket file of device. */
void fdp_files_reclaim(const char *device) FDP_HIDDEN;
/* Remove this process's EAL runtime directory (after rte_eal_init). */
void fdp_files_runtime_dir_remove(void) FDP_HIDDEN;
/* fdp_eal_quiet.c: around rte_eal_init, fds 1 and 2 go to memfds (begin);
 * end restores them, writes back what was not DPDK's (another thread's
 * output) and drops DPDK's prints, the first of its stderr lines ("<prog>:
 * ..." from getopt, "EAL: ...") copied to reason ("" when none). prog is
 * the argv[0] given to rte_eal_init. A memfd that cannot be made leaves
 * that fd as it was. */
struct fdp_quiet {
	int saved[2], mem[2];
};
void fdp_quiet_begin(struct fdp_quiet *q) FDP_HIDDEN;
void fdp_quiet_end(struct fdp_quiet *q, const char *prog, char *reason, size_t cap) FDP_HIDDEN;
/* fdp_eal_quiet.c: between begin and end, what libbpf and libxdp print
 * (net_af_xdp's libraries, when loaded) goes to the provider's debug log
 * instead of the application's stderr; end puts their previous print
 * callbacks back. Bracket the DPDK calls that load, attach or detach the
 * XDP program: port setup and close. Not reentrant (process-wide). */
#define FDP_LIBPRINT_LIBS 2
struct fdp_libprint {
	void (*set[FDP_LIBPRINT_LIBS])(void); /* their setters, NULL: not loaded */
	void (*old[FDP_LIBPRINT_LIBS])(void); /* the callbacks before begin */
};
void fdp_libprint_begin(struct fdp_libprint *lp) FDP_HIDDEN;
void fdp_libprint_end(struct fdp_libprint *lp) FDP_HIDDEN;
/* fdp_fd_floor.c: between begin and end, the free descriptor numbers below
 * a floor (512, or half the soft RLIMIT_NOFILE if lower; none under 128)
 * are held, so that the descriptors DPDK opens meanwhile are above the
 * application's. Bracket rte_eal_init and a port's set-up. begin never
 * fails (without memory or descriptors the floor is lower or absent). */
struct fdp_fd_floor {
	int *held;
	int n;
};
void fdp_fd_floor_begin(struct fdp_fd_floor *f) FDP_HIDDEN;
void fdp_fd_floor_end(struct fdp_fd_floor *f) FDP_HIDDEN;
/* DPDK port id of FI_DPDK_DEVICE after fdp_eal_start succeeded. */
uint16_t fdp_eal_port_id(void) FDP_HIDDEN;

#endif /* FDP_EAL_H */
