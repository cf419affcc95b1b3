/* Descriptors closed behind the wrappers' back, then reused: fclose() of an
 * fdopen()ed socket (glibc closes with its internal close), closefrom(),
 * close_range() and syscall(SYS_close). The number then comes back as a
 * pipe, an eventfd, an epoll fd, a UDP socket or a regular file, and each
 * must behave as what it now is, not as the socket that was there. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A TCP pair whose client end holds the lowest free fd number, so that
 * once it is closed behind the wrappers' back the next fd allocation
 * reuses that number. (bh_tcp_pair leaves a hole where its listener was:
 * move the client end into it.) */
static void tcp_pair_low(int *low, int *other)
{
	int c, s;

	bh_tcp_pair(&c, &s, 0);
	*low = fcntl(c, F_DUPFD, 0);
	close(c);
	*other = s;
	write(*other, "stale", 5);
}

/* fd is free again: reopen it as a pipe and check the pipe works. */
static void reuse_as_pipe(const char *how, int fd)
{
	int p[2];
	char buf[8] = "";

	if (pipe(p) || (p[0] != fd && p[1] != fd)) {
		bh_say("%s: number not reused by pipe()", how);
		BH_CHECK(0);
		return;
	}
	int ok = write(p[1], "pipe", 4) == 4 && read(p[0], buf, 4) == 4 &&
		 !memcmp(buf, "pipe", 4);
	struct pollfd pf = { .fd = p[0], .events = POLLIN };
	int n = poll(&pf, 1, 0);
	int v;
	socklen_t len = sizeof(v);
	bh_say("%s, reused as a pipe: data %d, poll idle %d", how, ok, n);
	BH_CHECK(ok && n == 0);
	bh_err("  getsockopt on the pipe", getsockopt(p[0], SOL_SOCKET,
						      SO_TYPE, &v, &len),
	       ENOTSOCK);
	bh_err("  recv on the pipe", recv(p[0], buf, 4, MSG_DONTWAIT), ENOTSOCK);
	close(p[0]);
	close(p[1]);
}

static void test_fclose(void)
{
	int low, other;

	bh_say("-- fclose(fdopen(socket))");
	tcp_pair_low(&low, &other);
	FILE *f = fdopen(low, "r+");
	char buf[8] = "";
	size_t n = fread(buf, 1, 5, f);
	bh_say("fread through stdio: %zu %.5s", n, buf);
	BH_CHECK(n == 5);
	bh_ok("fclose", fclose(f));
	bh_ok("peer sees EOF", bh_read_all(other, buf, 1));
	reuse_as_pipe("after fclose", low);

	tcp_pair_low(&low, &other);
	f = fdopen(low, "r");
	fclose(f);
	int e = bh_okfd("eventfd on the reused number", eventfd(3, EFD_NONBLOCK));
	uint64_t val = 0;
	bh_ok("  read(eventfd)", read(e, &val, sizeof(val)));
	bh_say("  value %llu, same number %d", (unsigned long long)val, e == low);
	BH_CHECK(val == 3 && e == low);
	bh_err("  read again (EAGAIN)", read(e, &val, sizeof(val)), EAGAIN);
	close(e);
	close(other);
}

static void test_close_range(void)
{
	int low, other, ep;

	bh_say("-- closefrom, close_range, syscall(SYS_close)");
	tcp_pair_low(&low, &other);
	/* Both ends of the pair, closed by one syscall no wrapper sees. */
	bh_ok("close_range(low, other, 0)", close_range((unsigned)low,
						       (unsigned)other, 0));
	bh_err("  fcntl on the closed pair", fcntl(other, F_GETFD), EBADF);
	ep = bh_okfd("epoll_create1 on the reused number", epoll_create1(0));
	bh_say("  same number %d", ep == low);
	BH_CHECK(ep == low);
	int p[2];
	pipe(p);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 5 };
	bh_ok("  epoll_ctl(ADD pipe)", epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev));
	write(p[1], "x", 1);
	int n = (int)bh_ok("  epoll_wait", epoll_wait(ep, &ev, 1, 1000));
	BH_CHECK(n == 1 && ev.data.u64 == 5);
	close(ep);
	close(p[0]);
	close(p[1]);

	tcp_pair_low(&low, &other);
	bh_ok("syscall(SYS_close)", syscall(SYS_close, low));
	int u = bh_udp_bound(0);
	bh_say("UDP socket on the reused number: %d", u == low);
	BH_CHECK(u == low);
	struct sockaddr_in ua;
	socklen_t len = sizeof(ua);
	getsockname(u, (struct sockaddr *)&ua, &len);
	int s = bh_udp_bound(0);
	bh_ok("  sendto", sendto(s, "udp", 3, 0, (struct sockaddr *)&ua,
				 sizeof(ua)));
	bh_wait(u, POLLIN, 5000);
	char buf[8];
	int v;
	socklen_t vl = sizeof(v);
	bh_ok("  recv", recv(u, buf, sizeof(buf), 0));
	bh_ok("  getsockopt(SO_TYPE)", getsockopt(u, SOL_SOCKET, SO_TYPE, &v,
						 &vl));
	bh_say("  type %d", v);
	BH_CHECK(v == SOCK_DGRAM);
	bh_err("  listen (UDP)", listen(u, 1), EOPNOTSUPP);
	close(u);
	close(s);
	close(other);

	tcp_pair_low(&low, &other);
	bh_ok("closefrom(low)", (closefrom(low), 0));
	char path[] = "/tmp/bh_bypass.XXXXXX";
	int f = mkstemp(path);
	unlink(path);
	bh_say("regular file on the reused number: %d", f == low);
	BH_CHECK(f == low);
	bh_ok("  write(file)", write(f, "file", 4));
	bh_ok("  lseek", lseek(f, 0, SEEK_SET));
	bh_ok("  read(file)", read(f, buf, 4));
	bh_err("  send on the file", send(f, "x", 1, 0), ENOTSOCK);
	close(f);
}

/* A daemon's start-up: close every fd above stderr, then open its own
 * files, which get the lowest numbers, then work with sockets. Whatever the
 * library had open there is gone; nothing it does later may land in the
 * app's files. (Runs last: it closes everything.) */
static void test_daemon_closefrom(void)
{
	char path[] = "/tmp/bh_bypass_log.XXXXXX";
	char buf[256];
	int f, c, s;

	bh_say("-- closefrom(3) at start-up, then the app's own files");
	fflush(stdout);
	closefrom(3);
	f = mkstemp(path);
	bh_say("app file got the lowest number: %d", f == 3);
	bh_ok("write(app file)", write(f, "app data\n", 9));
	bh_tcp_pair(&c, &s, 0);
	bh_ok("send", send(c, "sock", 4, 0));
	bh_ok("recv", bh_read_all(s, buf, 4));
	close(c);
	close(s);
	int u = bh_udp_bound(0);
	close(u);
	lseek(f, 0, SEEK_SET);
	ssize_t n = read(f, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	bh_say("app file holds only the app's bytes: %d (%zd bytes)",
	       n == 9 && !memcmp(buf, "app data\n", 9), n);
	BH_CHECK(n == 9);
	if (n != 9)
		fprintf(stderr, "bypass: foreign bytes in the app's file: %s",
			buf);
	close(f);
	unlink(path);
}

int main(void)
{
	bh_start("bypass");
	test_fclose();
	test_close_range();
	test_daemon_closefrom();
	return bh_finish();
}
