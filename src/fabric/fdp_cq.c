/* fdp_cq.c - completion queues: a growable ring of tagged entries, a list of
 * error entries, and an optional eventfd armed by fi_trywait. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"
#include "fabric/fdp_wait.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define CQ_DEFAULT_SIZE 1024
#define SREAD_SPIN_NS (20ull * 1000)

static size_t format_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

static bool ring_grow(struct fdp_cq *cq)
{
	size_t cap = cq->ring_cap * 2, i;
	struct fdp_cq_slot *n = malloc(cap * sizeof(*n));

	if (!n)
		return false;
	for (i = 0; i < cq->count; i++)
		n[i] = cq->ring[(cq->head + i) % cq->ring_cap];
	free(cq->ring);
	cq->ring = n;
	cq->ring_cap = cap;
	cq->head = 0;
	return true;
}

/* After an append: release cq->lock and wake a reader fi_trywait armed. */
static void unlock_and_wake(struct fdp_cq *cq)
{
	bool wake_reader = fdp_wait_disarm(&cq->wait, cq->domain->port);

	fdp_unlock(&cq->lock);
	if (wake_reader)
		fdp_wait_signal(&cq->wait);
}

void fdp_cq_write(struct fdp_cq *cq, void *context, uint64_t flags, size_t len,
		  void *buf, uint64_t data, uint64_t tag, fi_addr_t src)
{
	struct fdp_cq_slot *s;

	fdp_lock(&cq->lock);
	if (cq->count == cq->ring_cap && !ring_grow(cq)) {
		fdp_unlock(&cq->lock);
		FDP_WARN(FI_LOG_CQ, "out of memory: completion lost\n");
		return;
	}
	s = &cq->ring[(cq->head + cq->count) % cq->ring_cap];
	s->e.op_context = context;
	s->e.flags = flags;
	s->e.len = len;
	s->e.buf = buf;
	s->e.data = data;
	s->e.tag = tag;
	s->src = src;
	__atomic_store_n(&cq->count, cq->count + 1, __ATOMIC_RELEASE);
	unlock_and_wake(cq);
}

static void push_err(struct fdp_cq *cq, struct fdp_cq_err_node *n)
{
	fdp_lock(&cq->lock);
	if (cq->err_tail)
		cq->err_tail->next = n;
	else
		__atomic_store_n(&cq->err_head, n, __ATOMIC_RELEASE);
	cq->err_tail = n;
	unlock_and_wake(cq);
}

/* A new error entry with the fields every error completion sets, or NULL
 * (logged: the completion is lost). */
static struct fdp_cq_err_node *err_node(void *context, uint64_t flags, int err,
					int prov_errno, size_t len, void *buf, size_t olen)
{
	struct fdp_cq_err_node *n = calloc(1, sizeof(*n));

	if (!n) {
		FDP_WARN(FI_LOG_CQ, "out of memory: error completion lost\n");
		return NULL;
	}
	n->e.op_context = context;
	n->e.flags = flags;
	n->e.len = len;
	n->e.buf = buf;
	n->e.olen = olen;
	n->e.err = err;
	n->e.prov_errno = prov_errno;
	return n;
}

void fdp_cq_write_err_data(struct fdp_cq *cq, void *context, uint64_t flags,
			   int err, size_t len, void *buf, size_t olen,
			   const void *err_data, size_t err_data_size)
{
	struct fdp_cq_err_node *n = err_node(context, flags, err, err, len, buf, olen);

	if (!n)
		return;
	if (err_data_size > sizeof(n->err_data))
		err_data_size = sizeof(n->err_data);
	if (err_data_size)
		memcpy(n->err_data, err_data, err_data_size);
	n->err_data_size = err_data_size;
	push_err(cq, n);
}

void fdp_cq_write_err(struct fdp_cq *cq, void *context, uint64_t flags, int err,
		      int prov_errno, size_t len, void *buf, uint64_t data,
		      uint64_t tag, size_t olen)
{
	struct fdp_cq_err_node *n = err_node(context, flags, err, prov_errno, len, buf, olen);

	if (!n)
		return;
	n->e.data = data;
	n->e.tag = tag;
	push_err(cq, n);
}

static ssize_t cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			   fi_addr_t *src_addr)
{
	struct fdp_cq *cq = container_of(cq_fid, struct fdp_cq, cq_fid);
	size_t i, n;
	char *out = buf;

	fdp_domain_progress(cq->domain);
	/* empty: answer without the lock (a racing writer's entry is seen by
	 * the next read) */
	if (__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE) == 0 &&
	    __atomic_load_n(&cq->err_head, __ATOMIC_ACQUIRE) == NULL)
		return -FI_EAGAIN;
	fdp_lock(&cq->lock);
	/* A read leaves the CQ armed: another thread may sleep on the wait fd
	 * after its fi_trywait, and only the next completion (fdp_cq_write,
	 * which disarms and signals) may end that sleep. Disarming here would
	 * lose its wake-up and stop the progress thread: a multi-threaded
	 * application (one thread reading, another asleep in poll) would stall. */
	n = cq->count < count ? cq->count : count;
	for (i = 0; i < n; i++) {
		struct fdp_cq_slot *s = &cq->ring[cq->head];

		memcpy(out, &s->e, cq->entry_size);
		out += cq->entry_size;
		if (src_addr)
			src_addr[i] = s->src;
		cq->head = (cq->head + 1) % cq->ring_cap;
	}
	__atomic_store_n(&cq->count, cq->count - n, __ATOMIC_RELEASE);
	if (n == 0 && cq->err_head) {
		fdp_unlock(&cq->lock);
		return -FI_EAVAIL;
	}
	fdp_unlock(&cq->lock);
	return n ? (ssize_t)n : -FI_EAGAIN;
}

static ssize_t cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf,
			  uint64_t flags)
{
	struct fdp_cq *cq = container_of(cq_fid, struct fdp_cq, cq_fid);
	struct fdp_cq_err_node *n;
	void *err_data;
	size_t err_data_size;

	(void)flags;
	fdp_lock(&cq->lock);
	n = cq->err_head;
	if (!n) {
		fdp_unlock(&cq->lock);
		return -FI_EAGAIN;
	}
	__atomic_store_n(&cq->err_head, n->next, __ATOMIC_RELEASE);
	if (!n->next)
		cq->err_tail = NULL;
	/* fi_cq(3), API >= 1.5: a caller's err_data buffer (err_data_size
	 * > 0) receives a copy; without one, err_data points to the CQ's
	 * buffer, valid until the next read */
	err_data = buf->err_data;
	err_data_size = buf->err_data_size;
	*buf = n->e;
	buf->err_data = err_data;
	buf->err_data_size = 0;
	if (n->err_data_size && err_data && err_data_size) {
		buf->err_data_size = n->err_data_size < err_data_size ?
				     n->err_data_size : err_data_size;
		memcpy(err_data, n->err_data, buf->err_data_size);
	} else if (n->err_data_size) {
		memcpy(cq->err_data, n->err_data, n->err_data_size);
		buf->err_data = cq->err_data;
		buf->err_data_size = n->err_data_size;
	}
	fdp_unlock(&cq->lock);
	free(n);
	return 1;
}

int fdp_cq_trywait(struct fdp_cq *cq)
{
	int ret = 0;

	if (cq->wait.fd < 0)
		return -FI_EINVAL;
	fdp_domain_progress(cq->domain);
	fdp_lock(&cq->lock);
	if (cq->count || cq->err_head)
		ret = -FI_EAGAIN;
	else
		fdp_wait_arm(&cq->wait, cq->domain->port);
	fdp_unlock(&cq->lock);
	return ret;
}

/* fi_cq_signal's flag, consumed by the reader it ends. */
static bool take_signal(struct fdp_cq *cq)
{
	return atomic_load_explicit(&cq->signaled, memory_order_relaxed) &&
	       atomic_exchange(&cq->signaled, false);
}

static ssize_t cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			    fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct fdp_cq *cq = container_of(cq_fid, struct fdp_cq, cq_fid);
	uint64_t start = fdp_now_ns(), now, deadline;
	ssize_t ret;

	(void)cond;
	deadline = timeout < 0 ? UINT64_MAX : start + (uint64_t)timeout * 1000000ull;
	for (;;) {
		ret = cq_readfrom(cq_fid, buf, count, src_addr);
		if (ret != -FI_EAGAIN || take_signal(cq))
			return ret;
		now = fdp_now_ns();
		if (now >= deadline)
			return -FI_EAGAIN;
		if (now - start < SREAD_SPIN_NS || cq->wait.fd < 0) {
			sched_yield();
			continue;
		}
		/* fi_trywait drains the wait fd, which may hold fi_cq_signal's
		 * wake-up: look at the flag after it (a signal raised later
		 * writes the fd again, after the drain, and ends the poll) */
		if (fdp_cq_trywait(cq) == 0) {
			struct pollfd pfd = {.fd = cq->wait.fd, .events = POLLIN};
			int ms = deadline == UINT64_MAX ? -1 :
				 (int)((deadline - now + 999999) / 1000000);

			if (take_signal(cq))
				return -FI_EAGAIN;
			if (poll(&pfd, 1, ms) < 0 && errno == EINTR)
				return -FI_EINTR;
		}
	}
}

static ssize_t cq_sread(struct fid_cq *cq_fid, void *buf, size_t count,
			const void *cond, int timeout)
{
	return cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *cq_fid)
{
	struct fdp_cq *cq = container_of(cq_fid, struct fdp_cq, cq_fid);

	atomic_store(&cq->signaled, true);
	fdp_wait_signal(&cq->wait);
	return 0;
}

static const char *cq_strerror(struct fid_cq *cq_fid, int prov_errno,
			       const void *err_data, char *buf, size_t len)
{
	(void)cq_fid;
	(void)err_data;
	return fdp_wait_strerror(prov_errno, buf, len);
}

static int cq_close(struct fid *fid)
{
	struct fdp_cq *cq = container_of(fid, struct fdp_cq, cq_fid.fid);
	struct fdp_cq_err_node *n;

	if (atomic_load(&cq->ref))
		return -FI_EBUSY;
	fdp_wait_close(&cq->wait, cq->domain->port);
	while ((n = cq->err_head)) {
		cq->err_head = n->next;
		free(n);
	}
	atomic_fetch_sub(&cq->domain->ref, 1);
	fdp_lock_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return 0;
}

static const struct fi_ops cq_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = cq_close,
	.bind = fdp_enosys_bind,
	.control = fdp_wait_fid_control,
	.ops_open = fdp_enosys_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static const struct fi_ops_cq cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = cq_read,
	.readfrom = cq_readfrom,
	.readerr = cq_readerr,
	.sread = cq_sread,
	.sreadfrom = cq_sreadfrom,
	.signal = cq_signal,
	.strerror = cq_strerror,
};

int fdp_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr,
		struct fid_cq **cq_fid, void *context)
{
	struct fdp_domain *domain = container_of(domain_fid, struct fdp_domain, domain_fid);
	enum fi_cq_format format = attr->format;
	struct fdp_cq *cq;

	if (format == FI_CQ_FORMAT_UNSPEC)
		format = FI_CQ_FORMAT_CONTEXT;
	if (!format_size(format)) {
		FDP_WARN(FI_LOG_CQ, "CQ format %d not supported (up to FI_CQ_FORMAT_TAGGED)\n",
			 (int)attr->format);
		return -FI_ENOSYS;
	}
	if (!fdp_wait_obj_supported(attr->wait_obj)) {
		FDP_WARN(FI_LOG_CQ, "CQ wait object %d not supported (FI_WAIT_FD is)\n",
			 (int)attr->wait_obj);
		return -FI_ENOSYS;
	}
	if (attr->flags & FI_AFFINITY)
		return -FI_ENOSYS;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->ring_cap = attr->size ? attr->size : CQ_DEFAULT_SIZE;
	cq->ring = calloc(cq->ring_cap, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		return -FI_ENOMEM;
	}
	if (fdp_wait_open(&cq->wait, attr->wait_obj, FI_LOG_CQ)) {
		free(cq->ring);
		free(cq);
		return -FI_EMFILE;
	}
	cq->domain = domain;
	cq->format = format;
	cq->entry_size = format_size(format);
	cq->wait_obj = attr->wait_obj;
	fdp_lock_init(&cq->lock);
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = (struct fi_ops *)&cq_fid_ops;
	cq->cq_fid.ops = (struct fi_ops_cq *)&cq_ops;
	atomic_fetch_add(&domain->ref, 1);
	*cq_fid = &cq->cq_fid;
	return 0;
}
