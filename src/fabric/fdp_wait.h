/* fdp_wait.h - what CQs, counters and EQs share (fdp_wait.c): the wait
 * object (struct fdp_wait in fdp.h), and their fi_ops slots other than
 * close. */
#ifndef FDP_WAIT_H
#define FDP_WAIT_H

#include "fabric/fdp.h"

/* FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_FD and FI_WAIT_YIELD. */
bool fdp_wait_obj_supported(enum fi_wait_obj wait_obj) FDP_HIDDEN;
/* Set w up for wait_obj: an eventfd for FI_WAIT_FD and FI_WAIT_UNSPEC, none
 * (fd -1) otherwise. 0, or -FI_EMFILE after a warning in subsys. */
int fdp_wait_open(struct fdp_wait *w, enum fi_wait_obj wait_obj,
		  enum fi_log_subsys subsys) FDP_HIDDEN;
/* Disarm (see fdp_wait_disarm) and close the eventfd. port may be NULL for
 * an object never armed (EQs). */
void fdp_wait_close(struct fdp_wait *w, struct fdp_port *port) FDP_HIDDEN;

/* One eventfd write: wakes a reader asleep on the fd. A full counter is
 * already a wake-up. No-op without an fd. */
void fdp_wait_signal(const struct fdp_wait *w) FDP_HIDDEN;
/* Empty the eventfd's counter. */
void fdp_wait_drain(const struct fdp_wait *w) FDP_HIDDEN;
/* fi_trywait found nothing to read: drain the fd and mark the reader
 * asleep, so that the progress thread polls the device for it. Requires
 * an fd. */
void fdp_wait_arm(struct fdp_wait *w, struct fdp_port *port) FDP_HIDDEN;
/* True (and the progress thread told) if a reader was armed: the caller
 * must then fdp_wait_signal. Costs one load when nobody sleeps. */
bool fdp_wait_disarm(struct fdp_wait *w, struct fdp_port *port) FDP_HIDDEN;

/* fi_control of a CQ, counter or EQ: FI_GETWAIT, FI_GETWAITOBJ; anything
 * else -FI_ENOSYS. */
int fdp_wait_fid_control(struct fid *fid, int command, void *arg) FDP_HIDDEN;
/* fi_cq_strerror / fi_eq_strerror: fi_strerror(prov_errno), copied into
 * buf when one is given. */
const char *fdp_wait_strerror(int prov_errno, char *buf, size_t len) FDP_HIDDEN;

#endif /* FDP_WAIT_H */
