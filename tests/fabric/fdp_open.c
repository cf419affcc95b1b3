/* fdp_open: open fabric, domain and a DGRAM endpoint of the dpdk provider
 * as configured by FI_DPDK_*; print each step's result. Exit 0 when all
 * succeed, 1 otherwise (used by tests to probe a device).
 * FDP_OPEN_FORK=1: fork right after fi_getinfo (while an early EAL start,
 * FI_DPDK_EAL_EARLY, is still under way); the child prints "child
 * fi_fabric: <result>" and exits 0 (the caller checks the result). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_ep *ep;
	int ret;

	if (!hints)
		return 1;
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG;
	hints->fabric_attr->prov_name = strdup("dpdk");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	printf("fi_getinfo: %s\n", fi_strerror(-ret));
	if (ret)
		return 1;
	if (getenv("FDP_OPEN_FORK")) {
		int status = -1;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			ret = fi_fabric(info->fabric_attr, &fabric, NULL);
			printf("child fi_fabric: %s\n", fi_strerror(-ret));
			fflush(stdout);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			return 1;
	}
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	printf("fi_fabric: %s\n", fi_strerror(-ret));
	if (ret)
		return 1;
	ret = fi_domain(fabric, info, &domain, NULL);
	printf("fi_domain: %s\n", fi_strerror(-ret));
	if (ret)
		return 1;
	ret = fi_endpoint(domain, info, &ep, NULL);
	printf("fi_endpoint: %s\n", fi_strerror(-ret));
	if (ret)
		return 1;
	fi_close(&ep->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
