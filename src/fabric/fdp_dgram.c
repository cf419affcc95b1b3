/* fdp_dgram.c - the FI_EP_DGRAM endpoint classes: one message per frame, no
 * reliability, posted receives consumed in FIFO order. Sends copy into an
 * mbuf, so they complete as soon as the device took the frame.
 *
 * Two protocols share the code: FI_PROTO_UNSPEC (fdp_dgram_class) puts
 * struct fdp_dgram_hdr in front of the message (remote CQ data); FI_PROTO_UDP
 * (fdp_udp_class) sends and receives plain UDP datagrams, the UDP payload
 * being the message, so it talks to any UDP socket. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_port.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#define DGRAM_IOV_LIMIT 4
#define DGRAM_QUEUE 1024

struct dgram_rx {
	void *context;
	uint64_t flags;
	size_t iov_count;
	struct iovec iov[DGRAM_IOV_LIMIT];
};

struct dgram_state {
	struct dgram_rx *rxq;       /* ring, protected by ep->lock */
	size_t rx_cap, rx_head, rx_count;
};

static struct dgram_state *st(struct fdp_ep *ep)
{
	return ep->hook_ctx;
}

/* ---------------------------------------------------------------- receive */

static ssize_t post_recv(struct fdp_ep *ep, const struct iovec *iov, size_t count,
			 void *context, uint64_t flags)
{
	struct dgram_state *s = st(ep);
	struct dgram_rx *r;

	if (count > DGRAM_IOV_LIMIT)
		return -FI_EINVAL;
	fdp_lock(&ep->lock);
	if (s->rx_count == s->rx_cap) {
		fdp_unlock(&ep->lock);
		return -FI_EAGAIN;
	}
	r = &s->rxq[(s->rx_head + s->rx_count) % s->rx_cap];
	r->context = context;
	r->flags = flags;
	r->iov_count = count;
	if (count)
		memcpy(r->iov, iov, count * sizeof(*iov));
	s->rx_count++;
	fdp_unlock(&ep->lock);
	return 0;
}

static void src_of(const struct fdp_frame_view *v, struct sockaddr_in *src)
{
	memset(src, 0, sizeof(*src));
	src->sin_family = AF_INET;
	src->sin_addr.s_addr = v->src_ip;
	src->sin_port = v->src_port;
}

/* ep->lock held. One received message into the next posted buffer. An
 * unknown source is FI_ADDR_NOTAVAIL, or with FI_SOURCE_ERR an error
 * completion FI_EADDRNOTAVAIL whose err_data is its sockaddr_in (fi_cq(3));
 * the data is in the buffer either way. */
static void deliver(struct fdp_ep *ep, const struct fdp_frame_view *v,
		    const uint8_t *payload, size_t payload_len, uint64_t cq_flags)
{
	struct dgram_state *s = st(ep);
	struct dgram_rx r;
	struct sockaddr_in src;
	fi_addr_t src_addr = FI_ADDR_NOTAVAIL;
	size_t cap, done;
	void *buf0;

	if (s->rx_count == 0) {
		ep->rx_dropped_no_buffer++;
		return;
	}
	r = s->rxq[s->rx_head];
	s->rx_head = (s->rx_head + 1) % s->rx_cap;
	s->rx_count--;

	cap = fdp_iov_len(r.iov, r.iov_count);
	done = fdp_buf_to_iov(r.iov, r.iov_count, payload, payload_len);
	buf0 = r.iov_count ? r.iov[0].iov_base : NULL;
	if (payload_len > cap) {
		fdp_ep_rx_error(ep, r.context, cq_flags, FI_ETRUNC, done, buf0, v->data, 0,
				payload_len - done);
		return;
	}
	src_of(v, &src);
	if (ep->av && (ep->caps & FI_SOURCE || ep->rx_cq))
		src_addr = fdp_av_reverse(ep->av, &src);
	if (src_addr == FI_ADDR_NOTAVAIL && (ep->caps & FI_SOURCE_ERR) && ep->av) {
		if (ep->rx_cq)
			fdp_cq_write_err_data(ep->rx_cq, r.context, cq_flags, FI_EADDRNOTAVAIL,
					      done, buf0, 0, &src, sizeof(src));
		fdp_cntr_inc_err(ep->recv_cntr);
		return;
	}
	fdp_ep_rx_done(ep, r.context, r.flags | ep->rx_op_flags, cq_flags, done,
		       buf0, v->data, 0, src_addr);
}

void fdp_dgram_rx(struct fdp_ep *ep, const struct fdp_frame_view *v)
{
	uint64_t cq_flags = FI_RECV | FI_MSG;

	if (v->flags & FDP_DGRAM_F_DATA)
		cq_flags |= FI_REMOTE_CQ_DATA;
	deliver(ep, v, v->payload, v->payload_len, cq_flags);
}

void fdp_udp_rx(struct fdp_ep *ep, const struct fdp_frame_view *v)
{
	struct fdp_frame_view raw = *v;

	raw.data = 0;
	deliver(ep, &raw, v->udp_payload, v->udp_payload_len, FI_RECV | FI_MSG);
}

static ssize_t dg_recv(struct fid_ep *ep_fid, void *buf, size_t len, void *desc,
		       fi_addr_t src_addr, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct iovec iov = {.iov_base = buf, .iov_len = len};

	(void)desc;
	(void)src_addr;
	return post_recv(ep, &iov, 1, context, 0);
}

static ssize_t dg_recvv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			size_t count, fi_addr_t src_addr, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);

	(void)desc;
	(void)src_addr;
	return post_recv(ep, iov, count, context, 0);
}

static ssize_t dg_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);

	return post_recv(ep, msg->msg_iov, msg->iov_count, msg->context, flags);
}

/* ---------------------------------------------------------------- send */

static ssize_t do_send(struct fdp_ep *ep, const struct iovec *iov, size_t count,
		       fi_addr_t dest, void *context, uint64_t data,
		       uint64_t flags)
{
	struct fdp_dgram_hdr dh;
	size_t len = fdp_iov_len(iov, count);
	uint64_t cq_flags = FI_SEND | FI_MSG;
	int ret;

	size_t hdr_len = ep->cls->wire_hdr_len;

	if (count > DGRAM_IOV_LIMIT)
		return -FI_EINVAL;
	if (len + hdr_len > ep->frame_payload_max)
		return -FI_EMSGSIZE;
	if (hdr_len == 0 && (flags & FI_REMOTE_CQ_DATA))
		return -FI_EINVAL; /* a raw UDP datagram has no room for it */
	memset(&dh, 0, sizeof(dh));
	dh.hdr.magic = FDP_MAGIC;
	dh.hdr.version = FDP_PROTO_VERSION;
	dh.hdr.type = FDP_TYPE_DGRAM;
	if (flags & FI_REMOTE_CQ_DATA) {
		dh.hdr.flags = FDP_DGRAM_F_DATA;
		dh.data = htobe64(data);
	}
	ret = fdp_tx_frame(ep, dest, &dh, hdr_len, iov, count);
	if (ret == -FI_EAGAIN) {
		/* let ARP replies and TX completions in before the caller retries */
		fdp_domain_progress(ep->domain);
		return -FI_EAGAIN;
	}
	if (ret == -FI_EHOSTUNREACH) {
		if (flags & FI_INJECT)
			return ret;
		fdp_ep_tx_error(ep, context, cq_flags, FI_EHOSTUNREACH, len);
		return 0;
	}
	if (ret)
		return ret;
	if (!(flags & FI_INJECT))
		fdp_ep_tx_done(ep, context, flags, cq_flags, len);
	else
		fdp_cntr_inc(ep->send_cntr);
	return 0;
}

static ssize_t dg_send(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
		       fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return do_send(ep, &iov, 1, dest, context, 0, ep->tx_op_flags);
}

static ssize_t dg_sendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			size_t count, fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);

	(void)desc;
	return do_send(ep, iov, count, dest, context, 0, ep->tx_op_flags);
}

static ssize_t dg_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg, uint64_t flags)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);

	return do_send(ep, msg->msg_iov, msg->iov_count, msg->addr, msg->context,
		       msg->data, flags);
}

static ssize_t dg_inject(struct fid_ep *ep_fid, const void *buf, size_t len,
			 fi_addr_t dest)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return do_send(ep, &iov, 1, dest, NULL, 0, FI_INJECT);
}

static ssize_t dg_senddata(struct fid_ep *ep_fid, const void *buf, size_t len,
			   void *desc, uint64_t data, fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	(void)desc;
	return do_send(ep, &iov, 1, dest, context, data,
		       ep->tx_op_flags | FI_REMOTE_CQ_DATA);
}

static ssize_t dg_injectdata(struct fid_ep *ep_fid, const void *buf, size_t len,
			     uint64_t data, fi_addr_t dest)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};

	return do_send(ep, &iov, 1, dest, NULL, data, FI_INJECT | FI_REMOTE_CQ_DATA);
}

static const struct fi_ops_msg dgram_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = dg_recv,
	.recvv = dg_recvv,
	.recvmsg = dg_recvmsg,
	.send = dg_send,
	.sendv = dg_sendv,
	.sendmsg = dg_sendmsg,
	.inject = dg_inject,
	.senddata = dg_senddata,
	.injectdata = dg_injectdata,
};

/* ---------------------------------------------------------------- hooks */

static int dg_cancel(struct fdp_ep *ep, void *context)
{
	struct dgram_state *s = st(ep);
	size_t i, j;

	for (i = 0; i < s->rx_count; i++) {
		struct dgram_rx *r = &s->rxq[(s->rx_head + i) % s->rx_cap];

		if (r->context != context)
			continue;
		fdp_ep_rx_error(ep, context, FI_RECV | FI_MSG, FI_ECANCELED, 0,
				NULL, 0, 0, 0);
		for (j = i; j + 1 < s->rx_count; j++)
			s->rxq[(s->rx_head + j) % s->rx_cap] =
				s->rxq[(s->rx_head + j + 1) % s->rx_cap];
		s->rx_count--;
		return 0;
	}
	return -FI_ENOENT;
}

static void dg_close(struct fdp_ep *ep)
{
	struct dgram_state *s = st(ep);

	if (!s)
		return;
	free(s->rxq);
	free(s);
	ep->hook_ctx = NULL;
}

static ssize_t dg_rx_size_left(struct fdp_ep *ep)
{
	return (ssize_t)(st(ep)->rx_cap - st(ep)->rx_count);
}

static ssize_t dg_tx_size_left(struct fdp_ep *ep)
{
	(void)ep;
	return DGRAM_QUEUE; /* sends never queue in the provider */
}

static const struct fdp_ep_hooks dgram_hooks = {
	.rx_rdm = NULL,
	.progress = NULL,
	.enable = NULL,
	.cancel = dg_cancel,
	.close = dg_close,
	.rx_size_left = dg_rx_size_left,
	.tx_size_left = dg_tx_size_left,
};

static int dg_open(struct fdp_ep *ep, const struct fi_info *info)
{
	struct dgram_state *s = calloc(1, sizeof(*s));

	if (!s)
		return -FI_ENOMEM;
	s->rx_cap = info->rx_attr && info->rx_attr->size ? info->rx_attr->size : DGRAM_QUEUE;
	s->rxq = calloc(s->rx_cap, sizeof(*s->rxq));
	if (!s->rxq) {
		free(s);
		return -FI_ENOMEM;
	}
	ep->hook_ctx = s;
	ep->hooks = &dgram_hooks;
	ep->ep_fid.msg = (struct fi_ops_msg *)&dgram_msg_ops;
	return 0;
}

const struct fdp_ep_class fdp_dgram_class = {
	.type = FI_EP_DGRAM,
	.caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM,
	.mode = 0,
	.msg_order = 0,
	.comp_order = FI_ORDER_NONE,
	.max_msg_size = 0,
	.inject_size = 0,
	.tx_size = DGRAM_QUEUE,
	.rx_size = DGRAM_QUEUE,
	.iov_limit = DGRAM_IOV_LIMIT,
	.mem_tag_format_bits = 0,
	.protocol_version = FDP_PROTO_VERSION,
	.protocol = FI_PROTO_UNSPEC,
	.wire_hdr_len = sizeof(struct fdp_dgram_hdr),
	.open = dg_open,
};

/* FI_SOURCE_ERR is offered but only enabled when the application asks
 * for it (fdp_attr.c): it turns unknown sources into error completions. */
const struct fdp_ep_class fdp_udp_class = {
	.type = FI_EP_DGRAM,
	.caps = FI_MSG | FI_SEND | FI_RECV | FI_MULTICAST | FI_SOURCE | FI_SOURCE_ERR |
		FI_LOCAL_COMM | FI_REMOTE_COMM,
	.mode = 0,
	.msg_order = 0,
	.comp_order = FI_ORDER_NONE,
	.max_msg_size = 0,
	.inject_size = 0,
	.tx_size = DGRAM_QUEUE,
	.rx_size = DGRAM_QUEUE,
	.iov_limit = DGRAM_IOV_LIMIT,
	.mem_tag_format_bits = 0,
	.protocol_version = 4, /* IPv4 */
	.protocol = FI_PROTO_UDP,
	.wire_hdr_len = 0,
	.open = dg_open,
};
