/* fdp_enosys.h - "not supported" ops tables (fdp_enosys.c). An endpoint
 * starts with all of them; a class replaces the tables it implements. */
#ifndef FDP_ENOSYS_H
#define FDP_ENOSYS_H

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

#include "fabric/fdp.h"

extern const struct fi_ops_msg fdp_enosys_msg FDP_HIDDEN;
extern const struct fi_ops_tagged fdp_enosys_tagged FDP_HIDDEN;
extern const struct fi_ops_rma fdp_enosys_rma FDP_HIDDEN;
extern const struct fi_ops_atomic fdp_enosys_atomic FDP_HIDDEN;
extern const struct fi_ops_collective fdp_enosys_collective FDP_HIDDEN;

/* fi_ops slots no object of ours supports: -FI_ENOSYS. */
int fdp_enosys_bind(struct fid *fid, struct fid *bfid, uint64_t flags) FDP_HIDDEN;
int fdp_enosys_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			void *context) FDP_HIDDEN;

#endif /* FDP_ENOSYS_H */
