/* stk_fab's data path: send buffers, sends, progress and waits. */
#include "config.h"
#include "stack/stk_fab_int.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include <rdma/fi_domain.h>

static stk_fab_deliver_fn *deliver; /* set once before any fabric opens */

void stk_fab_set_deliver(stk_fab_deliver_fn *fn)
{
	deliver = fn;
}

#define BATCH_MAX 64

const char *stk_fab_name(const struct stk_fab *fab)
{
	return fab->name;
}

uint32_t stk_fab_addr_format(const struct stk_fab *fab)
{
	return fab->info->addr_format;
}

size_t stk_fab_seg_size(const struct stk_fab *fab)
{
	return fab->seg;
}

size_t stk_fab_stream_seg(const struct stk_fab *fab)
{
	return fab->stream_seg;
}

size_t stk_fab_inject_size(const struct stk_fab *fab)
{
	return fab->inject;
}

int stk_fab_wait_fd(const struct stk_fab *fab)
{
	return fab->wait_fd;
}

/* ---- send buffer free list (Treiber stack, tag against ABA) ---- */

struct stk_fab_buf *stk_fab_buf_get(struct stk_fab *fab)
{
	uint64_t head = __atomic_load_n(&fab->tx_free, __ATOMIC_ACQUIRE);
	for (;;) {
		uint32_t top = (uint32_t)head;
		if (top == 0)
			return NULL;
		struct stk_fab_buf *buf = &fab->bufs[top - 1];
		uint32_t next = __atomic_load_n(&buf->next, __ATOMIC_RELAXED);
		uint64_t want = ((head >> 32) + 1) << 32 | next;
		if (__atomic_compare_exchange_n(&fab->tx_free, &head, want, true,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			buf->outstanding = NULL;
			return buf;
		}
	}
}

bool stk_fab_tx_available(struct stk_fab *fab)
{
	return (uint32_t)__atomic_load_n(&fab->tx_free, __ATOMIC_RELAXED) != 0;
}

void stk_fab_buf_put(struct stk_fab *fab, struct stk_fab_buf *buf)
{
	uint64_t head = __atomic_load_n(&fab->tx_free, __ATOMIC_RELAXED);
	for (;;) {
		__atomic_store_n(&buf->next, (uint32_t)head, __ATOMIC_RELAXED);
		uint64_t want = ((head >> 32) + 1) << 32 | (buf->index + 1);
		if (__atomic_compare_exchange_n(&fab->tx_free, &head, want, true,
						__ATOMIC_RELEASE, __ATOMIC_RELAXED))
			return;
	}
}

/* ---- data path ---- */

/* A post's result: 0, -FI_EAGAIN (the caller retries after progress), or an
 * error, logged with the call that failed. */
static int post_result(struct stk_fab *fab, ssize_t ret, const char *call)
{
	if (ret != 0 && ret != -FI_EAGAIN)
		STK_WARN("%s on %s: %s", call, fab->name, stk_fi.strerror((int)-ret));
	return (int)ret;
}

int stk_fab_send(struct stk_fab *fab, struct stk_fab_buf *buf, size_t len, fi_addr_t dest)
{
	stk_fi_enter();
	ssize_t ret = fi_send(fab->ep, buf->data, len, fab->mr_desc, dest, &buf->ctx);
	stk_fi_leave();
	if (ret == 0)
		fab_ring_after_post(fab, dest);
	return post_result(fab, ret, "fi_send");
}

int stk_fab_inject(struct stk_fab *fab, const void *msg, size_t len, fi_addr_t dest)
{
	stk_fi_enter();
	ssize_t ret = fi_inject(fab->ep, msg, len, dest);
	stk_fi_leave();
	if (ret == 0)
		fab_ring_after_post(fab, dest);
	return post_result(fab, ret, "fi_inject");
}

int stk_fab_inject2(struct stk_fab *fab, const void *hdr, size_t hlen, const void *payload,
		    size_t plen, fi_addr_t dest)
{
	if (!fab->gather || plen < STK_FAB_GATHER_MIN) {
		uint8_t tmp[STK_FAB_STAGE_MAX];
		if (hlen + plen > sizeof(tmp))
			return -EMSGSIZE;
		memcpy(tmp, hdr, hlen);
		if (plen)
			memcpy(tmp + hlen, payload, plen);
		return stk_fab_inject(fab, tmp, hlen + plen, dest);
	}
	struct iovec iov[2] = {
		{ .iov_base = (void *)hdr, .iov_len = hlen },
		{ .iov_base = (void *)payload, .iov_len = plen },
	};
	void *desc[2] = { NULL, NULL };
	struct fi_msg msg = { .msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dest };
	stk_fi_enter();
	/* no FI_COMPLETION: the CQ is bound with FI_SELECTIVE_COMPLETION (gather) */
	ssize_t ret = fi_sendmsg(fab->ep, &msg, FI_INJECT);
	stk_fi_leave();
	if (ret == 0)
		fab_ring_after_post(fab, dest);
	return post_result(fab, ret, "fi_sendmsg(FI_INJECT)");
}

static void complete(struct stk_fab *fab, void *context, uint64_t flags, size_t len, bool ok)
{
	struct stk_fab_buf *buf = context;
	if (!buf)
		return;
	if (buf->is_rx) {
		if (ok && (flags & FI_RECV))
			deliver(fab, buf->data, len);
		fab_post_rx(fab, buf);
		return;
	}
	if (buf->outstanding)
		__atomic_fetch_sub(buf->outstanding, 1, __ATOMIC_RELEASE);
	stk_fab_buf_put(fab, buf);
}

static size_t batch_size(void)
{
	size_t batch = stk_cfg.batch ? stk_cfg.batch : 16;
	return batch > BATCH_MAX ? BATCH_MAX : batch;
}

void stk_fab_progress_all(struct stk_fab *fab, unsigned max_batches)
{
	size_t batch = batch_size();
	for (unsigned i = 0; i < max_batches; i++)
		if ((size_t)stk_fab_progress(fab) < batch)
			return;
}

/* One batch from the CQ (cq_lock held): the number handled. */
static int progress_batch(struct stk_fab *fab)
{
	stk_fi_enter();
	unsigned retry = fab->repost_count;
	fab->repost_count = 0;
	for (unsigned i = 0; i < retry; i++)
		fab_post_rx(fab, &fab->bufs[fab->repost[i]]);

	struct fi_cq_msg_entry ev[BATCH_MAX];
	size_t batch = batch_size();
	int handled = 0;
	ssize_t n = fi_cq_read(fab->cq, ev, batch);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++)
			complete(fab, ev[i].op_context, ev[i].flags, ev[i].len, true);
		handled = (int)n;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(fab->cq, &err, 0) == 1) {
			stk_count(STK_C_FAB_CQ_ERRORS);
			/* Expected when a peer process exits (rxm reports its dropped
			 * connection): counted, logged at info the first time only. */
			static int logged;
			if (__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED) == 0)
				STK_INFO("%s: completion error: %s (logged once, counted in "
					 "fab_cq_errors)", fab->name, stk_fi.strerror(err.err));
			else
				STK_DBG("%s: completion error: %s", fab->name, stk_fi.strerror(err.err));
			complete(fab, err.op_context, err.flags, 0, false);
			handled = 1;
		}
	}
	stk_fi_leave();
	return handled;
}

int stk_fab_progress(struct stk_fab *fab)
{
	if (pthread_mutex_trylock(&fab->cq_lock) != 0)
		return 0;
	int handled = progress_batch(fab);
	pthread_mutex_unlock(&fab->cq_lock);
	return handled;
}

int fab_progress_locked(struct stk_fab *fab)
{
	size_t batch = batch_size();
	int total = 0;
	pthread_mutex_lock(&fab->cq_lock);
	for (unsigned i = 0; i < 64; i++) {
		int n = progress_batch(fab);
		total += n;
		if ((size_t)n < batch)
			break;
	}
	pthread_mutex_unlock(&fab->cq_lock);
	return total;
}

void stk_fab_quiesce(struct stk_fab *fab)
{
	pthread_mutex_lock(&fab->cq_lock);
	pthread_mutex_unlock(&fab->cq_lock);
}

bool stk_fab_trywait(struct stk_fab *fab)
{
	if (fab->wait_fd < 0)
		return false;
	/* our bell armed first: a peer on this host that posts from then on
	 * rings it; the provider's wait fd covers the others */
	if (fab->bell_page && !fab_bell_trywait(fab))
		return false;
	if (fab->cq_wait_fd < 0)
		return fab->bell_page != NULL;
	struct fid *fids[1] = { &fab->cq->fid };
	stk_fi_enter();
	int ret = fi_trywait(fab->fabric, fids, 1);
	stk_fi_leave();
	return ret == FI_SUCCESS;
}
