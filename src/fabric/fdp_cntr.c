/* fdp_cntr.c - counters: lock-free values, progress on read, optional
 * eventfd armed by fi_trywait like CQs. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"
#include "fabric/fdp_wait.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>

static void cntr_wake(struct fdp_cntr *cntr)
{
	if (fdp_wait_disarm(&cntr->wait, cntr->domain->port))
		fdp_wait_signal(&cntr->wait);
}

void fdp_cntr_inc(struct fdp_cntr *cntr)
{
	if (!cntr)
		return;
	atomic_fetch_add_explicit(&cntr->value, 1, memory_order_release);
	cntr_wake(cntr);
}

void fdp_cntr_inc_err(struct fdp_cntr *cntr)
{
	if (!cntr)
		return;
	atomic_fetch_add_explicit(&cntr->errors, 1, memory_order_release);
	cntr_wake(cntr);
}

int fdp_cntr_trywait(struct fdp_cntr *cntr)
{
	if (cntr->wait.fd < 0)
		return -FI_EINVAL;
	fdp_domain_progress(cntr->domain);
	fdp_wait_arm(&cntr->wait, cntr->domain->port);
	return 0;
}

static uint64_t cntr_read(struct fid_cntr *fid)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	fdp_domain_progress(cntr->domain);
	return atomic_load_explicit(&cntr->value, memory_order_acquire);
}

static uint64_t cntr_readerr(struct fid_cntr *fid)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	fdp_domain_progress(cntr->domain);
	return atomic_load_explicit(&cntr->errors, memory_order_acquire);
}

static int cntr_add(struct fid_cntr *fid, uint64_t value)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	atomic_fetch_add(&cntr->value, value);
	cntr_wake(cntr);
	return 0;
}

static int cntr_set(struct fid_cntr *fid, uint64_t value)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	atomic_store(&cntr->value, value);
	cntr_wake(cntr);
	return 0;
}

static int cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	atomic_fetch_add(&cntr->errors, value);
	cntr_wake(cntr);
	return 0;
}

static int cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);

	atomic_store(&cntr->errors, value);
	cntr_wake(cntr);
	return 0;
}

static int cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid);
	uint64_t start = fdp_now_ns(), now, deadline, errs;

	deadline = timeout < 0 ? UINT64_MAX : start + (uint64_t)timeout * 1000000ull;
	errs = atomic_load(&cntr->errors);
	for (;;) {
		if (cntr_read(fid) >= threshold)
			return 0;
		if (atomic_load(&cntr->errors) != errs)
			return -FI_EAVAIL;
		now = fdp_now_ns();
		if (now >= deadline)
			return -FI_ETIMEDOUT;
		if (cntr->wait.fd >= 0 && now - start > 20000 &&
		    fdp_cntr_trywait(cntr) == 0) {
			struct pollfd pfd = {.fd = cntr->wait.fd, .events = POLLIN};

			/* re-check after arming: an increment may have raced */
			if (atomic_load(&cntr->value) < threshold)
				poll(&pfd, 1, 1);
		} else {
			sched_yield();
		}
	}
}

static int cntr_close(struct fid *fid)
{
	struct fdp_cntr *cntr = container_of(fid, struct fdp_cntr, cntr_fid.fid);

	if (atomic_load(&cntr->ref))
		return -FI_EBUSY;
	fdp_wait_close(&cntr->wait, cntr->domain->port);
	atomic_fetch_sub(&cntr->domain->ref, 1);
	free(cntr);
	return 0;
}

static const struct fi_ops cntr_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = cntr_close,
	.bind = fdp_enosys_bind,
	.control = fdp_wait_fid_control,
	.ops_open = fdp_enosys_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static const struct fi_ops_cntr cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = cntr_read,
	.readerr = cntr_readerr,
	.add = cntr_add,
	.set = cntr_set,
	.wait = cntr_wait,
	.adderr = cntr_adderr,
	.seterr = cntr_seterr,
};

int fdp_cntr_open(struct fid_domain *domain_fid, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr_fid, void *context)
{
	struct fdp_domain *domain = container_of(domain_fid, struct fdp_domain, domain_fid);
	struct fdp_cntr *cntr;

	if (attr && attr->events != FI_CNTR_EVENTS_COMP)
		return -FI_ENOSYS;
	if (attr && !fdp_wait_obj_supported(attr->wait_obj))
		return -FI_ENOSYS;
	cntr = calloc(1, sizeof(*cntr));
	if (!cntr)
		return -FI_ENOMEM;
	cntr->wait_obj = attr ? attr->wait_obj : FI_WAIT_UNSPEC;
	if (fdp_wait_open(&cntr->wait, cntr->wait_obj, FI_LOG_CNTR)) {
		free(cntr);
		return -FI_EMFILE;
	}
	cntr->domain = domain;
	cntr->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	cntr->cntr_fid.fid.context = context;
	cntr->cntr_fid.fid.ops = (struct fi_ops *)&cntr_fid_ops;
	cntr->cntr_fid.ops = (struct fi_ops_cntr *)&cntr_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cntr_fid = &cntr->cntr_fid;
	return 0;
}
