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
/* Provider cleanup (process exit): stop and close a PCI or af_xdp device,
 * remove the runtime dir; the EAL itself is left to the exit. */
void fdp_eal_cleanup(void) FDP_HIDDEN;
/* DPDK port id of FI_DPDK_DEVICE after fdp_eal_start succeeded. */
uint16_t fdp_eal_port_id(void) FDP_HIDDEN;

#endif /* FDP_EAL_H */
