/* Check tests of the provider's objects and DGRAM endpoint in one process,
 * over a net_ring0 device (its TX ring is its RX ring: a loopback port).
 * Each test runs in its own forked process (Check's default), so each gets
 * a fresh EAL and reads the FI_DPDK_* parameters it sets. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define IP "198.18.5.1"

struct env {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq[2];
	struct fid_cntr *cntr[2];
	struct fid_ep *ep[2];
	struct sockaddr_in addr[2];
	fi_addr_t fa[2];
};

static void set_env(const char *device, const char *ip)
{
	char path[4096];
	const char *top = getenv("top_builddir");

	snprintf(path, sizeof(path), "%s/src/fabric/.libs", top ? top : ".");
	setenv("FI_PROVIDER_PATH", path, 1);
	setenv("FI_PROVIDER", "dpdk", 1);
	unsetenv("FI_DPDK_EAL_ARGS");
	if (device)
		setenv("FI_DPDK_DEVICE", device, 1);
	else
		unsetenv("FI_DPDK_DEVICE");
	if (ip)
		setenv("FI_DPDK_IP", ip, 1);
	else
		unsetenv("FI_DPDK_IP");
}

static struct fi_info *hints_dgram(void)
{
	struct fi_info *h = fi_allocinfo();

	ck_assert_ptr_nonnull(h);
	h->ep_attr->type = FI_EP_DGRAM;
	h->caps = FI_MSG | FI_SOURCE;
	h->fabric_attr->prov_name = strdup("dpdk");
	return h;
}

static void env_open_dev(struct env *e, const char *device, enum fi_wait_obj wait,
			 bool cntrs)
{
	struct fi_info *h;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = wait};
	struct fi_cntr_attr cntr_attr = {.events = FI_CNTR_EVENTS_COMP,
					 .wait_obj = FI_WAIT_UNSPEC};
	size_t len;
	int i;

	memset(e, 0, sizeof(*e));
	set_env(device, IP "/24");
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &e->info), 0);
	fi_freeinfo(h);
	ck_assert_int_eq(fi_fabric(e->info->fabric_attr, &e->fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(e->fabric, e->info, &e->domain, NULL), 0);
	ck_assert_int_eq(fi_av_open(e->domain, &av_attr, &e->av, NULL), 0);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(fi_cq_open(e->domain, &cq_attr, &e->cq[i], NULL), 0);
		ck_assert_int_eq(fi_endpoint(e->domain, e->info, &e->ep[i], NULL), 0);
		ck_assert_int_eq(fi_ep_bind(e->ep[i], &e->av->fid, 0), 0);
		ck_assert_int_eq(fi_ep_bind(e->ep[i], &e->cq[i]->fid, FI_TRANSMIT | FI_RECV), 0);
		if (cntrs) {
			ck_assert_int_eq(fi_cntr_open(e->domain, &cntr_attr, &e->cntr[i], NULL), 0);
			ck_assert_int_eq(fi_ep_bind(e->ep[i], &e->cntr[i]->fid, FI_SEND | FI_RECV), 0);
		}
		ck_assert_int_eq(fi_enable(e->ep[i]), 0);
		len = sizeof(e->addr[i]);
		ck_assert_int_eq(fi_getname(&e->ep[i]->fid, &e->addr[i], &len), 0);
		ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
		ck_assert_int_eq(fi_av_insert(e->av, &e->addr[i], 1, &e->fa[i], 0, NULL), 1);
	}
	ck_assert_uint_ne(e->addr[0].sin_port, e->addr[1].sin_port);
}

static void env_open(struct env *e, enum fi_wait_obj wait, bool cntrs)
{
	env_open_dev(e, "net_ring0", wait, cntrs);
}

static void env_close(struct env *e)
{
	int i;

	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(fi_close(&e->ep[i]->fid), 0);
		ck_assert_int_eq(fi_close(&e->cq[i]->fid), 0);
		if (e->cntr[i])
			ck_assert_int_eq(fi_close(&e->cntr[i]->fid), 0);
	}
	ck_assert_int_eq(fi_close(&e->av->fid), 0);
	ck_assert_int_eq(fi_close(&e->domain->fid), 0);
	ck_assert_int_eq(fi_close(&e->fabric->fid), 0);
	fi_freeinfo(e->info);
}

/* Read one completion, driving progress, for at most 5 s. */
static ssize_t read_one(struct fid_cq *cq, struct fi_cq_tagged_entry *ent, fi_addr_t *src)
{
	time_t end = time(NULL) + 5;
	ssize_t ret;

	do {
		ret = fi_cq_readfrom(cq, ent, 1, src);
		if (ret != -FI_EAGAIN)
			return ret;
	} while (time(NULL) < end);
	return -FI_EAGAIN;
}

static void send_retry(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
		       fi_addr_t dest, void *ctx)
{
	time_t end = time(NULL) + 5;
	ssize_t ret;

	do {
		ret = fi_senddata(ep, buf, len, NULL, data, dest, ctx);
	} while (ret == -FI_EAGAIN && time(NULL) < end);
	ck_assert_int_eq(ret, 0);
}

START_TEST(test_getinfo_addresses)
{
	struct fi_info *h, *info;
	struct sockaddr_in *sa;

	set_env("net_ring0", IP "/24");
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	ck_assert_int_eq(info->addr_format, FI_SOCKADDR_IN);
	sa = info->src_addr;
	ck_assert_ptr_nonnull(sa);
	ck_assert_str_eq(inet_ntoa(sa->sin_addr), IP);
	ck_assert_uint_eq(info->ep_attr->max_msg_size, 1500 - 20 - 8 - 16);
	ck_assert_str_eq(info->domain_attr->name, "net_ring0");
	fi_freeinfo(info);

	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), IP, "7000", FI_SOURCE, h, &info), 0);
	sa = info->src_addr;
	ck_assert_uint_eq(ntohs(sa->sin_port), 7000);
	fi_freeinfo(info);

	/* a destination: the source stays ours */
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), "198.18.5.9", "7001", 0, h, &info), 0);
	sa = info->dest_addr;
	ck_assert_ptr_nonnull(sa);
	ck_assert_uint_eq(ntohs(sa->sin_port), 7001);
	ck_assert_str_eq(inet_ntoa(((struct sockaddr_in *)info->src_addr)->sin_addr), IP);
	fi_freeinfo(info);

	/* an address this port does not have */
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), "10.1.2.3", "7000", FI_SOURCE, h, &info),
			 -FI_ENODATA);
	fi_freeinfo(h);
}
END_TEST

START_TEST(test_getinfo_unconfigured)
{
	struct fi_info *h, *info = NULL;

	set_env(NULL, NULL);
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);
}
END_TEST

START_TEST(test_send_recv_data)
{
	struct env e;
	struct fi_cq_tagged_entry ent;
	char out[100], in[100], a[40], b[60];
	struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
	fi_addr_t src = 0;
	int i, ctx_r, ctx_s;

	env_open(&e, FI_WAIT_NONE, true);
	for (i = 0; i < (int)sizeof(out); i++)
		out[i] = (char)(i * 3 + 1);
	ck_assert_int_eq(fi_recv(e.ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, &ctx_r), 0);
	send_retry(e.ep[0], out, sizeof(out), 0xabcdef0123ull, e.fa[1], &ctx_s);

	ck_assert_int_eq(read_one(e.cq[0], &ent, NULL), 1);
	ck_assert_ptr_eq(ent.op_context, &ctx_s);
	ck_assert(ent.flags & FI_SEND);
	ck_assert_int_eq(read_one(e.cq[1], &ent, &src), 1);
	ck_assert_ptr_eq(ent.op_context, &ctx_r);
	ck_assert_uint_eq(ent.len, sizeof(out));
	ck_assert_uint_eq(ent.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	ck_assert_uint_eq(ent.data, 0xabcdef0123ull);
	ck_assert_ptr_eq(ent.buf, in);
	ck_assert_uint_eq(src, e.fa[0]);
	ck_assert_mem_eq(in, out, sizeof(out));
	ck_assert_uint_eq(fi_cntr_read(e.cntr[0]), 1);
	ck_assert_uint_eq(fi_cntr_read(e.cntr[1]), 1);

	/* scatter into two buffers */
	ck_assert_int_eq(fi_recvv(e.ep[1], iov, NULL, 2, FI_ADDR_UNSPEC, &ctx_r), 0);
	ck_assert_int_eq(fi_inject(e.ep[0], out, sizeof(out), e.fa[1]), 0);
	ck_assert_int_eq(read_one(e.cq[1], &ent, NULL), 1);
	ck_assert_uint_eq(ent.len, sizeof(out));
	ck_assert_mem_eq(a, out, sizeof(a));
	ck_assert_mem_eq(b, out + sizeof(a), sizeof(b));
	/* inject: no send completion */
	ck_assert_int_eq(fi_cq_read(e.cq[0], &ent, 1), -FI_EAGAIN);
	env_close(&e);
}
END_TEST

/* FI_PROTO_UDP over net_ring0: listed after the provider's own DGRAM, with
 * no CQ data and FI_SOURCE_ERR only when asked for; a provider frame that
 * reaches a raw UDP endpoint is just bytes, a raw datagram reaching the
 * provider's own DGRAM endpoint is dropped; fi_join's argument checks (the
 * multicast itself: fabric_udp.sh). */
static struct fid_ep *raw_udp_ep(struct fid_domain *domain, struct fi_info *info,
				 struct fid_av *av, struct fid_cq **cq, fi_addr_t *fa)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct sockaddr_in addr;
	struct fid_ep *ep;
	size_t len = sizeof(addr);

	ck_assert_int_eq(fi_cq_open(domain, &cq_attr, cq, NULL), 0);
	ck_assert_int_eq(fi_endpoint(domain, info, &ep, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(ep, &av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV), 0);
	ck_assert_int_eq(fi_enable(ep), 0);
	ck_assert_int_eq(fi_getname(&ep->fid, &addr, &len), 0);
	ck_assert_int_eq(fi_av_insert(av, &addr, 1, fa, 0, NULL), 1);
	return ep;
}

START_TEST(test_raw_udp)
{
	struct fi_info *h, *own, *udp, *none = NULL;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fid_cq *cq[2];
	struct fid_ep *ep[2];
	struct fid_mc *mc = NULL;
	struct fi_cq_tagged_entry ent;
	struct sockaddr_in group = {.sin_family = AF_INET, .sin_port = htons(5000)};
	fi_addr_t fa[2], src = FI_ADDR_NOTAVAIL;
	char in[64];
	int i;

	set_env("net_ring0", IP "/24");
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &own), 0);
	ck_assert_int_eq(own->ep_attr->protocol, FI_PROTO_UNSPEC);
	ck_assert_ptr_nonnull(own->next);
	ck_assert_int_eq(own->next->ep_attr->protocol, FI_PROTO_UDP);
	ck_assert_uint_eq(own->next->ep_attr->max_msg_size, own->ep_attr->max_msg_size + 16);
	ck_assert_uint_eq(own->next->domain_attr->cq_data_size, 0);
	ck_assert(!(own->next->caps & FI_SOURCE_ERR));
	h->ep_attr->protocol = FI_PROTO_UDP;
	h->caps = FI_MSG | FI_SOURCE | FI_MULTICAST;
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &udp), 0);
	ck_assert_ptr_null(udp->next);
	ck_assert_int_eq(udp->ep_attr->protocol, FI_PROTO_UDP);
	ck_assert(udp->caps & FI_MULTICAST);
	h->domain_attr->cq_data_size = 8;
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &none), -FI_ENODATA);
	ck_assert_ptr_null(none);
	fi_freeinfo(h);

	ck_assert_int_eq(fi_fabric(udp->fabric_attr, &fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(fabric, udp, &domain, NULL), 0);
	ck_assert_int_eq(fi_av_open(domain, &av_attr, &av, NULL), 0);
	ep[0] = raw_udp_ep(domain, own, av, &cq[0], &fa[0]);  /* provider's protocol */
	ep[1] = raw_udp_ep(domain, udp, av, &cq[1], &fa[1]);  /* raw UDP */

	/* provider frame -> raw endpoint: the header arrives as data */
	ck_assert_int_eq(fi_recv(ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
	send_retry(ep[0], "hello", 5, 7, fa[1], NULL);
	ck_assert_int_eq(read_one(cq[1], &ent, &src), 1);
	ck_assert_uint_eq(ent.len, 16 + 5);
	ck_assert_uint_eq((uint8_t)in[0], 0xfd);
	ck_assert_mem_eq(in + 16, "hello", 5);
	ck_assert_uint_eq(src, fa[0]);
	ck_assert_int_eq(read_one(cq[0], &ent, NULL), 1);
	ck_assert(ent.flags & FI_SEND);
	/* a source not in the AV, FI_SOURCE_ERR not asked for: FI_ADDR_NOTAVAIL */
	ck_assert_int_eq(fi_av_remove(av, &fa[0], 1, 0), 0);
	ck_assert_int_eq(fi_recv(ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
	send_retry(ep[0], "again", 5, 7, fa[1], NULL);
	ck_assert_int_eq(read_one(cq[1], &ent, &src), 1);
	ck_assert_uint_eq(ent.len, 16 + 5);
	ck_assert_uint_eq(src, FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(read_one(cq[0], &ent, NULL), 1);
	{
		struct sockaddr_in a0;
		size_t len = sizeof(a0);

		ck_assert_int_eq(fi_getname(&ep[0]->fid, &a0, &len), 0);
		ck_assert_int_eq(fi_av_insert(av, &a0, 1, &fa[0], 0, NULL), 1);
	}
	/* raw endpoint -> itself: exactly the bytes */
	ck_assert_int_eq(fi_recv(ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
	ck_assert_int_eq(fi_inject(ep[1], "raw", 3, fa[1]), 0);
	ck_assert_int_eq(read_one(cq[1], &ent, &src), 1);
	ck_assert_uint_eq(ent.len, 3);
	ck_assert_mem_eq(in, "raw", 3);
	ck_assert_uint_eq(src, fa[1]);
	/* raw datagram -> the provider's protocol: dropped */
	ck_assert_int_eq(fi_recv(ep[0], in, sizeof(in), NULL, FI_ADDR_UNSPEC, in), 0);
	ck_assert_int_eq(fi_inject(ep[1], "raw", 3, fa[0]), 0);
	for (i = 0; i < 20000; i++)
		ck_assert_int_eq(fi_cq_read(cq[0], &ent, 1), -FI_EAGAIN);
	ck_assert_int_eq(fi_cancel(&ep[0]->fid, in), 0);
	/* no room for CQ data; fi_join's checks */
	ck_assert_int_eq(fi_injectdata(ep[1], "x", 1, 1, fa[0]), -FI_EINVAL);
	ck_assert_int_eq(fi_join(ep[0], &group, 0, &mc, NULL), -FI_EOPNOTSUPP);
	ck_assert_int_eq(fi_join(ep[1], &group, 0, &mc, NULL), -FI_EINVAL); /* 0.0.0.0 */
	group.sin_addr.s_addr = htonl(0xef010203);
	ck_assert_int_eq(fi_join(ep[1], &group, 0, &mc, NULL), -FI_ENOEQ);
	ck_assert_ptr_null(mc);

	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(fi_close(&ep[i]->fid), 0);
		ck_assert_int_eq(fi_close(&cq[i]->fid), 0);
	}
	ck_assert_int_eq(fi_close(&av->fid), 0);
	ck_assert_int_eq(fi_close(&domain->fid), 0);
	ck_assert_int_eq(fi_close(&fabric->fid), 0);
	fi_freeinfo(own);
	fi_freeinfo(udp);
}
END_TEST

START_TEST(test_truncation_and_cancel)
{
	struct env e;
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	char out[100], in[10];
	int ctx_r, ctx_c;

	env_open(&e, FI_WAIT_NONE, false);
	memset(out, 7, sizeof(out));
	ck_assert_int_eq(fi_recv(e.ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, &ctx_r), 0);
	ck_assert_int_eq(fi_inject(e.ep[0], out, sizeof(out), e.fa[1]), 0);
	ck_assert_int_eq(read_one(e.cq[1], &ent, NULL), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(fi_cq_readerr(e.cq[1], &err, 0), 1);
	ck_assert_int_eq(err.err, FI_ETRUNC);
	ck_assert_uint_eq(err.olen, sizeof(out) - sizeof(in));
	ck_assert_ptr_eq(err.op_context, &ctx_r);

	ck_assert_int_eq(fi_recv(e.ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, &ctx_c), 0);
	ck_assert_int_eq(fi_cancel(&e.ep[1]->fid, &ctx_c), 0);
	ck_assert_int_eq(fi_cancel(&e.ep[1]->fid, &ctx_c), -FI_ENOENT);
	ck_assert_int_eq(fi_cq_read(e.cq[1], &ent, 1), -FI_EAVAIL);
	ck_assert_int_eq(fi_cq_readerr(e.cq[1], &err, 0), 1);
	ck_assert_int_eq(err.err, FI_ECANCELED);
	ck_assert_ptr_eq(err.op_context, &ctx_c);

	/* larger than one frame */
	{
		static char big[2000];

		ck_assert_int_eq(fi_send(e.ep[0], big, sizeof(big), NULL, e.fa[1], NULL),
				 -FI_EMSGSIZE);
	}
	env_close(&e);
}
END_TEST

START_TEST(test_wait_fd)
{
	struct env e;
	struct fi_cq_tagged_entry ent;
	struct fid *fids[1];
	struct pollfd pfd;
	char in[64], out[64] = "wake";
	int fd = -1;

	env_open(&e, FI_WAIT_FD, false);
	ck_assert_int_eq(fi_control(&e.cq[1]->fid, FI_GETWAIT, &fd), 0);
	ck_assert_int_ge(fd, 0);
	fids[0] = &e.cq[1]->fid;
	ck_assert_int_eq(fi_recv(e.ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, NULL), 0);
	ck_assert_int_eq(fi_trywait(e.fabric, fids, 1), 0);
	/* nothing pending: the fd stays quiet */
	pfd.fd = fd;
	pfd.events = POLLIN;
	ck_assert_int_eq(poll(&pfd, 1, 20), 0);
	/* the frame sits in the device until the progress thread polls it */
	ck_assert_int_eq(fi_inject(e.ep[0], out, sizeof(out), e.fa[1]), 0);
	ck_assert_int_eq(poll(&pfd, 1, 5000), 1);
	ck_assert_int_eq(fi_cq_read(e.cq[1], &ent, 1), 1);
	ck_assert_str_eq(in, "wake");
	/* a completion is pending: trywait refuses */
	ck_assert_int_eq(fi_recv(e.ep[1], in, sizeof(in), NULL, FI_ADDR_UNSPEC, NULL), 0);
	ck_assert_int_eq(fi_inject(e.ep[0], out, sizeof(out), e.fa[1]), 0);
	{
		/* either trywait sees the completion, or (the progress thread
		 * got the frame first) it arms and the fd fires */
		int r = fi_trywait(e.fabric, fids, 1);

		ck_assert(r == -FI_EAGAIN || (r == 0 && poll(&pfd, 1, 5000) == 1));
	}
	ck_assert_int_eq(read_one(e.cq[1], &ent, NULL), 1);
	/* sread on an empty queue times out */
	ck_assert_int_eq(fi_cq_sread(e.cq[1], &ent, 1, NULL, 30), -FI_EAGAIN);
	env_close(&e);
}
END_TEST

START_TEST(test_arp_unreachable)
{
	struct env e;
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	struct sockaddr_in nobody;
	fi_addr_t fa;
	time_t end;
	char out[8] = "x";
	ssize_t ret;
	int ctx;

	env_open(&e, FI_WAIT_NONE, false);
	memset(&nobody, 0, sizeof(nobody));
	nobody.sin_family = AF_INET;
	nobody.sin_port = htons(9);
	inet_pton(AF_INET, "198.18.5.99", &nobody.sin_addr);
	ck_assert_int_eq(fi_av_insert(e.av, &nobody, 1, &fa, 0, NULL), 1);
	end = time(NULL) + 10;
	do {
		ret = fi_send(e.ep[0], out, sizeof(out), NULL, fa, &ctx);
		if (ret == -FI_EAGAIN)
			fi_cq_read(e.cq[0], &ent, 1);
	} while (ret == -FI_EAGAIN && time(NULL) < end);
	ck_assert_int_eq(ret, 0); /* accepted, then completed in error */
	ck_assert_int_eq(fi_cq_read(e.cq[0], &ent, 1), -FI_EAVAIL);
	ck_assert_int_eq(fi_cq_readerr(e.cq[0], &err, 0), 1);
	ck_assert_int_eq(err.err, FI_EHOSTUNREACH);
	ck_assert_ptr_eq(err.op_context, &ctx);
	env_close(&e);
}
END_TEST

/* While the port's link is down (a memif server without its client: the
 * state of a memif client whose handshake the EAL thread has not run yet)
 * ARP requests are lost before anyone can answer: a send waits for the link
 * (-FI_EAGAIN) instead of failing after ARP's ~0.5 s, and gives up with
 * FI_EHOSTUNREACH only after a bounded wait. */
START_TEST(test_arp_waits_for_link)
{
	struct env e;
	struct fi_cq_tagged_entry ent;
	struct fi_cq_err_entry err;
	struct sockaddr_in peer;
	struct timespec t0, t;
	char dev[128];
	fi_addr_t fa;
	double waited = 0;
	char out[8] = "x";
	ssize_t ret;
	int ctx;

	snprintf(dev, sizeof(dev), "net_memif0,role=server,socket=/tmp/fdp-linkdown-%d.sock",
		 (int)getpid());
	env_open_dev(&e, dev, FI_WAIT_NONE, false);
	memset(&peer, 0, sizeof(peer));
	peer.sin_family = AF_INET;
	peer.sin_port = htons(9);
	inet_pton(AF_INET, "198.18.5.2", &peer.sin_addr);
	ck_assert_int_eq(fi_av_insert(e.av, &peer, 1, &fa, 0, NULL), 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		ret = fi_send(e.ep[0], out, sizeof(out), NULL, fa, &ctx);
		if (ret == -FI_EAGAIN)
			ck_assert_int_eq(fi_cq_read(e.cq[0], &ent, 1), -FI_EAGAIN);
		clock_gettime(CLOCK_MONOTONIC, &t);
		waited = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
	} while (ret == -FI_EAGAIN && waited < 20);
	ck_assert_int_eq(ret, 0); /* accepted, then completed in error */
	ck_assert_msg(waited >= 1.5, "gave up on a peer behind a down link after %.2f s", waited);
	ck_assert_int_eq(fi_cq_read(e.cq[0], &ent, 1), -FI_EAVAIL);
	ck_assert_int_eq(fi_cq_readerr(e.cq[0], &err, 0), 1);
	ck_assert_int_eq(err.err, FI_EHOSTUNREACH);
	env_close(&e);
}
END_TEST

START_TEST(test_names_and_eq)
{
	struct env e;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};
	struct fid_eq *eq;
	struct sockaddr_in sa;
	char small[4];
	size_t len = sizeof(small);
	uint32_t event;
	int v = 42, got = 0;

	env_open(&e, FI_WAIT_NONE, false);
	ck_assert_int_eq(fi_getname(&e.ep[0]->fid, small, &len), -FI_ETOOSMALL);
	ck_assert_uint_eq(len, sizeof(struct sockaddr_in));
	len = sizeof(sa);
	ck_assert_int_eq(fi_av_lookup(e.av, e.fa[1], &sa, &len), 0);
	ck_assert_uint_eq(sa.sin_port, e.addr[1].sin_port);
	/* unsupported operations say so */
	ck_assert_int_eq(fi_tsend(e.ep[0], small, 1, NULL, e.fa[1], 0, NULL), -FI_ENOSYS);
	ck_assert_int_eq(fi_connect(e.ep[0], &sa, NULL, 0), -FI_ENOSYS);

	ck_assert_int_eq(fi_eq_open(e.fabric, &eq_attr, &eq, NULL), 0);
	ck_assert_int_eq(fi_eq_write(eq, 7, &v, sizeof(v), 0), (ssize_t)sizeof(v));
	ck_assert_int_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), (ssize_t)sizeof(got));
	ck_assert_uint_eq(event, 7);
	ck_assert_int_eq(got, 42);
	ck_assert_int_eq(fi_eq_read(eq, &event, &got, sizeof(got), 0), -FI_EAGAIN);
	ck_assert_int_eq(fi_close(&eq->fid), 0);
	env_close(&e);
}
END_TEST

START_TEST(test_bad_device)
{
	struct fi_info *h, *info;
	struct fid_fabric *fabric = NULL;
	int ret;

	set_env("net_nosuchdriver0", IP "/24");
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	ck_assert_msg(ret == -FI_ENODEV || ret == -FI_EINVAL, "fi_fabric: %d", ret);
	/* a second attempt fails the same way, without touching DPDK again */
	ck_assert_int_eq(fi_fabric(info->fabric_attr, &fabric, NULL), ret);
	fi_freeinfo(info);
	fi_freeinfo(h);
}
END_TEST

#define MT_THREADS 3
#define MT_PER_THREAD 300

struct mt_arg {
	struct env *e;
	int id;
};

static void *mt_sender(void *p)
{
	struct mt_arg *a = p;
	uint32_t msg[2];
	time_t end = time(NULL) + 20;
	ssize_t ret;
	int i;

	for (i = 0; i < MT_PER_THREAD; i++) {
		msg[0] = (uint32_t)a->id;
		msg[1] = (uint32_t)i;
		do {
			ret = fi_inject(a->e->ep[0], msg, sizeof(msg), a->e->fa[1]);
		} while (ret == -FI_EAGAIN && time(NULL) < end);
		if (ret)
			return (void *)1;
	}
	return NULL;
}

/* FI_THREAD_SAFE: several threads inject on one endpoint while the main
 * thread receives; every message arrives exactly once, intact. */
START_TEST(test_threads_one_endpoint)
{
	static uint32_t bufs[MT_THREADS * MT_PER_THREAD][2];
	static bool seen[MT_THREADS][MT_PER_THREAD];
	struct mt_arg args[MT_THREADS];
	pthread_t th[MT_THREADS];
	struct fi_cq_tagged_entry ent;
	struct env e;
	void *rv;
	int i, got = 0;
	time_t end;

	env_open(&e, FI_WAIT_NONE, false);
	for (i = 0; i < MT_THREADS * MT_PER_THREAD; i++)
		ck_assert_int_eq(fi_recv(e.ep[1], bufs[i], sizeof(bufs[i]), NULL,
					 FI_ADDR_UNSPEC, NULL), 0);
	for (i = 0; i < MT_THREADS; i++) {
		args[i].e = &e;
		args[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, mt_sender, &args[i]), 0);
	}
	end = time(NULL) + 20;
	while (got < MT_THREADS * MT_PER_THREAD && time(NULL) < end) {
		if (fi_cq_read(e.cq[1], &ent, 1) != 1)
			continue;
		{
			uint32_t *m = ent.buf;

			ck_assert_uint_eq(ent.len, 8);
			ck_assert_uint_lt(m[0], MT_THREADS);
			ck_assert_uint_lt(m[1], MT_PER_THREAD);
			ck_assert_msg(!seen[m[0]][m[1]], "duplicate %u/%u", m[0], m[1]);
			seen[m[0]][m[1]] = true;
		}
		got++;
	}
	for (i = 0; i < MT_THREADS; i++) {
		pthread_join(th[i], &rv);
		ck_assert_ptr_null(rv);
	}
	ck_assert_int_eq(got, MT_THREADS * MT_PER_THREAD);
	env_close(&e);
}
END_TEST

/* EAL arguments from the user that DPDK rejects, or that would make it
 * exit the process: an error from fi_fabric, and the process lives on. */
static void bad_eal_args(const char *args)
{
	struct fi_info *h, *info;
	struct fid_fabric *fabric = NULL;

	set_env("net_ring0", IP "/24");
	setenv("FI_DPDK_EAL_ARGS", args, 1);
	h = hints_dgram();
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info), 0);
	ck_assert_int_eq(fi_fabric(info->fabric_attr, &fabric, NULL), -FI_EINVAL);
	fi_freeinfo(info);
	fi_freeinfo(h);
}

START_TEST(test_bad_eal_args)
{
	bad_eal_args("--no-such-eal-option");
}
END_TEST

START_TEST(test_eal_help_refused)
{
	bad_eal_args("-m 64 --help");
}
END_TEST

static void on_usr1(int sig)
{
	(void)sig;
}

START_TEST(test_affinity_and_signals_untouched)
{
	struct env e;
	struct sigaction sa, before[NSIG], after;
	bool valid[NSIG];
	cpu_set_t set, now;
	int sig;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	/* glibc reserves two real-time signals: sigaction() refuses them */
	for (sig = 1; sig < NSIG; sig++)
		valid[sig] = sigaction(sig, NULL, &before[sig]) == 0;
	env_open(&e, FI_WAIT_NONE, false);
	ck_assert_int_eq(sched_getaffinity(0, sizeof(now), &now), 0);
	ck_assert_msg(CPU_EQUAL(&set, &now), "CPU affinity changed by the provider");
	for (sig = 1; sig < NSIG; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP || !valid[sig])
			continue;
		ck_assert_int_eq(sigaction(sig, NULL, &after), 0);
		ck_assert_msg(after.sa_handler == before[sig].sa_handler,
			      "signal %d handler changed by the provider", sig);
	}
	env_close(&e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fdp_dgram");
	TCase *tc = tcase_create("dgram");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_getinfo_addresses);
	tcase_add_test(tc, test_getinfo_unconfigured);
	tcase_add_test(tc, test_send_recv_data);
	tcase_add_test(tc, test_raw_udp);
	tcase_add_test(tc, test_truncation_and_cancel);
	tcase_add_test(tc, test_wait_fd);
	tcase_add_test(tc, test_arp_unreachable);
	tcase_add_test(tc, test_arp_waits_for_link);
	tcase_add_test(tc, test_names_and_eq);
	tcase_add_test(tc, test_threads_one_endpoint);
	tcase_add_test(tc, test_bad_device);
	tcase_add_test(tc, test_bad_eal_args);
	tcase_add_test(tc, test_eal_help_refused);
	tcase_add_test(tc, test_affinity_and_signals_untouched);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
