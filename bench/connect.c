/* Connection set-up cost: connect + first exchange (64 bytes each way) + close,
 * one connection at a time, measured by the client. Run it on the kernel and
 * under the launcher with FABSOCK_TCP_ACCEL=1 (bench/connect.sh) to see what
 * the negotiation adds.
 *
 * usage: connect server PORT            (accepts and echoes 64 bytes, forever)
 *        connect client PORT N [nb]     (N connections; nb: non-blocking
 *                                        connect waited with poll)
 * The client prints: n, median, p90 and min in microseconds for the whole
 * connect+exchange, and the same for connect() alone, the first write (where a
 * negotiation settles), the read of the echo, and close() (not in the total).
 * The server is sequential:
 * the time its close() of the previous connection takes delays the next accept
 * and so shows in the next connection's numbers. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int exact(int fd, char *buf, size_t n, int write_it)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = write_it ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
		if (r < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = fd, .events = write_it ? POLLOUT : POLLIN };
			poll(&p, 1, 5000);
			continue;
		}
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

static int server(int port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 128)) {
		perror("server");
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			continue;
		char buf[64];
		if (exact(c, buf, sizeof(buf), 0) == 0)
			exact(c, buf, sizeof(buf), 1);
		close(c); /* on the fabric, close lingers until the peer took the data */
	}
}

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("%-22s n=%d median %.1f us  p90 %.1f us  min %.1f us\n", what, n, v[n / 2],
	       v[n * 9 / 10], v[0]);
}

static int client(int port, int n, int nb)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	double *total = calloc((size_t)n, sizeof(double));
	double *conn = calloc((size_t)n, sizeof(double));
	double *wr = calloc((size_t)n, sizeof(double));
	double *echo = calloc((size_t)n, sizeof(double));
	double *cl = calloc((size_t)n, sizeof(double));
	char buf[64];
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			if (errno != EINPROGRESS) {
				perror("connect");
				return 1;
			}
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			poll(&p, 1, 5000);
		}
		double t1 = now_us();
		int bad = exact(fd, buf, sizeof(buf), 1);
		double tw = now_us();
		if (bad || exact(fd, buf, sizeof(buf), 0)) {
			fprintf(stderr, "exchange %d failed\n", i);
			return 1;
		}
		double t2 = now_us();
		close(fd);
		conn[i] = t1 - t0;
		total[i] = t2 - t0;
		wr[i] = tw - t1;
		echo[i] = t2 - tw;
		cl[i] = now_us() - t2;
	}
	report("connect+exchange", total, n);
	report("connect alone", conn, n);
	report("first write", wr, n);
	report("echo read", echo, n);
	report("close (not in total)", cl, n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]));
	if (argc >= 4 && strcmp(argv[1], "client") == 0)
		return client(atoi(argv[2]), atoi(argv[3]), argc > 4 && strcmp(argv[4], "nb") == 0);
	fprintf(stderr, "usage: connect server PORT | connect client PORT N [nb]\n");
	return 2;
}
