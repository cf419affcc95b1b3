/* fdp_stub.c - temporary: entry points not written yet (removed as they land). */
#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

int fdp_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	(void)version; (void)node; (void)service; (void)flags; (void)hints; (void)info;
	return -FI_ENODATA;
}

int fdp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context)
{
	(void)attr; (void)fabric; (void)context;
	return -FI_ENOSYS;
}

void fdp_eal_cleanup(void)
{
}
