/* startup_order.c - what ordering DPDK's EAL start against libfabric's load
 * can gain, without the stack or the provider around them (the question of
 * the first-socket start-up target, bench/footprint.sh).
 *
 * Loading Debian's libfabric runs the constructors of libpsm2 and
 * libpsm_infinipath (~0.2 s of calibration sleeps) inside dlopen, that is
 * with glibc's loader lock held; the EAL dlopens every PMD plugin of its
 * directory near the start of rte_eal_init, so it cannot load them while
 * libfabric loads. Orders, each run in a fresh process:
 *   seq     libfabric, then the EAL (what a process does today: the
 *           provider, hence its early EAL thread, loads after libfabric)
 *   par     the EAL on a thread, libfabric at once on the main thread
 *   delay   the EAL on a thread, libfabric DELAY ms later (once the EAL is
 *           past its plugins, its TSC calibration sleep overlaps PSM's)
 * Each prints when libfabric was loaded, when rte_eal_init returned, and
 * the later of both, in ms from the start.
 *
 * usage: startup_order seq|par|DELAY_MS [DEVARGS]
 * (default DEVARGS net_memif0,role=server,socket=/tmp/startup_order-PID.sock:
 * a memif server needs no peer). Never part of make check. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>

static double t_start, t_fabric, t_eal;
static char devargs[256];
static char own_sock[64]; /* the default memif socket, removed at the end */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The provider's own EAL arguments (fdp_eal.c), without hugepages. */
static void *eal_main(void *arg)
{
	char prefix[64], vdev[300];
	char *argv[] = {"startup_order", "-l0", prefix, "--no-huge", "-m64",
			"--no-telemetry", "--no-shconf", "--no-pci", vdev,
			"--log-level=error", NULL};

	(void)arg;
	snprintf(prefix, sizeof(prefix), "--file-prefix=so%d", (int)getpid());
	snprintf(vdev, sizeof(vdev), "--vdev=%s", devargs);
	if (rte_eal_init((int)(sizeof(argv) / sizeof(argv[0])) - 1, argv) < 0)
		fprintf(stderr, "startup_order: rte_eal_init failed\n");
	t_eal = now_ms() - t_start;
	return NULL;
}

static void load_fabric(void)
{
	if (!dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL))
		fprintf(stderr, "startup_order: %s\n", dlerror());
	t_fabric = now_ms() - t_start;
}

int main(int argc, char **argv)
{
	pthread_t eal;
	int delay;

	if (argc < 2) {
		fprintf(stderr, "usage: startup_order seq|par|DELAY_MS [DEVARGS]\n");
		return 2;
	}
	if (argc > 2)
		snprintf(devargs, sizeof(devargs), "%s", argv[2]);
	else {
		snprintf(own_sock, sizeof(own_sock), "/tmp/startup_order-%d.sock", (int)getpid());
		snprintf(devargs, sizeof(devargs), "net_memif0,role=server,socket=%s", own_sock);
	}
	t_start = now_ms();
	if (!strcmp(argv[1], "seq")) {
		load_fabric();
		if (pthread_create(&eal, NULL, eal_main, NULL) != 0)
			return 1;
	} else {
		delay = strcmp(argv[1], "par") ? atoi(argv[1]) : 0;
		if (pthread_create(&eal, NULL, eal_main, NULL) != 0)
			return 1;
		if (delay > 0)
			usleep((useconds_t)delay * 1000);
		load_fabric();
	}
	pthread_join(eal, NULL);
	printf("%s: libfabric loaded at %.0f ms, EAL started at %.0f ms, both at %.0f ms\n",
	       argv[1], t_fabric, t_eal, t_eal > t_fabric ? t_eal : t_fabric);
	fflush(stdout);
	/* no rte_eal_cleanup: a memif server's listener leaks an interrupt
	 * source at cleanup in DPDK 22.11 (fi_dpdk(7)); exit unmaps it all, but
	 * the listener's socket file stays unless removed */
	if (own_sock[0])
		unlink(own_sock);
	_exit(0);
}
