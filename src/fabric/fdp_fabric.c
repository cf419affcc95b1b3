/* fdp_fabric.c - the fabric object: domains, EQs, trywait. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fabric_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	int i, ret;

	(void)fabric;
	for (i = 0; i < count; i++) {
		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			ret = fdp_cq_trywait(container_of(fids[i], struct fdp_cq, cq_fid.fid));
			break;
		case FI_CLASS_CNTR:
			ret = fdp_cntr_trywait(container_of(fids[i], struct fdp_cntr, cntr_fid.fid));
			break;
		case FI_CLASS_EQ: {
			struct fdp_eq *eq = container_of(fids[i], struct fdp_eq, eq_fid.fid);

			fdp_lock(&eq->lock);
			ret = (eq->head || eq->err_head) ? -FI_EAGAIN : 0;
			fdp_unlock(&eq->lock);
			break;
		}
		default:
			return -FI_EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int fabric_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
			     struct fid_pep **pep, void *context)
{
	(void)fabric; (void)info; (void)pep; (void)context;
	return -FI_ENOSYS;
}

static int fabric_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
			    struct fid_wait **waitset)
{
	(void)fabric; (void)attr; (void)waitset;
	return -FI_ENOSYS;
}

static int fabric_domain2(struct fid_fabric *fabric, struct fi_info *info,
			  struct fid_domain **dom, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return fdp_domain_open(fabric, info, dom, context);
}

static int fabric_close(struct fid *fid)
{
	struct fdp_fabric *fabric = container_of(fid, struct fdp_fabric, fabric_fid.fid);

	if (atomic_load(&fabric->ref))
		return -FI_EBUSY;
	free(fabric);
	return 0;
}

static int fabric_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}

static int fabric_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}

static int fabric_ops_open(struct fid *fid, const char *name, uint64_t flags,
			   void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops fabric_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = fabric_close,
	.bind = fabric_bind,
	.control = fabric_control,
	.ops_open = fabric_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static const struct fi_ops_fabric fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = fdp_domain_open,
	.passive_ep = fabric_passive_ep,
	.eq_open = fdp_eq_open,
	.wait_open = fabric_wait_open,
	.trywait = fabric_trywait,
	.domain2 = fabric_domain2,
};

int fdp_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric_fid,
		    void *context)
{
	struct fdp_fabric *fabric;
	int ret;

	/* Start DPDK now so a bad device or EAL argument fails here, with
	 * its reason logged, rather than at the first endpoint. */
	ret = fdp_eal_start();
	if (ret)
		return ret;
	fabric = calloc(1, sizeof(*fabric));
	if (!fabric)
		return -FI_ENOMEM;
	snprintf(fabric->name, sizeof(fabric->name), "%s",
		 attr && attr->name ? attr->name : FDP_PROV_NAME);
	fabric->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fabric->fabric_fid.fid.context = context;
	fabric->fabric_fid.fid.ops = (struct fi_ops *)&fabric_fid_ops;
	fabric->fabric_fid.ops = (struct fi_ops_fabric *)&fabric_ops;
	fabric->fabric_fid.api_version = attr ? attr->api_version : FDP_FI_VERSION;
	*fabric_fid = &fabric->fabric_fid;
	return 0;
}
