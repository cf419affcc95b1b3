/* TCP urgent data (tcp(7) "Sockets API", MSG_OOB): send(MSG_OOB) makes the
 * last byte urgent; the receiver sees POLLPRI / select's exceptfds /
 * EPOLLPRI, reads the byte with recv(MSG_OOB) once (then EINVAL), normal
 * reads stop at the mark and skip the byte, SIOCATMARK says when the read
 * pointer is at it, a new urgent byte replaces the old one, reading past an
 * unread urgent byte loses it, SO_OOBINLINE leaves it in the stream. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

/* Wait (bounded) for the urgent byte, then a moment for what was sent after
 * it: FIONREAD cannot tell (it counts only up to the mark). */
static void wait_urgent(int fd)
{
	if (!(bh_wait(fd, POLLPRI, 5000) & POLLPRI))
		bh_say("  (no POLLPRI within 5 s)");
	usleep(20000);
}

/* One line: poll's IN/PRI, SIOCATMARK, FIONREAD. */
static void state(const char *what, int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLPRI };
	int atmark = -1, inq = -1;

	poll(&pfd, 1, 0);
	ioctl(fd, SIOCATMARK, &atmark);
	ioctl(fd, FIONREAD, &inq);
	bh_say("  %s: IN %d PRI %d atmark %d inq %d", what, !!(pfd.revents & POLLIN),
	       !!(pfd.revents & POLLPRI), atmark, inq);
}

/* recv and print the bytes (or the error). */
static ssize_t rd(const char *what, int fd, size_t len, int flags)
{
	char buf[64] = { 0 };
	ssize_t n = recv(fd, buf, len, flags);

	if (n >= 0)
		bh_say("%s = %zd \"%.*s\"", what, n, (int)n, buf);
	else
		bh_say("%s = -1 %s", what, bh_errname(errno));
	return n;
}

static void test_basic(void)
{
	int cfd, sfd;

	bh_say("-- one urgent byte after normal data");
	bh_tcp_pair(&cfd, &sfd, 0);
	state("before", sfd);
	rd("recv(MSG_OOB) before any", sfd, 1, MSG_OOB | MSG_DONTWAIT);
	bh_ok("send(abc)", send(cfd, "abc", 3, 0));
	bh_ok("send(XY, MSG_OOB)", send(cfd, "XY", 2, MSG_OOB));
	wait_urgent(sfd);
	state("arrived", sfd);

	fd_set ex;
	struct timeval tv = { .tv_sec = 2 };
	FD_ZERO(&ex);
	FD_SET(sfd, &ex);
	bh_show("select(exceptfds)", select(sfd + 1, NULL, NULL, &ex, &tv));
	bh_say("  exceptional %d", FD_ISSET(sfd, &ex));
	BH_CHECK(FD_ISSET(sfd, &ex));

	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLPRI, .data.u32 = 7 }, out[2];
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	int n = epoll_wait(ep, out, 2, 2000);
	bh_say("epoll_wait(EPOLLPRI) = %d, PRI %d IN %d", n,
	       n == 1 && (out[0].events & EPOLLPRI), n == 1 && (out[0].events & EPOLLIN));
	BH_CHECK(n == 1 && (out[0].events & EPOLLPRI));
	close(ep);

	ssize_t r = rd("recv(10): stops at the mark", sfd, 10, 0);
	BH_CHECK(r == 4);
	state("at the mark", sfd);
	rd("recv(MSG_OOB|MSG_PEEK)", sfd, 1, MSG_OOB | MSG_PEEK);
	r = rd("recv(MSG_OOB)", sfd, 1, MSG_OOB);
	BH_CHECK(r == 1);
	rd("recv(MSG_OOB) again", sfd, 1, MSG_OOB);
	state("urgent byte taken", sfd);
	rd("recv(nonblocking): skips it", sfd, 10, MSG_DONTWAIT);
	state("past the mark", sfd);
	send(cfd, "z", 1, 0);
	bh_wait(sfd, POLLIN, 5000);
	rd("recv after more data", sfd, 10, 0);
	rd("recv(MSG_OOB) afterwards", sfd, 1, MSG_OOB);
	close(cfd);
	close(sfd);
}

static void test_read_past(void)
{
	int cfd, sfd;

	bh_say("-- reading past an unread urgent byte");
	bh_tcp_pair(&cfd, &sfd, 0);
	send(cfd, "ab", 2, MSG_OOB);
	send(cfd, "cd", 2, 0);
	wait_urgent(sfd);
	state("arrived", sfd);
	rd("recv(10, MSG_PEEK)", sfd, 10, MSG_PEEK);
	rd("recv(10, MSG_WAITALL): stops at the mark", sfd, 10, MSG_WAITALL);
	state("at the mark", sfd);
	rd("recv(10, MSG_PEEK) at the mark", sfd, 10, MSG_PEEK);
	rd("recv(10): skips the urgent byte", sfd, 10, 0);
	state("past the mark", sfd);
	rd("recv(MSG_OOB): lost", sfd, 1, MSG_OOB | MSG_DONTWAIT);
	close(cfd);
	close(sfd);
}

static void test_only_urgent(void)
{
	int cfd, sfd;

	bh_say("-- a single urgent byte, nothing else");
	bh_tcp_pair(&cfd, &sfd, 0);
	send(cfd, "!", 1, MSG_OOB);
	wait_urgent(sfd);
	state("arrived", sfd);
	rd("recv(nonblocking)", sfd, 10, MSG_DONTWAIT);
	state("after the read", sfd);
	rd("recv(MSG_OOB)", sfd, 1, MSG_OOB);
	close(cfd);
	close(sfd);
}

static void test_replaced(void)
{
	int cfd, sfd;

	bh_say("-- a second urgent byte replaces the first");
	bh_tcp_pair(&cfd, &sfd, 0);
	send(cfd, "xa", 2, MSG_OOB);
	send(cfd, "yb", 2, MSG_OOB);
	wait_urgent(sfd);
	state("arrived", sfd);
	rd("recv(MSG_OOB)", sfd, 1, MSG_OOB);
	rd("recv(10)", sfd, 10, 0);
	state("at the second mark", sfd);
	rd("recv(10, MSG_DONTWAIT)", sfd, 10, MSG_DONTWAIT);
	close(cfd);
	close(sfd);
}

static void test_inline(void)
{
	int cfd, sfd, one = 1;

	bh_say("-- SO_OOBINLINE");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("setsockopt(SO_OOBINLINE)", setsockopt(sfd, SOL_SOCKET, SO_OOBINLINE, &one,
						     sizeof(one)));
	send(cfd, "ab", 2, MSG_OOB);
	send(cfd, "cd", 2, 0);
	wait_urgent(sfd);
	state("arrived", sfd);
	rd("recv(MSG_OOB)", sfd, 1, MSG_OOB);
	rd("recv(10): stops at the mark", sfd, 10, 0);
	state("at the mark", sfd);
	rd("recv(10): the urgent byte inline", sfd, 10, 0);
	state("past the mark", sfd);

	struct msghdr mh;
	struct iovec iov;
	char c = 0;
	send(cfd, "q", 1, MSG_OOB);
	wait_urgent(sfd);
	one = 0;
	setsockopt(sfd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = &c;
	iov.iov_len = 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	ssize_t n = recvmsg(sfd, &mh, MSG_OOB);
	bh_say("recvmsg(MSG_OOB) after SO_OOBINLINE off = %zd '%c' MSG_OOB flag %d", n,
	       n == 1 ? c : '-', !!(mh.msg_flags & MSG_OOB));
	close(cfd);
	close(sfd);
}

int main(void)
{
	bh_start("oob");
	test_basic();
	test_read_past();
	test_only_urgent();
	test_replaced();
	test_inline();
	return bh_finish();
}
