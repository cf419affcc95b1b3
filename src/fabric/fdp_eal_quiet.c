/* fdp_eal_quiet.c - keep DPDK's prints off the application's stdout/stderr.
 *
 * rte_eal_init writes outside its log stream on failures: getopt's
 * "<prog>: unrecognized option" and "EAL: FATAL: ..." on stderr, its
 * 100-line usage on stdout. Those fds belong to the application, whose
 * stdout must stay byte-exact what it printed. For the duration of
 * rte_eal_init, fds 1 and 2 point at memfds; afterwards DPDK's part is
 * recognised by its shape (the usage block from "\nUsage: <prog> " on,
 * stderr lines starting "<prog>: " or "EAL: ") and dropped, its first
 * stderr line kept as the reason for the caller's warning, and everything
 * else (another application thread's output meanwhile) is written to the
 * real fds, in order, once they are restored. Residual risk: what another
 * thread wrote during rte_eal_init (tens of ms) comes out late, after
 * anything it writes between the restore and the replay.
 *
 * After rte_eal_init, DPDK itself logs through our log stream, but the
 * libraries of its net_af_xdp PMD do not: libbpf and libxdp print with
 * vfprintf(stderr) (about eight lines when the port's XDP program is
 * loaded: "libxdp: No bpffs found at /sys/fs/bpf", "libbpf: elf: skipping
 * unrecognized data section"), at port setup and at close. Around those
 * calls their print callbacks point at our debug log (fdp_libprint_*). The
 * libraries are found with RTLD_NOLOAD: only when the PMD loaded them, so
 * the provider neither links nor loads them. The callbacks are process-wide:
 * the previous ones (the application's, when it uses libbpf itself) are put
 * back afterwards, unless someone changed them meanwhile; what libbpf
 * prints for another thread during our port setup (milliseconds, once)
 * goes to our debug log too. */
#define _GNU_SOURCE
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

void fdp_quiet_begin(struct fdp_quiet *q)
{
	int i;

	for (i = 0; i < 2; i++) {
		q->saved[i] = -1;
		q->mem[i] = memfd_create(i ? "fdp-eal-stderr" : "fdp-eal-stdout", MFD_CLOEXEC);
		if (q->mem[i] < 0)
			continue;
		q->saved[i] = fcntl(1 + i, F_DUPFD_CLOEXEC, 3);
		if (q->saved[i] < 0 || dup2(q->mem[i], 1 + i) < 0) {
			if (q->saved[i] >= 0)
				close(q->saved[i]);
			q->saved[i] = -1;
			close(q->mem[i]);
			q->mem[i] = -1;
		}
	}
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* The whole memfd (NUL-terminated), or NULL. */
static char *slurp(int fd, size_t *len)
{
	off_t end = lseek(fd, 0, SEEK_END);
	char *buf;
	ssize_t r;

	*len = 0;
	if (end <= 0)
		return NULL;
	buf = malloc((size_t)end + 1);
	if (!buf)
		return NULL;
	r = pread(fd, buf, (size_t)end, 0);
	if (r < 0)
		r = 0;
	buf[r] = '\0';
	*len = (size_t)r;
	return buf;
}

/* stdout: drop DPDK's usage block (it ends rte_eal_init's output). */
static void replay_stdout(int real, const char *prog, char *buf, size_t len)
{
	char mark[64];
	char *at;

	snprintf(mark, sizeof(mark), "\nUsage: %s ", prog);
	at = memmem(buf, len, mark, strlen(mark));
	write_all(real, buf, at ? (size_t)(at - buf) : len);
}

/* stderr: drop DPDK's lines, keep the first as the reason. */
static void replay_stderr(int real, const char *prog, char *buf, size_t len,
			  char *reason, size_t cap)
{
	size_t plen = strlen(prog);
	char *line = buf, *nl;
	size_t n;

	while (line < buf + len) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		n = nl ? (size_t)(nl - line) + 1 : (size_t)(buf + len - line);
		if ((n > plen + 1 && !strncmp(line, prog, plen) && line[plen] == ':') ||
		    !strncmp(line, "EAL: ", 5)) {
			if (reason && !reason[0])
				snprintf(reason, cap, "%.*s", (int)(nl ? n - 1 : n), line);
		} else {
			write_all(real, line, n);
		}
		line += n;
	}
}

void fdp_quiet_end(struct fdp_quiet *q, const char *prog, char *reason, size_t cap)
{
	char *buf;
	size_t len;
	int i;

	if (reason && cap)
		reason[0] = '\0';
	fflush(stdout);
	fflush(stderr);
	for (i = 0; i < 2; i++) {
		if (q->saved[i] < 0)
			continue;
		dup2(q->saved[i], 1 + i);
		close(q->saved[i]);
		buf = slurp(q->mem[i], &len);
		close(q->mem[i]);
		if (!buf)
			continue;
		if (i == 0)
			replay_stdout(1, prog, buf, len);
		else
			replay_stderr(2, prog, buf, len, reason, cap);
		free(buf);
	}
}

/* ---- libbpf and libxdp ---- */

/* libbpf_print_fn_t and libxdp_print_fn_t: (level, format, args); both
 * levels are enums WARN 0, INFO 1, DEBUG 2. */
typedef int (*lib_print_fn)(int level, const char *fmt, va_list ap);
typedef lib_print_fn (*lib_set_print_fn)(lib_print_fn fn);

static const struct {
	const char *const sonames[2];
	const char *setter;
} print_libs[FDP_LIBPRINT_LIBS] = {
	{ { "libbpf.so.1", "libbpf.so.0" }, "libbpf_set_print" },
	{ { "libxdp.so.1", NULL }, "libxdp_set_print" },
};

/* Their lines, into our debug log (they carry their "libbpf: " prefix). */
static int lib_print(int level, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)level;
	if (!fi_log_enabled(&fdp_prov, FI_LOG_DEBUG, FI_LOG_CORE))
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	FDP_DBG(FI_LOG_CORE, "%.*s\n", (int)n, line);
	return 0;
}

static lib_set_print_fn find_setter(unsigned i)
{
	lib_set_print_fn set = NULL;
	void *h = NULL;
	unsigned k;

	for (k = 0; k < 2 && !h && print_libs[i].sonames[k]; k++)
		h = dlopen(print_libs[i].sonames[k], RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return NULL;
	*(void **)&set = dlsym(h, print_libs[i].setter);
	/* the PMD holds the library: the function stays mapped */
	dlclose(h);
	return set;
}

void fdp_libprint_begin(struct fdp_libprint *lp)
{
	unsigned i;

	for (i = 0; i < FDP_LIBPRINT_LIBS; i++) {
		lib_set_print_fn set = find_setter(i);

		lp->set[i] = (void (*)(void))set;
		if (set)
			lp->old[i] = (void (*)(void))set(lib_print);
	}
}

void fdp_libprint_end(struct fdp_libprint *lp)
{
	unsigned i;

	for (i = 0; i < FDP_LIBPRINT_LIBS; i++) {
		lib_set_print_fn set = (lib_set_print_fn)lp->set[i];
		lib_print_fn now;

		if (!set)
			continue;
		now = set((lib_print_fn)lp->old[i]);
		if (now != lib_print)
			set(now); /* changed meanwhile: theirs stays */
	}
}
