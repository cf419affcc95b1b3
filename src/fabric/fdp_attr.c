/* fdp_attr.c - fi_getinfo: one fi_info per endpoint class (DGRAM, and the
 * native RDM class when fdp_rdm.c is linked in), filtered by the hints, with
 * concrete addresses: the source is always FI_DPDK_IP (port 0 = ephemeral
 * unless node/service or hints say otherwise), so fi_getinfo(NULL, NULL, 0,
 * hints) yields an endpoint address another process can be given.
 * Never starts the EAL: every libfabric program may call this. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"
#include "fabric/fdp_proto.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#define SECONDARY_CAPS (FI_SOURCE | FI_SOURCE_ERR | FI_LOCAL_COMM | FI_REMOTE_COMM | \
			FI_MULTI_RECV | FI_RMA_EVENT | FI_SHARED_AV | FI_TRIGGER | \
			FI_FENCE | FI_VARIABLE_MSG)

/* Which capabilities belong in tx_attr->caps and rx_attr->caps
 * (fi_endpoint(3) "CAPABILITIES" of the transmit and receive contexts;
 * fabtests' getinfo_test checks the same split). Domain-wide ones
 * (FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV) stay in info->caps and
 * domain_attr->caps only. */
#define TX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | \
		 FI_NAMED_RX_CTX | FI_HMEM | FI_COLLECTIVE | FI_SEND | FI_READ | \
		 FI_WRITE | FI_TRIGGER | FI_FENCE | FI_RMA_PMEM)
#define RX_CAPS (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV | \
		 FI_VARIABLE_MSG | FI_HMEM | FI_COLLECTIVE | FI_RECV | \
		 FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_PMEM | FI_SOURCE | \
		 FI_SOURCE_ERR | FI_RMA_EVENT | FI_MULTI_RECV | FI_TRIGGER)
/* Domain capabilities we have: every peer is reached the same way, on this
 * host or another. No FI_SHARED_AV: named AVs are not implemented. */
#define DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)

static int resolve(const char *node, const char *service, struct sockaddr_in *out)
{
	struct addrinfo hints, *res = NULL;
	unsigned long port = 0;
	char *end;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (service) {
		port = strtoul(service, &end, 10);
		if (*service == '\0' || *end || port > 65535)
			return -FI_ENODATA;
		out->sin_port = htons((uint16_t)port);
	}
	if (!node)
		return 0;
	if (inet_pton(AF_INET, node, &out->sin_addr) == 1)
		return 0;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	if (getaddrinfo(node, NULL, &hints, &res) != 0 || !res)
		return -FI_ENODATA;
	out->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
	freeaddrinfo(res);
	return 0;
}

static bool is_ours(const struct sockaddr_in *sa)
{
	return sa->sin_addr.s_addr == INADDR_ANY ||
	       sa->sin_addr.s_addr == fdp_params.addr.s_addr;
}

static size_t class_max_msg(const struct fdp_ep_class *cls)
{
	size_t frame = fdp_params.mtu - FDP_IPV4_HLEN - FDP_UDP_HLEN;

	if (cls->max_msg_size)
		return cls->max_msg_size;
	return frame - cls->wire_hdr_len;
}

static void device_name(char *out, size_t cap)
{
	size_t n = strcspn(fdp_params.device, ",");

	if (n >= cap)
		n = cap - 1;
	memcpy(out, fdp_params.device, n);
	out[n] = '\0';
}

static bool class_matches(const struct fdp_ep_class *cls, const struct fi_info *hints)
{
	char dom[64];

	if (!hints)
		return true;
	if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC &&
	    hints->ep_attr->type != cls->type)
		return false;
	if (hints->caps & ~(cls->caps | SECONDARY_CAPS))
		return false;
	if ((hints->caps & SECONDARY_CAPS & ~(FI_LOCAL_COMM | FI_REMOTE_COMM)) & ~cls->caps)
		return false;
	if (cls->mode & ~hints->mode)
		return false;
	if (hints->ep_attr && hints->ep_attr->protocol != FI_PROTO_UNSPEC &&
	    hints->ep_attr->protocol != cls->protocol)
		return false;
	if (hints->ep_attr && hints->ep_attr->mem_tag_format && !cls->mem_tag_format_bits)
		return false;
	if (hints->tx_attr && (hints->tx_attr->msg_order & ~cls->msg_order))
		return false;
	if (hints->rx_attr && (hints->rx_attr->msg_order & ~cls->msg_order))
		return false;
	if (hints->domain_attr) {
		const struct fi_domain_attr *d = hints->domain_attr;

		if (d->name) {
			device_name(dom, sizeof(dom));
			if (strcmp(d->name, dom) != 0)
				return false;
		}
		if (d->data_progress == FI_PROGRESS_AUTO ||
		    d->control_progress == FI_PROGRESS_AUTO)
			return false;
		if (d->cq_data_size > (cls->protocol == FI_PROTO_UDP ? 0 : 8))
			return false;
		if (d->caps & ~DOMAIN_CAPS)
			return false;
	}
	if (hints->fabric_attr && hints->fabric_attr->name &&
	    strcmp(hints->fabric_attr->name, FDP_PROV_NAME) != 0)
		return false;
	return true;
}

static int class_info_addrs(struct fi_info *fi, const struct sockaddr_in *src,
			    const struct sockaddr_in *dest)
{
	fi->src_addr = calloc(1, sizeof(*src));
	if (!fi->src_addr)
		return -FI_ENOMEM;
	memcpy(fi->src_addr, src, sizeof(*src));
	fi->src_addrlen = sizeof(*src);
	if (dest) {
		fi->dest_addr = calloc(1, sizeof(*dest));
		if (!fi->dest_addr)
			return -FI_ENOMEM;
		memcpy(fi->dest_addr, dest, sizeof(*dest));
		fi->dest_addrlen = sizeof(*dest);
	}
	return 0;
}

static void class_info_tx_rx(struct fi_info *fi, const struct fdp_ep_class *cls,
			     uint64_t caps, size_t max_msg)
{
	fi->tx_attr->caps = caps & TX_CAPS;
	fi->tx_attr->mode = cls->mode;
	fi->tx_attr->op_flags = 0;
	fi->tx_attr->msg_order = cls->msg_order;
	fi->tx_attr->comp_order = cls->comp_order;
	fi->tx_attr->inject_size = cls->inject_size ? cls->inject_size : max_msg;
	fi->tx_attr->size = cls->tx_size;
	fi->tx_attr->iov_limit = cls->iov_limit;
	fi->tx_attr->rma_iov_limit = 0;

	fi->rx_attr->caps = caps & RX_CAPS;
	fi->rx_attr->mode = cls->mode;
	fi->rx_attr->op_flags = 0;
	fi->rx_attr->msg_order = cls->msg_order;
	fi->rx_attr->comp_order = cls->comp_order;
	fi->rx_attr->total_buffered_recv = 0;
	fi->rx_attr->size = cls->rx_size;
	fi->rx_attr->iov_limit = cls->iov_limit;
}

static void class_info_ep(struct fi_info *fi, const struct fdp_ep_class *cls, size_t max_msg)
{
	fi->ep_attr->type = cls->type;
	fi->ep_attr->protocol = cls->protocol;
	fi->ep_attr->protocol_version = cls->protocol_version;
	fi->ep_attr->max_msg_size = max_msg;
	fi->ep_attr->msg_prefix_size = 0;
	fi->ep_attr->max_order_raw_size = 0;
	fi->ep_attr->max_order_war_size = 0;
	fi->ep_attr->max_order_waw_size = 0;
	fi->ep_attr->mem_tag_format = cls->mem_tag_format_bits ?
		(cls->mem_tag_format_bits >= 64 ? ~0ull :
		 (1ull << cls->mem_tag_format_bits) - 1) : 0;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;
}

static void class_info_domain(struct fi_info *fi, const struct fi_info *hints)
{
	fi->domain_attr->threading = hints && hints->domain_attr &&
		hints->domain_attr->threading != FI_THREAD_UNSPEC ?
		hints->domain_attr->threading : FI_THREAD_SAFE;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = hints && hints->domain_attr &&
		hints->domain_attr->resource_mgmt != FI_RM_UNSPEC ?
		hints->domain_attr->resource_mgmt : FI_RM_ENABLED;
	fi->domain_attr->av_type = hints && hints->domain_attr &&
		hints->domain_attr->av_type != FI_AV_UNSPEC ?
		hints->domain_attr->av_type : FI_AV_UNSPEC;
	fi->domain_attr->mr_mode = 0;
	fi->domain_attr->mr_key_size = sizeof(uint64_t);
	fi->domain_attr->cq_data_size = sizeof(uint64_t);
	fi->domain_attr->cq_cnt = 1024;
	fi->domain_attr->ep_cnt = 1024;
	fi->domain_attr->tx_ctx_cnt = 1024;
	fi->domain_attr->rx_ctx_cnt = 1024;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->max_ep_stx_ctx = 0;
	fi->domain_attr->max_ep_srx_ctx = 0;
	fi->domain_attr->cntr_cnt = 1024;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->caps = DOMAIN_CAPS;
	fi->domain_attr->mode = 0;
	fi->domain_attr->mr_cnt = 65536;
}

static struct fi_info *class_info(const struct fdp_ep_class *cls,
				  const struct fi_info *hints,
				  const struct sockaddr_in *src,
				  const struct sockaddr_in *dest)
{
	struct fi_info *fi = fi_allocinfo();
	size_t max_msg = class_max_msg(cls);
	uint64_t caps = cls->caps;
	char dom[64];

	if (!fi)
		return NULL;
	if (hints && hints->caps)
		caps = (hints->caps & cls->caps) | (cls->caps & SECONDARY_CAPS);
	if (caps & (FI_MSG | FI_TAGGED) && !(caps & (FI_SEND | FI_RECV)))
		caps |= FI_SEND | FI_RECV;
	/* FI_SOURCE_ERR changes what an unknown source's message completes
	 * with: only when asked for */
	if (!(hints && (hints->caps & FI_SOURCE_ERR)))
		caps &= ~FI_SOURCE_ERR;
	fi->caps = caps;
	fi->mode = cls->mode;
	fi->addr_format = FI_SOCKADDR_IN;
	if (class_info_addrs(fi, src, dest))
		goto fail;
	class_info_tx_rx(fi, cls, caps, max_msg);
	class_info_ep(fi, cls, max_msg);
	device_name(dom, sizeof(dom));
	fi->domain_attr->name = strdup(dom);
	class_info_domain(fi, hints);
	if (cls->protocol == FI_PROTO_UDP)
		fi->domain_attr->cq_data_size = 0; /* raw UDP: no room on the wire */
	fi->fabric_attr->name = strdup(FDP_PROV_NAME);
	fi->fabric_attr->prov_version = FDP_PROV_VERSION;
	fi->fabric_attr->api_version = FDP_FI_VERSION;
	if (!fi->domain_attr->name || !fi->fabric_attr->name)
		goto fail;
	return fi;
fail:
	fi_freeinfo(fi);
	return NULL;
}

/* libfabric's internal getinfo flag (ofi_util.h, (1ULL << 59) since 1.9):
 * the caller wants core providers only, to layer a utility provider. */
#define FDP_OFI_CORE_PROV_ONLY (1ULL << 59)

int fdp_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	const struct fdp_ep_class *classes[3];
	struct sockaddr_in src, dest, tmp;
	struct fi_info *head = NULL, *tail = NULL, *fi;
	bool have_dest = false;
	size_t n = 0, i;
	int ret;

	(void)version;
	*info = NULL;
	if (fdp_eal_foreign()) {
		FDP_INFO(FI_LOG_CORE, "a forked child cannot use its parent's DPDK port\n");
		return -FI_ENODATA;
	}
	fdp_pool_port(); /* a failure is the domain's name (pool_error) */
	if (!fdp_params.device || (!fdp_params.ip_ok && !fdp_params.pool_error)) {
		FDP_INFO(FI_LOG_CORE, "FI_DPDK_DEVICE and FI_DPDK_IP must be set\n");
		return -FI_ENODATA;
	}
	if (hints && hints->addr_format != FI_FORMAT_UNSPEC &&
	    hints->addr_format != FI_SOCKADDR_IN && hints->addr_format != FI_SOCKADDR)
		return -FI_ENODATA;

	memset(&src, 0, sizeof(src));
	src.sin_family = AF_INET;
	src.sin_addr = fdp_params.addr;

	if (hints && hints->src_addr) {
		const struct sockaddr_in *sa = hints->src_addr;

		if (hints->src_addrlen < sizeof(*sa) || sa->sin_family != AF_INET || !is_ours(sa))
			return -FI_ENODATA;
		src.sin_port = sa->sin_port;
	}
	if (hints && hints->dest_addr) {
		const struct sockaddr_in *sa = hints->dest_addr;

		if (hints->dest_addrlen < sizeof(*sa) || sa->sin_family != AF_INET)
			return -FI_ENODATA;
		dest = *sa;
		have_dest = true;
	}
	if (node || service) {
		ret = resolve(node, service, &tmp);
		if (ret)
			return ret;
		if ((flags & FI_SOURCE) || !node) {
			if (!is_ours(&tmp))
				return -FI_ENODATA;
			src.sin_port = tmp.sin_port;
		} else {
			dest = tmp;
			have_dest = true;
		}
	}

	/* A utility provider building a layering (ofi_rxd: RDM over a core's
	 * DGRAM) calls with OFI_CORE_PROV_ONLY. libfabric 1.17 lists the
	 * layered "dpdk;ofi_rxd" before our native RDM info (built-in providers
	 * come before external ones), so `-p dpdk -e rdm` would pick rxd: with
	 * the native RDM endpoint built, DGRAM is offered to layering only
	 * when FI_DPDK_RXD=1. Applications asking for DGRAM themselves are
	 * not affected. */
	if (!(flags & FDP_OFI_CORE_PROV_ONLY) || &fdp_rdm_class == NULL || fdp_params.rxd)
		classes[n++] = &fdp_dgram_class;
	/* raw UDP (FI_PROTO_UDP) after the provider's own DGRAM protocol, so
	 * a program that asks for DGRAM without a protocol gets that; never
	 * offered for layering */
	if (!(flags & FDP_OFI_CORE_PROV_ONLY))
		classes[n++] = &fdp_udp_class;
	if (&fdp_rdm_class != NULL)
		classes[n++] = &fdp_rdm_class;
	for (i = 0; i < n; i++) {
		if (!class_matches(classes[i], hints))
			continue;
		fi = class_info(classes[i], hints, &src, have_dest ? &dest : NULL);
		if (!fi) {
			fi_freeinfo(head);
			return -FI_ENOMEM;
		}
		if (tail)
			tail->next = fi;
		else
			head = fi;
		tail = fi;
	}
	if (!head)
		return -FI_ENODATA;
	*info = head;
	return 0;
}
