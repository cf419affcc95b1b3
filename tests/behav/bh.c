/* Behaviour-test helpers (see bh.h). */
#include "config.h"
#include "bh.h"
#include "../lib/tcp_pair.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *bh_name = "?";
static int bh_failures;

/* Generous: every program finishes in well under a second; a hang in a
 * wrapper must not hold the suite until the harness timeout. */
enum { BH_WATCHDOG_S = 30 };

void bh_start(const char *name)
{
	bh_name = name;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(BH_WATCHDOG_S);
	printf("== %s\n", name);
}

int bh_finish(void)
{
	printf("== %s: %s\n", bh_name, bh_failures ? "FAILED" : "ok");
	fflush(stdout);
	return bh_failures ? 1 : 0;
}

void bh_say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

void bh_fail(const char *file, int line, const char *what)
{
	bh_failures++;
	printf("FAIL %s:%d: %s\n", file, line, what);
	fprintf(stderr, "%s: FAIL %s:%d: %s\n", bh_name, file, line, what);
}

const char *bh_errname(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "E?";
}

static void bh_print(const char *what, long ret, int err, int is_fd)
{
	if (ret == -1)
		printf("%s = -1 %s\n", what, bh_errname(err));
	else if (is_fd)
		printf("%s = fd\n", what);
	else
		printf("%s = %ld\n", what, ret);
}

long bh_ok(const char *what, long ret)
{
	int err = errno;

	bh_print(what, ret, err, 0);
	if (ret < 0)
		bh_fail(__FILE__, __LINE__, what);
	errno = err;
	return ret;
}

int bh_okfd(const char *what, int ret)
{
	int err = errno;

	bh_print(what, ret, err, 1);
	if (ret < 0)
		bh_fail(__FILE__, __LINE__, what);
	errno = err;
	return ret;
}

long bh_err(const char *what, long ret, int want)
{
	int err = errno;

	bh_print(what, ret, err, 0);
	if (ret != -1 || err != want) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s: want -1 %s", what,
			 bh_errname(want));
		bh_fail(__FILE__, __LINE__, msg);
	}
	errno = err;
	return ret;
}

long bh_show(const char *what, long ret)
{
	int err = errno;

	bh_print(what, ret, err, 0);
	errno = err;
	return ret;
}

void bh_fill(void *buf, size_t len, uint32_t seed, size_t stream_off)
{
	unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		uint64_t x = (uint64_t)(stream_off + i) * 2654435761u + seed;

		p[i] = (unsigned char)(x ^ (x >> 13) ^ (x >> 29));
	}
}

uint64_t bh_sum(uint64_t sum, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < len; i++) {
		sum ^= p[i];
		sum *= 0x100000001b3ULL;
	}
	return sum;
}

int bh_wait(int fd, short events, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n = poll(&pfd, 1, timeout_ms);

	return n > 0 ? pfd.revents : 0;
}

ssize_t bh_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!bh_wait(fd, POLLOUT, 5000))
				return -1;
			continue;
		}
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

ssize_t bh_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!bh_wait(fd, POLLIN, 5000))
				return -1;
			continue;
		}
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void bh_die(const char *what)
{
	fprintf(stderr, "%s: setup failed: %s: %s\n", bh_name, what,
		strerror(errno));
	printf("FAIL setup: %s\n", what);
	exit(1);
}

int bh_listener(int type_flags)
{
	int fd = tcp_pair_listen(NULL, type_flags, 16);

	if (fd < 0)
		bh_die("listen");
	return fd;
}

struct bh_acceptor {
	int lfd;
	int fd;
	int err;
};

static void *bh_accept_main(void *arg)
{
	struct bh_acceptor *a = arg;

	a->fd = accept(a->lfd, NULL, NULL);
	a->err = a->fd < 0 ? errno : 0;
	return NULL;
}

void bh_tcp_pair(int *client, int *server, int type_flags)
{
	struct sockaddr_in sa;
	struct bh_acceptor acc = { .lfd = tcp_pair_listen(&sa, 0, 16), .fd = -1 };
	pthread_t thread;
	/* BH_ACCEPT_THREAD=1: accept in a thread while connect runs, as a
	 * server process would, so that a connect waiting for its peer to
	 * speak first (libfabsock's negotiation) is answered. Both runs of
	 * a comparison get the same environment. */
	int threaded = getenv("BH_ACCEPT_THREAD") != NULL;
	int cfd;

	if (acc.lfd < 0)
		bh_die("listen");
	if (threaded && pthread_create(&thread, NULL, bh_accept_main, &acc))
		bh_die("pthread_create");
	cfd = socket(AF_INET, SOCK_STREAM | type_flags, 0);
	if (cfd < 0)
		bh_die("socket");
	if (connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (errno != EINPROGRESS)
			bh_die("connect");
		if (!(bh_wait(cfd, POLLOUT, 5000) & POLLOUT))
			bh_die("connect completion");
	}
	if (threaded)
		pthread_join(thread, NULL);
	else
		bh_accept_main(&acc);
	errno = acc.err;
	if (acc.fd < 0)
		bh_die("accept");
	*server = acc.fd;
	*client = cfd;
	close(acc.lfd);
}

void bh_tcp_pair_warm(int *client, int *server, int warm)
{
	char b[4];

	bh_tcp_pair(client, server, 0);
	if (!warm)
		return;
	if (bh_write_all(*client, "ping", 4) != 4 || bh_read_all(*server, b, 4) != 4 ||
	    bh_write_all(*server, "pong", 4) != 4 || bh_read_all(*client, b, 4) != 4)
		bh_fail(__FILE__, __LINE__, "warm-up round trip");
}

int bh_udp_bound(int type_flags)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_DGRAM | type_flags, 0);

	if (fd < 0)
		bh_die("socket");
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		bh_die("bind");
	return fd;
}

int bh_same_addr(const void *a, const void *b)
{
	const struct sockaddr_in *x = a, *y = b;

	return x->sin_family == y->sin_family &&
	       x->sin_port == y->sin_port &&
	       x->sin_addr.s_addr == y->sin_addr.s_addr;
}

int bh_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : !!(fl & O_NONBLOCK);
}

int bh_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl < 0 ? -1 : !!(fl & FD_CLOEXEC);
}

int bh_closed_fd(void)
{
	/* High, so later socket()/pipe() calls (lowest free number first)
	 * never reuse it, and below FD_SETSIZE so select can take it. */
	struct rlimit rl;
	int fd = FD_SETSIZE - 1;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FD_SETSIZE)
		fd = (int)rl.rlim_cur - 1;
	while (fd > 2 && fcntl(fd, F_GETFD) >= 0)
		fd--;
	return fd;
}
