/* epoll: epoll_create/epoll_create1, epoll_ctl ADD/MOD/DEL and its errors,
 * epoll_wait, epoll_pwait, epoll_pwait2, level vs edge triggered
 * (EPOLLET), EPOLLONESHOT re-arming, EPOLLRDHUP, data cookies, a listener
 * and UDP in the same set, a closed fd leaving the set, DEL and ADD again. Events are printed
 * by cookie, sorted, never by fd. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static int cmp_ev(const void *a, const void *b)
{
	const struct epoll_event *x = a, *y = b;

	return x->data.u64 < y->data.u64 ? -1 : x->data.u64 > y->data.u64;
}

static const char *ev_str(uint32_t ev)
{
	static char s[96];

	snprintf(s, sizeof(s), "%s%s%s%s%s",
		 ev & EPOLLIN ? "IN " : "", ev & EPOLLOUT ? "OUT " : "",
		 ev & EPOLLERR ? "ERR " : "", ev & EPOLLHUP ? "HUP " : "",
		 ev & EPOLLRDHUP ? "RDHUP " : "");
	if (!s[0])
		strcpy(s, "- ");
	s[strlen(s) - 1] = '\0';
	return s;
}

/* Print a wait result: count, then each event by cookie (sorted). */
static int show(const char *what, int n, struct epoll_event *ev)
{
	bh_show(what, n);
	if (n > 0) {
		qsort(ev, (size_t)n, sizeof(*ev), cmp_ev);
		for (int i = 0; i < n; i++)
			bh_say("  cookie %llu: %s",
			       (unsigned long long)ev[i].data.u64,
			       ev_str(ev[i].events));
	}
	return n;
}

static int add(int ep, int fd, uint32_t events, uint64_t cookie)
{
	struct epoll_event e = { .events = events, .data.u64 = cookie };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static int mod(int ep, int fd, uint32_t events, uint64_t cookie)
{
	struct epoll_event e = { .events = events, .data.u64 = cookie };

	return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
}

/* Wait until `want` events are reported (bounded), return the last count. */
static int wait_for(int ep, struct epoll_event *ev, int want)
{
	int n = 0;

	for (int i = 0; i < 100; i++) {
		n = epoll_wait(ep, ev, 16, 100);
		if (n >= want)
			break;
	}
	return n;
}

/* Events that each fire once (EPOLLET, EPOLLONESHOT) gathered over several
 * calls until want of them came (bounded: 100 x 100 ms): two sources that
 * become ready one after the other may be reported by two calls, on the
 * kernel as under the preload; the count and cookies are the same. */
static int gather_once(int ep, struct epoll_event *ev, int want)
{
	int n = 0;

	for (int i = 0; i < 100 && n < want; i++) {
		int got = epoll_wait(ep, ev + n, 16 - n, 100);
		if (got > 0)
			n += got;
	}
	return n;
}

static void test_create_ctl(void)
{
	int ep, ep2, cfd, sfd, pfd[2], n, fd;
	struct epoll_event ev[16];

	bh_say("-- create and ctl");
	ep = bh_okfd("epoll_create(1)", epoll_create(1));
	bh_err("epoll_create(0)", epoll_create(0), EINVAL);
	bh_err("epoll_create(-1)", epoll_create(-1), EINVAL);
	ep2 = bh_okfd("epoll_create1(EPOLL_CLOEXEC)",
		      epoll_create1(EPOLL_CLOEXEC));
	bh_say("  cloexec: create %d create1 %d", bh_cloexec(ep),
	       bh_cloexec(ep2));
	BH_CHECK(bh_cloexec(ep) == 0 && bh_cloexec(ep2) == 1);
	bh_err("epoll_create1(bad flags)", epoll_create1(1), EINVAL);
	fd = bh_okfd("epoll_create1(0)", epoll_create1(0));
	close(fd);

	bh_tcp_pair(&cfd, &sfd, 0);
	pipe(pfd);
	bh_ok("epoll_ctl(ADD tcp IN)", add(ep, sfd, EPOLLIN, 1));
	bh_err("epoll_ctl(ADD again)", add(ep, sfd, EPOLLIN, 1), EEXIST);
	bh_err("epoll_ctl(MOD not added)", mod(ep, cfd, EPOLLIN, 2), ENOENT);
	bh_err("epoll_ctl(DEL not added)",
	       epoll_ctl(ep, EPOLL_CTL_DEL, cfd, NULL), ENOENT);
	bh_err("epoll_ctl(ADD closed fd)", add(ep, bh_closed_fd(), EPOLLIN, 3),
	       EBADF);
	bh_err("epoll_ctl(on a non-epoll fd)", add(pfd[0], sfd, EPOLLIN, 3),
	       EINVAL);
	bh_err("epoll_ctl(ADD itself)", add(ep, ep, EPOLLIN, 3), EINVAL);
	int file = open("/dev/null", O_RDONLY);
	bh_err("epoll_ctl(ADD /dev/null)", add(ep, file, EPOLLIN, 3), EPERM);
	close(file);
	bh_err("epoll_ctl(bad op)", epoll_ctl(ep, 99, sfd, ev), EINVAL);
	bh_err("epoll_wait(maxevents 0)", epoll_wait(ep, ev, 0, 0), EINVAL);
	bh_err("epoll_wait(not epoll)", epoll_wait(pfd[0], ev, 1, 0), EINVAL);
	bh_err("epoll_wait(closed fd)", epoll_wait(bh_closed_fd(), ev, 1, 0),
	       EBADF);
	/* Nested epoll: ep2 watches ep. */
	bh_ok("epoll_ctl(ADD epoll into epoll)", add(ep2, ep, EPOLLIN, 50));

	n = show("epoll_wait(idle, 0)", epoll_wait(ep, ev, 16, 0), ev);
	BH_CHECK(n == 0);
	bh_ok("epoll_ctl(ADD client OUT)", add(ep, cfd, EPOLLOUT, 2));
	bh_ok("epoll_ctl(ADD pipe IN)", add(ep, pfd[0], EPOLLIN, 3));
	write(cfd, "hello", 5);
	write(pfd[1], "x", 1);
	n = show("epoll_wait(3 ready)", wait_for(ep, ev, 3), ev);
	BH_CHECK(n == 3 && ev[0].data.u64 == 1 && ev[0].events == EPOLLIN &&
		 ev[1].events == EPOLLOUT && ev[2].events == EPOLLIN);
	n = show("epoll_wait(nested)", epoll_wait(ep2, ev, 16, 1000), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 50);

	/* Level triggered: still reported while unread. */
	n = show("epoll_wait(level, again)", epoll_wait(ep, ev, 16, 0), ev);
	BH_CHECK(n == 3);
	bh_ok("epoll_ctl(MOD client -> IN|RDHUP)",
	      mod(ep, cfd, EPOLLIN | EPOLLRDHUP, 22));
	bh_ok("epoll_ctl(DEL pipe)", epoll_ctl(ep, EPOLL_CTL_DEL, pfd[0], NULL));
	n = show("epoll_wait(after MOD/DEL)", epoll_wait(ep, ev, 16, 0), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 1);
	/* maxevents smaller than ready count. */
	write(sfd, "back", 4);
	wait_for(ep, ev, 2);
	n = show("epoll_wait(maxevents 1)", epoll_wait(ep, ev, 1, 0), ev);
	BH_CHECK(n == 1);

	/* Peer shutdown: RDHUP. */
	char buf[16];
	read(cfd, buf, sizeof(buf));
	read(sfd, buf, sizeof(buf));
	shutdown(sfd, SHUT_WR);
	n = 0;
	for (int i = 0; i < 100; i++) {
		n = epoll_wait(ep, ev, 16, 100);
		if (n == 1 && (ev[0].events & EPOLLRDHUP))
			break;
	}
	show("epoll_wait(peer SHUT_WR)", n, ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 22 &&
		 ev[0].events == (EPOLLIN | EPOLLRDHUP));

	/* Closing the only fd of a socket removes it from the set (cookie
	 * 22 never again); its peer, shut both ways now, reports HUP. */
	close(cfd);
	for (int i = 0; i < 100; i++) {
		n = epoll_wait(ep, ev, 16, 100);
		if (n == 1 && (ev[0].events & EPOLLHUP))
			break;
	}
	show("epoll_wait(after close)", n, ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 1 &&
		 ev[0].events == (EPOLLIN | EPOLLHUP));
	close(sfd);
	close(pfd[0]);
	close(pfd[1]);
	close(ep);
	close(ep2);
}

static void test_edge_oneshot(void)
{
	int ep, cfd, sfd, u1, u2, lfd, n;
	struct epoll_event ev[16];
	struct sockaddr_in ua, la;
	socklen_t len = sizeof(ua);
	char buf[64];

	bh_say("-- EPOLLET and EPOLLONESHOT");
	ep = epoll_create1(0);
	bh_tcp_pair(&cfd, &sfd, SOCK_NONBLOCK);
	fcntl(sfd, F_SETFL, O_NONBLOCK);
	u1 = bh_udp_bound(SOCK_NONBLOCK);
	u2 = bh_udp_bound(SOCK_NONBLOCK);
	getsockname(u2, (struct sockaddr *)&ua, &len);
	bh_ok("epoll_ctl(ADD tcp IN|ET)", add(ep, sfd, EPOLLIN | EPOLLET, 1));
	bh_ok("epoll_ctl(ADD udp IN|ONESHOT)",
	      add(ep, u2, EPOLLIN | EPOLLONESHOT, 2));

	write(cfd, "edge1", 5);
	sendto(u1, "one", 3, 0, (struct sockaddr *)&ua, sizeof(ua));
	n = show("epoll_wait(both)", gather_once(ep, ev, 2), ev);
	BH_CHECK(n == 2);
	/* Edge: no new data -> no event even though unread. Oneshot:
	 * disabled until re-armed. */
	n = show("epoll_wait(no new edge)", epoll_wait(ep, ev, 16, 0), ev);
	BH_CHECK(n == 0);
	sendto(u1, "two", 3, 0, (struct sockaddr *)&ua, sizeof(ua));
	write(cfd, "edge2", 5);
	n = show("epoll_wait(new data: edge fires, oneshot silent)",
		 wait_for(ep, ev, 1), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 1);
	/* Drain the edge-triggered socket to EAGAIN, as ET requires. */
	ssize_t got = 0, r;
	while ((r = read(sfd, buf, sizeof(buf))) > 0)
		got += r;
	bh_say("drained %zd bytes then %s", got, bh_errname(errno));
	BH_CHECK(got == 10 && errno == EAGAIN);
	bh_ok("epoll_ctl(MOD re-arm oneshot)",
	      mod(ep, u2, EPOLLIN | EPOLLONESHOT, 2));
	n = show("epoll_wait(re-armed, data pending)", wait_for(ep, ev, 1),
		 ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 2);
	n = show("epoll_wait(oneshot spent)", epoll_wait(ep, ev, 16, 0), ev);
	BH_CHECK(n == 0);
	r = recv(u2, buf, sizeof(buf), 0);
	bh_say("udp datagram 1: %zd bytes", r);
	r = recv(u2, buf, sizeof(buf), 0);
	bh_say("udp datagram 2: %zd bytes", r);
	bh_err("udp empty", recv(u2, buf, sizeof(buf), 0), EAGAIN);

	/* A non-blocking listener under EPOLLET: one event for two
	 * pending connections, accept drains both. */
	lfd = bh_listener(SOCK_NONBLOCK);
	len = sizeof(la);
	getsockname(lfd, (struct sockaddr *)&la, &len);
	bh_ok("epoll_ctl(ADD listener IN|ET)",
	      add(ep, lfd, EPOLLIN | EPOLLET, 3));
	int c1 = socket(AF_INET, SOCK_STREAM, 0);
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	connect(c1, (struct sockaddr *)&la, sizeof(la));
	connect(c2, (struct sockaddr *)&la, sizeof(la));
	n = show("epoll_wait(listener)", wait_for(ep, ev, 1), ev);
	BH_CHECK(n >= 1);
	int accepted = 0, a;
	for (int i = 0; i < 100 && accepted < 2; i++) {
		a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (a >= 0) {
			accepted++;
			close(a);
		} else {
			epoll_wait(ep, ev, 16, 100);
		}
	}
	bh_say("accepted %d, then %s", accepted,
	       accept(lfd, NULL, NULL) < 0 ? bh_errname(errno) : "more");
	BH_CHECK(accepted == 2);
	close(c1);
	close(c2);
	close(lfd);
	close(u1);
	close(u2);
	close(cfd);
	close(sfd);
	close(ep);
}

static void test_pwait(void)
{
	int ep, cfd, sfd, n;
	struct epoll_event ev[4];
	sigset_t mask;

	bh_say("-- epoll_pwait and epoll_pwait2");
	ep = epoll_create1(0);
	bh_tcp_pair(&cfd, &sfd, 0);
	add(ep, sfd, EPOLLIN, 7);
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	n = show("epoll_pwait(20ms, mask) timeout",
		 epoll_pwait(ep, ev, 4, 20, &mask), ev);
	BH_CHECK(n == 0);
	struct timespec ts = { 0, 20000000 };
	n = show("epoll_pwait2(20ms, mask) timeout",
		 epoll_pwait2(ep, ev, 4, &ts, &mask), ev);
	BH_CHECK(n == 0);
	write(cfd, "x", 1);
	n = show("epoll_pwait(ready, NULL mask)",
		 epoll_pwait(ep, ev, 4, 1000, NULL), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 7);
	n = show("epoll_pwait2(ready, NULL timeout)",
		 epoll_pwait2(ep, ev, 4, NULL, NULL), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 7);
	ts.tv_nsec = -1;
	bh_err("epoll_pwait2(bad timespec)",
	       epoll_pwait2(ep, ev, 4, &ts, NULL), EINVAL);
	volatile int negative = -1;
	bh_err("epoll_pwait(maxevents -1)",
	       epoll_pwait(ep, ev, negative, 0, NULL), EINVAL);
	close(cfd);
	close(sfd);
	close(ep);
}

/* A socket removed and added again around every exchange (event loops that
 * DEL and ADD per request, as redis-benchmark): never reported while
 * removed, reported with its new cookie once added; a removed socket whose
 * peer closes, which is closed itself, or whose set is closed. */
static void test_del_readd(void)
{
	struct epoll_event ev[16];
	int cfd, sfd, ep, n, bad = 0;
	char buf[16];

	ep = bh_okfd("epoll_create1(0)", epoll_create1(0));
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("epoll_ctl(ADD tcp IN)", add(ep, sfd, EPOLLIN, 1));
	for (int i = 0; i < 20; i++) {
		bad += epoll_ctl(ep, EPOLL_CTL_DEL, sfd, NULL) != 0;
		bad += write(cfd, "x", 1) != 1;
		bad += epoll_wait(ep, ev, 16, 20) != 0;
		bad += add(ep, sfd, EPOLLIN, 100 + (uint64_t)i) != 0;
		n = wait_for(ep, ev, 1);
		bad += n != 1 || ev[0].data.u64 != 100 + (uint64_t)i;
		bad += read(sfd, buf, sizeof(buf)) != 1;
	}
	bh_say("20 DEL/ADD rounds: %d wrong", bad);
	BH_CHECK(bad == 0);
	bh_ok("epoll_ctl(DEL tcp)", epoll_ctl(ep, EPOLL_CTL_DEL, sfd, NULL));
	close(cfd);
	n = show("epoll_wait(removed, peer closed, 100 ms)", epoll_wait(ep, ev, 16, 100), ev);
	BH_CHECK(n == 0);
	bh_ok("epoll_ctl(ADD tcp IN|RDHUP)", add(ep, sfd, EPOLLIN | EPOLLRDHUP, 7));
	n = show("epoll_wait(added again)", wait_for(ep, ev, 1), ev);
	BH_CHECK(n == 1 && ev[0].data.u64 == 7);
	bh_ok("epoll_ctl(DEL tcp)", epoll_ctl(ep, EPOLL_CTL_DEL, sfd, NULL));
	close(sfd); /* closed while removed */
	n = show("epoll_wait(removed, closed)", epoll_wait(ep, ev, 16, 50), ev);
	BH_CHECK(n == 0);
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("epoll_ctl(ADD tcp IN)", add(ep, sfd, EPOLLIN, 2));
	bh_ok("epoll_ctl(DEL tcp)", epoll_ctl(ep, EPOLL_CTL_DEL, sfd, NULL));
	close(ep); /* the set goes first */
	bh_ok("write after the set closed", write(cfd, "y", 1) == 1 ? 0 : -1);
	close(cfd);
	close(sfd);
}

int main(void)
{
	bh_start("epoll");
	test_create_ctl();
	test_edge_oneshot();
	test_pwait();
	test_del_readd();
	return bh_finish();
}
