/* MSG_ZEROCOPY (Documentation/networking/msg_zerocopy.rst): SO_ZEROCOPY on a
 * TCP socket, send(MSG_ZEROCOPY), the completions on the error queue
 * (SO_EE_ORIGIN_ZEROCOPY, ranges of send calls), POLLERR / EPOLLERR for them;
 * the option set before connect, after acceleration, and on a listener (its
 * accepted sockets inherit it); MSG_ZEROCOPY without the option (ignored, no
 * completion). The byte stream stays exact throughout. */
#define _GNU_SOURCE
#include "config.h"
#include "bh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif

#define CHUNK 32768


static void zc_on(const char *what, int fd)
{
	int one = 1;

	bh_ok(what, setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)));
}

/* n sends of CHUNK bytes of stream seed with flags; the peer reads and checks them. */
static void send_chunks(int tx, int rx, int n, int flags, uint32_t seed)
{
	static uint8_t buf[CHUNK], got[CHUNK];
	uint64_t want = BH_SUM_INIT, sum = BH_SUM_INIT;
	size_t sent = 0;

	for (int i = 0; i < n; i++) {
		bh_fill(buf, CHUNK, seed, (size_t)i * CHUNK);
		want = bh_sum(want, buf, CHUNK);
		for (size_t off = 0; off < CHUNK;) {
			ssize_t k = send(tx, buf + off, CHUNK - off, flags);
			if (k < 0) {
				bh_say("  send = -1 %s", bh_errname(errno));
				BH_CHECK(0);
				return;
			}
			off += (size_t)k;
			sent += (size_t)k;
			/* the receiver drains as we go: the window never blocks us */
			ssize_t r = bh_read_all(rx, got, (size_t)k);
			BH_CHECK(r == k);
			sum = bh_sum(sum, got, (size_t)k);
		}
	}
	bh_say("  %d send(s) of %d B: %zu B received, checksum %s", n, CHUNK, sent,
	       sum == want ? "ok" : "BAD");
	BH_CHECK(sum == want);
}

/* Read completions until calls 0..last are covered (bounded: 5 s). */
static void completions(int fd, uint32_t first, uint32_t last)
{
	uint32_t covered = first;
	int notes = 0, other = 0;

	for (int tries = 0; tries < 500 && covered <= last; tries++) {
		struct pollfd p = { .fd = fd, .events = 0 };
		if (poll(&p, 1, 10) <= 0 || !(p.revents & POLLERR))
			continue;
		char control[128];
		struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
		if (recvmsg(fd, &msg, MSG_ERRQUEUE) < 0)
			continue;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
			struct sock_extended_err ee;
			memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
			if (ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY || ee.ee_errno != 0) {
				other++;
				continue;
			}
			notes++;
			if (ee.ee_info <= covered && ee.ee_data >= covered)
				covered = ee.ee_data + 1;
		}
	}
	bh_say("  completions cover calls %u..%u: %s (other errors %d)", first, last,
	       covered > last ? "yes" : "no", other);
	BH_CHECK(covered > last && notes > 0 && other == 0);
}

static void queue_empty(const char *what, int fd)
{
	char control[128];
	struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
	struct pollfd p = { .fd = fd, .events = 0 };

	poll(&p, 1, 50);
	bh_say("  %s: POLLERR %d", what, !!(p.revents & POLLERR));
	bh_err("  recvmsg(MSG_ERRQUEUE)", recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT), EAGAIN);
}

static void test_after_accel(void)
{
	int c, s;

	bh_say("-- SO_ZEROCOPY on an accelerated connection");
	bh_tcp_pair_warm(&c, &s, 1);
	zc_on("setsockopt(SO_ZEROCOPY)", c);
	send_chunks(c, s, 3, MSG_ZEROCOPY, 1);
	completions(c, 0, 2);

	bh_say("-- EPOLLERR for a completion");
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 }, out;
	bh_ok("epoll_ctl ADD", epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	send_chunks(c, s, 1, MSG_ZEROCOPY, 2);
	int n = epoll_wait(ep, &out, 1, 5000);
	bh_say("  epoll_wait = %d, EPOLLERR %d", n, n == 1 && (out.events & EPOLLERR));
	BH_CHECK(n == 1 && (out.events & EPOLLERR));
	completions(c, 3, 3);
	close(ep);

	bh_say("-- the stream goes on both ways");
	send_chunks(s, c, 2, 0, 3);
	send_chunks(c, s, 2, 0, 4);
	close(c);
	close(s);
}

static void test_before_connect(void)
{
	int lfd = bh_listener(0), c, s;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	bh_say("-- SO_ZEROCOPY before connect");
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	c = socket(AF_INET, SOCK_STREAM, 0);
	zc_on("setsockopt(SO_ZEROCOPY)", c);
	bh_ok("connect", connect(c, (struct sockaddr *)&sa, len));
	s = accept(lfd, NULL, NULL);
	BH_CHECK(s >= 0);
	send_chunks(c, s, 2, MSG_ZEROCOPY, 5);
	completions(c, 0, 1);
	send_chunks(s, c, 1, 0, 6);
	close(c);
	close(s);
	close(lfd);
}

static void test_listener(void)
{
	int lfd = bh_listener(0), c, s, val = 0;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa), vlen = sizeof(val);

	bh_say("-- SO_ZEROCOPY on a listener: accepted sockets inherit it");
	zc_on("setsockopt(listener, SO_ZEROCOPY)", lfd);
	getsockname(lfd, (struct sockaddr *)&sa, &len);
	c = socket(AF_INET, SOCK_STREAM, 0);
	bh_ok("connect", connect(c, (struct sockaddr *)&sa, len));
	s = accept(lfd, NULL, NULL);
	BH_CHECK(s >= 0);
	bh_ok("getsockopt(accepted, SO_ZEROCOPY)", getsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &val, &vlen));
	bh_say("  SO_ZEROCOPY = %d", val);
	send_chunks(s, c, 2, MSG_ZEROCOPY, 7);
	completions(s, 0, 1);
	close(c);
	close(s);
	close(lfd);
}

static void test_flag_only(void)
{
	int c, s;

	bh_say("-- MSG_ZEROCOPY without SO_ZEROCOPY: an ordinary send");
	bh_tcp_pair_warm(&c, &s, 1);
	send_chunks(c, s, 2, MSG_ZEROCOPY, 8);
	queue_empty("no completion", c);
	close(c);
	close(s);
}

int main(void)
{
	bh_start("zerocopy");
	test_flag_only();
	test_after_accel();
	test_before_connect();
	test_listener();
	return bh_finish();
}
