/* fdp_domain.c - the domain (opens the port) and memory registration
 * (mr_mode 0: registration hands out a key and nothing else, since every
 * operation copies through mbufs). */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_port.h"

#include <stdlib.h>
#include <string.h>

static int mr_close(struct fid *fid)
{
	struct fdp_mr *mr = container_of(fid, struct fdp_mr, mr_fid.fid);

	atomic_fetch_sub(&mr->domain->ref, 1);
	free(mr);
	return 0;
}

static int mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}

static int mr_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)arg;
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static int mr_ops_open(struct fid *fid, const char *name, uint64_t flags,
		       void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops mr_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = mr_close,
	.bind = mr_bind,
	.control = mr_control,
	.ops_open = mr_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

int fdp_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
		   uint64_t flags, struct fid_mr **mr_fid)
{
	struct fdp_domain *domain;
	struct fdp_mr *mr;

	(void)flags;
	if (fid->fclass != FI_CLASS_DOMAIN)
		return -FI_EINVAL;
	domain = container_of(fid, struct fdp_domain, domain_fid.fid);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->domain = domain;
	mr->access = attr->access;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = attr->context;
	mr->mr_fid.fid.ops = (struct fi_ops *)&mr_fid_ops;
	mr->mr_fid.mem_desc = NULL;
	mr->mr_fid.key = atomic_fetch_add(&domain->next_mr_key, 1);
	atomic_fetch_add(&domain->ref, 1);
	*mr_fid = &mr->mr_fid;
	return 0;
}

int fdp_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		uint64_t access, uint64_t offset, uint64_t requested_key,
		uint64_t flags, struct fid_mr **mr, void *context)
{
	struct fi_mr_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = iov;
	attr.iov_count = count;
	attr.access = access;
	attr.offset = offset;
	attr.requested_key = requested_key;
	attr.context = context;
	return fdp_mr_regattr(fid, &attr, flags, mr);
}

int fdp_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
	       uint64_t offset, uint64_t requested_key, uint64_t flags,
	       struct fid_mr **mr, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return fdp_mr_regv(fid, &iov, 1, access, offset, requested_key, flags,
			   mr, context);
}

static const struct fi_ops_mr domain_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = fdp_mr_reg,
	.regv = fdp_mr_regv,
	.regattr = fdp_mr_regattr,
};

static int domain_scalable_ep(struct fid_domain *domain, struct fi_info *info,
			      struct fid_ep **sep, void *context)
{
	(void)domain; (void)info; (void)sep; (void)context;
	return -FI_ENOSYS;
}

static int domain_poll_open(struct fid_domain *domain, struct fi_poll_attr *attr,
			    struct fid_poll **pollset)
{
	(void)domain; (void)attr; (void)pollset;
	return -FI_ENOSYS;
}

static int domain_stx_ctx(struct fid_domain *domain, struct fi_tx_attr *attr,
			  struct fid_stx **stx, void *context)
{
	(void)domain; (void)attr; (void)stx; (void)context;
	return -FI_ENOSYS;
}

static int domain_srx_ctx(struct fid_domain *domain, struct fi_rx_attr *attr,
			  struct fid_ep **rx_ep, void *context)
{
	(void)domain; (void)attr; (void)rx_ep; (void)context;
	return -FI_ENOSYS;
}

static int domain_query_atomic(struct fid_domain *domain, enum fi_datatype datatype,
			       enum fi_op op, struct fi_atomic_attr *attr,
			       uint64_t flags)
{
	(void)domain; (void)datatype; (void)op; (void)attr; (void)flags;
	return -FI_ENOSYS;
}

static int domain_query_collective(struct fid_domain *domain,
				   enum fi_collective_op coll,
				   struct fi_collective_attr *attr, uint64_t flags)
{
	(void)domain; (void)coll; (void)attr; (void)flags;
	return -FI_ENOSYS;
}

static int domain_endpoint2(struct fid_domain *domain, struct fi_info *info,
			    struct fid_ep **ep, uint64_t flags, void *context)
{
	if (flags)
		return -FI_EINVAL;
	return fdp_ep_open(domain, info, ep, context);
}

static const struct fi_ops_domain domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = fdp_av_open,
	.cq_open = fdp_cq_open,
	.endpoint = fdp_ep_open,
	.scalable_ep = domain_scalable_ep,
	.cntr_open = fdp_cntr_open,
	.poll_open = domain_poll_open,
	.stx_ctx = domain_stx_ctx,
	.srx_ctx = domain_srx_ctx,
	.query_atomic = domain_query_atomic,
	.query_collective = domain_query_collective,
	.endpoint2 = domain_endpoint2,
};

static int domain_close(struct fid *fid)
{
	struct fdp_domain *domain = container_of(fid, struct fdp_domain, domain_fid.fid);

	if (atomic_load(&domain->ref))
		return -FI_EBUSY;
	fdp_port_put(domain->port);
	atomic_fetch_sub(&domain->fabric->ref, 1);
	fi_freeinfo(domain->info);
	fdp_lock_destroy(&domain->lock);
	free(domain);
	return 0;
}

static int domain_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}

static int domain_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}

static int domain_ops_open(struct fid *fid, const char *name, uint64_t flags,
			   void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops domain_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = domain_close,
	.bind = domain_bind,
	.control = domain_control,
	.ops_open = domain_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

int fdp_domain_open(struct fid_fabric *fabric_fid, struct fi_info *info,
		    struct fid_domain **domain_fid, void *context)
{
	struct fdp_fabric *fabric = container_of(fabric_fid, struct fdp_fabric, fabric_fid);
	struct fdp_domain *domain;
	int ret;

	domain = calloc(1, sizeof(*domain));
	if (!domain)
		return -FI_ENOMEM;
	ret = fdp_port_get(&domain->port);
	if (ret) {
		free(domain);
		return ret;
	}
	domain->info = fi_dupinfo(info);
	domain->fabric = fabric;
	domain->threading = info && info->domain_attr ? info->domain_attr->threading :
			    FI_THREAD_SAFE;
	fdp_lock_init(&domain->lock);
	atomic_store(&domain->next_mr_key, 1);
	domain->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	domain->domain_fid.fid.context = context;
	domain->domain_fid.fid.ops = (struct fi_ops *)&domain_fid_ops;
	domain->domain_fid.ops = (struct fi_ops_domain *)&domain_ops;
	domain->domain_fid.mr = (struct fi_ops_mr *)&domain_mr_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*domain_fid = &domain->domain_fid;
	return 0;
}
