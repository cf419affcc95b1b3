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
 * anything it writes between the restore and the replay. */
#define _GNU_SOURCE
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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
