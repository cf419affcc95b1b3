/* The fortified entry points glibc emits under -D_FORTIFY_SOURCE=2 -O2
 * when a buffer's size is known and the length is not a compile-time
 * constant: __read_chk, __recv_chk, __recvfrom_chk, __poll_chk,
 * __ppoll_chk, and __fdelt_chk behind FD_SET/FD_ISSET. The runner checks
 * with nm that this binary references each of them (a change of compiler
 * or flags that silently drops them fails the test).
 *
 * The lengths come from a volatile so the compiler cannot prove them in
 * range and must call the _chk variant. */
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

#if !defined(_FORTIFY_SOURCE) || _FORTIFY_SOURCE < 2 || !defined(__OPTIMIZE__)
#error "bh_fortify must be built with -O2 -D_FORTIFY_SOURCE=2"
#endif

static volatile size_t len16 = 16;
static volatile nfds_t nfds2 = 2;

int main(void)
{
	char buf[16];
	int cfd, sfd, u1, u2;
	ssize_t n;

	bh_start("fortify");
	bh_tcp_pair(&cfd, &sfd, 0);
	u1 = bh_udp_bound(0);
	u2 = bh_udp_bound(0);
	struct sockaddr_in ua, from;
	socklen_t len = sizeof(ua);
	getsockname(u2, (struct sockaddr *)&ua, &len);

	write(cfd, "0123456789abcdef", 16);
	n = bh_ok("read -> __read_chk", bh_wait(sfd, POLLIN, 5000) ?
		  read(sfd, buf, len16 / 2) : -1);
	BH_CHECK(n == 8 && !memcmp(buf, "01234567", 8));
	n = bh_ok("recv -> __recv_chk", recv(sfd, buf, len16 / 2, MSG_WAITALL));
	BH_CHECK(n == 8 && !memcmp(buf, "89abcdef", 8));
	bh_err("recv -> __recv_chk (empty, DONTWAIT)",
	       recv(sfd, buf, len16, MSG_DONTWAIT), EAGAIN);
	bh_err("read -> __read_chk (bad fd)",
	       read(bh_closed_fd(), buf, len16), EBADF);

	sendto(u1, "datagram", 8, 0, (struct sockaddr *)&ua, sizeof(ua));
	bh_wait(u2, POLLIN, 5000);
	len = sizeof(from);
	n = bh_ok("recvfrom -> __recvfrom_chk",
		  recvfrom(u2, buf, len16, 0, (struct sockaddr *)&from, &len));
	BH_CHECK(n == 8 && !memcmp(buf, "datagram", 8));
	bh_err("recvfrom -> __recvfrom_chk (empty)",
	       recvfrom(u2, buf, len16, MSG_DONTWAIT, NULL, NULL), EAGAIN);

	struct pollfd p[2] = { { .fd = cfd, .events = POLLOUT },
			       { .fd = u2, .events = POLLIN } };
	n = bh_ok("poll -> __poll_chk", poll(p, nfds2, 0));
	bh_say("  [0] OUT %d [1] IN %d", p[0].revents == POLLOUT,
	       p[1].revents == POLLIN);
	BH_CHECK(n == 1 && p[0].revents == POLLOUT && p[1].revents == 0);
	struct timespec ts = { 0, 10000000 };
	sigset_t mask;
	sigemptyset(&mask);
	n = bh_ok("ppoll -> __ppoll_chk", ppoll(p, nfds2, &ts, &mask));
	BH_CHECK(n == 1);

	fd_set rd;
	struct timeval tv = { 0, 0 };
	write(cfd, "x", 1);
	bh_wait(sfd, POLLIN, 5000);
	FD_ZERO(&rd);
	FD_SET(sfd, &rd);
	n = bh_ok("select with FD_SET -> __fdelt_chk",
		  select(sfd + 1, &rd, NULL, NULL, &tv));
	bh_say("  FD_ISSET %d", FD_ISSET(sfd, &rd));
	BH_CHECK(n == 1 && FD_ISSET(sfd, &rd));

	close(cfd);
	close(sfd);
	close(u1);
	close(u2);
	return bh_finish();
}
