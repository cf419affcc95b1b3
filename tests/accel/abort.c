/* What a peer sees when the other end closes with unread data (the kernel
 * resets the connection): the same transcript on the kernel and accelerated.
 *
 *   abort server PORT ROUNDS SYNC   accept ROUNDS connections, one at a time
 *   abort client PORT ROUNDS SYNC   make them
 *
 * SYNC is a directory holding two FIFOs made by the caller (s2c, c2s): the
 * ends tell each other where they are without touching the connection (a
 * call on the socket would let the library process what arrived).
 *
 * Each connection first exchanges a greeting both ways (the negotiation
 * settles: accelerated when launched); once the client says on c2s that it
 * took it, the server writes "unread" and says so on s2c. The client leaves those bytes unread and, by round number:
 *   0: polls the socket until they are readable (taken by the library),
 *      writes "done" and closes;
 *   1: writes "done" and closes without any call that reads or polls (the
 *      bytes may still wait in the fabric provider);
 *   2: closes at once, with the bytes unprocessed as in 1;
 *   3: sets SO_LINGER {1, 0} (an abortive close), writes "done" and closes.
 * and says "closed" on c2s. The server then reads until an error or EOF,
 * reads once more, and writes once, printing every result: on Linux
 * "done" (when written), then ECONNRESET, then EOF, then EPIPE. The first
 * round of each way is printed, later rounds only where they differ from it,
 * so that the kernel's and the launched run's outputs compare line by line. Every wait is bounded (30 s for the whole run). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MODES 4

static void die(const char *what)
{
	fprintf(stderr, "abort: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void read_exact(int fd, void *buf, size_t len, const char *what)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0) {
			fprintf(stderr, "abort: %s: %s\n", what, n == 0 ? "EOF" : strerror(errno));
			exit(1);
		}
		got += (size_t)n;
	}
}

static void write_all(int fd, const void *buf, size_t len, const char *what)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die(what);
}

static const char *result(ssize_t n, int err, const char *buf, char *out, size_t outlen)
{
	if (n > 0)
		snprintf(out, outlen, "%zd '%.*s'", n, (int)n, buf);
	else if (n == 0)
		snprintf(out, outlen, "0 (EOF)");
	else
		snprintf(out, outlen, "-1 %s", err == ECONNRESET ? "ECONNRESET" :
					       err == EPIPE ? "EPIPE" : strerror(err));
	return out;
}

/* The server's side of one round: its transcript in out. */
static void serve_round(int lfd, int s2c, int c2s, int round, char *out, size_t outlen)
{
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	char buf[64], line[96];
	read_exact(fd, buf, 5, "greeting");
	write_all(fd, "hello", 5, "greeting");
	read_exact(c2s, buf, 1, "c2s"); /* the client took the greeting */
	write_all(fd, "unread", 6, "unread bytes");
	write_all(s2c, "s", 1, "s2c");
	read_exact(c2s, buf, 1, "c2s");
	size_t used = (size_t)snprintf(out, outlen, "mode %d:", round % MODES);
	for (int i = 0; i < 4; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));
		int err = errno;
		used += (size_t)snprintf(out + used, outlen - used, " read %s;",
					 result(n, err, buf, line, sizeof(line)));
		if (n < 0)
			break;
		if (n == 0) {
			used += (size_t)snprintf(out + used, outlen - used, " (no reset)");
			break;
		}
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	int err = errno;
	used += (size_t)snprintf(out + used, outlen - used, " read again %s;",
				 result(n, err, buf, line, sizeof(line)));
	n = send(fd, "x", 1, MSG_NOSIGNAL);
	err = errno;
	snprintf(out + used, outlen - used, " send %s", result(n, err, buf, line, sizeof(line)));
	close(fd);
}

static int server(int port, int rounds, const char *sync)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 16))
		die("listen");
	printf("listening\n");
	fflush(stdout);
	char path[4096];
	snprintf(path, sizeof(path), "%s/s2c", sync);
	int s2c = open(path, O_WRONLY);
	snprintf(path, sizeof(path), "%s/c2s", sync);
	int c2s = open(path, O_RDONLY);
	if (s2c < 0 || c2s < 0)
		die("open the FIFOs");
	char first[MODES][512], out[512];
	for (int r = 0; r < rounds; r++) {
		serve_round(lfd, s2c, c2s, r, out, sizeof(out));
		if (r < MODES) {
			strcpy(first[r], out);
			printf("%s\n", out);
		} else if (strcmp(out, first[r % MODES]) != 0) {
			printf("round %d differs: %s\n", r, out);
		}
	}
	printf("%d rounds\n", rounds);
	close(lfd);
	return 0;
}

static int client(int port, int rounds, const char *sync)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/s2c", sync);
	int s2c = open(path, O_RDONLY);
	snprintf(path, sizeof(path), "%s/c2s", sync);
	int c2s = open(path, O_WRONLY);
	if (s2c < 0 || c2s < 0)
		die("open the FIFOs");
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	for (int r = 0; r < rounds; r++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			die("connect");
		char buf[8];
		write_all(fd, "greet", 5, "greeting");
		read_exact(fd, buf, 5, "greeting");
		write_all(c2s, "g", 1, "c2s");
		read_exact(s2c, buf, 1, "s2c"); /* "unread" was written */
		int mode = r % MODES;
		if (mode == 0) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (poll(&p, 1, 10000) != 1)
				die("poll for the unread bytes");
		}
		if (mode == 3) {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
				die("SO_LINGER");
		}
		if (mode != 2)
			write_all(fd, "done", 4, "done");
		close(fd);
		write_all(c2s, "c", 1, "c2s");
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: abort server|client PORT ROUNDS SYNCDIR\n");
		return 2;
	}
	alarm(30); /* every wait is bounded */
	char *end1, *end2;
	long port = strtol(argv[2], &end1, 10), rounds = strtol(argv[3], &end2, 10);
	if (*end1 || *end2 || port <= 0 || port > 65535 || rounds <= 0 || rounds > 100000) {
		fprintf(stderr, "abort: bad PORT or ROUNDS\n");
		return 2;
	}
	if (!strcmp(argv[1], "server"))
		return server((int)port, (int)rounds, argv[4]);
	if (!strcmp(argv[1], "client"))
		return client((int)port, (int)rounds, argv[4]);
	fprintf(stderr, "abort: unknown role %s\n", argv[1]);
	return 2;
}
