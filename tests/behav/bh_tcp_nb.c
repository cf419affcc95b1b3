/* Non-blocking TCP: EINPROGRESS connect and its completion, EAGAIN on
 * accept/read/write, filling the send buffer, O_NONBLOCK via fcntl and
 * FIONBIO, SOCK_NONBLOCK at creation, a refused connect reported through
 * SO_ERROR. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static void listener_addr(int lfd, struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);

	getsockname(lfd, (struct sockaddr *)sa, &len);
}

static void test_connect_accept(void)
{
	struct sockaddr_in la;
	int lfd, cfd, sfd, val, rev;
	socklen_t len;

	bh_say("-- non-blocking connect and accept");
	lfd = bh_listener(SOCK_NONBLOCK);
	listener_addr(lfd, &la);
	bh_say("listener nonblock = %d", bh_nonblock(lfd));
	bh_err("accept(empty, nonblocking)", accept(lfd, NULL, NULL), EAGAIN);
	bh_err("accept4(empty, nonblocking)", accept4(lfd, NULL, NULL, 0),
	       EAGAIN);
	rev = bh_wait(lfd, POLLIN, 0);
	bh_say("listener readable before connect: %d", !!(rev & POLLIN));
	BH_CHECK(rev == 0);

	cfd = bh_okfd("socket(SOCK_STREAM|SOCK_NONBLOCK)",
		      socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
	bh_say("nonblock = %d", bh_nonblock(cfd));
	BH_CHECK(bh_nonblock(cfd) == 1);
	/* Linux always answers EINPROGRESS for a non-blocking TCP connect,
	 * loopback included: the handshake completes in softirq context. */
	bh_err("connect(nonblocking)",
	       connect(cfd, (struct sockaddr *)&la, sizeof(la)), EINPROGRESS);
	rev = bh_wait(cfd, POLLOUT, 5000);
	bh_say("poll(POLLOUT) after connect: out %d err %d hup %d",
	       !!(rev & POLLOUT), !!(rev & POLLERR), !!(rev & POLLHUP));
	BH_CHECK(rev == POLLOUT);
	len = sizeof(val);
	bh_ok("getsockopt(SO_ERROR)",
	      getsockopt(cfd, SOL_SOCKET, SO_ERROR, &val, &len));
	bh_say("  so_error = %d", val);
	BH_CHECK(val == 0);
	/* Linux reports the completed connect once with 0, then EISCONN. */
	bh_ok("connect again (completes)",
	      connect(cfd, (struct sockaddr *)&la, sizeof(la)));
	bh_err("connect a third time",
	       connect(cfd, (struct sockaddr *)&la, sizeof(la)), EISCONN);
	rev = bh_wait(lfd, POLLIN, 5000);
	bh_say("listener readable: %d", !!(rev & POLLIN));
	sfd = bh_okfd("accept4(SOCK_NONBLOCK)",
		      accept4(lfd, NULL, NULL, SOCK_NONBLOCK));
	bh_say("accepted nonblock = %d (flag not inherited from listener "
	       "without SOCK_NONBLOCK)", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 1);
	bh_err("accept(empty again)", accept(lfd, NULL, NULL), EAGAIN);

	int s2, c2 = socket(AF_INET, SOCK_STREAM, 0);
	connect(c2, (struct sockaddr *)&la, sizeof(la));
	bh_wait(lfd, POLLIN, 5000);
	s2 = bh_okfd("accept(plain) from non-blocking listener",
		     accept(lfd, NULL, NULL));
	bh_say("  accepted nonblock = %d", bh_nonblock(s2));
	BH_CHECK(bh_nonblock(s2) == 0);
	close(s2);
	close(c2);
	close(cfd);
	close(sfd);
	close(lfd);
}

static void test_eagain_and_fill(void)
{
	static char buf[65536];
	int cfd, sfd, avail, rev;
	size_t total = 0, drained = 0;
	uint64_t sent = BH_SUM_INIT, got = BH_SUM_INIT;
	ssize_t n;

	bh_say("-- EAGAIN, filling and draining");
	bh_tcp_pair(&cfd, &sfd, SOCK_NONBLOCK);
	bh_err("read(empty)", read(cfd, buf, 10), EAGAIN);
	bh_err("recv(empty)", recv(cfd, buf, 10, 0), EAGAIN);
	struct iovec iv = { buf, 10 };
	bh_err("readv(empty)", readv(cfd, &iv, 1), EAGAIN);
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
	bh_err("recvmsg(empty)", recvmsg(cfd, &mh, 0), EAGAIN);
	bh_err("recvfrom(empty)", recvfrom(cfd, buf, 10, 0, NULL, NULL),
	       EAGAIN);

	/* The server never reads: the client fills until EAGAIN. */
	for (int i = 0; i < 10000; i++) {
		bh_fill(buf, sizeof(buf), 3, total);
		n = send(cfd, buf, sizeof(buf), 0);
		if (n < 0)
			break;
		sent = bh_sum(sent, buf, (size_t)n);
		total += (size_t)n;
	}
	bh_say("send until full: %s, some sent: %d", bh_errname(errno),
	       total > 0);
	BH_CHECK(errno == EAGAIN && total > 0);
	bh_err("write(full)", write(cfd, buf, 1), EAGAIN);
	bh_err("writev(full)", writev(cfd, &iv, 1), EAGAIN);
	bh_err("sendmsg(full)", sendmsg(cfd, &mh, 0), EAGAIN);
	rev = bh_wait(cfd, POLLOUT, 0);
	bh_say("writable when full: %d", !!(rev & POLLOUT));
	BH_CHECK(!(rev & POLLOUT));

	/* Drain everything, checksumming. */
	while (drained < total) {
		n = recv(sfd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			if (!bh_wait(sfd, POLLIN, 5000))
				break;
			continue;
		}
		if (n <= 0)
			break;
		got = bh_sum(got, buf, (size_t)n);
		drained += (size_t)n;
	}
	bh_say("drained all: %d checksum %s", drained == total,
	       got == sent ? "match" : "MISMATCH");
	BH_CHECK(drained == total && got == sent);
	rev = bh_wait(cfd, POLLOUT, 5000);
	bh_say("writable after drain: %d", !!(rev & POLLOUT));
	BH_CHECK(rev & POLLOUT);
	bh_ok("ioctl(FIONREAD) empty", ioctl(sfd, FIONREAD, &avail));
	bh_say("  available = %d", avail);
	BH_CHECK(avail == 0);
	close(cfd);
	close(sfd);
}

static void test_nonblock_toggles(void)
{
	int cfd, sfd, on, fl;
	char c;

	bh_say("-- toggling O_NONBLOCK");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_say("initial nonblock = %d", bh_nonblock(sfd));
	fl = (int)bh_ok("fcntl(F_GETFL)", fcntl(sfd, F_GETFL));
	bh_say("  O_RDWR = %d", (fl & O_ACCMODE) == O_RDWR);
	bh_ok("fcntl(F_SETFL, O_NONBLOCK)",
	      fcntl(sfd, F_SETFL, fl | O_NONBLOCK));
	bh_say("nonblock = %d", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 1);
	bh_err("read(empty)", read(sfd, &c, 1), EAGAIN);
	bh_ok("fcntl(F_SETFL, 0)", fcntl(sfd, F_SETFL, fl & ~O_NONBLOCK));
	bh_say("nonblock = %d", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 0);
	on = 1;
	bh_ok("ioctl(FIONBIO, 1)", ioctl(sfd, FIONBIO, &on));
	bh_say("nonblock = %d", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 1);
	bh_err("recv(empty)", recv(sfd, &c, 1, 0), EAGAIN);
	on = 0;
	bh_ok("ioctl(FIONBIO, 0)", ioctl(sfd, FIONBIO, &on));
	bh_say("nonblock = %d", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 0);
	/* Now blocking: a read with SO_RCVTIMEO returns EAGAIN after it. */
	struct timeval tv = { .tv_sec = 0, .tv_usec = 50000 };
	setsockopt(sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	bh_err("blocking read with SO_RCVTIMEO 50ms", read(sfd, &c, 1), EAGAIN);
	bh_ok("write(1)", write(cfd, "z", 1));
	bh_ok("blocking read(1)", read(sfd, &c, 1));
	BH_CHECK(c == 'z');
	close(cfd);
	close(sfd);
}

static void test_refused(void)
{
	struct sockaddr_in la;
	int lfd, fd, val, rev;
	socklen_t len = sizeof(val);

	bh_say("-- refused connections");
	/* A port that was bound and is now closed: nobody listens there. */
	lfd = bh_listener(0);
	listener_addr(lfd, &la);
	close(lfd);

	fd = socket(AF_INET, SOCK_STREAM, 0);
	bh_err("connect(blocking, closed port)",
	       connect(fd, (struct sockaddr *)&la, sizeof(la)), ECONNREFUSED);
	close(fd);

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	long r = connect(fd, (struct sockaddr *)&la, sizeof(la));
	/* Loopback may report the refusal at once or after the RST. */
	bh_say("connect(nonblocking, closed port): %s",
	       r == -1 && (errno == EINPROGRESS || errno == ECONNREFUSED) ?
	       "EINPROGRESS-or-ECONNREFUSED" : bh_errname(errno));
	if (r == -1 && errno == EINPROGRESS) {
		rev = bh_wait(fd, POLLOUT, 5000);
		BH_CHECK(rev & (POLLERR | POLLHUP));
		bh_ok("getsockopt(SO_ERROR)",
		      getsockopt(fd, SOL_SOCKET, SO_ERROR, &val, &len));
	} else {
		bh_say("getsockopt(SO_ERROR) = 0");
		val = ECONNREFUSED;
	}
	bh_say("  so_error = %s", bh_errname(val));
	BH_CHECK(val == ECONNREFUSED);
	close(fd);
}

int main(void)
{
	bh_start("tcp_nb");
	test_connect_accept();
	test_eagain_and_fill();
	test_nonblock_toggles();
	test_refused();
	return bh_finish();
}
