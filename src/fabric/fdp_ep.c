/* fdp_ep.c - the endpoint object common to every class: creation, address,
 * bindings, enable, options, close. Data operations belong to the class
 * (fdp_dgram.c, fdp_rdm*.c). */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"
#include "fabric/fdp_port.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

static bool ep_tx_pending(struct fdp_ep *ep)
{
	bool pending;

	fdp_lock(&ep->lock);
	pending = ep->enabled && ep->hooks && ep->hooks->tx_pending &&
		  ep->hooks->tx_pending(ep);
	fdp_unlock(&ep->lock);
	return pending;
}

void fdp_ep_linger(struct fdp_ep *ep)
{
	uint64_t start = fdp_now_ns();

	while (ep_tx_pending(ep)) {
		if (fdp_now_ns() - start >= FDP_CLOSE_LINGER_NS) {
			FDP_WARN(FI_LOG_EP_CTRL, "endpoint closed with sends its peer has not "
				 "acknowledged after %llu ms: they are dropped\n",
				 (unsigned long long)(FDP_CLOSE_LINGER_NS / 1000000));
			return;
		}
		if (fdp_domain_progress(ep->domain) == 0)
			sched_yield();
	}
}

static int ep_close(struct fid *fid)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	struct fdp_port *port = ep->domain->port;

	/* the data of sends that completed at copy time is still only in
	 * this endpoint's send window: deliver it before the endpoint goes */
	fdp_ep_linger(ep);
	fdp_ep_leave_all(ep);
	fdp_port_detach(port, ep);
	/* after unbind no receive burst can reach ep (it takes the rx lock) */
	fdp_port_unbind(port, ep->addr.sin_port);
	fdp_lock(&ep->lock);
	ep->enabled = false;
	/* acks owed for what was received last (a reply the application has
	 * already seen): without them the peer's send would end in
	 * FI_EHOSTUNREACH once this endpoint is gone */
	if (ep->hooks && ep->hooks->flush)
		ep->hooks->flush(ep, fdp_now_ns());
	if (ep->hooks && ep->hooks->close)
		ep->hooks->close(ep);
	fdp_unlock(&ep->lock);
	if (ep->av)
		atomic_fetch_sub(&ep->av->ref, 1);
	if (ep->tx_cq)
		atomic_fetch_sub(&ep->tx_cq->ref, 1);
	if (ep->rx_cq && ep->rx_cq != ep->tx_cq)
		atomic_fetch_sub(&ep->rx_cq->ref, 1);
	if (ep->send_cntr)
		atomic_fetch_sub(&ep->send_cntr->ref, 1);
	if (ep->recv_cntr && ep->recv_cntr != ep->send_cntr)
		atomic_fetch_sub(&ep->recv_cntr->ref, 1);
	atomic_fetch_sub(&ep->domain->ref, 1);
	fi_freeinfo(ep->info);
	fdp_lock_destroy(&ep->lock);
	free(ep);
	return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	int ret = 0;

	fdp_lock(&ep->lock);
	if (ep->enabled) {
		ret = -FI_EOPBADSTATE;
		goto out;
	}
	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		struct fdp_av *av = container_of(bfid, struct fdp_av, av_fid.fid);

		if (ep->av) {
			ret = -FI_EINVAL;
			break;
		}
		ep->av = av;
		atomic_fetch_add(&av->ref, 1);
		break;
	}
	case FI_CLASS_CQ: {
		struct fdp_cq *cq = container_of(bfid, struct fdp_cq, cq_fid.fid);
		bool counted = false;

		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
			atomic_fetch_add(&cq->ref, 1);
			counted = true;
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
			if (!counted)
				atomic_fetch_add(&cq->ref, 1);
		}
		if (!(flags & (FI_TRANSMIT | FI_RECV)))
			ret = -FI_EINVAL;
		break;
	}
	case FI_CLASS_CNTR: {
		struct fdp_cntr *cntr = container_of(bfid, struct fdp_cntr, cntr_fid.fid);
		bool counted = false;

		if (flags & FI_SEND) {
			ep->send_cntr = cntr;
			atomic_fetch_add(&cntr->ref, 1);
			counted = true;
		}
		if (flags & FI_RECV) {
			ep->recv_cntr = cntr;
			if (!counted)
				atomic_fetch_add(&cntr->ref, 1);
		}
		/* FI_READ/FI_WRITE/FI_REMOTE_*: no RMA, nothing to count */
		break;
	}
	case FI_CLASS_EQ:
		ep->eq = container_of(bfid, struct fdp_eq, eq_fid.fid);
		break;
	default:
		ret = -FI_EINVAL;
	}
out:
	fdp_unlock(&ep->lock);
	return ret;
}

static int ep_enable(struct fdp_ep *ep)
{
	int ret = 0;

	fdp_lock(&ep->lock);
	if (ep->enabled)
		goto out;
	if (!ep->av) {
		FDP_WARN(FI_LOG_EP_CTRL, "fi_enable: no AV bound\n");
		ret = -FI_ENOAV;
		goto out;
	}
	if (!ep->tx_cq && !ep->rx_cq && !ep->send_cntr && !ep->recv_cntr) {
		FDP_WARN(FI_LOG_EP_CTRL, "fi_enable: no CQ or counter bound\n");
		ret = -FI_ENOCQ;
		goto out;
	}
	if (ep->hooks && ep->hooks->enable) {
		ret = ep->hooks->enable(ep);
		if (ret)
			goto out;
	}
	ep->enabled = true;
out:
	fdp_unlock(&ep->lock);
	if (ret == 0)
		fdp_port_attach(ep->domain->port, ep);
	return ret;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	uint64_t *flags = arg;

	switch (command) {
	case FI_ENABLE:
		return ep_enable(ep);
	case FI_GETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			*flags = ep->tx_op_flags;
		else if (*flags & FI_RECV)
			*flags = ep->rx_op_flags;
		else
			return -FI_EINVAL;
		return 0;
	case FI_SETOPSFLAG:
		if (!flags)
			return -FI_EINVAL;
		if (*flags & FI_TRANSMIT)
			ep->tx_op_flags = *flags & ~FI_TRANSMIT;
		else if (*flags & FI_RECV)
			ep->rx_op_flags = *flags & ~FI_RECV;
		else
			return -FI_EINVAL;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int ep_ops_open(struct fid *fid, const char *name, uint64_t flags,
		       void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops ep_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = ep_close,
	.bind = ep_bind,
	.control = ep_control,
	.ops_open = ep_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static ssize_t ep_cancel(fid_t fid, void *context)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	ssize_t ret = -FI_ENOENT;

	fdp_lock(&ep->lock);
	if (ep->hooks && ep->hooks->cancel)
		ret = ep->hooks->cancel(ep, context);
	fdp_unlock(&ep->lock);
	return ret;
}

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (optname) {
	case FI_OPT_MIN_MULTI_RECV:
		if (*optlen < sizeof(size_t))
			return -FI_ETOOSMALL;
		*(size_t *)optval = ep->min_multi_recv;
		*optlen = sizeof(size_t);
		return 0;
	case FI_OPT_CM_DATA_SIZE:
		if (*optlen < sizeof(size_t))
			return -FI_ETOOSMALL;
		*(size_t *)optval = 0;
		*optlen = sizeof(size_t);
		return 0;
	default:
		return -FI_ENOPROTOOPT;
	}
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval,
		     size_t optlen)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (optname) {
	case FI_OPT_MIN_MULTI_RECV:
		if (optlen != sizeof(size_t))
			return -FI_EINVAL;
		ep->min_multi_recv = *(const size_t *)optval;
		return 0;
	default:
		return -FI_ENOPROTOOPT;
	}
}

static int ep_tx_ctx(struct fid_ep *sep, int index, struct fi_tx_attr *attr,
		     struct fid_ep **tx_ep, void *context)
{
	(void)sep; (void)index; (void)attr; (void)tx_ep; (void)context;
	return -FI_ENOSYS;
}

static int ep_rx_ctx(struct fid_ep *sep, int index, struct fi_rx_attr *attr,
		     struct fid_ep **rx_ep, void *context)
{
	(void)sep; (void)index; (void)attr; (void)rx_ep; (void)context;
	return -FI_ENOSYS;
}

static ssize_t ep_rx_size_left(struct fid_ep *ep_fid)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	ssize_t ret = -FI_ENOSYS;

	fdp_lock(&ep->lock);
	if (ep->hooks && ep->hooks->rx_size_left)
		ret = ep->hooks->rx_size_left(ep);
	fdp_unlock(&ep->lock);
	return ret;
}

static ssize_t ep_tx_size_left(struct fid_ep *ep_fid)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	ssize_t ret = -FI_ENOSYS;

	fdp_lock(&ep->lock);
	if (ep->hooks && ep->hooks->tx_size_left)
		ret = ep->hooks->tx_size_left(ep);
	fdp_unlock(&ep->lock);
	return ret;
}

static const struct fi_ops_ep ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ep_cancel,
	.getopt = ep_getopt,
	.setopt = ep_setopt,
	.tx_ctx = ep_tx_ctx,
	.rx_ctx = ep_rx_ctx,
	.rx_size_left = ep_rx_size_left,
	.tx_size_left = ep_tx_size_left,
};

static int cm_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	size_t n = *addrlen < sizeof(ep->addr) ? *addrlen : sizeof(ep->addr);

	/* fi_getname(ep, NULL, &len) asks for the size */
	if (addr && n)
		memcpy(addr, &ep->addr, n);
	*addrlen = sizeof(ep->addr);
	return n < sizeof(ep->addr) || !addr ? -FI_ETOOSMALL : 0;
}

static int cm_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct fdp_ep *ep = container_of(fid, struct fdp_ep, ep_fid.fid);
	struct sockaddr_in sa_copy;
	const struct sockaddr_in *sa = &sa_copy;
	uint16_t port;
	int ret;

	if (!addr || addrlen < sizeof(sa_copy))
		return -FI_EINVAL;
	memcpy(&sa_copy, addr, sizeof(sa_copy)); /* may be unaligned */
	if (sa->sin_family != AF_INET)
		return -FI_EINVAL;
	if (sa->sin_addr.s_addr != INADDR_ANY &&
	    sa->sin_addr.s_addr != fdp_params.addr.s_addr)
		return -FI_EADDRNOTAVAIL;
	fdp_lock(&ep->lock);
	if (ep->enabled) {
		fdp_unlock(&ep->lock);
		return -FI_EOPBADSTATE;
	}
	port = sa->sin_port;
	if (port == ep->addr.sin_port) {
		fdp_unlock(&ep->lock);
		return 0;
	}
	ret = fdp_port_bind(ep->domain->port, ep, &port);
	if (ret == 0) {
		fdp_port_unbind(ep->domain->port, ep->addr.sin_port);
		ep->addr.sin_port = port;
	}
	fdp_unlock(&ep->lock);
	return ret;
}

static int cm_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
	(void)ep; (void)addr; (void)addrlen;
	return -FI_ENOSYS;
}

static int cm_connect(struct fid_ep *ep, const void *addr, const void *param,
		      size_t paramlen)
{
	(void)ep; (void)addr; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_listen(struct fid_pep *pep)
{
	(void)pep;
	return -FI_ENOSYS;
}

static int cm_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
	(void)ep; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_reject(struct fid_pep *pep, fid_t handle, const void *param,
		     size_t paramlen)
{
	(void)pep; (void)handle; (void)param; (void)paramlen;
	return -FI_ENOSYS;
}

static int cm_shutdown(struct fid_ep *ep, uint64_t flags)
{
	(void)ep; (void)flags;
	return -FI_ENOSYS;
}

static const struct fi_ops_cm ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = cm_setname,
	.getname = cm_getname,
	.getpeer = cm_getpeer,
	.connect = cm_connect,
	.listen = cm_listen,
	.accept = cm_accept,
	.reject = cm_reject,
	.shutdown = cm_shutdown,
	.join = fdp_ep_join,
};

int fdp_ep_open(struct fid_domain *domain_fid, struct fi_info *info,
		struct fid_ep **ep_fid, void *context)
{
	struct fdp_domain *domain = container_of(domain_fid, struct fdp_domain, domain_fid);
	const struct fdp_ep_class *cls;
	enum fi_ep_type type;
	struct fdp_ep *ep;
	uint16_t port = 0;
	int ret;

	if (!info || !info->ep_attr)
		return -FI_EINVAL;
	type = info->ep_attr->type;
	if (type == FI_EP_DGRAM && info->ep_attr->protocol == FI_PROTO_UDP)
		cls = &fdp_udp_class;
	else if (type == FI_EP_DGRAM && info->ep_attr->protocol == FI_PROTO_UNSPEC)
		cls = &fdp_dgram_class;
	else if (type == FI_EP_RDM && &fdp_rdm_class != NULL)
		cls = &fdp_rdm_class;
	else
		return -FI_ENOPROTOOPT;
	if (info->src_addr) {
		const struct sockaddr_in *sa = info->src_addr;

		if (info->src_addrlen < sizeof(*sa) || sa->sin_family != AF_INET)
			return -FI_EINVAL;
		if (sa->sin_addr.s_addr != INADDR_ANY &&
		    sa->sin_addr.s_addr != fdp_params.addr.s_addr)
			return -FI_EADDRNOTAVAIL;
		port = sa->sin_port;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	ret = fdp_port_bind(domain->port, ep, &port);
	if (ret) {
		FDP_WARN(FI_LOG_EP_CTRL, "UDP port %u: %s\n", ntohs(port), fi_strerror(-ret));
		fi_freeinfo(ep->info);
		free(ep);
		return ret;
	}
	ep->domain = domain;
	ep->cls = cls;
	ep->caps = info->caps;
	ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	fdp_lock_init(&ep->lock);
	ep->addr.sin_family = AF_INET;
	ep->addr.sin_addr = fdp_params.addr;
	ep->addr.sin_port = port;
	ep->frame_payload_max = fdp_port_mtu(domain->port) - FDP_IPV4_HLEN - FDP_UDP_HLEN;
	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = (struct fi_ops *)&ep_fid_ops;
	ep->ep_fid.ops = (struct fi_ops_ep *)&ep_ops;
	ep->ep_fid.cm = (struct fi_ops_cm *)&ep_cm_ops;
	ep->ep_fid.msg = (struct fi_ops_msg *)&fdp_enosys_msg;
	ep->ep_fid.tagged = (struct fi_ops_tagged *)&fdp_enosys_tagged;
	ep->ep_fid.rma = (struct fi_ops_rma *)&fdp_enosys_rma;
	ep->ep_fid.atomic = (struct fi_ops_atomic *)&fdp_enosys_atomic;
	ep->ep_fid.collective = (struct fi_ops_collective *)&fdp_enosys_collective;
	ret = cls->open(ep, info);
	if (ret) {
		fdp_port_unbind(domain->port, ep->addr.sin_port);
		fdp_lock_destroy(&ep->lock);
		fi_freeinfo(ep->info);
		free(ep);
		return ret;
	}
	atomic_fetch_add(&domain->ref, 1);
	*ep_fid = &ep->ep_fid;
	return 0;
}
