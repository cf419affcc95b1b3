/* fdp_init.c - provider entry point and parameters.
 *
 * fi_prov_ini runs in every libfabric program on the machine that scans the
 * provider directory, so it only defines and reads parameters; the one
 * exception is a process configured for this provider (FI_DPDK_DEVICE and
 * FI_DPDK_IP set and valid), whose EAL start begins here in the background
 * (fdp_eal_start_early, FI_DPDK_EAL_EARLY=0 turns it off). A process on a
 * port pool (FI_DPDK_POOL) has no device yet at that point: it claims its
 * port at first use (fdp_pool_port) and starts the EAL in fi_fabric. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"
#include "fabric/fdp_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fdp_params fdp_params = {
	.mtu = 1500,
	.idle_max_ms = 32,
	.eal_early = true,
};

static void fdp_cleanup(void)
{
	fdp_port_shutdown();
	fdp_eal_cleanup();
}

struct fi_provider fdp_prov = {
	.version = FDP_PROV_VERSION,
	.fi_version = FDP_FI_VERSION,
	.name = FDP_PROV_NAME,
	.getinfo = fdp_getinfo,
	.fabric = fdp_fabric_open,
	.cleanup = fdp_cleanup,
};

/* A probability parameter: "0".."1"; anything else is ignored with a
 * warning naming the variable (the default 0 stays). */
static double param_probability(const char *name)
{
	char *s = NULL, *end;
	double v;

	if (fi_param_get_str(&fdp_prov, name, &s) != FI_SUCCESS || !s || !*s)
		return 0.0;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0.0 && v <= 1.0)) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_%s=%s: not a probability in [0,1], using 0\n",
			 name, s);
		return 0.0;
	}
	return v;
}

/* FI_DPDK_IP "a.b.c.d/prefix" (prefix defaults to 24). */
static void param_ip(void)
{
	char buf[64], *slash, *end;
	unsigned long prefix = 24;

	fdp_params.ip_ok = false;
	if (!fdp_params.ip || !*fdp_params.ip)
		return;
	if (strlen(fdp_params.ip) >= sizeof(buf))
		goto bad;
	strcpy(buf, fdp_params.ip);
	slash = strchr(buf, '/');
	if (slash) {
		*slash = '\0';
		errno = 0;
		prefix = strtoul(slash + 1, &end, 10);
		if (errno || end == slash + 1 || *end || prefix < 1 || prefix > 32)
			goto bad;
	}
	if (inet_pton(AF_INET, buf, &fdp_params.addr) != 1)
		goto bad;
	fdp_params.prefix = (unsigned int)prefix;
	fdp_params.netmask = htonl(prefix == 32 ? 0xffffffffu :
				   ~((1u << (32 - prefix)) - 1));
	fdp_params.ip_ok = true;
	return;
bad:
	FDP_WARN(FI_LOG_CORE, "FI_DPDK_IP=%s: expected a.b.c.d[/prefix]; provider disabled\n",
		 fdp_params.ip);
}

bool fdp_device_is_memif(void)
{
	return fdp_params.device && strncmp(fdp_params.device, "net_memif", 9) == 0;
}

#define MEMIF_BSIZE_DEFAULT 2048

/* bsize=N in the device's devargs, 0 when absent or not a number. */
static size_t devargs_bsize(void)
{
	const char *s = fdp_params.device;

	while ((s = strchr(s, ',')) != NULL) {
		s++;
		if (strncmp(s, "bsize=", 6) == 0) {
			char *end;
			unsigned long v = strtoul(s + 6, &end, 0);

			return (*end == ',' || *end == '\0') ? v : 0;
		}
	}
	return 0;
}

/* Frame bytes at the given MTU on the memif (Ethernet header, no CRC). */
static size_t memif_frame(size_t mtu)
{
	return mtu + 14;
}

size_t fdp_memif_bsize(void)
{
	size_t given = devargs_bsize();

	if (given)
		return given;
	if (memif_frame(fdp_params.mtu) > MEMIF_BSIZE_DEFAULT)
		return (memif_frame(fdp_params.mtu) + 1023) & ~(size_t)1023;
	return MEMIF_BSIZE_DEFAULT;
}

/* fdp_params.devargs: a memif port gets buffers that hold a frame. */
static void set_devargs(void)
{
	static char buf[1024];
	size_t bsize;

	fdp_params.devargs = fdp_params.device;
	if (!fdp_device_is_memif() || devargs_bsize())
		return;
	bsize = fdp_memif_bsize();
	if (bsize != MEMIF_BSIZE_DEFAULT &&
	    (size_t)snprintf(buf, sizeof(buf), "%s,bsize=%zu", fdp_params.device, bsize) <
		    sizeof(buf))
		fdp_params.devargs = buf;
}

static void read_params(void)
{
	char *s;
	size_t mtu;

	s = NULL;
	if (fi_param_get_str(&fdp_prov, "device", &s) == FI_SUCCESS && s && *s)
		fdp_params.device = s;
	s = NULL;
	if (fi_param_get_str(&fdp_prov, "ip", &s) == FI_SUCCESS && s && *s)
		fdp_params.ip = s;
	s = NULL;
	if (fi_param_get_str(&fdp_prov, "pool", &s) == FI_SUCCESS && s && *s) {
		/* the pool's port and address replace FI_DPDK_DEVICE and
		 * FI_DPDK_IP, claimed at first use (fdp_pool_port) */
		fdp_params.pool = s;
		fdp_params.device = NULL;
		fdp_params.ip = NULL;
	}
	s = NULL;
	if (fi_param_get_str(&fdp_prov, "eal_args", &s) == FI_SUCCESS && s && *s)
		fdp_params.eal_args = s;
	/* A bad MTU is reported by fi_fabric/fi_domain (fdp_eal.c), which
	 * then fail: libfabric parses the value ("abc" reads as 0). */
	if (fi_param_get_size_t(&fdp_prov, "mtu", &mtu) == FI_SUCCESS) {
		if (mtu < 576 || mtu > 9000)
			fdp_params.mtu_bad = true;
		else
			fdp_params.mtu = mtu;
	} else if (fdp_device_is_memif()) {
		fdp_params.mtu = FDP_MEMIF_MTU;
	}
	set_devargs();
	fdp_params.drop = param_probability("drop");
	fdp_params.dup = param_probability("dup");
	fdp_params.reorder = param_probability("reorder");
	s = NULL;
	if (fi_param_get_str(&fdp_prov, "seed", &s) == FI_SUCCESS && s && *s) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(s, &end, 0);
		if (errno || end == s || *end)
			FDP_WARN(FI_LOG_CORE, "FI_DPDK_SEED=%s: not an integer, using a random seed\n", s);
		else
			fdp_params.seed = v;
	}
	{
		int rxd = 0;

		if (fi_param_get_bool(&fdp_prov, "rxd", &rxd) == FI_SUCCESS)
			fdp_params.rxd = rxd != 0;
	}
	{
		int early = 1;

		if (fi_param_get_bool(&fdp_prov, "eal_early", &early) == FI_SUCCESS)
			fdp_params.eal_early = early != 0;
	}
	{
		size_t ms;

		if (fi_param_get_size_t(&fdp_prov, "idle_max_ms", &ms) == FI_SUCCESS) {
			if (ms < 1 || ms > 1000)
				FDP_WARN(FI_LOG_CORE, "FI_DPDK_IDLE_MAX_MS=%zu: not in 1..1000, "
					 "using %zu\n", ms, fdp_params.idle_max_ms);
			else
				fdp_params.idle_max_ms = ms;
		}
	}
	param_ip();
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t pool_pid;   /* the process that claimed (protected by pool_lock) */
static int pool_result;  /* its fdp_claim's result */

/* A child forked while another thread claimed has the lock held by a thread
 * it does not have; it claims anew anyway (pool_pid is not its pid). */
static void pool_atfork_child(void)
{
	pthread_mutex_init(&pool_lock, NULL);
}

int fdp_pool_port(void)
{
	int ret;

	if (!fdp_params.pool)
		return 0;
	pthread_mutex_lock(&pool_lock);
	if (pool_pid != getpid()) {
		pool_pid = getpid();
		fdp_params.pool_error = NULL;
		pool_result = fdp_claim(fdp_params.pool);
		param_ip();
		set_devargs();
	}
	ret = pool_result;
	pthread_mutex_unlock(&pool_lock);
	return ret;
}

FI_EXT_INI
{
	fi_param_define(&fdp_prov, "device", FI_PARAM_STRING,
			"DPDK device (devargs): a PCI address or a vdev spec such as "
			"net_memif0,role=server,socket=/tmp/x.sock (default: none, "
			"provider disabled)");
	fi_param_define(&fdp_prov, "ip", FI_PARAM_STRING,
			"IPv4 address/prefix of the port, e.g. 198.18.0.1/15 "
			"(default: none, provider disabled)");
	fi_param_define(&fdp_prov, "pool", FI_PARAM_STRING,
			"directory of a pool of vhost-user ports made by fabsock-ovs, "
			"e.g. /run/fabsock/ovs/br0: the process claims a free port and "
			"its address, in place of FI_DPDK_DEVICE and FI_DPDK_IP "
			"(default: none)");
	fi_param_define(&fdp_prov, "eal_args", FI_PARAM_STRING,
			"extra DPDK EAL arguments appended to the provider's own, "
			"space separated (default: none)");
	fi_param_define(&fdp_prov, "mtu", FI_PARAM_SIZE_T,
			"IP MTU of the port, 576..9000 (default: 1500, 9000 on net_memif)");
	fi_param_define(&fdp_prov, "drop", FI_PARAM_STRING,
			"test fault injection: probability 0..1 of dropping each "
			"transmitted frame (default: 0)");
	fi_param_define(&fdp_prov, "dup", FI_PARAM_STRING,
			"test fault injection: probability 0..1 of duplicating each "
			"transmitted frame (default: 0)");
	fi_param_define(&fdp_prov, "reorder", FI_PARAM_STRING,
			"test fault injection: probability 0..1 of delaying each "
			"transmitted frame behind the next one (default: 0)");
	fi_param_define(&fdp_prov, "seed", FI_PARAM_STRING,
			"test fault injection: PRNG seed (default: 0 = from time and pid)");
	fi_param_define(&fdp_prov, "idle_max_ms", FI_PARAM_SIZE_T,
			"longest pause of the progress thread after a long silence, "
			"1..1000 ms: the most a frame ending the silence waits more "
			"(default: 32; 1: no pauses longer than the usual 1 ms)");
	fi_param_define(&fdp_prov, "rxd", FI_PARAM_BOOL,
			"offer the DGRAM endpoint to ofi_rxd for layering, making "
			"\"dpdk;ofi_rxd\" RDM available (default: no; the native RDM "
			"endpoint is then the only dpdk RDM)");
	fi_param_define(&fdp_prov, "eal_early", FI_PARAM_BOOL,
			"when FI_DPDK_DEVICE and FI_DPDK_IP are set, start DPDK's EAL "
			"on a thread of the provider as soon as libfabric loads it, so "
			"that it runs while libfabric initialises its other providers "
			"(fi_fabric then waits for it); no: start it in fi_fabric "
			"(default: yes)");
	read_params();
	if (fdp_params.pool)
		pthread_atfork(NULL, NULL, pool_atfork_child);
	fdp_eal_start_early();
	return &fdp_prov;
}
