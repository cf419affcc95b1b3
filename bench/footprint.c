/* footprint.c - a small TCP pair for bench/footprint.sh.
 *
 *   footprint server PORT   accept one connection, echo its first byte,
 *                           print "ready", then sit idle in read() until
 *                           the peer closes
 *   footprint client PORT   socket + connect + 1 byte each way, print
 *                           "ready first_byte_us=F launch_us=L", then sit
 *                           idle in read() until SIGTERM (then closes)
 *
 * F: from just before the first socket() to the echoed byte (libfabsock's
 * negotiation and, the first time, the provider's start-up: DPDK's EAL).
 * L: from FOOTPRINT_T0_NS (CLOCK_REALTIME, set by the script just before
 * it starts the process) to the same point: F plus exec and the preload's
 * constructor. Both processes end by themselves after 120 s (alarm). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

static long long now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* Idle in read() until EOF or SIGTERM, then close: a clean end, so that
 * the peer sees an orderly close (not a dead peer). */
static void idle(int fd)
{
	char c;

	while (read(fd, &c, 1) < 0 && errno == EINTR && !stop)
		;
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct sigaction sa = {.sa_handler = on_term}; /* no SA_RESTART */
	const char *t0s = getenv("FOOTPRINT_T0_NS");
	long long t0 = 0, t1, t2;
	int fd, lfd, one = 1;
	char c = 'x';

	if (argc != 3) {
		fprintf(stderr, "usage: footprint server|client PORT\n");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	alarm(120);
	if (t0s)
		t0 = atoll(t0s);
	sin.sin_port = htons((unsigned short)atoi(argv[2]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!strcmp(argv[1], "server")) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 4)) {
			perror("footprint: bind/listen");
			return 1;
		}
		printf("listening\n");
		fflush(stdout);
		fd = accept(lfd, NULL, NULL);
		if (fd < 0 || read(fd, &c, 1) != 1 || write(fd, &c, 1) != 1) {
			perror("footprint: accept/echo");
			return 1;
		}
		printf("ready\n");
		fflush(stdout);
		idle(fd);
		return 0;
	}
	t1 = now_ns(CLOCK_MONOTONIC);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) || write(fd, &c, 1) != 1 ||
	    read(fd, &c, 1) != 1) {
		perror("footprint: connect/exchange");
		return 1;
	}
	t2 = now_ns(CLOCK_MONOTONIC);
	printf("ready first_byte_us=%lld launch_us=%lld\n", (t2 - t1) / 1000,
	       t0 ? (now_ns(CLOCK_REALTIME) - t0) / 1000 : -1);
	fflush(stdout);
	idle(fd);
	return 0;
}
