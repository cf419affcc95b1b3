/* udp: a UDP program for tests/accel/udp.sh, run under the launcher on a
 * dpdk port against a plain kernel peer (udp_peer.py).
 *
 *   udp PORT PEER_IP ECHO_PORT COUNT
 *
 * Server: a socket bound to INADDR_ANY:PORT echoes every datagram to its
 * source until the peer's "END", taking each one through another call:
 * poll (mixed with a pipe) + recvfrom, epoll + recvmsg(MSG_DONTWAIT) with
 * IP_PKTINFO and SO_TIMESTAMPNS data checked,
 * recvmmsg(MSG_WAITFORONE), select + FIONREAD + MSG_PEEK (and a truncated
 * MSG_PEEK|MSG_TRUNC) + recvmsg into two iovecs. Client: an unbound socket
 * connects to PEER_IP:ECHO_PORT, sends COUNT numbered datagrams in sendmmsg
 * batches and checks every echo byte for byte (recvmmsg), retrying lost
 * ones; then disconnects (AF_UNSPEC) and does one sendto/recvfrom with the
 * source checked (a multicast mode, below, joins and leaves groups). Fork: the child's copy of the server socket is a kernel
 * socket (nothing pending, a datagram sent and its echo received through
 * the kernel), while the parent's stays accelerated. Prints "ok" and exits
 * 0, or a reason and exits 1. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DGRAM 1472
#define BATCH 8
#define DEADLINE_S 60

static time_t start;

static void fail(const char *what)
{
	printf("FAIL: %s (errno %d %s)\n", what, errno, strerror(errno));
	fflush(stdout);
	exit(1);
}

static void check_time(void)
{
	if (time(NULL) - start > DEADLINE_S)
		fail("out of time");
}

/* The payload of datagram seq: its number, then bytes derived from it. */
static size_t payload(unsigned seq, uint8_t *p)
{
	size_t len = 4 + (seq * 37u) % (MAX_DGRAM - 4);
	memcpy(p, &seq, 4);
	uint32_t x = seq * 2654435761u + 1;
	for (size_t i = 4; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
	return len;
}

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { .fd = fd, .events = ev };
	return poll(&p, 1, ms);
}

/* IP_PKTINFO and SO_TIMESTAMPNS are on: both came, the time is now. */
static void check_cmsgs(struct msghdr *m)
{
	bool stamp = false, info = false;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			stamp = ts.tv_sec <= now.tv_sec && ts.tv_sec + 10 > now.tv_sec;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			info = pi.ipi_spec_dst.s_addr != 0 && pi.ipi_addr.s_addr != 0;
		}
	}
	if (!stamp || !info)
		fail("recvmsg: SCM_TIMESTAMPNS or IP_PKTINFO missing or wrong");
}

/* One datagram by the call of turn i; its length, source in *src. */
static ssize_t server_take(int s, int ep, int pipe_rd, unsigned i, uint8_t *buf,
			   struct sockaddr_in *src)
{
	socklen_t alen = sizeof(*src);
	ssize_t n;
	switch (i % 4) {
	case 0: {
		struct pollfd p[2] = { { .fd = pipe_rd, .events = POLLIN }, { .fd = s, .events = POLLIN } };
		if (poll(p, 2, 10000) != 1 || !(p[1].revents & POLLIN) || p[0].revents)
			fail("poll: the socket should be the only one ready");
		return recvfrom(s, buf, 65536, 0, (struct sockaddr *)src, &alen);
	}
	case 1: {
		struct epoll_event ev;
		if (epoll_wait(ep, &ev, 1, 10000) != 1 || ev.data.u32 != 7)
			fail("epoll_wait: the socket should be ready");
		struct iovec iov = { .iov_base = buf, .iov_len = 65536 };
		union {
			struct cmsghdr align;
			char bytes[256];
		} control;
		struct msghdr m = { .msg_name = src, .msg_namelen = sizeof(*src), .msg_iov = &iov,
				    .msg_iovlen = 1, .msg_control = &control,
				    .msg_controllen = sizeof(control) };
		n = recvmsg(s, &m, MSG_DONTWAIT);
		if (n >= 0 && (m.msg_namelen != sizeof(*src) || m.msg_flags))
			fail("recvmsg: name length or flags");
		if (n >= 0)
			check_cmsgs(&m);
		return n;
	}
	case 2: {
		struct mmsghdr v[1];
		struct iovec iov = { .iov_base = buf, .iov_len = 65536 };
		memset(v, 0, sizeof(v));
		v[0].msg_hdr = (struct msghdr){ .msg_name = src, .msg_namelen = sizeof(*src),
						.msg_iov = &iov, .msg_iovlen = 1 };
		int r = recvmmsg(s, v, 1, MSG_WAITFORONE, NULL);
		return r == 1 ? (ssize_t)v[0].msg_len : -1;
	}
	default: {
		fd_set r;
		FD_ZERO(&r);
		FD_SET(s, &r);
		struct timeval tv = { .tv_sec = 10 };
		if (select(s + 1, &r, NULL, NULL, &tv) != 1)
			fail("select: the socket should be ready");
		int avail = -1;
		if (ioctl(s, FIONREAD, &avail) != 0)
			fail("FIONREAD");
		n = recv(s, buf, 65536, MSG_PEEK);
		if (n != avail)
			fail("FIONREAD is not the next datagram's length");
		if (n > 2) { /* truncated peek: the full length and MSG_TRUNC */
			struct iovec iov = { .iov_base = buf, .iov_len = (size_t)n / 2 };
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
			if (recvmsg(s, &m, MSG_PEEK | MSG_TRUNC) != n || !(m.msg_flags & MSG_TRUNC))
				fail("MSG_PEEK|MSG_TRUNC of a truncated datagram");
		}
		struct iovec iov[2] = { { .iov_base = buf, .iov_len = 8 },
					{ .iov_base = buf + 8, .iov_len = 65536 - 8 } };
		struct msghdr m = { .msg_name = src, .msg_namelen = sizeof(*src), .msg_iov = iov,
				    .msg_iovlen = 2 };
		ssize_t got = recvmsg(s, &m, 0);
		if (got != n)
			fail("recvmsg after MSG_PEEK: another datagram");
		return got;
	}
	}
}

static void server(int s)
{
	int pipefd[2];
	if (pipe(pipefd) != 0)
		fail("pipe");
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0)
		fail("epoll");
	static uint8_t buf[65536];
	unsigned echoed = 0;
	for (unsigned i = 0;; i++) {
		check_time();
		struct sockaddr_in src;
		ssize_t n = server_take(s, ep, pipefd[0], i, buf, &src);
		if (n < 0)
			fail("server receive");
		if (sendto(s, buf, (size_t)n, 0, (struct sockaddr *)&src, sizeof(src)) != n)
			fail("server sendto");
		echoed++;
		if (n == 3 && memcmp(buf, "END", 3) == 0)
			break;
	}
	char dummy;
	if (recv(s, &dummy, 1, MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
		/* a repeated END may still come: drain, then check EAGAIN */
		while (recv(s, &dummy, 1, MSG_DONTWAIT) >= 0)
			check_time();
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			fail("MSG_DONTWAIT on an empty socket: not EAGAIN");
	}
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
	if (recv(s, &dummy, 1, 0) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail("O_NONBLOCK on an empty socket: not EAGAIN");
	printf("server echoed %u\n", echoed);
	close(ep);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* Send the not yet echoed datagrams of [base, base + n) (sendmmsg), take
 * echoes (recvmmsg) until all came or 300 ms passed. */
static void client_window(int c, unsigned base, unsigned n, unsigned char *ok)
{
	static uint8_t out[BATCH][MAX_DGRAM], in[BATCH][65536];
	struct mmsghdr v[BATCH];
	struct iovec iov[BATCH];
	unsigned k = 0;
	for (unsigned j = 0; j < n; j++) {
		if (ok[j])
			continue;
		iov[k] = (struct iovec){ .iov_base = out[k], .iov_len = payload(base + j, out[k]) };
		memset(&v[k], 0, sizeof(v[k]));
		v[k].msg_hdr.msg_iov = &iov[k];
		v[k].msg_hdr.msg_iovlen = 1;
		k++;
	}
	if (k == 0)
		return;
	if (sendmmsg(c, v, k, 0) != (int)k)
		fail("sendmmsg");
	while (wait_fd(c, POLLIN, 300) == 1) {
		for (unsigned j = 0; j < BATCH; j++) {
			iov[j] = (struct iovec){ .iov_base = in[j], .iov_len = sizeof(in[j]) };
			memset(&v[j], 0, sizeof(v[j]));
			v[j].msg_hdr.msg_iov = &iov[j];
			v[j].msg_hdr.msg_iovlen = 1;
		}
		int r = recvmmsg(c, v, BATCH, MSG_DONTWAIT, NULL);
		if (r < 0)
			fail("recvmmsg");
		for (int j = 0; j < r; j++) {
			unsigned seq;
			uint8_t want[MAX_DGRAM];
			memcpy(&seq, in[j], 4);
			size_t len = payload(seq, want);
			if (v[j].msg_len != len || memcmp(in[j], want, len) != 0)
				fail("client: an echo differs from what was sent");
			if (seq >= base && seq < base + n)
				ok[seq - base] = 1;
		}
		unsigned missing = 0;
		for (unsigned j = 0; j < n; j++)
			missing += !ok[j];
		if (!missing)
			return;
	}
}

/* The child's socket is the kernel's: empty, and a round trip through it,
 * its readiness seen by an epoll set made before the fork. */
static void forked(int s, const char *peer_ip, unsigned port)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 9 };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0)
		fail("fork: epoll");
	pid_t pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid > 0) {
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			fail("the forked child failed");
		close(ep);
		return;
	}
	char b[64];
	if (recv(s, b, sizeof(b), MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail("child: the inherited socket is not empty");
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, peer_ip, &peer.sin_addr);
	for (int tries = 0; tries < 20; tries++) {
		if (sendto(s, "child", 5, 0, (struct sockaddr *)&peer, sizeof(peer)) != 5)
			fail("child: sendto");
		struct epoll_event got;
		if (epoll_wait(ep, &got, 1, 300) == 1 && got.data.u32 == 9 &&
		    recv(s, b, sizeof(b), 0) == 5 && memcmp(b, "child", 5) == 0) {
			printf("child: echo through the kernel socket\n");
			_exit(0);
		}
	}
	fail("child: no echo through the kernel socket");
}

static void client(const char *peer_ip, unsigned port, unsigned count)
{
	int c = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, peer_ip, &peer.sin_addr);
	if (c < 0 || connect(c, (struct sockaddr *)&peer, sizeof(peer)) != 0)
		fail("client connect");
	for (unsigned base = 0; base < count; base += BATCH) {
		unsigned n = count - base < BATCH ? count - base : BATCH;
		unsigned char ok[BATCH] = { 0 };
		for (int tries = 0; tries < 20; tries++) {
			check_time();
			client_window(c, base, n, ok);
			if (memchr(ok, 0, n) == NULL)
				break;
		}
		if (memchr(ok, 0, n) != NULL)
			fail("client: echoes missing after 20 tries");
	}
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	if (connect(c, &unspec, sizeof(unspec)) != 0)
		fail("disconnect (AF_UNSPEC)");
	if (send(c, "x", 1, 0) != -1 || errno != EDESTADDRREQ)
		fail("send after disconnect: not EDESTADDRREQ");
	uint8_t p[MAX_DGRAM], got[65536];
	size_t len = payload(count, p);
	for (int tries = 0;; tries++) {
		if (tries == 20)
			fail("sendto/recvfrom after disconnect: no echo");
		if (sendto(c, p, len, 0, (struct sockaddr *)&peer, sizeof(peer)) != (ssize_t)len)
			fail("sendto after disconnect");
		if (wait_fd(c, POLLIN, 300) != 1)
			continue;
		struct sockaddr_in src;
		socklen_t alen = sizeof(src);
		ssize_t n = recvfrom(c, got, sizeof(got), 0, (struct sockaddr *)&src, &alen);
		if (n != (ssize_t)len || memcmp(got, p, len) != 0 || alen != sizeof(src) ||
		    src.sin_addr.s_addr != peer.sin_addr.s_addr || src.sin_port != peer.sin_port)
			fail("recvfrom after disconnect: bytes or source differ");
		break;
	}
	printf("client checked %u\n", count + 1);
	close(c);
}

static int mc_socket(unsigned port, struct ip_mreq *req)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, req, sizeof(*req)) != 0)
		fail("multicast socket: bind or IP_ADD_MEMBERSHIP");
	return s;
}

/* Take datagrams on s until all of 0..count-1 came (payloads checked). */
static void mc_take_all(int s, unsigned count, unsigned char *seen)
{
	uint8_t buf[65536], want[MAX_DGRAM];
	unsigned got = 0;
	while (got < count) {
		check_time();
		if (wait_fd(s, POLLIN, 20000) != 1)
			fail("multicast: datagrams to the group missing");
		ssize_t n = recv(s, buf, sizeof(buf), 0);
		unsigned seq;
		if (n < 4)
			fail("multicast: short datagram");
		memcpy(&seq, buf, 4);
		if (seq >= count || (size_t)n != payload(seq, want) || memcmp(buf, want, (size_t)n))
			fail("multicast: a datagram differs from what was sent");
		got += !seen[seq];
		seen[seq] = 1;
	}
}

/* udp mcast GROUP PORT PEER_PORT COUNT: two sockets (PORT, PORT + 1) join
 * GROUP and take COUNT datagrams each; the first leaves and takes nothing
 * for 1.5 s; the second sends COUNT datagrams to GROUP:PEER_PORT. */
static int mcast(char **argv)
{
	struct ip_mreq req = { .imr_interface.s_addr = htonl(INADDR_ANY) };
	if (inet_pton(AF_INET, argv[2], &req.imr_multiaddr) != 1)
		fail("group");
	unsigned port = (unsigned)strtoul(argv[3], NULL, 10);
	unsigned peer_port = (unsigned)strtoul(argv[4], NULL, 10);
	unsigned count = (unsigned)strtoul(argv[5], NULL, 10);
	int s1 = mc_socket(port, &req), s2 = mc_socket(port + 1, &req);
	if (setsockopt(s1, IPPROTO_IP, IP_ADD_MEMBERSHIP, &req, sizeof(req)) != -1 ||
	    errno != EADDRINUSE)
		fail("a second IP_ADD_MEMBERSHIP of one group: not EADDRINUSE");
	printf("joined\n");
	unsigned char *seen1 = calloc(count, 1), *seen2 = calloc(count, 1);
	if (!seen1 || !seen2)
		fail("calloc");
	mc_take_all(s1, count, seen1);
	mc_take_all(s2, count, seen2);
	printf("received %u on each\n", count);
	if (setsockopt(s1, IPPROTO_IP, IP_DROP_MEMBERSHIP, &req, sizeof(req)) != 0)
		fail("IP_DROP_MEMBERSHIP");
	if (setsockopt(s1, IPPROTO_IP, IP_DROP_MEMBERSHIP, &req, sizeof(req)) != -1 ||
	    errno != EADDRNOTAVAIL)
		fail("a second IP_DROP_MEMBERSHIP: not EADDRNOTAVAIL");
	char b[64];
	while (recv(s1, b, sizeof(b), MSG_DONTWAIT) >= 0) /* sent before the leave */
		;
	printf("left\n");
	if (wait_fd(s1, POLLIN, 1500) != 0)
		fail("a datagram to the group after IP_DROP_MEMBERSHIP");
	struct sockaddr_in group = { .sin_family = AF_INET, .sin_port = htons((uint16_t)peer_port),
				     .sin_addr = req.imr_multiaddr };
	for (int round = 0; round < 3; round++) {
		for (unsigned seq = 0; seq < count; seq++) {
			uint8_t p[MAX_DGRAM];
			size_t len = payload(seq, p);
			if (sendto(s2, p, len, 0, (struct sockaddr *)&group, sizeof(group)) != (ssize_t)len)
				fail("sendto the group");
		}
		usleep(100000);
	}
	printf("ok\n");
	free(seen1);
	free(seen2);
	return 0;
}

/* udp flood PORT MAX: a socket on PORT with the smallest SO_RCVBUF reads
 * nothing until a datagram reaches PORT + 1, then takes what was kept:
 * between 1 and MAX datagrams, each intact. Then a blocking receive with
 * SO_RCVTIMEO 200 ms times out (EAGAIN), and one with 10 s sleeps until the
 * peer's "late" datagram wakes it. */
static int flood(char **argv)
{
	unsigned port = (unsigned)strtoul(argv[2], NULL, 10);
	long max = strtol(argv[3], NULL, 10);
	int s = socket(AF_INET, SOCK_DGRAM, 0), go = socket(AF_INET, SOCK_DGRAM, 0);
	int small = 1;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1)) };
	if (s < 0 || go < 0 || setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) != 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    bind(go, (struct sockaddr *)&b, sizeof(b)) != 0)
		fail("flood: sockets");
	printf("flood ready\n");
	if (wait_fd(go, POLLIN, 30000) != 1)
		fail("flood: no go");
	uint8_t buf[65536], want[MAX_DGRAM];
	long kept = 0;
	ssize_t n;
	while ((n = recv(s, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
		unsigned seq;
		memcpy(&seq, buf, 4);
		if (n < 4 || (size_t)n != payload(seq, want) || memcmp(buf, want, (size_t)n) != 0)
			fail("flood: a kept datagram differs");
		kept++;
	}
	printf("flood kept %ld\n", kept);
	if (kept < 1 || kept > max)
		fail("flood: the socket kept more than its receive buffers (or nothing)");
	struct timeval tv = { .tv_usec = 200000 };
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    recv(s, buf, sizeof(buf), 0) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail("SO_RCVTIMEO: not EAGAIN");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (ms < 150)
		fail("SO_RCVTIMEO: returned too early");
	tv.tv_sec = 10;
	tv.tv_usec = 0;
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    recv(s, buf, sizeof(buf), 0) != 4 || memcmp(buf, "late", 4) != 0)
		fail("a blocking receive was not woken by the port's datagram");
	printf("timeout after %ld ms; woken by a late datagram\n", ms);
	printf("ok\n");
	return 0;
}

/* udp exec PORT COUNT: COUNT datagrams reach a socket on PORT before a
 * datagram to PORT + 1 says go; then the program execs itself ("execd")
 * with the socket, which must read the COUNT datagrams, intact, in order of
 * arrival, poll saying readable before each. */
static int exec_self(char **argv)
{
	unsigned port = (unsigned)strtoul(argv[2], NULL, 10);
	int s = socket(AF_INET, SOCK_DGRAM, 0), go = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in b = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(port + 1)) };
	if (s < 0 || go < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    bind(go, (struct sockaddr *)&b, sizeof(b)) != 0)
		fail("exec: sockets");
	printf("exec ready\n");
	if (wait_fd(go, POLLIN, 30000) != 1)
		fail("exec: no go");
	char fd[16];
	snprintf(fd, sizeof(fd), "%d", s);
	execl("/proc/self/exe", "udp", "execd", fd, argv[3], (char *)NULL);
	fail("execl");
	return 1;
}

static int execd(char **argv)
{
	int s = (int)strtol(argv[2], NULL, 10);
	unsigned count = (unsigned)strtoul(argv[3], NULL, 10);
	uint8_t buf[65536], want[MAX_DGRAM];
	for (unsigned seq = 0; seq < count; seq++) {
		if (wait_fd(s, POLLIN, 2000) != 1)
			fail("execd: a datagram received before the exec is not readable");
		ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
		if (n != (ssize_t)payload(seq, want) || memcmp(buf, want, (size_t)n) != 0)
			fail("execd: not the datagram received before the exec");
	}
	printf("exec kept %u\n", count);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	start = time(NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && strcmp(argv[1], "mcast") == 0)
		return mcast(argv);
	if (argc == 4 && strcmp(argv[1], "flood") == 0)
		return flood(argv);
	if (argc == 4 && strcmp(argv[1], "exec") == 0)
		return exec_self(argv);
	if (argc == 4 && strcmp(argv[1], "execd") == 0)
		return execd(argv);
	if (argc != 5) {
		fprintf(stderr, "usage: udp PORT PEER_IP ECHO_PORT COUNT\n"
				"       udp mcast GROUP PORT PEER_PORT COUNT\n"
				"       udp flood PORT MAX\n"
				"       udp exec PORT COUNT\n");
		return 2;
	}
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)strtoul(argv[1], NULL, 10)) };
	int on = 1, big = 16 << 20;
	/* a receive buffer larger than the port's receives (root may force it) */
	if (s >= 0 && setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) != 0)
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (s < 0 || setsockopt(s, IPPROTO_IP, IP_PKTINFO, &on, sizeof(on)) != 0 ||
	    bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)) != 0)
		fail("IP_PKTINFO, bind, SO_TIMESTAMPNS");
	char dummy;
	if (recv(s, &dummy, 1, MSG_DONTWAIT) != -1 || (errno != EAGAIN && errno != EWOULDBLOCK))
		fail("MSG_DONTWAIT before any datagram: not EAGAIN");
	printf("listening\n");
	server(s);
	forked(s, argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	client(argv[2], (unsigned)strtoul(argv[3], NULL, 10), (unsigned)strtoul(argv[4], NULL, 10));
	close(s);
	printf("ok\n");
	return 0;
}
