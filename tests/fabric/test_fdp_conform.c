/* Check tests of what libfabric's man pages (and fabtests' unit tests
 * getinfo_test, av_test and cq_test, which check them) require of the
 * provider's attributes, address vectors and completion queues: the
 * transmit/receive/domain capability split of fi_getinfo, FI_EVENT and
 * FI_SYNC_ERR AV inserts with failing addresses, and fi_cq_signal. One
 * process over net_ring0; each test forks (Check's default), so each gets a
 * fresh EAL. */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define IP "198.18.6.1"

/* fi_endpoint(3): what a transmit and a receive context may hold. */
#define ALLOWED_TX (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | \
		    FI_NAMED_RX_CTX | FI_HMEM | FI_COLLECTIVE | FI_SEND | FI_READ | \
		    FI_WRITE | FI_TRIGGER | FI_FENCE | FI_RMA_PMEM)
#define ALLOWED_RX (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_DIRECTED_RECV | \
		    FI_VARIABLE_MSG | FI_HMEM | FI_COLLECTIVE | FI_RECV | \
		    FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_PMEM | FI_SOURCE | \
		    FI_SOURCE_ERR | FI_RMA_EVENT | FI_MULTI_RECV | FI_TRIGGER)
#define PRIMARY (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_MULTICAST | \
		 FI_NAMED_RX_CTX | FI_HMEM | FI_COLLECTIVE | FI_DIRECTED_RECV | \
		 FI_VARIABLE_MSG)

static void set_env(void)
{
	char path[4096];
	const char *top = getenv("top_builddir");

	snprintf(path, sizeof(path), "%s/src/fabric/.libs", top ? top : ".");
	setenv("FI_PROVIDER_PATH", path, 1);
	setenv("FI_PROVIDER", "dpdk", 1);
	unsetenv("FI_DPDK_EAL_ARGS");
	setenv("FI_DPDK_DEVICE", "net_ring0", 1);
	setenv("FI_DPDK_IP", IP "/24", 1);
}

static struct fi_info *hints_for(enum fi_ep_type type)
{
	struct fi_info *h = fi_allocinfo();

	ck_assert_ptr_nonnull(h);
	h->ep_attr->type = type;
	h->mode = ~0ull;
	h->fabric_attr->prov_name = strdup("dpdk");
	return h;
}

static void check_split(const struct fi_info *fi, uint64_t asked)
{
	char what[64];

	snprintf(what, sizeof(what), "type %d, caps asked 0x%llx", (int)fi->ep_attr->type,
		 (unsigned long long)asked);
	ck_assert_msg(!(fi->tx_attr->caps & ~ALLOWED_TX),
		      "%s: tx_attr->caps has 0x%llx, not transmit capabilities", what,
		      (unsigned long long)(fi->tx_attr->caps & ~ALLOWED_TX));
	ck_assert_msg(!(fi->rx_attr->caps & ~ALLOWED_RX),
		      "%s: rx_attr->caps has 0x%llx, not receive capabilities", what,
		      (unsigned long long)(fi->rx_attr->caps & ~ALLOWED_RX));
	ck_assert_msg(!(fi->tx_attr->caps & ~fi->caps), "%s: tx caps not in info->caps", what);
	ck_assert_msg(!(fi->rx_attr->caps & ~fi->caps), "%s: rx caps not in info->caps", what);
	ck_assert_msg((fi->caps & asked) == asked, "%s: info->caps lacks some", what);
	ck_assert_msg((fi->tx_attr->caps & asked & ALLOWED_TX & PRIMARY) ==
		      (asked & ALLOWED_TX & PRIMARY), "%s: tx_attr->caps lacks some", what);
	ck_assert_msg((fi->rx_attr->caps & asked & ALLOWED_RX & PRIMARY) ==
		      (asked & ALLOWED_RX & PRIMARY), "%s: rx_attr->caps lacks some", what);
}

/* fabtests getinfo_test caps1/caps2: every combination of primary
 * capabilities, and no hints at all. */
START_TEST(test_caps_split)
{
	static const enum fi_ep_type types[] = {FI_EP_RDM, FI_EP_DGRAM};
	struct fi_info *h, *info, *fi;
	uint64_t bits[10], combo;
	int nbits = 0, answered = 0;

	set_env();
	for (uint64_t b = 1; b; b <<= 1)
		if (PRIMARY & b)
			bits[nbits++] = b;
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, &info), 0);
	for (fi = info; fi; fi = fi->next)
		check_split(fi, 0);
	fi_freeinfo(info);
	for (size_t t = 0; t < 2; t++) {
		for (uint32_t m = 0; m < (1u << nbits); m++) {
			combo = 0;
			for (int i = 0; i < nbits; i++)
				if (m & (1u << i))
					combo |= bits[i];
			h = hints_for(types[t]);
			h->caps = combo;
			if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info) == 0) {
				for (fi = info; fi; fi = fi->next)
					check_split(fi, combo);
				fi_freeinfo(info);
				answered++;
			}
			fi_freeinfo(h);
		}
	}
	ck_assert_int_gt(answered, 4);
}
END_TEST

/* fabtests getinfo_test caps3: a domain capability asked for is in the
 * answer or there is no answer; the ones we have are answered. */
START_TEST(test_domain_caps)
{
	static const uint64_t bits[] = {FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV};
	struct fi_info *h, *info, *fi;
	int ret;

	set_env();
	for (uint32_t m = 0; m < 8; m++) {
		uint64_t combo = 0;

		for (int i = 0; i < 3; i++)
			if (m & (1u << i))
				combo |= bits[i];
		h = hints_for(FI_EP_RDM);
		h->domain_attr->caps = combo;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
		if (!(combo & FI_SHARED_AV))
			ck_assert_int_eq(ret, 0);
		if (ret == 0) {
			for (fi = info; fi; fi = fi->next)
				ck_assert_msg((fi->domain_attr->caps & combo) == combo,
					      "domain caps 0x%llx asked, 0x%llx answered",
					      (unsigned long long)combo,
					      (unsigned long long)fi->domain_attr->caps);
			fi_freeinfo(info);
		} else {
			ck_assert_int_eq(ret, -FI_ENODATA);
		}
		fi_freeinfo(h);
	}
}
END_TEST

struct dom {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
};

static void dom_open(struct dom *d)
{
	struct fi_info *h;
	struct fi_eq_attr eq_attr = {.wait_obj = FI_WAIT_UNSPEC};

	memset(d, 0, sizeof(*d));
	set_env();
	h = hints_for(FI_EP_RDM);
	ck_assert_int_eq(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &d->info), 0);
	fi_freeinfo(h);
	ck_assert_int_eq(fi_fabric(d->info->fabric_attr, &d->fabric, NULL), 0);
	ck_assert_int_eq(fi_domain(d->fabric, d->info, &d->domain, NULL), 0);
	ck_assert_int_eq(fi_eq_open(d->fabric, &eq_attr, &d->eq, NULL), 0);
}

static void dom_close(struct dom *d)
{
	ck_assert_int_eq(fi_close(&d->eq->fid), 0);
	ck_assert_int_eq(fi_close(&d->domain->fid), 0);
	ck_assert_int_eq(fi_close(&d->fabric->fid), 0);
	fi_freeinfo(d->info);
}

/* a good address then one that is not an IPv4 sockaddr (all zeroes, as
 * fabtests' av_test builds its invalid address) */
static void good_bad(struct sockaddr_in sa[2])
{
	memset(sa, 0, 2 * sizeof(*sa));
	sa[0].sin_family = AF_INET;
	sa[0].sin_port = htons(9);
	inet_pton(AF_INET, "198.18.6.2", &sa[0].sin_addr);
}

/* fi_av(3) FI_EVENT: an error entry per failed address (data = its index),
 * then one FI_AV_COMPLETE with the number inserted. */
START_TEST(test_av_async_errors)
{
	struct dom d;
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .count = 32, .flags = FI_EVENT};
	struct fid_av *av;
	struct sockaddr_in sa[2];
	fi_addr_t fa[2] = {FI_ADDR_NOTAVAIL, 0};
	struct fi_eq_entry ent;
	struct fi_eq_err_entry err;
	uint32_t event, ctx;

	dom_open(&d);
	good_bad(sa);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL), 0);
	/* asynchronous without an EQ */
	ck_assert_int_eq(fi_av_insert(av, sa, 1, fa, 0, &ctx), -FI_ENOEQ);
	ck_assert_int_eq(fi_av_bind(av, &d.eq->fid, 0), 0);
	ck_assert_int_eq(fi_av_insert(av, sa, 2, fa, 0, &ctx), 0);
	ck_assert_int_eq(fi_eq_sread(d.eq, &event, &ent, sizeof(ent), 2000, 0), -FI_EAVAIL);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(fi_eq_readerr(d.eq, &err, 0), (ssize_t)sizeof(err));
	ck_assert_ptr_eq(err.fid, &av->fid);
	ck_assert_ptr_eq(err.context, &ctx);
	ck_assert_uint_eq(err.data, 1);
	ck_assert_int_gt(err.err, 0);
	ck_assert_int_eq(fi_eq_sread(d.eq, &event, &ent, sizeof(ent), 2000, 0),
			 (ssize_t)sizeof(ent));
	ck_assert_uint_eq(event, FI_AV_COMPLETE);
	ck_assert_ptr_eq(ent.fid, &av->fid);
	ck_assert_ptr_eq(ent.context, &ctx);
	ck_assert_uint_eq(ent.data, 1);
	ck_assert_uint_ne(fa[0], FI_ADDR_NOTAVAIL);
	ck_assert_uint_eq(fa[1], FI_ADDR_NOTAVAIL);
	/* zero addresses: still one completion */
	ck_assert_int_eq(fi_av_insert(av, sa, 0, fa, 0, &ctx), 0);
	ck_assert_int_eq(fi_eq_sread(d.eq, &event, &ent, sizeof(ent), 2000, 0),
			 (ssize_t)sizeof(ent));
	ck_assert_uint_eq(ent.data, 0);
	ck_assert_int_eq(fi_eq_read(d.eq, &event, &ent, sizeof(ent), 0), -FI_EAGAIN);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	dom_close(&d);
}
END_TEST

/* fi_av(3) FI_SYNC_ERR: each address's status in the context's int array;
 * an AV without FI_EVENT is synchronous even with an EQ bound. */
START_TEST(test_av_sync_err)
{
	struct dom d;
	struct fi_av_attr attr = {.type = FI_AV_TABLE, .count = 32};
	struct fid_av *av;
	struct sockaddr_in sa[2];
	fi_addr_t fa[2] = {FI_ADDR_NOTAVAIL, 0};
	uint32_t event;
	struct fi_eq_entry ent;
	int sync_err[2] = {-1, 0};

	dom_open(&d);
	good_bad(sa);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL), 0);
	ck_assert_int_eq(fi_av_insert(av, sa, 2, NULL, FI_SYNC_ERR, sync_err), 1);
	ck_assert_int_eq(sync_err[0], 0);
	ck_assert_int_ne(sync_err[1], 0);
	ck_assert_int_eq(fi_av_bind(av, &d.eq->fid, 0), 0);
	ck_assert_int_eq(fi_av_insert(av, sa, 2, fa, 0, NULL), 1);
	ck_assert_uint_ne(fa[0], FI_ADDR_NOTAVAIL);
	ck_assert_uint_eq(fa[1], FI_ADDR_NOTAVAIL);
	ck_assert_int_eq(fi_eq_read(d.eq, &event, &ent, sizeof(ent), 0), -FI_EAGAIN);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	dom_close(&d);
}
END_TEST

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *signal_later(void *arg)
{
	usleep(200 * 1000);
	ck_assert_int_eq(fi_cq_signal(arg), 0);
	return NULL;
}

/* fi_cq(3) fi_cq_signal: a blocked (or the next) fi_cq_sread returns at
 * once with -FI_EAGAIN. */
START_TEST(test_cq_signal)
{
	static const enum fi_wait_obj waits[] = {FI_WAIT_UNSPEC, FI_WAIT_NONE};
	struct dom d;
	struct fid_cq *cq;
	struct fi_cq_tagged_entry ent;
	pthread_t th;
	double t0, ms;

	dom_open(&d);
	for (size_t w = 0; w < 2; w++) {
		struct fi_cq_attr attr = {.size = 1, .format = FI_CQ_FORMAT_UNSPEC,
					  .wait_obj = waits[w]};

		ck_assert_int_eq(fi_cq_open(d.domain, &attr, &cq, NULL), 0);
		/* signalled before the read */
		ck_assert_int_eq(fi_cq_signal(cq), 0);
		t0 = now_ms();
		ck_assert_int_eq(fi_cq_sread(cq, &ent, 1, NULL, 2000), -FI_EAGAIN);
		ms = now_ms() - t0;
		ck_assert_msg(ms < 1000, "wait %d: sread after fi_cq_signal took %.0f ms",
			      (int)waits[w], ms);
		/* signalled while the read blocks */
		ck_assert_int_eq(pthread_create(&th, NULL, signal_later, cq), 0);
		t0 = now_ms();
		ck_assert_int_eq(fi_cq_sread(cq, &ent, 1, NULL, 5000), -FI_EAGAIN);
		ms = now_ms() - t0;
		ck_assert_int_eq(pthread_join(th, NULL), 0);
		ck_assert_msg(ms < 2500, "wait %d: fi_cq_signal did not end a blocked sread "
			      "(%.0f ms)", (int)waits[w], ms);
		/* the signal is consumed: the next sread waits its timeout */
		t0 = now_ms();
		ck_assert_int_eq(fi_cq_sread(cq, &ent, 1, NULL, 100), -FI_EAGAIN);
		ck_assert_double_ge(now_ms() - t0, 90);
		ck_assert_int_eq(fi_close(&cq->fid), 0);
	}
	dom_close(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fdp_conform");
	TCase *tc = tcase_create("conform");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_caps_split);
	tcase_add_test(tc, test_domain_caps);
	tcase_add_test(tc, test_av_async_errors);
	tcase_add_test(tc, test_av_sync_err);
	tcase_add_test(tc, test_cq_signal);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
