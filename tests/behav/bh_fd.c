/* Descriptor operations on sockets: dup, dup2 (incl. over a live socket
 * and onto itself), dup3 with O_CLOEXEC, fcntl F_DUPFD/F_DUPFD_CLOEXEC/
 * F_GETFD/F_SETFD/F_GETFL/F_SETFL, fcntl64, ioctl FIONREAD/FIONBIO/SIOCOUTQ
 * style, and close semantics: a socket lives until its last fd closes. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* One byte each way through fd a (on one end) and its peer b. */
static int echo_ok(int a, int b)
{
	char c = 0;

	if (write(a, "q", 1) != 1 || bh_read_all(b, &c, 1) != 1 || c != 'q')
		return 0;
	if (write(b, "r", 1) != 1 || bh_read_all(a, &c, 1) != 1 || c != 'r')
		return 0;
	return 1;
}

static void test_dup(void)
{
	int cfd, sfd, d, d2, d3, x, y;
	char c;

	bh_say("-- dup, dup2, dup3");
	bh_tcp_pair(&cfd, &sfd, 0);
	d = bh_okfd("dup(client)", dup(cfd));
	bh_say("  same socket through the dup: %d", echo_ok(d, sfd));
	BH_CHECK(echo_ok(d, sfd));
	bh_ok("close(original)", close(cfd));
	bh_say("  dup still works after closing the original: %d",
	       echo_ok(d, sfd));
	BH_CHECK(echo_ok(d, sfd));
	bh_err("read(peer, nonblocking): no EOF yet",
	       recv(sfd, &c, 1, MSG_DONTWAIT), EAGAIN);

	/* dup2 over a live socket: x is silently closed (its peer sees EOF)
	 * and becomes another name for d. */
	bh_tcp_pair(&x, &y, 0);
	d2 = (int)bh_show("dup2(d, x) over a live socket", dup2(d, x) == x);
	BH_CHECK(d2 == 1);
	bh_say("  x now talks to d's peer: %d", echo_ok(x, sfd));
	BH_CHECK(echo_ok(x, sfd));
	ssize_t n = bh_read_all(y, &c, 1);
	bh_say("  replaced socket's peer sees EOF: %d", n == 0);
	BH_CHECK(n == 0);
	close(y);
	bh_show("dup2(x, x) same fd", dup2(x, x) == x);
	bh_err("dup2(closed, x)", dup2(bh_closed_fd(), x), EBADF);
	bh_err("dup2(x, -1)", dup2(x, -1), EBADF);

	d3 = bh_okfd("dup3(d, new, O_CLOEXEC)", dup3(d, bh_closed_fd(),
						     O_CLOEXEC));
	bh_say("  cloexec %d, works %d", bh_cloexec(d3), echo_ok(d3, sfd));
	BH_CHECK(bh_cloexec(d3) == 1);
	bh_err("dup3(x, x)", dup3(x, x, 0), EINVAL);
	bh_err("dup3(bad flags)", dup3(d, d3, 0x4), EINVAL);
	bh_ok("close(dup3)", close(d3));

	/* Close every name: only then does the peer see EOF. */
	bh_ok("close(x)", close(x));
	bh_err("read(peer): still open via d",
	       recv(sfd, &c, 1, MSG_DONTWAIT), EAGAIN);
	bh_ok("close(d)", close(d));
	n = bh_read_all(sfd, &c, 1);
	bh_say("  peer sees EOF after the last close: %d", n == 0);
	BH_CHECK(n == 0);
	close(sfd);
}

static void test_fcntl(void)
{
	int cfd, sfd, d, fl;

	bh_say("-- fcntl and fcntl64");
	bh_tcp_pair(&cfd, &sfd, 0);
	d = bh_okfd("fcntl(F_DUPFD, 100)", fcntl(cfd, F_DUPFD, 100));
	bh_say("  >= 100: %d cloexec %d works %d", d >= 100, bh_cloexec(d),
	       echo_ok(d, sfd));
	BH_CHECK(d >= 100 && bh_cloexec(d) == 0);
	close(d);
	d = bh_okfd("fcntl(F_DUPFD_CLOEXEC, 0)",
		    fcntl(cfd, F_DUPFD_CLOEXEC, 0));
	bh_say("  cloexec %d works %d", bh_cloexec(d), echo_ok(d, sfd));
	BH_CHECK(bh_cloexec(d) == 1);
	close(d);
	bh_ok("fcntl(F_GETFD)", fcntl(cfd, F_GETFD));
	bh_ok("fcntl(F_SETFD, FD_CLOEXEC)", fcntl(cfd, F_SETFD, FD_CLOEXEC));
	bh_ok("fcntl(F_GETFD)", fcntl(cfd, F_GETFD));
	fl = (int)bh_ok("fcntl(F_GETFL)", fcntl(cfd, F_GETFL));
	bh_ok("fcntl(F_SETFL, O_NONBLOCK)", fcntl(cfd, F_SETFL, fl | O_NONBLOCK));
	bh_ok("fcntl(F_GETFL)", fcntl(cfd, F_GETFL));
	bh_ok("fcntl(F_SETFL, O_NONBLOCK|O_ASYNC off)",
	      fcntl(cfd, F_SETFL, fl));
	/* fcntl64 is the symbol glibc redirects fcntl to with
	 * _FILE_OFFSET_BITS=64 on 32-bit ABIs; call it by name. */
	bh_ok("fcntl64(F_GETFL)", fcntl64(cfd, F_GETFL));
	bh_ok("fcntl64(F_SETFL, O_NONBLOCK)",
	      fcntl64(cfd, F_SETFL, fl | O_NONBLOCK));
	bh_say("  nonblock = %d", bh_nonblock(cfd));
	BH_CHECK(bh_nonblock(cfd) == 1);
	d = bh_okfd("fcntl64(F_DUPFD_CLOEXEC, 0)",
		    fcntl64(cfd, F_DUPFD_CLOEXEC, 0));
	bh_say("  dup shares O_NONBLOCK: %d", bh_nonblock(d));
	BH_CHECK(bh_nonblock(d) == 1);
	close(d);
	int owner = (int)bh_ok("fcntl(F_GETOWN)", fcntl(cfd, F_GETOWN));
	BH_CHECK(owner == 0);
	bh_ok("fcntl(F_SETOWN, getpid())", fcntl(cfd, F_SETOWN, getpid()));
	owner = fcntl(cfd, F_GETOWN);
	bh_say("  owner is self: %d", owner == getpid());
	BH_CHECK(owner == getpid());
	bh_err("fcntl(bad cmd)", fcntl(cfd, 99999), EINVAL);
	bh_err("fcntl(F_DUPFD, -1)", fcntl(cfd, F_DUPFD, -1), EINVAL);
	bh_err("fcntl(closed, F_GETFL)", fcntl(bh_closed_fd(), F_GETFL), EBADF);
	bh_err("fcntl64(closed, F_GETFD)", fcntl64(bh_closed_fd(), F_GETFD),
	       EBADF);
	close(cfd);
	close(sfd);
}

static void test_ioctl(void)
{
	int cfd, sfd, v, pfd[2];

	bh_say("-- ioctl");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("ioctl(FIONREAD) empty", ioctl(sfd, FIONREAD, &v));
	bh_say("  %d", v);
	write(cfd, "0123456789", 10);
	for (int i = 0; i < 100 && (ioctl(sfd, FIONREAD, &v), v < 10); i++)
		bh_wait(sfd, POLLIN, 100);
	bh_ok("ioctl(FIONREAD)", ioctl(sfd, FIONREAD, &v));
	bh_say("  %d", v);
	BH_CHECK(v == 10);
	bh_ok("ioctl(SIOCINQ)", ioctl(sfd, SIOCINQ, &v));
	bh_say("  %d", v);
	BH_CHECK(v == 10);
	bh_ok("ioctl(SIOCATMARK)", ioctl(sfd, SIOCATMARK, &v));
	bh_say("  %d", v);
	v = 1;
	bh_ok("ioctl(FIONBIO, 1)", ioctl(sfd, FIONBIO, &v));
	bh_say("  nonblock %d", bh_nonblock(sfd));
	BH_CHECK(bh_nonblock(sfd) == 1);
	bh_err("ioctl(bad request)", ioctl(sfd, 0x7fff, &v), ENOTTY);
	int *volatile badp = (int *)8;
	bh_err("ioctl(FIONREAD, bad pointer)", ioctl(sfd, FIONREAD, badp),
	       EFAULT);
	pipe(pfd);
	write(pfd[1], "abc", 3);
	bh_ok("ioctl(pipe, FIONREAD)", ioctl(pfd[0], FIONREAD, &v));
	bh_say("  %d", v);
	BH_CHECK(v == 3);
	bh_err("ioctl(closed, FIONREAD)", ioctl(bh_closed_fd(), FIONREAD, &v),
	       EBADF);
	close(pfd[0]);
	close(pfd[1]);
	close(cfd);
	close(sfd);
}

/* Sockets at the edge of the fd table: the last fd below the soft
 * RLIMIT_NOFILE, then fds above the limit the process started with after
 * raising it (servers do this at start-up, after any constructor ran). */
static void test_high_fds(void)
{
	struct rlimit rl, high;
	int cfd, sfd, top, n;

	bh_say("-- sockets at high fd numbers");
	getrlimit(RLIMIT_NOFILE, &rl);
	bh_tcp_pair(&cfd, &sfd, 0);
	top = (int)rl.rlim_cur - 1;
	bh_show("dup2(socket, soft limit - 1)", dup2(cfd, top) == top);
	bh_say("  works: %d", echo_ok(top, sfd));
	BH_CHECK(echo_ok(top, sfd));
	struct pollfd p = { .fd = top, .events = POLLOUT };
	n = poll(&p, 1, 0);
	bh_say("  poll = %d OUT %d", n, p.revents == POLLOUT);
	BH_CHECK(n == 1 && p.revents == POLLOUT);
	bh_ok("close(soft limit - 1)", close(top));
	bh_err("dup2(socket, soft limit)", dup2(cfd, (int)rl.rlim_cur), EBADF);

	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= rl.rlim_cur * 4) {
		high.rlim_cur = rl.rlim_cur * 4;
		high.rlim_max = rl.rlim_max;
		bh_ok("setrlimit(NOFILE, 4x)", setrlimit(RLIMIT_NOFILE, &high));
		top = (int)rl.rlim_cur * 3;
		bh_show("dup2(socket, 3x old limit)", dup2(cfd, top) == top);
		bh_say("  works: %d", echo_ok(top, sfd));
		BH_CHECK(echo_ok(top, sfd));
		p.fd = top;
		p.revents = 0;
		n = poll(&p, 1, 0);
		bh_say("  poll = %d OUT %d", n, p.revents == POLLOUT);
		BH_CHECK(n == 1 && p.revents == POLLOUT);
		int v = 1;
		bh_ok("  setsockopt(TCP_NODELAY)",
		      setsockopt(top, IPPROTO_TCP, TCP_NODELAY, &v,
				 sizeof(v)));
		int s2 = bh_okfd("  fcntl(F_DUPFD, 3x old limit + 1)",
				 fcntl(sfd, F_DUPFD, top + 1));
		bh_say("  works: %d", echo_ok(top, s2));
		BH_CHECK(echo_ok(top, s2));
		close(s2);
		bh_ok("close(3x old limit)", close(top));
		setrlimit(RLIMIT_NOFILE, &rl);
	} else {
		/* Keep the transcript identical whatever the hard limit. */
		bh_say("hard limit too low to raise: not tested");
	}
	close(cfd);
	close(sfd);
}

int main(void)
{
	bh_start("fd");
	test_high_fds();
	test_dup();
	test_fcntl();
	test_ioctl();
	return bh_finish();
}
