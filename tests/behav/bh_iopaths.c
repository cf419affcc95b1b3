/* Every way glibc moves bytes through a TCP socket, each on a fresh pair
 * twice: "cold" (the call is the connection's first data call: libfabsock is
 * still negotiating) and "warm" (after a round trip: accelerated, with bytes
 * already received and not read yet where the path must hand them over).
 * Bytes are checked exactly (content and count), then the stream is checked
 * to go on correctly afterwards.
 * Paths: splice both ways, tee/vmsplice/copy_file_range (refused for a
 * socket), dprintf/vdprintf and their fortified entry points, stdio on
 * fdopen'ed sockets (reads, writes, fflush, fclose), syscall() for the data
 * and fd calls, preadv/pwritev/preadv2/pwritev2/pread, POSIX aio, and the
 * iovec rules: NULL/empty elements among real ones, more than IOV_MAX
 * elements, recv(NULL, n, MSG_TRUNC). */
#include "config.h"
#include "bh.h"

#include <aio.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The fortified entry points, called by name (gcc calls them only under
 * _FORTIFY_SOURCE; this program is built without it, so plain dprintf is
 * what it references). */
int __dprintf_chk(int fd, int flag, const char *fmt, ...);
int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap);

enum { PAYLOAD = 5000 };

static const char *phase_name(int warm)
{
	return warm ? "warm" : "cold";
}


/* Wait until fd has n bytes to read (bounded): they were received and not
 * read, which the paths that hand a connection to the kernel must keep. */
static void wait_inq(int fd, int n)
{
	for (int i = 0; i < 500; i++) {
		int inq = 0;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		poll(&p, 1, 10);
		if (ioctl(fd, FIONREAD, &inq) == 0 && inq >= n)
			return;
	}
	bh_say("  (%d bytes not readable within 5 s)", n);
}

/* Read exactly len bytes of pattern seed and say whether they match. */
static int got_pattern(int fd, uint32_t seed, size_t len)
{
	static char in[PAYLOAD], want[PAYLOAD];

	if (bh_read_all(fd, in, len) != (ssize_t)len)
		return 0;
	bh_fill(want, len, seed, 0);
	return memcmp(in, want, len) == 0;
}

/* The stream goes on: one more message each way, then EOF after close. */
static void still_fine(int c, int s)
{
	char b[8] = { 0 };

	bh_write_all(c, "tail", 4);
	int ok = bh_read_all(s, b, 4) == 4 && memcmp(b, "tail", 4) == 0;
	bh_write_all(s, "back", 4);
	ok = ok && bh_read_all(c, b, 4) == 4 && memcmp(b, "back", 4) == 0;
	bh_say("  stream goes on: %d", ok);
	BH_CHECK(ok);
	close(c);
	bh_say("  then EOF: %zd", read(s, b, sizeof(b)));
	close(s);
}

/* ---- splice, tee, vmsplice, copy_file_range ---- */

static void test_splice(int warm)
{
	static char buf[PAYLOAD];
	int c, s, p[2];
	size_t moved = 0;

	bh_say("-- splice socket -> pipe -> socket (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	if (pipe(p) != 0)
		bh_fail(__FILE__, __LINE__, "pipe");
	bh_fill(buf, PAYLOAD, 7, 0);
	bh_ok("write(client, 5000)", bh_write_all(c, buf, PAYLOAD));
	if (warm)
		wait_inq(s, PAYLOAD);
	/* server: socket -> pipe, pipe -> back to the client's side */
	for (int i = 0; i < 1000 && moved < PAYLOAD; i++) {
		ssize_t n = splice(s, NULL, p[1], NULL, PAYLOAD - moved, 0);
		if (n <= 0) {
			bh_show("splice(server -> pipe)", n);
			break;
		}
		ssize_t k = 0;
		while (k < n) {
			ssize_t m = splice(p[0], NULL, s, NULL, (size_t)(n - k), 0);
			if (m <= 0) {
				bh_show("splice(pipe -> server)", m);
				break;
			}
			k += m;
		}
		moved += (size_t)n;
	}
	bh_say("  spliced %zu bytes through the pipe", moved);
	int ok = got_pattern(c, 7, PAYLOAD);
	bh_say("  echoed bytes match: %d", ok);
	BH_CHECK(moved == PAYLOAD && ok);

	bh_err("tee(socket -> pipe)", tee(s, p[1], 10, 0), EINVAL);
	bh_err("tee(pipe -> socket)", tee(p[0], s, 10, 0), EINVAL);
	struct iovec v = { .iov_base = buf, .iov_len = 10 };
	bh_err("vmsplice(socket)", vmsplice(c, &v, 1, 0), EBADF);
	bh_err("copy_file_range(socket -> socket)", copy_file_range(s, NULL, c, NULL, 10, 0),
	       EINVAL);
	bh_err("splice(socket -> socket)", splice(s, NULL, c, NULL, 10, 0), EINVAL);
	close(p[0]);
	close(p[1]);
	still_fine(c, s);
}

/* splice into a pipe that cannot take everything: what stays is readable. */
static void test_splice_full_pipe(void)
{
	static char buf[PAYLOAD];
	int c, s, p[2];

	bh_say("-- splice into a full pipe (warm)");
	bh_tcp_pair_warm(&c, &s, 1);
	if (pipe(p) != 0)
		bh_fail(__FILE__, __LINE__, "pipe");
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	memset(buf, 'x', 4096);
	bh_show("fill the pipe", write(p[1], buf, 4096));
	bh_fill(buf, 100, 8, 0);
	bh_ok("write(client, 100)", write(c, buf, 100));
	wait_inq(s, 100);
	bh_err("splice(server -> full pipe)", splice(s, NULL, p[1], NULL, 100, 0), EAGAIN);
	fcntl(p[1], F_SETFL, 0);
	bh_err("splice(server -> full blocking pipe, SPLICE_F_NONBLOCK)",
	       splice(s, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK), EAGAIN);
	int ok = got_pattern(s, 8, 100);
	bh_say("  bytes still read from the socket: %d", ok);
	BH_CHECK(ok);
	close(p[0]);
	close(p[1]);
	still_fine(c, s);
}

/* ---- dprintf ---- */

static int vd(int fd, int chk, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = chk ? __vdprintf_chk(fd, 1, fmt, ap) : vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}

static void test_dprintf(int warm)
{
	char want[256], got[256] = { 0 };
	int c, s;

	bh_say("-- dprintf family (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	/* the server speaks first, as a greeting would */
	bh_ok("dprintf(server)", dprintf(s, "220 ready %d\r\n", 42));
	bh_ok("__dprintf_chk(server)", __dprintf_chk(s, 1, "%s-%05d\n", "id", 7));
	int n = snprintf(want, sizeof(want), "220 ready %d\r\n%s-%05d\n", 42, "id", 7);
	int ok = bh_read_all(c, got, (size_t)n) == n && memcmp(got, want, (size_t)n) == 0;
	bh_say("  client read the text: %d", ok);
	BH_CHECK(ok);
	bh_ok("vdprintf(client)", vd(c, 0, "GET /%s\n", "index"));
	bh_ok("__vdprintf_chk(client)", vd(c, 1, "%0600d\n", 3)); /* longer than a small buffer */
	n = snprintf(want, sizeof(want), "GET /%s\n", "index");
	ok = bh_read_all(s, got, (size_t)n) == n && memcmp(got, want, (size_t)n) == 0;
	static char big[700], bigwant[700];
	int bn = snprintf(bigwant, sizeof(bigwant), "%0600d\n", 3);
	ok = ok && bh_read_all(s, big, (size_t)bn) == bn && memcmp(big, bigwant, (size_t)bn) == 0;
	bh_say("  server read the text: %d", ok);
	BH_CHECK(ok);
	still_fine(c, s);
}

/* ---- stdio ---- */

static void test_stdio(int warm)
{
	char line[64];
	int c, s;

	bh_say("-- stdio on fdopen'ed sockets (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	bh_ok("write(client, two lines)", write(c, "one\ntwo\n", 8));
	if (warm)
		wait_inq(s, 8);
	FILE *in = fdopen(s, "r+");
	FILE *out = fdopen(c, "w");
	BH_CHECK(in && out);
	if (!in || !out)
		return;
	setvbuf(in, NULL, _IOFBF, 4096);
	bh_say("  fgets: \"%s\"", fgets(line, sizeof(line), in) ? strtok(line, "\n") : "(null)");
	bh_say("  fgets: \"%s\"", fgets(line, sizeof(line), in) ? strtok(line, "\n") : "(null)");
	bh_show("fprintf(client stream)", fprintf(out, "three %d\n", 3));
	bh_show("fflush(client stream)", fflush(out));
	bh_say("  fgets: \"%s\"", fgets(line, sizeof(line), in) ? strtok(line, "\n") : "(null)");
	bh_show("fputs(server stream)", fputs("reply\n", in));
	bh_show("fflush(server stream)", fflush(in));
	memset(line, 0, sizeof(line));
	bh_show("read(client)", bh_read_all(c, line, 6));
	bh_say("  client got \"%.5s\"", line);
	static char buf[PAYLOAD], got[PAYLOAD];
	bh_fill(buf, PAYLOAD, 9, 0);
	bh_show("fwrite(client stream, 5000)", (long)fwrite(buf, 1, PAYLOAD, out));
	bh_show("fclose(client stream)", fclose(out));
	size_t n = fread(got, 1, PAYLOAD, in);
	bh_say("  fread %zu, match %d", n, n == PAYLOAD && memcmp(got, buf, PAYLOAD) == 0);
	BH_CHECK(n == PAYLOAD && memcmp(got, buf, PAYLOAD) == 0);
	bh_say("  then fgetc: %d (EOF after the client's fclose)", fgetc(in));
	bh_show("fclose(server stream)", fclose(in));
}

/* A socket made stdin and stdout (dup2), used through stdio, as an
 * inetd-style server does; the transcript's stdout is put back after. */
static void test_stdstreams(int warm)
{
	char line[64] = { 0 };
	int c, s;

	bh_say("-- stdin and stdout on a socket (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	bh_ok("write(client, request)", write(c, "GET /\n", 6));
	if (warm)
		wait_inq(s, 6);
	fflush(stdout);
	int saved_in = dup(0), saved_out = dup(1);
	dup2(s, 0);
	dup2(s, 1);
	clearerr(stdin);
	char *got = fgets(line, sizeof(line), stdin);
	printf("reply to %s", got ? line : "(nothing)\n");
	fflush(stdout);
	dup2(saved_out, 1);
	dup2(saved_in, 0);
	close(saved_out);
	close(saved_in);
	clearerr(stdin);
	bh_say("  stdin read \"%s\"", got ? strtok(line, "\n") : "(null)");
	memset(line, 0, sizeof(line));
	bh_show("read(client)", bh_read_all(c, line, 15));
	bh_say("  client got \"%.14s\"", line);
	BH_CHECK(memcmp(line, "reply to GET /\n", 15) == 0);
	still_fine(c, s);
}

/* ---- syscall() ---- */

/* One side uses syscall(), the other the ordinary calls, both ways. */
static void test_syscall(int warm)
{
	static char buf[PAYLOAD], got[PAYLOAD];
	int c, s;

	bh_say("-- syscall() (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	bh_fill(buf, PAYLOAD, 10, 0);
	bh_show("syscall(SYS_write, client, 500)", syscall(SYS_write, c, buf, 500));
	bh_show("recv(server, 500, MSG_WAITALL)", recv(s, got, 500, MSG_WAITALL));
	bh_show("send(server, 500)", send(s, buf + 500, 500, 0));
	bh_show("syscall(SYS_recvfrom, client, 500, MSG_WAITALL)",
		syscall(SYS_recvfrom, c, got + 500, 500, MSG_WAITALL, NULL, NULL));
	bh_show("syscall(SYS_sendto, client, 500)",
		syscall(SYS_sendto, c, buf + 1000, 500, 0, NULL, 0));
	bh_show("syscall(SYS_read, server, 500)", syscall(SYS_read, s, got + 1000, 500));
	struct iovec v[2] = { { buf + 1500, 250 }, { buf + 1750, 250 } };
	bh_show("syscall(SYS_writev, server, 2 x 250)", syscall(SYS_writev, s, v, 2));
	bh_show("read(client, 500)", bh_read_all(c, got + 1500, 500));
	v[0].iov_base = buf + 2000;
	v[1].iov_base = buf + 2250;
	bh_show("writev(client, 2 x 250)", writev(c, v, 2));
	wait_inq(s, 500);
	struct iovec r[2] = { { got + 2000, 300 }, { got + 2300, 200 } };
	bh_show("syscall(SYS_readv, server, 300 + 200)", syscall(SYS_readv, s, r, 2));
	struct msghdr m = { .msg_iov = v, .msg_iovlen = 2 };
	v[0].iov_base = buf + 2500;
	v[1].iov_base = buf + 2750;
	bh_show("syscall(SYS_sendmsg, server, 2 x 250)", syscall(SYS_sendmsg, s, &m, 0));
	bh_show("recv(client, 500, MSG_WAITALL)", recv(c, got + 2500, 500, MSG_WAITALL));
	v[0].iov_base = buf + 3000;
	v[1].iov_base = buf + 3250;
	bh_show("sendmsg(client, 2 x 250)", sendmsg(c, &m, 0));
	struct iovec r1 = { got + 3000, 500 };
	struct msghdr rm = { .msg_iov = &r1, .msg_iovlen = 1 };
	bh_show("syscall(SYS_recvmsg, server, 500, MSG_WAITALL)",
		syscall(SYS_recvmsg, s, &rm, MSG_WAITALL));
	int ok = memcmp(got, buf, 3500) == 0;
	bh_say("  3500 bytes match: %d", ok);
	BH_CHECK(ok);
	bh_show("syscall(SYS_shutdown, client, SHUT_WR)", syscall(SYS_shutdown, c, SHUT_WR));
	bh_show("read(server) after it", read(s, got, 10));
	bh_show("syscall(SYS_close, client)", syscall(SYS_close, c));
	bh_show("syscall(SYS_close, server)", syscall(SYS_close, s));
	bh_show("syscall(SYS_getpid) is libc's", syscall(SYS_getpid) == getpid());
}

/* ---- positioned reads and writes ---- */

static void test_positioned(int warm)
{
	char b[16] = { 0 };
	int c, s;

	bh_say("-- preadv/pwritev/preadv2/pwritev2/pread/pwrite (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	struct iovec w = { "abcdef", 6 }, r = { b, 6 };
	bh_err("pwritev(offset 0)", pwritev(c, &w, 1, 0), ESPIPE);
	bh_err("pwrite(offset 0)", pwrite(c, "x", 1, 0), ESPIPE);
	bh_err("pwritev2(offset 0)", pwritev2(c, &w, 1, 0, 0), ESPIPE);
	bh_err("pwritev2(offset -1, unknown flag)", pwritev2(c, &w, 1, -1, 0x40000000),
	       EOPNOTSUPP);
	bh_ok("pwritev2(offset -1, RWF_DSYNC)", pwritev2(c, &w, 1, -1, RWF_DSYNC));
	if (warm)
		wait_inq(s, 6);
	bh_err("preadv(offset 0)", preadv(s, &r, 1, 0), ESPIPE);
	bh_err("preadv(offset -1)", preadv(s, &r, 1, -1), EINVAL);
	bh_err("pread(offset 0)", pread(s, b, 6, 0), ESPIPE);
	bh_err("preadv2(offset 5)", preadv2(s, &r, 1, 5, 0), ESPIPE);
	bh_err("preadv2(offset -2)", preadv2(s, &r, 1, -2, 0), EINVAL);
	bh_ok("preadv2(offset -1, 0)", preadv2(s, &r, 1, -1, 0));
	bh_say("  got \"%s\"", b);
	BH_CHECK(memcmp(b, "abcdef", 6) == 0);
	bh_err("preadv2(offset -1, RWF_NOWAIT) with nothing there",
	       preadv2(s, &r, 1, -1, RWF_NOWAIT), EAGAIN);
	still_fine(c, s);
}

/* ---- POSIX aio ---- */

static long aio_wait(struct aiocb *cb)
{
	const struct aiocb *list[1] = { cb };
	struct timespec t = { 5, 0 };
	for (int i = 0; i < 100 && aio_error(cb) == EINPROGRESS; i++)
		aio_suspend(list, 1, &t);
	int err = aio_error(cb);
	long ret = aio_return(cb);
	if (err) {
		errno = err;
		return -1;
	}
	return ret;
}

static void test_aio(int warm)
{
	static char buf[PAYLOAD], got[PAYLOAD];
	int c, s;

	bh_say("-- POSIX aio (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	bh_fill(buf, PAYLOAD, 11, 0);
	/* bytes already received when the aio starts */
	bh_ok("write(client, 1000)", write(c, buf, 1000));
	if (warm)
		wait_inq(s, 1000);
	struct aiocb rd = { .aio_fildes = s, .aio_buf = got, .aio_nbytes = 1000 };
	rd.aio_sigevent.sigev_notify = SIGEV_NONE;
	bh_ok("aio_read(server, 1000)", aio_read(&rd));
	bh_show("  completed with", aio_wait(&rd));
	struct aiocb wr = { .aio_fildes = c, .aio_buf = buf + 1000, .aio_nbytes = 3000 };
	wr.aio_sigevent.sigev_notify = SIGEV_NONE;
	bh_ok("aio_write(client, 3000)", aio_write(&wr));
	bh_show("  completed with", aio_wait(&wr));
	size_t have = (size_t)(rd.__return_value > 0 ? rd.__return_value : 0);
	for (int i = 0; i < 100 && have < 4000; i++) {
		struct aiocb more = { .aio_fildes = s, .aio_buf = got + have,
				      .aio_nbytes = 4000 - have };
		more.aio_sigevent.sigev_notify = SIGEV_NONE;
		if (aio_read(&more) != 0)
			break;
		long n = aio_wait(&more);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	int ok = have == 4000 && memcmp(got, buf, 4000) == 0;
	bh_say("  server read 4000 bytes through aio, match %d", ok);
	BH_CHECK(ok);
	still_fine(c, s);
}

/* ---- iovec rules ---- */

static void test_iovmax(int warm)
{
	static struct iovec many[IOV_MAX + 1];
	static char one[IOV_MAX + 1];
	char b[8] = { 0 };
	int c, s;

	bh_say("-- more than IOV_MAX elements (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	for (int i = 0; i <= IOV_MAX; i++) {
		one[i] = (char)('a' + i % 26);
		many[i] = (struct iovec){ one + i, 1 };
	}
	struct msghdr m = { .msg_iov = many, .msg_iovlen = IOV_MAX + 1 };
	volatile int negative = -1; /* gcc refuses a constant negative count */
	bh_err("writev(IOV_MAX + 1)", writev(c, many, IOV_MAX + 1), EINVAL);
	bh_err("sendmsg(IOV_MAX + 1)", sendmsg(c, &m, 0), EMSGSIZE);
	bh_err("writev(-1)", writev(c, many, negative), EINVAL);
	bh_ok("writev(IOV_MAX)", writev(c, many, IOV_MAX));
	wait_inq(s, IOV_MAX);
	bh_err("readv(IOV_MAX + 1)", readv(s, many, IOV_MAX + 1), EINVAL);
	bh_err("recvmsg(IOV_MAX + 1)", recvmsg(s, &m, 0), EMSGSIZE);
	bh_ok("recv(1020, MSG_WAITALL)", recv(s, one, 1020, MSG_WAITALL));
	bh_show("recv(4, DONTWAIT) of the rest", recv(s, b, 4, MSG_DONTWAIT));
	bh_say("  rest = \"%.4s\"", b);
	still_fine(c, s);
}

static void test_trunc(int warm)
{
	static char buf[1100];
	char b[8] = { 0 };
	int c, s;

	bh_say("-- recv(NULL, n, MSG_TRUNC) discards (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	for (int i = 0; i < (int)sizeof(buf); i++)
		buf[i] = (char)('a' + i % 26);
	bh_ok("write(client, 1024)", write(c, buf, 1024));
	wait_inq(s, 1024);
	bh_ok("recv(NULL, 50, MSG_TRUNC|MSG_PEEK)", recv(s, NULL, 50, MSG_TRUNC | MSG_PEEK));
	bh_ok("recv(NULL, 50, MSG_TRUNC)", recv(s, NULL, 50, MSG_TRUNC));
	bh_ok("recv(NULL, 900, MSG_TRUNC|MSG_WAITALL)",
	      recv(s, NULL, 900, MSG_TRUNC | MSG_WAITALL));
	struct iovec t = { NULL, 70 };
	struct msghdr tm = { .msg_iov = &t, .msg_iovlen = 1 };
	bh_ok("recvmsg({NULL, 70}, MSG_TRUNC)", recvmsg(s, &tm, MSG_TRUNC));
	bh_show("recv(4, DONTWAIT) of the rest", recv(s, b, 4, MSG_DONTWAIT));
	bh_say("  rest = \"%.4s\"", b);
	BH_CHECK(memcmp(b, buf + 1020, 4) == 0);
	still_fine(c, s);
}

/* Fabric messages this process sent so far, from libfabsock's own counter
 * (fsk_counter, found only under the launcher), or -1 on the kernel. */
static long long msgs_sent(void)
{
	int (*counter)(const char *, unsigned long long *) =
		(int (*)(const char *, unsigned long long *))dlsym(RTLD_DEFAULT, "fsk_counter");
	unsigned long long v;

	if (!counter || counter("msgs_tx", &v) != 0)
		return -1;
	return (long long)v;
}

/* NULL and empty elements among real ones (libvma's
 * tcp_send.null_iov_elements): the bytes arrive, in order, and the call's
 * bytes travel together, as the kernel sends one call in one segment: one
 * fabric message, so that a reader never wakes with a part of them (libvma's
 * receiver read the second half together with later bytes). The message
 * count is checked where the counter exists; it prints nothing. */
static void test_nulliov(int warm)
{
	char b[64];
	int c, s;

	bh_say("-- NULL and empty iovec elements (%s)", phase_name(warm));
	bh_tcp_pair_warm(&c, &s, warm);
	struct iovec v[4] = { { NULL, 0 }, { "abcd", 4 }, { NULL, 0 }, { "efgh", 4 } };
	struct msghdr m = { .msg_iov = v, .msg_iovlen = 4 };
	for (int use_msg = 0; use_msg <= 1; use_msg++) {
		long long before = msgs_sent();
		if (use_msg)
			bh_ok("sendmsg(NULL, ijkl, NULL, mnop)", sendmsg(c, &m, 0));
		else
			bh_ok("writev(NULL, abcd, NULL, efgh)", writev(c, v, 4));
		long long after = msgs_sent();
		if (warm && before >= 0 && after - before != 1) {
			bh_say("  %lld fabric messages for one call", after - before);
			BH_CHECK(after - before == 1);
		}
		memset(b, 0, sizeof(b));
		bh_show("read_all(8)", bh_read_all(s, b, 8));
		bh_say("  got \"%s\"", b);
		v[1].iov_base = "ijkl";
		v[3].iov_base = "mnop";
	}
	v[1].iov_len = 0;
	v[3].iov_base = NULL;
	v[3].iov_len = 0;
	bh_show("sendmsg(all empty)", sendmsg(c, &m, 0));
	bh_err("recv(DONTWAIT) finds nothing", recv(s, b, sizeof(b), MSG_DONTWAIT), EAGAIN);
	still_fine(c, s);
}

static const struct {
	const char *name;
	void (*run)(int warm);
} tests[] = {
	{ "splice", test_splice },   { "dprintf", test_dprintf },
	{ "stdio", test_stdio },     { "stdstreams", test_stdstreams },
	{ "syscall", test_syscall },
	{ "positioned", test_positioned }, { "aio", test_aio },
	{ "iovmax", test_iovmax },   { "trunc", test_trunc },
	{ "nulliov", test_nulliov },
};

/* BH_IOPATHS_ONLY=<name> runs one family (to see each alone). */
int main(void)
{
	const char *only = getenv("BH_IOPATHS_ONLY");

	bh_start("bh_iopaths");
	for (int warm = 0; warm <= 1; warm++)
		for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
			if (!only || strcmp(only, tests[i].name) == 0)
				tests[i].run(warm);
	if (!only || strcmp(only, "splice") == 0)
		test_splice_full_pipe();
	return bh_finish();
}
