/* fabric_wakeup: how long a reader sleeping on the dpdk provider's CQ wait
 * fd takes to wake after a frame arrives, as a function of how long the
 * endpoint was idle before (the progress thread backs off while idle).
 * One process, a net_ring0 loopback port: the main thread injects a
 * message to itself and a reader thread blocked in poll() on the CQ's fd
 * timestamps its wake-up. Prints median and max over SAMPLES runs
 * (LONG_SAMPLES for idle periods of a second and more). */
#include "config.h"

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
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

#define SAMPLES 21
#define LONG_SAMPLES 5    /* idle periods of a second and more */

static struct fid_fabric *fabric;
static struct fid_cq *cq;
static int wait_fd;
static volatile uint64_t woke_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int ret)
{
	fprintf(stderr, "%s: %s\n", what, fi_strerror(-ret));
	exit(1);
}

static void *reader(void *arg)
{
	struct fi_cq_entry ent;
	struct pollfd pfd = {.fd = wait_fd, .events = POLLIN};
	struct fid *fids[1] = {&cq->fid};

	(void)arg;
	for (;;) {
		if (fi_trywait(fabric, fids, 1) == 0)
			poll(&pfd, 1, 5000);
		if (fi_cq_read(cq, &ent, 1) == 1) {
			woke_ns = now_ns();
			return NULL;
		}
	}
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	static const unsigned int idle_us[] = {20, 100, 1000, 10000, 100000, 1500000};
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD};
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_ep *ep;
	struct sockaddr_in addr;
	size_t len = sizeof(addr);
	fi_addr_t self;
	char buf[64];
	uint64_t lat[SAMPLES], sent;
	unsigned int i, s, n;
	pthread_t th;
	int ret;

	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup("dpdk");
	if ((ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info)))
		die("fi_getinfo (set FI_PROVIDER_PATH, FI_DPDK_DEVICE=net_ring0, FI_DPDK_IP)", ret);
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)))
		die("fi_fabric", ret);
	if ((ret = fi_domain(fabric, info, &domain, NULL)))
		die("fi_domain", ret);
	if ((ret = fi_av_open(domain, &av_attr, &av, NULL)) ||
	    (ret = fi_cq_open(domain, &cq_attr, &cq, NULL)) ||
	    (ret = fi_endpoint(domain, info, &ep, NULL)) ||
	    (ret = fi_ep_bind(ep, &av->fid, 0)) ||
	    (ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_enable(ep)) ||
	    (ret = fi_getname(&ep->fid, &addr, &len)) ||
	    (ret = fi_control(&cq->fid, FI_GETWAIT, &wait_fd)))
		die("setup", ret);
	if (fi_av_insert(av, &addr, 1, &self, 0, NULL) != 1)
		die("fi_av_insert", -FI_EINVAL);
	printf("%-12s %14s %14s\n", "idle before", "median wake", "max wake");
	for (i = 0; i < sizeof(idle_us) / sizeof(idle_us[0]); i++) {
		n = idle_us[i] >= 1000000 ? LONG_SAMPLES : SAMPLES;
		for (s = 0; s < n; s++) {
			woke_ns = 0;
			if ((ret = fi_recv(ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, NULL)))
				die("fi_recv", ret);
			pthread_create(&th, NULL, reader, NULL);
			usleep(idle_us[i]);
			sent = now_ns();
			while ((ret = fi_inject(ep, "x", 1, self)) == -FI_EAGAIN)
				;
			if (ret)
				die("fi_inject", ret);
			pthread_join(th, NULL);
			lat[s] = woke_ns - sent;
		}
		qsort(lat, n, sizeof(lat[0]), cmp);
		printf("%9u us %11.1f us %11.1f us\n", idle_us[i], lat[n / 2] / 1000.0,
		       lat[n - 1] / 1000.0);
	}
	fi_close(&ep->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
