/* fdp_util.c - small helpers shared by the provider's objects. */
#include "config.h"

#include "fabric/fdp.h"

#include <string.h>
#include <time.h>

void fdp_lock_slow(struct fdp_lock *l)
{
	unsigned int spins = 0;

	for (;;) {
		while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
			if (++spins >= 128) {
				sched_yield();
				spins = 0;
			} else {
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
			}
		}
		if (!atomic_exchange_explicit(&l->held, true, memory_order_acquire))
			return;
	}
}

uint64_t fdp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

size_t fdp_iov_len(const struct iovec *iov, size_t count)
{
	size_t i, len = 0;

	for (i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

size_t fdp_iov_to_buf(void *buf, size_t buf_len, const struct iovec *iov,
		      size_t count)
{
	size_t i, done = 0, n;

	for (i = 0; i < count && done < buf_len; i++) {
		n = iov[i].iov_len;
		if (n > buf_len - done)
			n = buf_len - done;
		memcpy((char *)buf + done, iov[i].iov_base, n);
		done += n;
	}
	return done;
}

size_t fdp_buf_to_iov(const struct iovec *iov, size_t count, const void *buf,
		      size_t len)
{
	size_t i, done = 0, n;

	for (i = 0; i < count && done < len; i++) {
		n = iov[i].iov_len;
		if (n > len - done)
			n = len - done;
		memcpy(iov[i].iov_base, (const char *)buf + done, n);
		done += n;
	}
	return done;
}

void fdp_ep_tx_done(struct fdp_ep *ep, void *context, uint64_t op_flags,
		    uint64_t cq_flags, size_t len)
{
	if (ep->tx_cq && (!ep->tx_selective || (op_flags & FI_COMPLETION)))
		fdp_cq_write(ep->tx_cq, context, cq_flags, len, NULL, 0, 0,
			     FI_ADDR_NOTAVAIL);
	fdp_cntr_inc(ep->send_cntr);
}

void fdp_ep_tx_error(struct fdp_ep *ep, void *context, uint64_t cq_flags,
		     int err, size_t len)
{
	if (ep->tx_cq)
		fdp_cq_write_err(ep->tx_cq, context, cq_flags, err, err, len,
				 NULL, 0, 0, 0);
	fdp_cntr_inc_err(ep->send_cntr);
}

void fdp_ep_rx_done(struct fdp_ep *ep, void *context, uint64_t op_flags,
		    uint64_t cq_flags, size_t len, void *buf, uint64_t data,
		    uint64_t tag, fi_addr_t src)
{
	if (ep->rx_cq && (!ep->rx_selective || (op_flags & FI_COMPLETION)))
		fdp_cq_write(ep->rx_cq, context, cq_flags, len, buf, data, tag,
			     src);
	fdp_cntr_inc(ep->recv_cntr);
}

void fdp_ep_rx_error(struct fdp_ep *ep, void *context, uint64_t cq_flags,
		     int err, size_t len, void *buf, uint64_t data,
		     uint64_t tag, size_t olen)
{
	if (ep->rx_cq)
		fdp_cq_write_err(ep->rx_cq, context, cq_flags, err, err, len,
				 buf, data, tag, olen);
	fdp_cntr_inc_err(ep->recv_cntr);
}
