/* fdp_eal.c - start DPDK's EAL once, lazily, inside someone else's process.
 *
 * The provider is loaded by every libfabric program that scans the provider
 * directory, so nothing here runs before the first fi_fabric/fi_domain.
 * rte_eal_init changes process-wide state the application owns: it narrows
 * the calling thread's CPU affinity to the main lcore and installs signal
 * handlers (e.g. for SIGBUS in memory setup). Both are snapshotted before and
 * restored after; and the threads it starts are born with the asynchronous
 * signals blocked, so the application's signals go to its own threads.
 *
 * In a process configured for the provider the start begins early, from
 * fi_prov_ini, on a thread of ours (fdp_eal_start_early): what libfabric
 * does after loading its providers (the verbs provider alone reads
 * /proc/kallsyms twice, ~0.1 s) then runs while DPDK loads its PMD plugins
 * and sleeps 0.1 s calibrating the TSC (no CPUID leaf 0x15 on AMD, no MSR
 * in a VM). The snapshot and restore of the signal handlers then bracket
 * rte_eal_init on that thread; the one of the CPU affinity is that thread's
 * own (rte_eal_init pins its caller to the main lcore), which it leaves
 * with. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mempool.h>

#define FDP_EAL_MAX_ARGS 64
/* argv[0]: DPDK's prints start with it (fdp_eal_quiet.c finds them) */
#define EAL_PROG "fdp-eal"

static pthread_mutex_t eal_mutex = PTHREAD_MUTEX_INITIALIZER;
static int eal_state;          /* 0 not tried, 1 running, <0 -FI_E* of the failure */
static pid_t eal_pid;          /* the process that started it */
static bool eal_starting;      /* rte_eal_init under way (eal_mutex held) */
static pthread_t early_thread; /* fdp_eal_start_early's, to join */
static bool early_joinable;    /* under eal_mutex */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static bool eal_ours;          /* we called rte_eal_init (so we clean it up) */
static bool eal_wait_logged;   /* fi_fabric's wait for an early start was said */
static uint16_t eal_port_id;
static FILE *eal_log_stream;
static atomic_bool eal_log_off;  /* set at cleanup: DPDK lines are dropped */
static atomic_bool eal_stopped;  /* set at cleanup: exiting threads skip unregistering */
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static bool thread_key_ok;
__thread bool fdp_eal_thread_ready;

/* Thread exit: give the lcore id back (the mbufs in its cache stay there
 * for the next thread that gets the id). */
static void thread_release(void *arg)
{
	(void)arg;
	if (!atomic_load(&eal_stopped) && !fdp_eal_foreign())
		rte_thread_unregister();
}

static void thread_key_create(void)
{
	thread_key_ok = pthread_key_create(&thread_key, thread_release) == 0;
}

void fdp_eal_thread_slow(void)
{
	fdp_eal_thread_ready = true; /* one attempt per thread */
	if (__atomic_load_n(&eal_state, __ATOMIC_ACQUIRE) <= 0 || fdp_eal_foreign() ||
	    atomic_load(&eal_stopped) || rte_lcore_id() != LCORE_ID_ANY)
		return;
	pthread_once(&thread_key_once, thread_key_create);
	if (!thread_key_ok)
		return; /* could not unregister at exit: leave it uncached */
	if (rte_thread_register() != 0 || rte_lcore_id() == LCORE_ID_ANY) {
		FDP_DBG(FI_LOG_CORE, "thread not registered with the EAL: %s\n",
			rte_strerror(rte_errno));
		return;
	}
	pthread_setspecific(thread_key, (void *)1);
}

/* DPDK log lines -> fi_log, at a level matching the message's. */
static ssize_t log_write(void *cookie, const char *buf, size_t size)
{
	int lvl = rte_log_cur_msg_loglevel();
	enum fi_log_level fl;
	size_t n = size;

	(void)cookie;
	if (atomic_load_explicit(&eal_log_off, memory_order_relaxed))
		return (ssize_t)size;
	if (lvl <= (int)RTE_LOG_ERR)
		fl = FI_LOG_WARN;
	else if (lvl <= (int)RTE_LOG_INFO)
		fl = FI_LOG_INFO;
	else
		fl = FI_LOG_DEBUG;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (n && fi_log_enabled(&fdp_prov, fl, FI_LOG_CORE))
		fi_log(&fdp_prov, fl, FI_LOG_CORE, "dpdk", 0, "%.*s\n", (int)n, buf);
	return (ssize_t)size;
}

/* The number a /proc or /sys file holds; -1 if it cannot be read. */
static long read_number(const char *path)
{
	char buf[32];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static bool hugepages_free(void)
{
	if (read_number("/proc/sys/vm/nr_hugepages") <= 0)
		return false;
	/* 64 MB worth of 2 MB pages */
	return read_number("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages") >= 32;
}

/* A vdev spec ("net_memif0,role=..."), else a PCI address to allow-list. */
static bool device_is_vdev(const char *dev)
{
	return strncmp(dev, "net_", 4) == 0 || strncmp(dev, "eth_", 4) == 0 ||
	       strncmp(dev, "crypto_", 7) == 0;
}

/* The port name DPDK gives the device: the devargs up to the first comma. */
static void device_name(const char *dev, char *out, size_t cap)
{
	size_t n = strcspn(dev, ",");

	if (n >= cap)
		n = cap - 1;
	memcpy(out, dev, n);
	out[n] = '\0';
}

struct eal_argv {
	char *argv[FDP_EAL_MAX_ARGS + 1];
	int argc;
	char *extra;     /* strdup of FI_DPDK_EAL_ARGS, tokenised in place */
};

static int argv_add(struct eal_argv *a, const char *s)
{
	if (a->argc >= FDP_EAL_MAX_ARGS)
		return -FI_EINVAL;
	a->argv[a->argc] = strdup(s);
	if (!a->argv[a->argc])
		return -FI_ENOMEM;
	a->argc++;
	return 0;
}

static void argv_free(struct eal_argv *a)
{
	int i;

	for (i = 0; i < a->argc; i++)
		free(a->argv[i]);
	a->argc = 0;
}

static int build_argv(struct eal_argv *a)
{
	char buf[512];
	unsigned int rnd = 0;
	int cpu, ret = 0;
	char *tok, *save = NULL, *copy;

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (unsigned int)fdp_now_ns();
	cpu = sched_getcpu();
	if (cpu < 0)
		cpu = 0;
	ret |= argv_add(a, EAL_PROG);
	/* one lcore: the CPU we run on now; DPDK starts no worker threads */
	snprintf(buf, sizeof(buf), "-l%d", cpu);
	ret |= argv_add(a, buf);
	snprintf(buf, sizeof(buf), "--file-prefix=fdp%d-%08x", (int)getpid(), rnd);
	ret |= argv_add(a, buf);
	if (hugepages_free()) {
		ret |= argv_add(a, "--in-memory");
		ret |= argv_add(a, "-m64");
	} else {
		ret |= argv_add(a, "--no-huge");
		ret |= argv_add(a, "-m64");
	}
	ret |= argv_add(a, "--no-telemetry");
	ret |= argv_add(a, "--no-shconf");
	/* vhost-user maps at most 8 memory regions of ours: one file per
	 * memseg list, not one per page */
	if (strncmp(fdp_params.device, "net_virtio_user", 15) == 0)
		ret |= argv_add(a, "--single-file-segments");
	if (device_is_vdev(fdp_params.device)) {
		ret |= argv_add(a, "--no-pci");
		snprintf(buf, sizeof(buf), "--vdev=%s", fdp_params.devargs);
	} else {
		snprintf(buf, sizeof(buf), "-a%s", fdp_params.devargs);
	}
	ret |= argv_add(a, buf);
	if (fdp_params.eal_args) {
		copy = strdup(fdp_params.eal_args);
		if (!copy)
			return -FI_ENOMEM;
		for (tok = strtok_r(copy, " \t", &save); tok;
		     tok = strtok_r(NULL, " \t", &save)) {
			/* rte_eal_init calls exit() after printing its usage */
			if (!strcmp(tok, "-h") || !strcmp(tok, "--help")) {
				FDP_WARN(FI_LOG_CORE, "FI_DPDK_EAL_ARGS: %s would make DPDK exit the process; refused\n",
					 tok);
				free(copy);
				return -FI_EINVAL;
			}
			ret |= argv_add(a, tok);
		}
		free(copy);
	}
	if (ret) {
		FDP_WARN(FI_LOG_CORE, "EAL arguments: too many (max %d) in FI_DPDK_EAL_ARGS\n",
			 FDP_EAL_MAX_ARGS);
		return -FI_EINVAL;
	}
	if (fi_log_enabled(&fdp_prov, FI_LOG_INFO, FI_LOG_CORE)) {
		char line[1024];
		size_t off = 0;
		int i;

		line[0] = '\0';
		for (i = 0; i < a->argc && off < sizeof(line) - 1; i++)
			off += (size_t)snprintf(line + off, sizeof(line) - off, " %s", a->argv[i]);
		FDP_INFO(FI_LOG_CORE, "rte_eal_init:%s\n", line);
	}
	return 0;
}

static int find_port(void)
{
	char name[128];
	uint16_t pid;

	device_name(fdp_params.device, name, sizeof(name));
	if (rte_eth_dev_get_port_by_name(name, &pid) != 0) {
		FDP_WARN(FI_LOG_CORE,
			 "FI_DPDK_DEVICE=%s: no DPDK port named %s after EAL start "
			 "(its probe failed, see DPDK's lines above; or its driver is "
			 "not loaded: FI_DPDK_EAL_ARGS=\"-d <pmd.so>\")\n",
			 fdp_params.device, name);
		return -FI_ENODEV;
	}
	eal_port_id = pid;
	return 0;
}

static int check_params(void)
{
	fdp_pool_port();
	if (fdp_params.pool_error)
		return -FI_EBUSY; /* said by fdp_claim */
	if (!fdp_params.device) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_DEVICE is not set\n");
		return -FI_ENODEV;
	}
	if (!fdp_params.ip_ok) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_IP is not set or invalid\n");
		return -FI_EINVAL;
	}
	if (fdp_params.mtu_bad) {
		const char *v = getenv("FI_DPDK_MTU");

		FDP_WARN(FI_LOG_CORE, "FI_DPDK_MTU=%s: not an IP MTU in 576..9000\n",
			 v ? v : "?");
		return -FI_EINVAL;
	}
	return 0;
}

/* What rte_eal_init changes in the calling thread and the process and the
 * application must find as it was: signal handlers, the signal mask, the
 * CPU affinity. */
struct thread_state {
	struct sigaction *sa;   /* NSIG entries */
	sigset_t mask;
	cpu_set_t cpus;
	bool have_cpus;
};

static int thread_state_save(struct thread_state *ts)
{
	int sig;

	ts->sa = calloc(NSIG, sizeof(*ts->sa));
	if (!ts->sa)
		return -FI_ENOMEM;
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, NULL, &ts->sa[sig]);
	pthread_sigmask(SIG_SETMASK, NULL, &ts->mask);
	ts->have_cpus = sched_getaffinity(0, sizeof(ts->cpus), &ts->cpus) == 0;
	return 0;
}

/* A handler installed by a thread of the application while rte_eal_init ran
 * (with a net_virtio_user server that is a second or more, waiting for the
 * switch to connect) must stay: only DPDK's own handlers, and dispositions
 * reset to the default or ignore, are put back. */
static bool handler_is_apps(const struct sigaction *now)
{
	void *fn = (now->sa_flags & SA_SIGINFO) ? (void *)now->sa_sigaction :
						   (void *)now->sa_handler;
	Dl_info info;

	if (now->sa_handler == SIG_DFL || now->sa_handler == SIG_IGN)
		return false;
	if (!dladdr(fn, &info) || !info.dli_fname)
		return true;
	return !strstr(info.dli_fname, "librte_") && !strstr(info.dli_fname, "libdpdk-fi");
}

static void thread_state_restore(struct thread_state *ts)
{
	int sig;

	if (ts->have_cpus)
		sched_setaffinity(0, sizeof(ts->cpus), &ts->cpus);
	pthread_sigmask(SIG_SETMASK, &ts->mask, NULL);
	for (sig = 1; sig < NSIG; sig++) {
		struct sigaction now;

		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (sigaction(sig, NULL, &now) == 0 &&
		    (now.sa_handler != ts->sa[sig].sa_handler ||
		     now.sa_flags != ts->sa[sig].sa_flags) && !handler_is_apps(&now))
			sigaction(sig, &ts->sa[sig], NULL);
	}
	free(ts->sa);
	ts->sa = NULL;
}

static void log_stream_open(void)
{
	cookie_io_functions_t io = {.write = log_write};

	if (eal_log_stream)
		return;
	eal_log_stream = fopencookie(NULL, "w", io);
	if (eal_log_stream) {
		setvbuf(eal_log_stream, NULL, _IOLBF, 0);
		rte_openlog_stream(eal_log_stream);
	}
}

/* rte_eal_init with DPDK's own output caught and its threads' signals
 * blocked. Returns its result; *err is rte_errno, reason what DPDK printed
 * (getopt's complaint). */
static int eal_init_quiet(struct eal_argv *a, int *err, char *reason, size_t reason_len)
{
	char *argv_copy[FDP_EAL_MAX_ARGS + 1];
	struct fdp_quiet quiet;
	sigset_t eal_mask;
	int ret;

	/* rte_eal_init may permute argv; keep our pointers to free them */
	memcpy(argv_copy, a->argv, sizeof(char *) * (size_t)a->argc);
	argv_copy[a->argc] = NULL;
	/* DPDK prints on the application's stdout and stderr when it fails
	 * (its usage, getopt's complaint, "EAL: FATAL"): caught, see
	 * fdp_eal_quiet.c; getopt's complaint becomes our warning's reason */
	fdp_quiet_begin(&quiet);
	/* The threads EAL starts (interrupt thread, multi-process channel)
	 * inherit this thread's mask: block the asynchronous signals so that
	 * a SIGTERM or SIGINT meant for the application is never handled on
	 * a DPDK thread (a handler that calls exit() there, or waits for the
	 * main thread, changes what the application does). The fault signals
	 * stay open: they go to the faulting thread, and EAL catches SIGBUS
	 * while probing memory. */
	sigfillset(&eal_mask);
	sigdelset(&eal_mask, SIGBUS);
	sigdelset(&eal_mask, SIGSEGV);
	sigdelset(&eal_mask, SIGFPE);
	sigdelset(&eal_mask, SIGILL);
	pthread_sigmask(SIG_SETMASK, &eal_mask, NULL);
	ret = rte_eal_init(a->argc, argv_copy);
	*err = rte_errno;
	fdp_quiet_end(&quiet, EAL_PROG, reason, reason_len);
	return ret;
}

/* The application runs DPDK itself: share its EAL and hot-plug our device
 * into it. */
static int eal_join_running(void)
{
	int ret;

	FDP_INFO(FI_LOG_CORE, "EAL already running in this process; probing %s\n",
		 fdp_params.device);
	ret = rte_dev_probe(fdp_params.devargs);
	if (ret < 0 && ret != -EEXIST) {
		FDP_WARN(FI_LOG_CORE, "FI_DPDK_DEVICE=%s: rte_dev_probe: %s\n",
			 fdp_params.device, rte_strerror(-ret));
		return -FI_ENODEV;
	}
	return find_port();
}

static int eal_start_locked(void)
{
	struct eal_argv a = {.argc = 0};
	struct fdp_fd_floor fd_floor;
	struct thread_state ts;
	char reason[256];
	int ret, err;

	ret = check_params();
	if (ret == 0)
		ret = fdp_claim_ready();
	if (ret)
		return ret;
	fdp_files_reclaim(fdp_params.device);
	ret = build_argv(&a);
	if (ret == 0)
		ret = thread_state_save(&ts);
	if (ret) {
		argv_free(&a);
		return ret;
	}
	log_stream_open();
	fdp_fd_floor_begin(&fd_floor);
	ret = eal_init_quiet(&a, &err, reason, sizeof(reason));
	fdp_fd_floor_end(&fd_floor);
	thread_state_restore(&ts);
	argv_free(&a);
	if (ret < 0 && err == EALREADY)
		return eal_join_running();
	if (ret < 0) {
		FDP_WARN(FI_LOG_CORE,
			 "rte_eal_init failed (%s%s%s) for FI_DPDK_DEVICE=%s FI_DPDK_EAL_ARGS=%s\n",
			 rte_strerror(err), reason[0] ? ": " : "", reason, fdp_params.device,
			 fdp_params.eal_args ? fdp_params.eal_args : "");
		return err == EINVAL ? -FI_EINVAL : -FI_ENODEV;
	}
	eal_ours = true;
	fdp_files_runtime_dir_remove();
	return find_port();
}

/* Under eal_mutex: the first call starts the EAL, later ones read its result.
 * The duration is logged (info): with fdp_eal_start's wait below, it is the
 * start-up breakdown (FI_LOG_LEVEL=info) without tracing the process. */
static void start_once_locked(const char *where)
{
	uint64_t t0;
	int ret;

	if (eal_state != 0)
		return;
	eal_pid = getpid();
	eal_starting = true;
	t0 = fdp_now_ns();
	ret = eal_start_locked();
	eal_state = ret ? ret : 1;
	eal_starting = false;
	FDP_INFO(FI_LOG_CORE, "EAL start (%s): %s in %llu ms\n", where,
		 ret ? "failed" : "done", (unsigned long long)((fdp_now_ns() - t0) / 1000000));
}

int fdp_eal_start(void)
{
	uint64_t t0 = fdp_now_ns();
	int ret;

	pthread_mutex_lock(&eal_mutex);
	/* an early start under way held the mutex: how long the caller waited
	 * for it is what the early start did not hide */
	if (early_joinable && eal_state != 0 && !eal_wait_logged) {
		eal_wait_logged = true;
		FDP_INFO(FI_LOG_CORE, "waited %llu ms for the early EAL start\n",
			 (unsigned long long)((fdp_now_ns() - t0) / 1000000));
	}
	start_once_locked("in fi_fabric");
	ret = eal_state > 0 ? 0 : eal_state;
	if (ret == 0 && getpid() != eal_pid) {
		FDP_INFO(FI_LOG_CORE, "a forked child cannot use its parent's DPDK port\n");
		ret = -FI_ENODEV;
	}
	pthread_mutex_unlock(&eal_mutex);
	return ret;
}

static void *early_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&eal_mutex);
	start_once_locked("early thread");
	pthread_mutex_unlock(&eal_mutex);
	return NULL;
}

/* A child forked while the EAL starts (the starting thread holds eal_mutex,
 * the EAL's memory is half made) has the mutex locked by a thread it does
 * not have: it gets a fresh one, and the EAL counts as its parent's
 * (eal_pid: the parent's, or 0 before the thread took the lock), as in a
 * child forked after the start. No lock in prepare: fork would then take
 * eal_mutex before the stack's locks that its callers hold around
 * fi_fabric. */
static void atfork_child(void)
{
	pthread_mutex_init(&eal_mutex, NULL);
	/* also when the early thread had not taken the lock yet: a child of
	 * a configured process is foreign from fi_prov_ini on, whatever the
	 * scheduler did */
	if (eal_starting || (early_joinable && eal_state == 0)) {
		eal_starting = false;
		eal_state = 1;
	}
	early_joinable = false;
}

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

void fdp_eal_start_early(void)
{
	sigset_t all, old;

	pthread_once(&atfork_once, atfork_register);
	if (!fdp_params.eal_early || !fdp_params.device || !fdp_params.ip_ok ||
	    fdp_params.mtu_bad)
		return; /* fi_fabric says what is missing, as without it */
	pthread_mutex_lock(&eal_mutex);
	if (eal_state == 0 && !early_joinable) {
		/* born with every signal blocked: none of the application's
		 * runs on it (eal_start_locked opens the fault signals) */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		early_joinable = pthread_create(&early_thread, NULL, early_main, NULL) == 0;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (!early_joinable)
			FDP_INFO(FI_LOG_CORE, "no thread for an early EAL start: it starts in fi_fabric\n");
	}
	pthread_mutex_unlock(&eal_mutex);
}

bool fdp_eal_foreign(void)
{
	return __atomic_load_n(&eal_state, __ATOMIC_ACQUIRE) > 0 && getpid() != eal_pid;
}

uint16_t fdp_eal_port_id(void)
{
	return eal_port_id;
}

/* Whether rte_eal_cleanup is safe with this port. Not with net_memif in
 * DPDK 22.11: memif_socket_remove_device (called by close) frees a server's
 * listener socket and its interrupt handle but never unregisters the
 * listener's interrupt callback, and rte_eal_cleanup does not stop the EAL
 * interrupt thread. The thread's next rebuild of its epoll set then reads
 * the source's handle (rte_malloc'ed, unmapped by rte_eal_cleanup): SIGSEGV
 * in rte_intr_fd_get on eal-intr-thread, 7 of 10 server exits in
 * rdm_xfer runs over memif. A memif client's control channel goes through
 * the same interrupt thread, so neither role risks it. */
static bool eal_cleanup_safe(uint16_t port)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port, &info) != 0 || !info.driver_name)
		return false;
	return strstr(info.driver_name, "memif") == NULL;
}

/* Stop before close: close alone reads a memif's control channel unlocked.
 * Close releases the queues' mbufs back to the pool, which can then be
 * freed. Runs on the EAL interrupt thread (close_port). */
static void close_port_now(uint16_t port)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	struct rte_mempool *pool;
	struct fdp_libprint libprint;
	int ret;

	fdp_libprint_begin(&libprint); /* net_af_xdp detaches its XDP program */
	ret = rte_eth_dev_stop(port);
	if (ret && ret != -ENODEV)
		FDP_INFO(FI_LOG_CORE, "rte_eth_dev_stop(%u): %s\n", port, rte_strerror(-ret));
	ret = rte_eth_dev_close(port);
	if (ret)
		FDP_INFO(FI_LOG_CORE, "rte_eth_dev_close(%u): %s\n", port, rte_strerror(-ret));
	fdp_libprint_end(&libprint);
	fdp_eal_pool_name(port, name, sizeof(name));
	pool = rte_mempool_lookup(name);
	if (pool)
		rte_mempool_free(pool);
	FDP_INFO(FI_LOG_CORE, "port %u stopped and closed, mbuf pool %s\n", port,
		 pool ? "freed" : "absent");
}

/* The port is stopped and closed on the EAL interrupt thread, through an
 * alarm: that thread also runs net_memif's control channel, and a memif
 * whose peer hangs up is disconnected there (memif_disconnect). Stopped from
 * another thread at that instant, both would run memif_disconnect at once:
 * only its control-channel part is locked, so the shared regions are freed
 * twice (DPDK 22.11: heap corruption, SIGSEGV in rte_free at exit when both
 * processes of a pair exit together). On one thread the two are
 * serialised. The caller waits for the alarm (bounded); an interrupt thread
 * that does not run it in time has the alarm cancelled and the port closed
 * here. */
#define CLOSE_ON_INTR_WAIT_S 5

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint16_t port;
	bool done;
} close_job = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false };

static void close_port_alarm(void *arg)
{
	(void)arg;
	close_port_now(close_job.port);
	pthread_mutex_lock(&close_job.lock);
	close_job.done = true;
	pthread_cond_broadcast(&close_job.cond);
	pthread_mutex_unlock(&close_job.lock);
}

static void close_port(uint16_t port)
{
	struct timespec end;
	bool done;

	close_job.port = port;
	close_job.done = false;
	if (rte_eal_alarm_set(1, close_port_alarm, NULL) != 0) {
		close_port_now(port);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += CLOSE_ON_INTR_WAIT_S;
	pthread_mutex_lock(&close_job.lock);
	while (!close_job.done &&
	       pthread_cond_timedwait(&close_job.cond, &close_job.lock, &end) != ETIMEDOUT)
		;
	done = close_job.done;
	pthread_mutex_unlock(&close_job.lock);
	if (done)
		return;
	/* cancel waits for an alarm that is running: afterwards it either ran
	 * (done) or never will */
	if (rte_eal_alarm_cancel(close_port_alarm, NULL) > 0) {
		FDP_INFO(FI_LOG_CORE, "interrupt thread busy: port %u closed on this thread\n",
			 port);
		close_port_now(port);
	}
}

void fdp_eal_pool_name(uint16_t port, char *out, size_t cap)
{
	snprintf(out, cap, "fdp_pool_%u", port);
}

void fdp_eal_cleanup(void)
{
	bool safe, join;
	int ret;

	/* an early start still under way ends first (the thread runs our code) */
	pthread_mutex_lock(&eal_mutex);
	join = early_joinable;
	early_joinable = false;
	pthread_mutex_unlock(&eal_mutex);
	if (join)
		pthread_join(early_thread, NULL);
	if (fdp_eal_foreign())
		return; /* the parent's DPDK: not ours to stop */
	pthread_mutex_lock(&eal_mutex);
	if (eal_state > 0) {
		safe = eal_cleanup_safe(eal_port_id);
		close_port(eal_port_id);
		if (eal_ours) {
			fdp_files_runtime_dir_remove();
			if (safe) {
				ret = rte_eal_cleanup();
				FDP_INFO(FI_LOG_CORE, "rte_eal_cleanup done: %d\n", ret);
			} else
				FDP_INFO(FI_LOG_CORE, "rte_eal_cleanup skipped: net_memif leaks an interrupt source in DPDK 22.11 (see fi_dpdk(7))\n");
		}
		eal_state = -FI_ENODEV; /* DPDK cannot be started twice */
	}
	atomic_store(&eal_stopped, true);
	/* DPDK threads may still log (interrupt thread): not through fi_log,
	 * whose provider is being torn down */
	atomic_store(&eal_log_off, true);
	pthread_mutex_unlock(&eal_mutex);
}
