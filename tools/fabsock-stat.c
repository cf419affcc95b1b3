/* fabsock-stat: list the processes running libfabsock and their sockets,
 * from each process's statistics segment (src/stack/stk_stat.h, fabsock-stat(1)).
 *
 * Read-only: a segment is mapped PROT_READ and never written, so a reader
 * cannot block or slow the process it reads; a record being changed is
 * copied again (a bounded number of times). Segments of processes that are
 * gone (or whose pid now runs another process) are skipped and removed when
 * the file's owner runs the tool (or root). */
#include "config.h"
#include "stack/stk_stat.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096        /* segments looked at per report */
#define COPY_TRIES 100        /* a record or the provider list being changed */
#define DIR_ENTRIES_MAX 1000000
#define NET_LINES_MAX 1000000 /* lines read from /proc/<pid>/net/tcp{,6} */

struct opts {
	long pid;                 /* 0: every process */
	long wait_s;              /* 0: one report */
	long count;               /* reports with -w; 0: until interrupted */
	bool json;
};

struct sock_view {
	struct stk_stat_rec rec;
	char local[64], remote[64];
	long kernel_rxq, kernel_txq;  /* from /proc/<pid>/net, -1: unknown */
	double rate_tx, rate_rx;      /* bytes/s since the previous report, -1: none */
};

struct proc_view {
	struct stk_stat_hdr hdr;
	char comm[32];
	struct sock_view *socks;
	unsigned nsocks;
};

/* Previous report's byte counts, for rates. */
struct prev_entry {
	uint32_t pid;
	int32_t fd;
	uint64_t ino, tx, rx;
};
static struct prev_entry *prev;
static size_t prev_count;
static double prev_time;

static void usage(FILE *out)
{
	fprintf(out, "usage: fabsock-stat [-p PID] [-w SECONDS [-n COUNT]] [--json]\n"
		     "  -p PID      only this process\n"
		     "  -w SECONDS  report again every SECONDS (1..3600), with rates\n"
		     "  -n COUNT    with -w: stop after COUNT reports (1..1000000)\n"
		     "  --json      one JSON document per report\n");
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = s ? strtol(s, &end, 10) : 0;
	if (!s || !*s || *end || errno || v < lo || v > hi) {
		fprintf(stderr, "fabsock-stat: %s expects a number from %ld to %ld, got '%s'\n", opt,
			lo, hi, s ? s : "");
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		int r = 0;
		if (strcmp(a, "--json") == 0) {
			o->json = true;
		} else if (strcmp(a, "-p") == 0) {
			r = parse_long("-p", val, 1, INT_MAX, &o->pid);
			i++;
		} else if (strcmp(a, "-w") == 0) {
			r = parse_long("-w", val, 1, 3600, &o->wait_s);
			i++;
		} else if (strcmp(a, "-n") == 0) {
			r = parse_long("-n", val, 1, 1000000, &o->count);
			i++;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else {
			fprintf(stderr, "fabsock-stat: unknown argument '%s' (see --help)\n", a);
			return -1;
		}
		if (r)
			return -1;
	}
	if (o->count && !o->wait_s) {
		fprintf(stderr, "fabsock-stat: -n needs -w\n");
		return -1;
	}
	return 0;
}

/* ---- processes ---- */

static uint64_t start_time_of(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	for (int field = 3; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void read_comm(long pid, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	FILE *f = fopen(path, "re");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

/* Copy len bytes (a multiple of 8, 8-aligned) word by word with acquire
 * loads: no load of the copy moves after a sequence number read after it. */
static void copy_words(void *dst, const void *src, size_t len)
{
	const uint64_t *s = src;
	uint64_t *d = dst;
	for (size_t i = 0; i < len / 8; i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
}

/* A record copied whole (its sequence number even and unchanged across the
 * copy); false when it stayed busy or free. */
static bool copy_rec(const struct stk_stat_rec *src, struct stk_stat_rec *dst)
{
	for (int i = 0; i < COPY_TRIES; i++) {
		uint32_t s1 = __atomic_load_n(&src->seq, __ATOMIC_ACQUIRE);
		if (!(s1 & 1)) {
			copy_words(dst, src, sizeof(*dst));
			if (__atomic_load_n(&src->seq, __ATOMIC_ACQUIRE) == s1)
				return dst->used && dst->state != STK_STAT_FREE;
		}
		sched_yield();
	}
	return false;
}

/* An orphan record is shown while its fd is still its socket. */
static bool orphan_alive(long pid, const struct stk_stat_rec *r)
{
	char path[64], link[64], want[64];
	snprintf(path, sizeof(path), "/proc/%ld/fd/%d", pid, r->fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return errno == EACCES; /* cannot tell: show it */
	link[n] = 0;
	snprintf(want, sizeof(want), "socket:[%" PRIu64 "]", r->ino);
	return strcmp(link, want) == 0;
}

static void fmt_addr(const uint8_t *a, char *out, size_t len)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, a, STK_STAT_ADDR_LEN);
	char ip[INET6_ADDRSTRLEN];
	out[0] = 0;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)&ss;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(out, len, "%s:%u", ip, ntohs(s->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)&ss;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(out, len, "[%s]:%u", ip, ntohs(s->sin6_port));
	}
}

/* /proc/<pid>/net/tcp{,6} address "0100007F:1F90" (v4) or 32 hex digits (v6). */
static void fmt_proc_addr(const char *hex, char *out, size_t len)
{
	unsigned port = 0;
	const char *colon = strchr(hex, ':');
	if (!colon)
		return;
	sscanf(colon + 1, "%x", &port);
	size_t n = (size_t)(colon - hex);
	uint8_t b[16];
	if (n != 8 && n != 32)
		return;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		sscanf(hex + 2 * i, "%2x", &v);
		b[i] = (uint8_t)v;
	}
	char ip[INET6_ADDRSTRLEN];
	/* the kernel prints each 32-bit word in host order */
	uint32_t w[4];
	memcpy(w, b, n / 2);
	if (n == 8) {
		inet_ntop(AF_INET, w, ip, sizeof(ip));
		snprintf(out, len, "%s:%u", ip, port);
	} else {
		inet_ntop(AF_INET6, w, ip, sizeof(ip));
		snprintf(out, len, "[%s]:%u", ip, port);
	}
}

/* Kernel view of the sockets of pid by inode: addresses when the record has
 * none, and the kernel's queues. */
static void fill_from_proc_net(long pid, struct proc_view *pv)
{
	static const char *files[] = { "tcp", "tcp6", "udp", "udp6" };
	for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%ld/net/%s", pid, files[f]);
		FILE *fp = fopen(path, "re");
		if (!fp)
			continue;
		for (long n = 0; n < NET_LINES_MAX && fgets(line, sizeof(line), fp); n++) {
			char la[64], ra[64];
			unsigned long txq, rxq;
			unsigned st;
			uint64_t ino;
			if (sscanf(line, " %*s %63s %63s %x %lx:%lx %*s %*s %*s %*s %" SCNu64, la, ra,
				   &st, &txq, &rxq, &ino) != 6)
				continue;
			for (unsigned i = 0; i < pv->nsocks; i++) {
				struct sock_view *s = &pv->socks[i];
				if (s->rec.ino != ino || !ino)
					continue;
				s->kernel_rxq = (long)rxq;
				s->kernel_txq = (long)txq;
				if (!s->local[0])
					fmt_proc_addr(la, s->local, sizeof(s->local));
				if (!s->remote[0] && strncmp(ra, "00000000:0000", 13) != 0 &&
				    strspn(ra, "0:") != strlen(ra))
					fmt_proc_addr(ra, s->remote, sizeof(s->remote));
			}
		}
		fclose(fp);
	}
}

static bool map_ok(const struct stk_stat_hdr *h, long pid, size_t size)
{
	uint64_t magic, want;
	memcpy(&want, STK_STAT_MAGIC, sizeof(want));
	magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE);
	return magic == want &&
	       h->version == STK_STAT_VERSION && h->hdr_size >= sizeof(*h) &&
	       h->rec_size == sizeof(struct stk_stat_rec) && h->rec_max <= 1u << 20 &&
	       (uint64_t)h->hdr_size + (uint64_t)h->rec_max * h->rec_size <= size &&
	       h->counter_count <= STK_STAT_COUNTERS_MAX && h->pid == (uint32_t)pid;
}

/* Copy the header (its provider list whole) and the live records. */
static void read_segment(const struct stk_stat_hdr *h, long pid, struct proc_view *pv)
{
	memcpy(&pv->hdr, h, sizeof(pv->hdr));
	for (int i = 0; i < COPY_TRIES; i++) {
		uint32_t s1 = __atomic_load_n(&h->prov_seq, __ATOMIC_ACQUIRE);
		copy_words(pv->hdr.providers, h->providers, sizeof(h->providers));
		if (!(s1 & 1) && __atomic_load_n(&h->prov_seq, __ATOMIC_ACQUIRE) == s1)
			break;
		pv->hdr.providers[0] = 0;
	}
	pv->hdr.providers[sizeof(pv->hdr.providers) - 1] = 0;
	pv->hdr.lib_version[sizeof(pv->hdr.lib_version) - 1] = 0;
	for (unsigned c = 0; c < pv->hdr.counter_count; c++) {
		pv->hdr.counter_names[c][STK_STAT_NAME_LEN - 1] = 0;
		pv->hdr.counters[c] = __atomic_load_n(&h->counters[c], __ATOMIC_RELAXED);
	}
	uint32_t used = __atomic_load_n(&h->rec_used, __ATOMIC_ACQUIRE);
	if (used > h->rec_max)
		used = h->rec_max;
	const struct stk_stat_rec *recs = (const void *)((const char *)h + h->hdr_size);
	pv->socks = calloc(used ? used : 1, sizeof(*pv->socks));
	pv->nsocks = 0;
	bool need_net = false;
	for (uint32_t i = 0; pv->socks && i < used; i++) {
		struct sock_view *s = &pv->socks[pv->nsocks];
		if (!__atomic_load_n(&recs[i].used, __ATOMIC_ACQUIRE) || !copy_rec(&recs[i], &s->rec))
			continue;
		if (s->rec.orphan && !orphan_alive(pid, &s->rec))
			continue;
		s->rec.provider[sizeof(s->rec.provider) - 1] = 0;
		s->rec.reason[sizeof(s->rec.reason) - 1] = 0;
		fmt_addr(s->rec.local, s->local, sizeof(s->local));
		fmt_addr(s->rec.remote, s->remote, sizeof(s->remote));
		s->kernel_rxq = s->kernel_txq = -1;
		s->rate_tx = s->rate_rx = -1;
		need_net = true;
		pv->nsocks++;
	}
	if (need_net)
		fill_from_proc_net(pid, pv);
}

/* A file shortened under our mapping (only its owner can) raises SIGBUS
 * when read: the process is skipped, the tool goes on. */
static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig)
{
	if (bus_armed)
		siglongjmp(bus_jmp, 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int read_guarded(const struct stk_stat_hdr *h, size_t size, long pid,
			struct proc_view *pv, bool *gone)
{
	if (sigsetjmp(bus_jmp, 1)) {
		bus_armed = 0;
		free(pv->socks);
		pv->socks = NULL;
		pv->nsocks = 0;
		return 0;
	}
	bus_armed = 1;
	int ret = 0;
	if (map_ok(h, pid, size)) {
		uint64_t now = start_time_of(pid);
		if (now && h->start_time && now != h->start_time) {
			*gone = true; /* the pid runs another process now */
		} else {
			read_segment(h, pid, pv);
			read_comm(pid, pv->comm, sizeof(pv->comm));
			ret = 1;
		}
	}
	bus_armed = 0;
	return ret;
}

/* 1: pv filled; 0: not a live process's segment (removed when stale). */
static int load_process(int dfd, const char *name, long pid, struct proc_view *pv)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (geteuid() != 0 && st.st_uid != geteuid())
		return 0;
	bool gone = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
	int fd = gone ? -1 : openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	int ret = 0;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (size_t)st.st_size >= sizeof(struct stk_stat_hdr) && (geteuid() == 0 || st.st_uid == geteuid())) {
		size_t size = (size_t)st.st_size;
		void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			ret = read_guarded(p, size, pid, pv, &gone);
			munmap(p, size);
		}
	}
	if (fd >= 0)
		close(fd);
	if (gone)
		unlinkat(dfd, name, 0); /* allowed for its owner (and root) only */
	return ret;
}

static size_t load_all(const struct opts *o, struct proc_view *pvs)
{
	DIR *dir = opendir(STK_STAT_DIR);
	if (!dir)
		return 0;
	size_t n = 0, plen = strlen(STK_STAT_PREFIX);
	struct dirent *de;
	for (long seen = 0; n < MAX_PROCS && seen < DIR_ENTRIES_MAX && (de = readdir(dir)); seen++) {
		if (strncmp(de->d_name, STK_STAT_PREFIX, plen) != 0)
			continue;
		char *end;
		long pid = strtol(de->d_name + plen, &end, 10);
		if (*end || pid <= 0 || (o->pid && pid != o->pid))
			continue;
		memset(&pvs[n], 0, sizeof(pvs[n]));
		if (load_process(dirfd(dir), de->d_name, pid, &pvs[n]) == 1)
			n++;
	}
	closedir(dir);
	return n;
}

/* ---- rates and counters ---- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void apply_rates(struct proc_view *pvs, size_t n, double t)
{
	double dt = t - prev_time;
	size_t total = 0;
	for (size_t p = 0; p < n; p++)
		total += pvs[p].nsocks;
	struct prev_entry *next = calloc(total ? total : 1, sizeof(*next));
	size_t k = 0;
	for (size_t p = 0; p < n; p++) {
		for (unsigned i = 0; i < pvs[p].nsocks; i++) {
			struct sock_view *s = &pvs[p].socks[i];
			for (size_t j = 0; prev && dt > 0 && j < prev_count; j++) {
				const struct prev_entry *e = &prev[j];
				if (e->pid == pvs[p].hdr.pid && e->fd == s->rec.fd && e->ino == s->rec.ino &&
				    s->rec.bytes_tx >= e->tx && s->rec.bytes_rx >= e->rx) {
					s->rate_tx = (double)(s->rec.bytes_tx - e->tx) / dt;
					s->rate_rx = (double)(s->rec.bytes_rx - e->rx) / dt;
					break;
				}
			}
			if (next)
				next[k++] = (struct prev_entry){ pvs[p].hdr.pid, s->rec.fd, s->rec.ino,
								 s->rec.bytes_tx, s->rec.bytes_rx };
		}
	}
	free(prev);
	prev = next;
	prev_count = next ? k : 0;
	prev_time = t;
}

static int counter_index(const struct stk_stat_hdr *h, const char *name)
{
	for (unsigned c = 0; c < h->counter_count; c++)
		if (strcmp(h->counter_names[c], name) == 0)
			return (int)c;
	return -1;
}

/* The counters as FABSOCK_LOG=info dumps them: the folded ones plus what
 * open connections hold (their records' bytes and messages). */
static void add_live(struct proc_view *pv)
{
	struct stk_stat_hdr *h = &pv->hdr;
	int mtx = counter_index(h, "msgs_tx"), mrx = counter_index(h, "msgs_rx");
	for (unsigned i = 0; i < pv->nsocks; i++) {
		const struct stk_stat_rec *r = &pv->socks[i].rec;
		if (r->orphan)
			continue;
		char name[64];
		snprintf(name, sizeof(name), "bytes_tx_%s", r->provider);
		int tx = counter_index(h, name);
		snprintf(name, sizeof(name), "bytes_rx_%s", r->provider);
		int rx = counter_index(h, name);
		if (tx >= 0)
			h->counters[tx] += r->bytes_tx;
		if (rx >= 0)
			h->counters[rx] += r->bytes_rx;
		if (mtx >= 0)
			h->counters[mtx] += r->msgs_tx;
		if (mrx >= 0)
			h->counters[mrx] += r->msgs_rx;
	}
}

static const char *state_name(uint8_t st)
{
	switch (st) {
	case STK_STAT_NEGOTIATING: return "negotiating";
	case STK_STAT_FABRIC: return "accelerated";
	case STK_STAT_KERNEL: return "kernel";
	case STK_STAT_MIGRATED: return "migrated";
	case STK_STAT_LISTENING: return "listening";
	default: return "unknown";
	}
}

/* Sent bytes the peer has not granted back: on the fabric only. */
static uint64_t send_queue(const struct stk_stat_rec *r)
{
	return r->state == STK_STAT_FABRIC && r->tx_window > r->tx_credits
		       ? r->tx_window - r->tx_credits : 0;
}

/* The queues shown: the stream's on the fabric, else the kernel's when known. */
static uint64_t shown_rxq(const struct sock_view *s)
{
	return s->rec.state != STK_STAT_FABRIC && s->kernel_rxq >= 0 ? (uint64_t)s->kernel_rxq
								      : s->rec.rx_queue;
}

static uint64_t shown_txq(const struct sock_view *s)
{
	return s->rec.state != STK_STAT_FABRIC && s->kernel_txq >= 0 ? (uint64_t)s->kernel_txq
								      : send_queue(&s->rec);
}

/* ---- output ---- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_sock(const struct sock_view *s)
{
	const struct stk_stat_rec *r = &s->rec;
	printf("{\"fd\":%d,\"local\":", r->fd);
	json_str(s->local);
	printf(",\"remote\":");
	json_str(s->remote);
	printf(",\"state\":\"%s\",\"provider\":", state_name(r->state));
	json_str(r->provider);
	printf(",\"reason\":");
	json_str(r->reason);
	printf(",\"bytes_tx\":%" PRIu64 ",\"bytes_rx\":%" PRIu64 ",\"msgs_tx\":%" PRIu64
	       ",\"msgs_rx\":%" PRIu64 ",\"rx_queue\":%" PRIu64 ",\"send_queue\":%" PRIu64
	       ",\"credits\":%" PRIu64 ",\"credit_owed\":%" PRIu64
	       ",\"kernel_rx_queue\":%ld,\"kernel_tx_queue\":%ld",
	       r->bytes_tx, r->bytes_rx, r->msgs_tx, r->msgs_rx, r->rx_queue, send_queue(r),
	       r->tx_credits, r->credit_owed, s->kernel_rxq, s->kernel_txq);
	if (s->rate_tx >= 0)
		printf(",\"tx_bytes_per_s\":%.0f,\"rx_bytes_per_s\":%.0f", s->rate_tx, s->rate_rx);
	putchar('}');
}

static void print_json(const struct proc_view *pvs, size_t n)
{
	printf("{\"time\":%ld,\"processes\":[", (long)time(NULL));
	for (size_t p = 0; p < n; p++) {
		const struct stk_stat_hdr *h = &pvs[p].hdr;
		printf("%s{\"pid\":%u,\"comm\":", p ? "," : "", h->pid);
		json_str(pvs[p].comm);
		printf(",\"version\":");
		json_str(h->lib_version);
		printf(",\"providers\":[");
		char provs[sizeof(h->providers)];
		memcpy(provs, h->providers, sizeof(provs));
		int k = 0;
		for (char *save = NULL, *t = strtok_r(provs, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			printf("%s", k++ ? "," : "");
			json_str(t);
		}
		printf("],\"socket_overflow\":%" PRIu64 ",\"counters\":{", h->rec_overflow);
		for (unsigned c = 0; c < h->counter_count; c++) {
			printf("%s", c ? "," : "");
			json_str(h->counter_names[c]);
			printf(":%" PRIu64, h->counters[c]);
		}
		printf("},\"sockets\":[");
		for (unsigned i = 0; i < pvs[p].nsocks; i++) {
			printf("%s", i ? "," : "");
			json_sock(&pvs[p].socks[i]);
		}
		printf("]}");
	}
	printf("]}\n");
}

static void print_human(const struct proc_view *pvs, size_t n)
{
	for (size_t p = 0; p < n; p++) {
		const struct stk_stat_hdr *h = &pvs[p].hdr;
		printf("pid %u (%s)  libfabsock %s  providers %s  sockets %u", h->pid, pvs[p].comm,
		       h->lib_version, h->providers[0] ? h->providers : "-", pvs[p].nsocks);
		if (h->rec_overflow)
			printf(" (+%" PRIu64 " not shown: table full)", h->rec_overflow);
		printf("\n  counters:");
		for (unsigned c = 0; c < h->counter_count; c++)
			if (h->counters[c])
				printf(" %s=%" PRIu64, h->counter_names[c], h->counters[c]);
		printf("\n  %4s %-22s %-22s %-16s %12s %12s %9s %9s %8s %8s %8s",
		       "FD", "LOCAL", "REMOTE", "STATE", "TX_BYTES", "RX_BYTES", "TX_MSGS", "RX_MSGS",
		       "RECV_Q", "SEND_Q", "CREDITS");
		if (prev_time)
			printf(" %10s %10s", "TX_B/s", "RX_B/s");
		printf("  REASON\n");
		for (unsigned i = 0; i < pvs[p].nsocks; i++) {
			const struct sock_view *s = &pvs[p].socks[i];
			const struct stk_stat_rec *r = &s->rec;
			char state[40];
			snprintf(state, sizeof(state), "%s%s%s", state_name(r->state),
				 r->provider[0] ? " " : "", r->provider);
			printf("  %4d %-22s %-22s %-16s %12" PRIu64 " %12" PRIu64 " %9" PRIu64 " %9" PRIu64
			       " %8" PRIu64 " %8" PRIu64 " %8" PRIu64, r->fd, s->local[0] ? s->local : "-",
			       s->remote[0] ? s->remote : "-", state, r->bytes_tx, r->bytes_rx, r->msgs_tx,
			       r->msgs_rx, shown_rxq(s), shown_txq(s), r->tx_credits);
			if (prev_time)
				printf(" %10.0f %10.0f", s->rate_tx < 0 ? 0 : s->rate_tx,
				       s->rate_rx < 0 ? 0 : s->rate_rx);
			printf("  %s\n", r->reason);
		}
	}
	if (!n)
		printf("no process of yours runs libfabsock (or none has made a socket yet)\n");
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	if (parse_args(argc, argv, &o) != 0)
		return 2;
	signal(SIGBUS, on_sigbus);
	struct proc_view *pvs = calloc(MAX_PROCS, sizeof(*pvs));
	if (!pvs) {
		fprintf(stderr, "fabsock-stat: out of memory\n");
		return 1;
	}
	bool missing = false;
	for (long round = 0;; round++) {
		size_t n = load_all(&o, pvs);
		if (round == 0 && o.pid && n == 0) {
			fprintf(stderr, "fabsock-stat: process %ld has no libfabsock statistics (not "
				"running, not yours, or no socket yet)\n", o.pid);
			missing = true;
			if (!o.wait_s)
				break;
		}
		for (size_t p = 0; p < n; p++)
			add_live(&pvs[p]);
		if (o.wait_s)
			apply_rates(pvs, n, now_s());
		if (o.json)
			print_json(pvs, n);
		else if (!missing || round)
			print_human(pvs, n);
		fflush(stdout);
		for (size_t p = 0; p < n; p++)
			free(pvs[p].socks);
		if (!o.wait_s || (o.count && round + 1 >= o.count))
			break;
		if (!o.json)
			printf("\n");
		struct timespec ts = { o.wait_s, 0 };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	free(prev);
	free(pvs);
	return missing ? 1 : 0;
}
