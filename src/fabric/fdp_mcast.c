/* fdp_mcast.c - fi_join / FI_MULTICAST on FI_PROTO_UDP endpoints (IPv4).
 *
 * fi_join(ep, &sockaddr_in{group, port}, flags, &mc, context) makes the
 * endpoint a member of the group for datagrams sent to group:port (port 0:
 * the endpoint's own UDP port), so several endpoints of a process, each on
 * its own UDP port, may receive one group; the port's MAC filter and IGMP
 * are fdp_port_mc.c's. The join completes at once: FI_JOIN_COMPLETE is
 * written to the endpoint's EQ before fi_join returns. fi_mc_addr(mc) is an
 * AV entry for group:port, for fi_send to the group. fi_close(mc) leaves;
 * closing the endpoint leaves what it still belongs to (the fid_mc then
 * only awaits its fi_close). flags FI_SEND alone: send only, no membership. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"
#include "fabric/fdp_port.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

struct fdp_mc {
	struct fid_mc mc_fid;           /* first */
	struct fdp_ep *ep;              /* NULL once the endpoint closed */
	uint32_t group;                 /* network order */
	uint16_t udp_port;              /* network order */
	bool member;                    /* joined for receiving */
	struct fdp_mc *next;            /* ep->mcs, protected by ep->lock */
};

/* No lock held. Leave the group and forget the group's fi_addr. */
static void mc_leave(struct fdp_mc *mc, struct fdp_ep *ep)
{
	if (mc->member)
		fdp_port_mc_leave(ep->domain->port, ep, mc->group, mc->udp_port);
	mc->member = false;
	if (ep->av)
		fdp_av_remove_one(ep->av, mc->mc_fid.fi_addr);
}

static int mc_close(struct fid *fid)
{
	struct fdp_mc *mc = container_of(fid, struct fdp_mc, mc_fid.fid);
	struct fdp_ep *ep = mc->ep;
	struct fdp_mc **pp;

	if (ep) {
		fdp_lock(&ep->lock);
		for (pp = &ep->mcs; *pp && *pp != mc; pp = &(*pp)->next)
			;
		if (*pp)
			*pp = mc->next;
		fdp_unlock(&ep->lock);
		mc_leave(mc, ep);
	}
	free(mc);
	return 0;
}

static int mc_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}

static const struct fi_ops mc_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = mc_close,
	.bind = fdp_enosys_bind,
	.control = mc_control,
	.ops_open = fdp_enosys_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

void fdp_ep_leave_all(struct fdp_ep *ep)
{
	struct fdp_mc *mc;

	for (;;) {
		fdp_lock(&ep->lock);
		mc = ep->mcs;
		if (mc) {
			ep->mcs = mc->next;
			mc->ep = NULL;
		}
		fdp_unlock(&ep->lock);
		if (!mc)
			return;
		mc_leave(mc, ep);
	}
}

static int join_check(struct fdp_ep *ep, const void *addr, uint64_t flags,
		      struct sockaddr_in *group)
{
	if (ep->cls != &fdp_udp_class || !(ep->caps & FI_MULTICAST))
		return -FI_EOPNOTSUPP;
	if (!addr || !group || (flags & FI_COLLECTIVE))
		return -FI_EINVAL;
	memcpy(group, addr, sizeof(*group)); /* may be unaligned */
	if (group->sin_family != AF_INET || !fdp_ip_is_multicast(group->sin_addr.s_addr))
		return -FI_EINVAL;
	if (!ep->av)
		return -FI_ENOAV;
	if (!ep->eq)
		return -FI_ENOEQ;
	return 0;
}

int fdp_ep_join(struct fid_ep *ep_fid, const void *addr, uint64_t flags,
		struct fid_mc **mc_fid, void *context)
{
	struct fdp_ep *ep = container_of(ep_fid, struct fdp_ep, ep_fid);
	struct sockaddr_in group;
	struct fdp_mc *mc;
	int ret;

	ret = join_check(ep, addr, flags, &group);
	if (ret || !mc_fid)
		return ret ? ret : -FI_EINVAL;
	if (group.sin_port == 0)
		group.sin_port = ep->addr.sin_port;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -FI_ENOMEM;
	mc->group = group.sin_addr.s_addr;
	mc->udp_port = group.sin_port;
	ret = fdp_av_insert_one(ep->av, &group, &mc->mc_fid.fi_addr);
	if (ret) {
		free(mc);
		return ret;
	}
	if (!(flags & FI_SEND) || (flags & FI_RECV)) {
		ret = fdp_port_mc_join(ep->domain->port, ep, mc->group, mc->udp_port);
		if (ret) {
			fdp_av_remove_one(ep->av, mc->mc_fid.fi_addr);
			free(mc);
			return ret;
		}
		mc->member = true;
	}
	mc->ep = ep;
	mc->mc_fid.fid.fclass = FI_CLASS_MC;
	mc->mc_fid.fid.context = context;
	mc->mc_fid.fid.ops = (struct fi_ops *)&mc_fid_ops;
	fdp_lock(&ep->lock);
	mc->next = ep->mcs;
	ep->mcs = mc;
	fdp_unlock(&ep->lock);
	*mc_fid = &mc->mc_fid;
	fdp_eq_join_complete(ep->eq, &mc->mc_fid.fid, context);
	return 0;
}
