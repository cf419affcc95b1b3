/* fdp_eq.c - event queues: enough for fi_pingpong and fabtests-style
 * programs (AV insert completions, fi_eq_write, errors, sread). Control path
 * only, so a mutex-protected list and an eventfd are fine. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"
#include "fabric/fdp_wait.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fdp_eq_node {
	struct fdp_eq_node *next;
	uint32_t event;
	size_t len;
	struct fi_eq_err_entry err;   /* error nodes */
	uint8_t data[];
};

static void eq_push(struct fdp_eq *eq, struct fdp_eq_node *n, bool is_err)
{
	fdp_lock(&eq->lock);
	if (is_err) {
		if (eq->err_tail)
			eq->err_tail->next = n;
		else
			eq->err_head = n;
		eq->err_tail = n;
	} else {
		if (eq->tail)
			eq->tail->next = n;
		else
			eq->head = n;
		eq->tail = n;
	}
	fdp_unlock(&eq->lock);
	fdp_wait_signal(&eq->wait);
}

static ssize_t eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf,
			size_t len, uint64_t flags)
{
	struct fdp_eq *eq = container_of(eq_fid, struct fdp_eq, eq_fid);
	struct fdp_eq_node *n = calloc(1, sizeof(*n) + len);

	if (!n)
		return -FI_ENOMEM;
	n->event = event;
	n->len = len;
	memcpy(n->data, buf, len);
	(void)flags;
	eq_push(eq, n, false);
	return (ssize_t)len;
}

static ssize_t eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf,
		       size_t len, uint64_t flags)
{
	struct fdp_eq *eq = container_of(eq_fid, struct fdp_eq, eq_fid);
	struct fdp_eq_node *n;
	ssize_t ret;

	fdp_lock(&eq->lock);
	if (eq->err_head) {
		fdp_unlock(&eq->lock);
		return -FI_EAVAIL;
	}
	n = eq->head;
	if (!n) {
		fdp_unlock(&eq->lock);
		return -FI_EAGAIN;
	}
	if (len < n->len) {
		fdp_unlock(&eq->lock);
		return -FI_ETOOSMALL;
	}
	if (!(flags & FI_PEEK)) {
		eq->head = n->next;
		if (!eq->head)
			eq->tail = NULL;
	}
	fdp_unlock(&eq->lock);
	if (event)
		*event = n->event;
	memcpy(buf, n->data, n->len);
	ret = (ssize_t)n->len;
	if (!(flags & FI_PEEK))
		free(n);
	return ret;
}

static ssize_t eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf,
			  uint64_t flags)
{
	struct fdp_eq *eq = container_of(eq_fid, struct fdp_eq, eq_fid);
	struct fdp_eq_node *n;
	void *err_data;

	fdp_lock(&eq->lock);
	n = eq->err_head;
	if (!n) {
		fdp_unlock(&eq->lock);
		return -FI_EAGAIN;
	}
	if (!(flags & FI_PEEK)) {
		eq->err_head = n->next;
		if (!eq->err_head)
			eq->err_tail = NULL;
	}
	fdp_unlock(&eq->lock);
	err_data = buf->err_data;
	*buf = n->err;
	buf->err_data = err_data;
	buf->err_data_size = 0;
	if (!(flags & FI_PEEK))
		free(n);
	return sizeof(*buf);
}

static ssize_t eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf,
			size_t len, int timeout, uint64_t flags)
{
	struct fdp_eq *eq = container_of(eq_fid, struct fdp_eq, eq_fid);
	uint64_t deadline = timeout < 0 ? UINT64_MAX :
			    fdp_now_ns() + (uint64_t)timeout * 1000000ull;
	ssize_t ret;

	for (;;) {
		ret = eq_read(eq_fid, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		if (fdp_now_ns() >= deadline)
			return -FI_EAGAIN;
		if (eq->wait.fd >= 0) {
			struct pollfd pfd = {.fd = eq->wait.fd, .events = POLLIN};

			if (poll(&pfd, 1, 10) > 0)
				fdp_wait_drain(&eq->wait);
		} else {
			usleep(100);
		}
	}
}

static const char *eq_strerror(struct fid_eq *eq_fid, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	(void)eq_fid;
	(void)err_data;
	return fdp_wait_strerror(prov_errno, buf, len);
}

static int eq_close(struct fid *fid)
{
	struct fdp_eq *eq = container_of(fid, struct fdp_eq, eq_fid.fid);
	struct fdp_eq_node *n;

	while ((n = eq->head)) {
		eq->head = n->next;
		free(n);
	}
	while ((n = eq->err_head)) {
		eq->err_head = n->next;
		free(n);
	}
	fdp_wait_close(&eq->wait, NULL);
	atomic_fetch_sub(&eq->fabric->ref, 1);
	fdp_lock_destroy(&eq->lock);
	free(eq);
	return 0;
}

static const struct fi_ops eq_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = eq_close,
	.bind = fdp_enosys_bind,
	.control = fdp_wait_fid_control,
	.ops_open = fdp_enosys_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static const struct fi_ops_eq eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = eq_read,
	.readerr = eq_readerr,
	.write = eq_write,
	.sread = eq_sread,
	.strerror = eq_strerror,
};

void fdp_eq_av_complete(struct fdp_eq *eq, fid_t fid, void *context, uint64_t count)
{
	struct fi_eq_entry e = {.fid = fid, .context = context, .data = count};

	eq_write(&eq->eq_fid, FI_AV_COMPLETE, &e, sizeof(e), 0);
}

void fdp_eq_join_complete(struct fdp_eq *eq, fid_t fid, void *context)
{
	struct fi_eq_entry e = {.fid = fid, .context = context, .data = 0};

	eq_write(&eq->eq_fid, FI_JOIN_COMPLETE, &e, sizeof(e), 0);
}

int fdp_eq_av_error(struct fdp_eq *eq, fid_t fid, void *context, uint64_t index, int err)
{
	struct fdp_eq_node *n = calloc(1, sizeof(*n));

	if (!n)
		return -FI_ENOMEM;
	n->event = FI_AV_COMPLETE;
	n->err.fid = fid;
	n->err.context = context;
	n->err.data = index;
	n->err.err = err;
	n->err.prov_errno = err;
	eq_push(eq, n, true);
	return 0;
}

int fdp_eq_open(struct fid_fabric *fabric_fid, struct fi_eq_attr *attr,
		struct fid_eq **eq_fid, void *context)
{
	struct fdp_fabric *fabric = container_of(fabric_fid, struct fdp_fabric, fabric_fid);
	struct fdp_eq *eq;

	if (!fdp_wait_obj_supported(attr->wait_obj))
		return -FI_ENOSYS;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	if (fdp_wait_open(&eq->wait, attr->wait_obj, FI_LOG_EQ)) {
		free(eq);
		return -FI_EMFILE;
	}
	eq->fabric = fabric;
	fdp_lock_init(&eq->lock);
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = (struct fi_ops *)&eq_fid_ops;
	eq->eq_fid.ops = (struct fi_ops_eq *)&eq_ops;
	atomic_fetch_add(&fabric->ref, 1);
	*eq_fid = &eq->eq_fid;
	return 0;
}
