/* Readiness with poll, ppoll, select and pselect over a mix of TCP, UDP,
 * a listener, a pipe and bad fds: timeouts, POLLIN/POLLOUT/POLLHUP/
 * POLLRDHUP/POLLNVAL, negative fds ignored, EBADF from select, signal
 * masks, EINVAL. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *ev_str(short ev)
{
	static char s[96];

	snprintf(s, sizeof(s), "%s%s%s%s%s%s",
		 ev & POLLIN ? "IN " : "", ev & POLLOUT ? "OUT " : "",
		 ev & POLLERR ? "ERR " : "", ev & POLLHUP ? "HUP " : "",
		 ev & POLLRDHUP ? "RDHUP " : "", ev & POLLNVAL ? "NVAL " : "");
	if (!s[0])
		strcpy(s, "- ");
	s[strlen(s) - 1] = '\0';
	return s;
}

static void show_poll(const char *what, int ret, struct pollfd *p, int n)
{
	bh_show(what, ret);
	for (int i = 0; i < n; i++)
		bh_say("  [%d] %s", i, ev_str(p[i].revents));
}

static void test_poll(void)
{
	int cfd, sfd, u1, u2, lfd, pfd[2], ret, bad = bh_closed_fd();
	struct sockaddr_in ua;
	socklen_t len = sizeof(ua);

	bh_say("-- poll");
	bh_tcp_pair(&cfd, &sfd, 0);
	u1 = bh_udp_bound(0);
	u2 = bh_udp_bound(0);
	getsockname(u2, (struct sockaddr *)&ua, &len);
	lfd = bh_listener(0);
	bh_ok("pipe", pipe(pfd));

	struct pollfd p[7] = {
		{ .fd = sfd, .events = POLLIN | POLLRDHUP },
		{ .fd = cfd, .events = POLLOUT },
		{ .fd = u2, .events = POLLIN },
		{ .fd = lfd, .events = POLLIN },
		{ .fd = pfd[0], .events = POLLIN },
		{ .fd = -1, .events = POLLIN },
		{ .fd = bad, .events = POLLIN },
	};
	ret = poll(p, 7, 0);
	show_poll("poll(7, 0ms) idle", ret, p, 7);
	/* cfd writable, u2 nothing, bad fd -> NVAL. */
	BH_CHECK(ret == 2 && p[1].revents == POLLOUT &&
		 p[6].revents == POLLNVAL && p[5].revents == 0);

	write(cfd, "abc", 3);
	sendto(u1, "dgram", 5, 0, (struct sockaddr *)&ua, sizeof(ua));
	int c2 = bh_listener(0);
	close(c2);
	struct sockaddr_in la;
	len = sizeof(la);
	getsockname(lfd, (struct sockaddr *)&la, &len);
	c2 = socket(AF_INET, SOCK_STREAM, 0);
	connect(c2, (struct sockaddr *)&la, sizeof(la));
	write(pfd[1], "p", 1);
	/* Everything is ready; wait until all four inputs are seen. */
	for (int i = 0; i < 100; i++) {
		ret = poll(p, 7, 100);
		if (p[0].revents && p[2].revents && p[3].revents &&
		    p[4].revents)
			break;
	}
	show_poll("poll(7) all ready", ret, p, 7);
	BH_CHECK(ret == 6 && p[0].revents == POLLIN && p[2].revents == POLLIN
		 && p[3].revents == POLLIN && p[4].revents == POLLIN);

	/* Peer half-close: POLLRDHUP; full close of the write side after
	 * shutdown RDWR: POLLHUP. */
	char buf[8];
	read(sfd, buf, sizeof(buf));
	shutdown(cfd, SHUT_WR);
	p[0].revents = 0;
	for (int i = 0; i < 100 && !(p[0].revents & POLLRDHUP); i++)
		ret = poll(p, 1, 100);
	show_poll("poll(peer SHUT_WR)", ret, p, 1);
	BH_CHECK(p[0].revents == (POLLIN | POLLRDHUP));
	shutdown(sfd, SHUT_RDWR);
	ret = poll(p, 1, 1000);
	show_poll("poll(after own SHUT_RDWR)", ret, p, 1);
	BH_CHECK(p[0].revents & POLLHUP);

	/* Timeout with nothing ready. */
	struct pollfd q = { .fd = u1, .events = POLLIN };
	bh_ok("poll(1, 20ms) timeout", poll(&q, 1, 20));
	bh_ok("poll(NULL, 0, 10ms)", poll(NULL, 0, 10));
	struct pollfd *volatile badp = (struct pollfd *)8;
	bh_err("poll(bad pointer)", poll(badp, 1, 0), EFAULT);

	/* ppoll: timespec timeout, a signal mask, a pending blocked signal
	 * stays blocked. */
	struct timespec ts = { 0, 20000000 };
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	struct pollfd r[2] = { { .fd = u1, .events = POLLIN },
			       { .fd = cfd, .events = POLLOUT } };
	ret = ppoll(r, 1, &ts, &mask);
	show_poll("ppoll(1, 20ms, mask) timeout", ret, r, 1);
	BH_CHECK(ret == 0);
	ts.tv_nsec = 0;
	ret = ppoll(r, 2, &ts, NULL);
	/* cfd after SHUT_WR and peer SHUT_RDWR: writable and hung up. */
	show_poll("ppoll(2, 0)", ret, r, 2);
	BH_CHECK(ret == 1 && r[0].revents == 0);
	ret = ppoll(r + 1, 1, NULL, NULL);
	show_poll("ppoll(NULL timeout, ready)", ret, r + 1, 1);
	BH_CHECK(ret == 1);
	ts.tv_nsec = 2000000000L;
	bh_err("ppoll(bad timespec)", ppoll(r, 1, &ts, NULL), EINVAL);

	close(c2);
	close(cfd);
	close(sfd);
	close(u1);
	close(u2);
	close(lfd);
	close(pfd[0]);
	close(pfd[1]);
}

/* An idle set (only cfd writable), then data on the TCP socket and the pipe:
 * exactly those two readable. */
static void select_ready(int cfd, int sfd, int u, const int pfd[2], int maxfd)
{
	fd_set rd, wr;
	struct timeval tv;
	int ret;

	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(sfd, &rd);
	FD_SET(u, &rd);
	FD_SET(pfd[0], &rd);
	FD_SET(cfd, &wr);
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	ret = (int)bh_show("select(idle, 0)", select(maxfd + 1, &rd, &wr,
						    NULL, &tv));
	bh_say("  sfd %d u %d pipe %d | cfd writable %d",
	       FD_ISSET(sfd, &rd), FD_ISSET(u, &rd), FD_ISSET(pfd[0], &rd),
	       FD_ISSET(cfd, &wr));
	BH_CHECK(ret == 1 && FD_ISSET(cfd, &wr) && !FD_ISSET(sfd, &rd));

	write(cfd, "data", 4);
	write(pfd[1], "x", 1);
	for (int i = 0; i < 100; i++) {
		FD_ZERO(&rd);
		FD_SET(sfd, &rd);
		FD_SET(pfd[0], &rd);
		FD_SET(u, &rd);
		tv.tv_sec = 0;
		tv.tv_usec = 100000;
		ret = select(maxfd + 1, &rd, NULL, NULL, &tv);
		if (ret == 2)
			break;
	}
	bh_show("select(tcp + pipe ready)", ret);
	bh_say("  sfd %d u %d pipe %d", FD_ISSET(sfd, &rd), FD_ISSET(u, &rd),
	       FD_ISSET(pfd[0], &rd));
	BH_CHECK(ret == 2 && FD_ISSET(sfd, &rd) && FD_ISSET(pfd[0], &rd) &&
		 !FD_ISSET(u, &rd));
}

/* Timeouts on an idle UDP socket, and the errors select reports. */
static void select_timeouts_and_errors(int u)
{
	int bad = bh_closed_fd();
	fd_set rd;
	struct timeval tv;

	/* Timeout: the kernel updates the timeval (Linux semantics). */
	FD_ZERO(&rd);
	FD_SET(u, &rd);
	tv.tv_sec = 0;
	tv.tv_usec = 20000;
	bh_ok("select(timeout 20ms)", select(u + 1, &rd, NULL, NULL, &tv));
	bh_say("  timeval consumed: %d", tv.tv_sec == 0 && tv.tv_usec == 0);
	BH_CHECK(tv.tv_sec == 0 && tv.tv_usec == 0);
	bh_ok("select(0 fds, 10ms)", select(0, NULL, NULL, NULL, &tv));

	/* A closed fd in a set: EBADF. Linux only checks fds below its
	 * fd-table size, so use a low number just closed. */
	bad = dup(u);
	close(bad);
	if (bad < FD_SETSIZE) {
		FD_ZERO(&rd);
		FD_SET(bad, &rd);
		tv.tv_sec = 0;
		tv.tv_usec = 0;
		bh_err("select(closed fd)", select(bad + 1, &rd, NULL, NULL,
						   &tv), EBADF);
	}
	tv.tv_usec = -1;
	bh_err("select(bad timeval)", select(1, NULL, NULL, NULL, &tv), EINVAL);
	bh_err("select(nfds -1)", select(-1, NULL, NULL, NULL, NULL), EINVAL);
}

/* pselect: timespec left untouched, signal mask applied. */
static void pselect_mask(int sfd, int u)
{
	fd_set rd, ex;
	int ret;
	struct timespec ts = { 0, 20000000 };
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR2);
	FD_ZERO(&rd);
	FD_SET(u, &rd);
	bh_ok("pselect(timeout 20ms, mask)",
	      pselect(u + 1, &rd, NULL, NULL, &ts, &mask));
	bh_say("  timespec untouched: %d", ts.tv_nsec == 20000000);
	BH_CHECK(ts.tv_nsec == 20000000);
	FD_ZERO(&rd);
	FD_ZERO(&ex);
	FD_SET(sfd, &rd);
	FD_SET(sfd, &ex);
	ret = (int)bh_show("pselect(ready, NULL timeout)",
			   pselect(sfd + 1, &rd, NULL, &ex, NULL, NULL));
	bh_say("  sfd readable %d exceptional %d", FD_ISSET(sfd, &rd),
	       FD_ISSET(sfd, &ex));
	BH_CHECK(ret == 1 && FD_ISSET(sfd, &rd));
}

/* MSG_OOB makes the exceptional set fire. */
static void select_oob(int cfd, int sfd)
{
	fd_set ex;
	struct timeval tv;
	char c;
	read(sfd, &c, 1);
	send(cfd, "!", 1, MSG_OOB);
	for (int i = 0; i < 100; i++) {
		FD_ZERO(&ex);
		FD_SET(sfd, &ex);
		tv.tv_sec = 0;
		tv.tv_usec = 100000;
		if (select(sfd + 1, NULL, NULL, &ex, &tv) == 1)
			break;
	}
	bh_say("exceptional after MSG_OOB: %d", FD_ISSET(sfd, &ex));
	BH_CHECK(FD_ISSET(sfd, &ex));
}

static void test_select(void)
{
	int cfd, sfd, u, pfd[2], maxfd;

	bh_say("-- select and pselect");
	bh_tcp_pair(&cfd, &sfd, 0);
	u = bh_udp_bound(0);
	pipe(pfd);
	maxfd = cfd;
	if (sfd > maxfd)
		maxfd = sfd;
	if (u > maxfd)
		maxfd = u;
	if (pfd[0] > maxfd)
		maxfd = pfd[0];

	select_ready(cfd, sfd, u, pfd, maxfd);
	select_timeouts_and_errors(u);
	pselect_mask(sfd, u);
	select_oob(cfd, sfd);
	close(cfd);
	close(sfd);
	close(u);
	close(pfd[0]);
	close(pfd[1]);
}

int main(void)
{
	bh_start("poll");
	test_poll();
	test_select();
	return bh_finish();
}
