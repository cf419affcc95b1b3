/* Steady-state bulk transfer, one connection, one way: the receiver times
 * from its first byte to EOF, so neither process start-up nor the connection
 * set-up counts (bench/apps.sh's socat and nginx rows include both).
 *
 * usage: bulk server PORT RBUF                 (one connection: read RBUF-byte
 *                                               chunks until EOF, print MB/s)
 *        bulk client PORT MB write WBUF        (write() WBUF-byte chunks)
 *        bulk client PORT MB sendfile FILE     (sendfile() FILE, NULL offset,
 *                                               from its start until MB sent,
 *                                               rewinding at its end)
 * The server prints "bulk: BYTES bytes in SECONDS s: MBPS MB/s". */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sa;
}

static int server(int port, size_t rbuf)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = loopback(port);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 4) != 0) {
		perror("bulk: bind/listen");
		return 1;
	}
	int s = accept(ls, NULL, NULL);
	char *buf = malloc(rbuf);
	if (s < 0 || !buf)
		return 1;
	double t0 = 0;
	unsigned long long total = 0;
	for (;;) {
		ssize_t n = read(s, buf, rbuf);
		if (n <= 0)
			break;
		if (total == 0)
			t0 = now_s();
		total += (unsigned long long)n;
	}
	double t = now_s() - t0;
	printf("bulk: %llu bytes in %.4f s: %.1f MB/s\n", total, t, (double)total / t / 1e6);
	close(s);
	close(ls);
	free(buf);
	return 0;
}

static int client(int port, size_t bytes, const char *mode, const char *arg)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = loopback(port);
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("bulk: connect");
		return 1;
	}
	size_t done = 0;
	if (strcmp(mode, "write") == 0) {
		size_t wbuf = strtoul(arg, NULL, 0);
		char *buf = calloc(1, wbuf);
		while (buf && done < bytes) {
			size_t want = bytes - done < wbuf ? bytes - done : wbuf;
			ssize_t n = write(s, buf, want);
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		free(buf);
	} else {
		int fd = open(arg, O_RDONLY);
		while (fd >= 0 && done < bytes) {
			ssize_t n = sendfile(s, fd, NULL, bytes - done);
			if (n < 0)
				break;
			if (n == 0)
				lseek(fd, 0, SEEK_SET);
			done += (size_t)n;
		}
	}
	shutdown(s, SHUT_WR);
	char c;
	while (read(s, &c, 1) > 0)
		;
	close(s);
	return done == bytes ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "server") == 0)
		return server(atoi(argv[2]), strtoul(argv[3], NULL, 0));
	if (argc == 6 && strcmp(argv[1], "client") == 0)
		return client(atoi(argv[2]), strtoul(argv[3], NULL, 0) << 20, argv[4], argv[5]);
	fprintf(stderr, "usage: bulk server PORT RBUF | bulk client PORT MB write|sendfile WBUF|FILE\n");
	return 2;
}
