/* sendfile and sendfile64 from a regular file into TCP and UDP sockets:
 * with an offset pointer (file position untouched, offset advanced), with
 * NULL (file position advanced), past EOF, a socket as the input (EINVAL),
 * a non-blocking full socket (EAGAIN), counts larger than the library's
 * chunks at unaligned offsets, a non-blocking sender's short counts (each
 * advances the offset or file position by exactly what it returns, EAGAIN
 * moves nothing); bytes checked by checksum. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { FILE_LEN = 1 << 20 };

static int make_file(void)
{
	static char buf[FILE_LEN];
	char path[] = "/tmp/bh_sendfile.XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	bh_fill(buf, sizeof(buf), 42, 0);
	if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
		return -1;
	return fd;
}

/* Read exactly len bytes from fd and compare with the file's pattern at
 * offset off. */
static int got_file_bytes(int fd, size_t off, size_t len)
{
	static char in[FILE_LEN], want[FILE_LEN];

	if (bh_read_all(fd, in, len) != (ssize_t)len)
		return 0;
	bh_fill(want, len, 42, off);
	return bh_sum(BH_SUM_INIT, in, len) == bh_sum(BH_SUM_INIT, want, len);
}

static void test_tcp(int file)
{
	int cfd, sfd;
	off_t off;
	off64_t off64;
	ssize_t n;
	size_t total;

	bh_say("-- sendfile into TCP");
	bh_tcp_pair(&cfd, &sfd, 0);
	lseek(file, 0, SEEK_SET);
	off = 1000;
	n = bh_ok("sendfile(&off=1000, 5000)", sendfile(cfd, file, &off, 5000));
	bh_say("  off now %ld, file position %ld", (long)off,
	       (long)lseek(file, 0, SEEK_CUR));
	BH_CHECK(n == 5000 && off == 6000 && lseek(file, 0, SEEK_CUR) == 0);
	bh_say("  bytes match: %d", got_file_bytes(sfd, 1000, 5000));

	n = bh_ok("sendfile(NULL, 3000)", sendfile(cfd, file, NULL, 3000));
	bh_say("  file position %ld", (long)lseek(file, 0, SEEK_CUR));
	BH_CHECK(n == 3000 && lseek(file, 0, SEEK_CUR) == 3000);
	bh_say("  bytes match: %d", got_file_bytes(sfd, 0, 3000));

	/* The whole file with sendfile64, looping over short sends. A
	 * reader child drains concurrently. */
	off64 = 0;
	total = 0;
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		close(cfd);
		_exit(got_file_bytes(sfd, 0, FILE_LEN) ? 0 : 1);
	}
	while (total < FILE_LEN) {
		n = sendfile64(cfd, file, &off64, FILE_LEN - total);
		if (n <= 0)
			break;
		total += (size_t)n;
	}
	int st;
	waitpid(pid, &st, 0);
	bh_say("sendfile64(whole file): %zu bytes, off %lld, reader %s", total,
	       (long long)off64,
	       WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "verified" : "FAILED");
	BH_CHECK(total == FILE_LEN && WIFEXITED(st) && WEXITSTATUS(st) == 0);

	off = FILE_LEN;
	bh_ok("sendfile(at EOF)", sendfile(cfd, file, &off, 100));
	off = FILE_LEN - 10;
	n = bh_ok("sendfile(10 before EOF, 100)", sendfile(cfd, file, &off,
							 100));
	BH_CHECK(n == 10);
	bh_say("  bytes match: %d", got_file_bytes(sfd, FILE_LEN - 10, 10));
	lseek(file, FILE_LEN - 5000, SEEK_SET);
	n = bh_ok("sendfile(NULL, 5000 before EOF, 100000)", sendfile(cfd, file, NULL, 100000));
	bh_say("  file position at EOF: %d", lseek(file, 0, SEEK_CUR) == FILE_LEN);
	BH_CHECK(n == 5000 && lseek(file, 0, SEEK_CUR) == FILE_LEN);
	bh_say("  bytes match: %d", got_file_bytes(sfd, FILE_LEN - 5000, 5000));
	/* several chunks of the library's, from an unaligned offset (fits the
	 * socket's buffer: no reader needed) */
	off = 4097;
	n = bh_ok("sendfile(&off=4097, 200000)", sendfile(cfd, file, &off, 200000));
	BH_CHECK(n == 200000 && off == 204097);
	bh_say("  bytes match: %d", got_file_bytes(sfd, 4097, 200000));
	lseek(file, 12345, SEEK_SET);
	n = bh_ok("sendfile(NULL from 12345, 150000)", sendfile(cfd, file, NULL, 150000));
	bh_say("  file position %ld", (long)lseek(file, 0, SEEK_CUR));
	BH_CHECK(n == 150000 && lseek(file, 0, SEEK_CUR) == 162345);
	bh_say("  bytes match: %d", got_file_bytes(sfd, 12345, 150000));
	off = -1;
	bh_err("sendfile(negative offset)", sendfile(cfd, file, &off, 1),
	       EINVAL);
	bh_err("sendfile(socket as input)", sendfile(cfd, sfd, NULL, 1),
	       EINVAL);
	int wr = open("/dev/null", O_WRONLY);
	bh_err("sendfile(write-only input)", sendfile(cfd, wr, NULL, 1),
	       EBADF);
	close(wr);

	/* Non-blocking destination filled up: EAGAIN. */
	int fl = fcntl(cfd, F_GETFL);
	fcntl(cfd, F_SETFL, fl | O_NONBLOCK);
	int err = 0;
	off = 0;
	for (int i = 0; i < 1000 && !err; i++) {
		if (off >= FILE_LEN)
			off = 0;
		if (sendfile(cfd, file, &off, FILE_LEN) < 0)
			err = errno;
	}
	bh_say("sendfile(non-blocking, until full): %s", bh_errname(err));
	BH_CHECK(err == EAGAIN);
	close(cfd);
	close(sfd);
}

/* The whole file through a non-blocking sender, the reader draining in
 * between, in one process (a fork would move an accelerated connection to
 * the kernel): each count advances the offset (use_off) or the file position
 * by exactly itself, EAGAIN moves nothing, the bytes arrive in order. The
 * counts themselves depend on the socket's buffer and are not printed. */
static void test_tcp_partial(int file, int use_off)
{
	static char in[FILE_LEN];
	int cfd, sfd, bad = 0;
	off_t off = 0;
	size_t sent = 0, got = 0;

	bh_tcp_pair(&cfd, &sfd, 0);
	fcntl(cfd, F_SETFL, fcntl(cfd, F_GETFL) | O_NONBLOCK);
	fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
	lseek(file, 0, SEEK_SET);
	for (int i = 0; i < 1000000 && got < FILE_LEN && !bad; i++) {
		if (sent < FILE_LEN) {
			ssize_t n = sendfile(cfd, file, use_off ? &off : NULL, FILE_LEN - sent);
			if (n > 0)
				sent += (size_t)n;
			else if (n == 0 || errno != EAGAIN)
				bad = 1;
			off_t pos = use_off ? off : lseek(file, 0, SEEK_CUR);
			if (pos != (off_t)sent || (use_off && lseek(file, 0, SEEK_CUR) != 0))
				bad = 2;
		}
		ssize_t r = read(sfd, in + got, FILE_LEN - got);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || errno != EAGAIN)
			bad = 3;
		else if (got < sent) /* in flight: wait for it */
			bh_wait(sfd, POLLIN, 1000);
	}
	static char want[FILE_LEN];
	bh_fill(want, FILE_LEN, 42, 0);
	int match = got == FILE_LEN && !memcmp(in, want, FILE_LEN);
	bh_say("sendfile(non-blocking, %s, whole file, reader between): sent %zu, "
	       "positions exact %d, bytes match %d", use_off ? "&off" : "NULL", sent, bad == 0,
	       match);
	BH_CHECK(bad == 0 && sent == FILE_LEN && match);
	close(cfd);
	close(sfd);
}

static void test_udp(int file)
{
	int a, b;
	struct sockaddr_in ba;
	socklen_t len = sizeof(ba);
	off_t off = 100;
	char in[2048], want[1200];

	bh_say("-- sendfile into connected UDP");
	a = bh_udp_bound(0);
	b = bh_udp_bound(0);
	getsockname(b, (struct sockaddr *)&ba, &len);
	connect(a, (struct sockaddr *)&ba, sizeof(ba));
	ssize_t n = bh_ok("sendfile(udp, 1200)", sendfile(a, file, &off, 1200));
	bh_wait(b, POLLIN, 5000);
	n = recv(b, in, sizeof(in), 0);
	bh_fill(want, sizeof(want), 42, 100);
	bh_say("  one datagram of %zd bytes, match %d", n,
	       n == 1200 && !memcmp(in, want, 1200));
	BH_CHECK(n == 1200 && !memcmp(in, want, 1200));
	close(a);
	close(b);
}

int main(void)
{
	int file;

	bh_start("sendfile");
	file = make_file();
	if (file < 0) {
		bh_fail(__FILE__, __LINE__, "temporary file");
		return bh_finish();
	}
	test_tcp(file);
	test_tcp_partial(file, 1);
	test_tcp_partial(file, 0);
	test_udp(file);
	close(file);
	return bh_finish();
}
