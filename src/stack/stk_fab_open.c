/* stk_fab's opening of an endpoint: fi_getinfo, the libfabric objects and
 * the registered buffers. */
#include "config.h"
#include "stack/stk_fab_int.h"
#include "stack/stk_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>

#define STK_FAB_RXM_SEG (16384u - 256u) /* below rxm's eager limit, header included */

static void fab_close(struct stk_fab *fab)
{
	if (fab->ep)
		fi_close(&fab->ep->fid);
	if (fab->mr)
		fi_close(&fab->mr->fid);
	if (fab->cq)
		fi_close(&fab->cq->fid);
	if (fab->av)
		fi_close(&fab->av->fid);
	if (fab->domain)
		fi_close(&fab->domain->fid);
	if (fab->fabric)
		fi_close(&fab->fabric->fid);
	if (fab->info)
		stk_fi.freeinfo(fab->info);
	if (fab->slab)
		munmap(fab->slab, fab->slab_len);
	free(fab);
}

/* FI_TRY: after fi_getinfo, a failing call ends the open with one line naming
 * the provider's domain (for dpdk, the device: the likely culprit) and what
 * the connections do instead. */
#define FI_TRY(call, what) \
	do { \
		int fi_try_ret = (call); \
		if (fi_try_ret) { \
			STK_WARN("%s: %s (domain %s): %s; its connections use the next " \
				 "provider of '%s' or the kernel", name, what, \
				 fab->info->domain_attr->name ? fab->info->domain_attr->name : "?", \
				 stk_fi.strerror(-fi_try_ret), stk_cfg.providers); \
			ret = fi_try_ret < 0 ? fi_try_ret : -EIO; \
			goto fail; \
		} \
	} while (0)

/* The hints for provider name (an RDM endpoint: FI_MSG, send-after-send
 * order, manual progress; a per-address provider at src) and fi_getinfo's
 * answer in fab->info. hints is freed. 0 or -errno (logged). */
static int fab_getinfo(struct stk_fab *fab, struct fi_info *hints, const char *name,
		       const struct fab_src *src)
{
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	hints->fabric_attr->prov_name = strdup(name);
	if (src->len) {
		/* An IP-addressed provider listens where the kernel connection's
		 * local side is, never on the provider's default (the host's first
		 * external address) nor the wildcard: an app bound to 127.0.0.1
		 * gets no port elsewhere. A concrete address also keeps rxm's
		 * names stable (rxm identifies peers by the name each side
		 * reports; 0.0.0.0 names make the two directions open separate
		 * connections, which breaks send-after-send ordering). */
		hints->addr_format = src->format;
		hints->src_addr = malloc(src->len);
		if (!hints->src_addr) {
			stk_fi.freeinfo(hints);
			return -ENOMEM;
		}
		memcpy(hints->src_addr, &src->addr, src->len);
		hints->src_addrlen = src->len;
	}
	int ret = stk_fi.getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &fab->info);
	stk_fi.freeinfo(hints);
	if (ret) {
		/* the default list names providers most hosts lack: say so only
		 * at info level, unless the user chose the list */
		if (stk_cfg.providers_chosen)
			STK_WARN("%s: fi_getinfo: %s (provider absent or no RDM endpoint)", name,
				 stk_fi.strerror(-ret));
		else
			STK_INFO("%s: fi_getinfo: %s (provider absent or no RDM endpoint)", name,
				 stk_fi.strerror(-ret));
		fab->info = NULL;
	}
	return ret;
}

/* The libfabric objects of fab->info: fabric, domain, AV, CQ (with its wait
 * fd when the provider has one) and the enabled endpoint. 0 or -errno
 * (logged). */
static int fab_open_ep(struct stk_fab *fab, const char *name)
{
	int ret = 0;
	struct fi_info *info = fab->info;
	FI_TRY(stk_fi.fabric(info->fabric_attr, &fab->fabric, NULL), "fi_fabric");
	FI_TRY(fi_domain(fab->fabric, info, &fab->domain, NULL), "fi_domain");

	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	FI_TRY(fi_av_open(fab->domain, &av_attr, &fab->av, NULL), "fi_av_open");

	struct fi_cq_attr cq_attr = {
		.format = FI_CQ_FORMAT_MSG,
		.size = STK_FAB_RX_BUFS + STK_FAB_TX_BUFS + 64,
		.wait_obj = FI_WAIT_FD,
	};
	if (fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL) == 0) {
		if (fi_control(&fab->cq->fid, FI_GETWAIT, &fab->wait_fd) != 0)
			fab->wait_fd = -1;
		fab->cq_wait_fd = fab->wait_fd;
	} else {
		/* shm: FI_WAIT_FD is -FI_ENOSYS (checked on this machine). */
		fab->cq = NULL;
		cq_attr.wait_obj = FI_WAIT_NONE;
		FI_TRY(fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL), "fi_cq_open");
	}

	/* Gathered injects (stk_fab_inject2) need two iovecs, and no completion:
	 * the transmit side is bound with FI_SELECTIVE_COMPLETION and the
	 * endpoint's default transmit flags keep FI_COMPLETION, so fi_send still
	 * completes (its buffer goes back to the free list) while fi_sendmsg
	 * without FI_COMPLETION does not. Without two iovecs: the old binding. */
	fab->gather = info->tx_attr->iov_limit >= 2 && info->tx_attr->inject_size >= STK_FAB_GATHER_MIN;
	if (fab->gather)
		info->tx_attr->op_flags |= FI_COMPLETION;
	FI_TRY(fi_endpoint(fab->domain, info, &fab->ep, NULL), "fi_endpoint");
	FI_TRY(fi_ep_bind(fab->ep, &fab->av->fid, 0), "fi_ep_bind(av)");
	if (fab->gather) {
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION),
		       "fi_ep_bind(cq, transmit)");
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_RECV), "fi_ep_bind(cq, recv)");
	} else {
		FI_TRY(fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	}
	FI_TRY(fi_enable(fab->ep), "fi_enable");
	return 0;
fail:
	return ret;
}

/* The sizes of messages: segment, inject and stream segment. */
static void fab_sizes(struct stk_fab *fab)
{
	struct fi_info *info = fab->info;
	fab->seg = STK_FAB_SEG_MAX;
	if (info->ep_attr->max_msg_size && info->ep_attr->max_msg_size < fab->seg)
		fab->seg = info->ep_attr->max_msg_size;
	/* ofi_rxm sends messages above its eager size (FI_OFI_RXM_BUFFER_SIZE,
	 * 16 KiB by default) by rendezvous, and their receive completions can come
	 * after those of later eager messages (seen here as sequence gaps): keep
	 * every segment eager. */
	if (strstr(info->fabric_attr->prov_name, "ofi_rxm") && fab->seg > STK_FAB_RXM_SEG)
		fab->seg = STK_FAB_RXM_SEG;
	fab->inject = info->tx_attr->inject_size;
	if (fab->inject > fab->seg)
		fab->inject = fab->seg;
	fab->stream_seg = fab->seg;
	if (info->ep_attr->max_msg_size == SIZE_MAX && fab->inject >= STK_FAB_STREAM_INJECT_MIN)
		fab->stream_seg = fab->inject;
}

/* The registered slab: send buffers on the free list, every receive buffer
 * posted. 0 or -errno (logged). */
static int fab_open_bufs(struct stk_fab *fab, const char *name)
{
	struct fi_info *info = fab->info;
	int ret = 0;
	size_t nbufs = STK_FAB_RX_BUFS + STK_FAB_TX_BUFS;
	fab->slab_len = nbufs * fab->seg;
	fab->slab = mmap(NULL, fab->slab_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fab->slab == MAP_FAILED) {
		fab->slab = NULL;
		ret = -ENOMEM;
		STK_WARN("%s: cannot map %zu bytes of buffers", name, fab->slab_len);
		goto fail;
	}
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		FI_TRY(fi_mr_reg(fab->domain, fab->slab, fab->slab_len,
				 FI_SEND | FI_RECV, 0, 0, 0, &fab->mr, NULL), "fi_mr_reg");
		fab->mr_desc = fi_mr_desc(fab->mr);
	}
	for (size_t i = 0; i < nbufs; i++) {
		struct stk_fab_buf *buf = &fab->bufs[i];
		buf->data = fab->slab + i * fab->seg;
		buf->index = (uint32_t)i;
		buf->is_rx = i < STK_FAB_RX_BUFS;
	}
	for (size_t i = STK_FAB_RX_BUFS; i < nbufs; i++)
		stk_fab_buf_put(fab, &fab->bufs[i]);
	for (size_t i = 0; i < STK_FAB_RX_BUFS; i++) {
		ret = fab_post_rx(fab, &fab->bufs[i]);
		if (ret)
			goto fail;
	}
	return 0;
fail:
	return ret;
}

int fab_open(const char *name, const struct fab_src *src, const char *key, struct stk_fab **out)
{
	int ret = stk_fi_load();
	if (ret)
		return ret;
	struct stk_fab *fab = calloc(1, sizeof(*fab));
	struct fi_info *hints = stk_fi.dupinfo(NULL);
	if (!fab || !hints) {
		free(fab);
		stk_fi.freeinfo(hints);
		return -ENOMEM;
	}
	snprintf(fab->name, sizeof(fab->name), "%s", name);
	fab->wait_fd = -1;
	fab->cq_wait_fd = -1;
	fab->bell_fd = -1;
	pthread_mutex_init(&fab->cq_lock, NULL);
	pthread_mutex_init(&fab->av_lock, NULL);

	ret = fab_getinfo(fab, hints, name, src);
	if (ret)
		goto fail;
	ret = fab_open_ep(fab, name);
	if (ret)
		goto fail;
	fab_sizes(fab);
	ret = fab_open_bufs(fab, name);
	if (ret)
		goto fail;
	struct fi_info *info = fab->info;
	if (strcmp(name, "shm") == 0) {
		fab_shm_note_owner(fab);
		ret = fab_bell_create(fab);
		if (ret)
			goto fail;
	} else if (fab_bell_wanted(name)) {
		/* a shortcut for peers on this host: the endpoint works without it */
		ret = fab_bell_create(fab);
	}
	STK_INFO("%s: RDM endpoint open (provider %s, segment %zu, stream segment %zu, "
		 "inject %zu%s, wait fd %d, order 0x%llx)", key, info->fabric_attr->prov_name,
		 fab->seg, fab->stream_seg, fab->inject, fab->gather ? " gathered" : "",
		 fab->wait_fd, (unsigned long long)info->tx_attr->msg_order);
	*out = fab;
	return 0;
fail:
	fab_close(fab);
	return ret ? ret : -EIO;
}
