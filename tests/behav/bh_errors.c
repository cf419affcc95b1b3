/* Every wrapped call on bad descriptors: closed fds (EBADF), negative fds,
 * fds at and beyond RLIMIT_NOFILE and INT_MAX (the preload's fd table is
 * sized from that limit: its bounds must not change the answer), and
 * non-sockets (a pipe, /dev/null: ENOTSOCK). Also socket()/socketpair()
 * with bad arguments. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* A regular file to give sendfile as the other descriptor, so only the
 * descriptor under test can be at fault. */
static int regular_file = -1;

/* Every call that takes one fd, expected to fail with `err` on `fd`. */
static void all_calls(const char *label, int fd, int err, int sock_err)
{
	char buf[16], what[128];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct iovec iv = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
	struct mmsghdr mm = { .msg_hdr = mh };
	int v = 0, ep;
	off_t off = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bh_say("-- %s", label);
#define E(name, call, e) \
	do { snprintf(what, sizeof(what), "%s", name); \
	     bh_err(what, (long)(call), e); } while (0)
	/* Socket-only calls: ENOTSOCK on a non-socket, EBADF on a bad fd. */
	E("bind", bind(fd, (struct sockaddr *)&sa, sizeof(sa)), sock_err);
	E("listen", listen(fd, 1), sock_err);
	E("accept", accept(fd, NULL, NULL), sock_err);
	E("accept4", accept4(fd, NULL, NULL, SOCK_CLOEXEC), sock_err);
	E("connect", connect(fd, (struct sockaddr *)&sa, sizeof(sa)),
	  sock_err);
	E("shutdown", shutdown(fd, SHUT_RDWR), sock_err);
	E("recv", recv(fd, buf, sizeof(buf), 0), sock_err);
	E("recvfrom", recvfrom(fd, buf, sizeof(buf), 0, NULL, NULL), sock_err);
	E("recvmsg", recvmsg(fd, &mh, 0), sock_err);
	E("recvmmsg", recvmmsg(fd, &mm, 1, 0, NULL), sock_err);
	E("send", send(fd, buf, 1, 0), sock_err);
	E("sendto", sendto(fd, buf, 1, 0, (struct sockaddr *)&sa, sizeof(sa)),
	  sock_err);
	E("sendmsg", sendmsg(fd, &mh, 0), sock_err);
	E("sendmmsg", sendmmsg(fd, &mm, 1, 0), sock_err);
	E("getsockopt", getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len),
	  sock_err);
	E("setsockopt", setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v,
				   sizeof(v)), sock_err);
	E("getsockname", getsockname(fd, (struct sockaddr *)&sa, &len),
	  sock_err);
	len = sizeof(sa);
	E("getpeername", getpeername(fd, (struct sockaddr *)&sa, &len),
	  sock_err);
	if (err != EBADF)
		return;
	/* Generic fd calls: only meaningful on a bad fd. */
	E("read", read(fd, buf, sizeof(buf)), EBADF);
	E("readv", readv(fd, &iv, 1), EBADF);
	E("write", write(fd, buf, 1), EBADF);
	E("writev", writev(fd, &iv, 1), EBADF);
	E("close", close(fd), EBADF);
	E("fcntl(F_GETFL)", fcntl(fd, F_GETFL), EBADF);
	E("fcntl64(F_GETFD)", fcntl64(fd, F_GETFD), EBADF);
	E("ioctl(FIONREAD)", ioctl(fd, FIONREAD, &v), EBADF);
	E("ioctl(FIONBIO)", ioctl(fd, FIONBIO, &v), EBADF);
	E("dup", dup(fd), EBADF);
	E("dup2", dup2(fd, 0), EBADF);
	E("dup3", dup3(fd, 0, 0), EBADF);
	E("sendfile(out)", sendfile(fd, regular_file, &off, 1), EBADF);
	E("sendfile(in)", sendfile(regular_file, fd, &off, 1), EBADF);
	E("sendfile64(out)", sendfile64(fd, regular_file, NULL, 1), EBADF);
	struct epoll_event ev = { .events = EPOLLIN };
	ep = epoll_create1(0);
	E("epoll_ctl(ADD)", epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), EBADF);
	close(ep);
	E("epoll_ctl(as epfd)", epoll_ctl(fd, EPOLL_CTL_ADD, 0, &ev), EBADF);
	E("epoll_wait(as epfd)", epoll_wait(fd, &ev, 1, 0), EBADF);
	E("epoll_pwait(as epfd)", epoll_pwait(fd, &ev, 1, 0, NULL), EBADF);
	E("epoll_pwait2(as epfd)", epoll_pwait2(fd, &ev, 1, NULL, NULL), EBADF);
	/* poll reports a bad fd in revents, not as an error. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, 0);
	bh_say("poll = %d revents NVAL %d", n, p.revents == POLLNVAL);
	BH_CHECK(fd < 0 ? n == 0 && p.revents == 0 :
		 n == 1 && p.revents == POLLNVAL);
	struct timespec ts = { 0, 0 };
	p.revents = 0;
	n = ppoll(&p, 1, &ts, NULL);
	bh_say("ppoll = %d revents NVAL %d", n, p.revents == POLLNVAL);
	BH_CHECK(fd < 0 ? n == 0 : n == 1 && p.revents == POLLNVAL);
#undef E
}

static void test_bad_socket_args(void)
{
	int sv[2];

	bh_say("-- socket() and socketpair() with bad arguments");
	bh_err("socket(bad domain)", socket(12345, SOCK_STREAM, 0),
	       EAFNOSUPPORT);
	bh_err("socket(bad type)", socket(AF_INET, 12345, 0), EINVAL);
	bh_err("socket(bad flags)", socket(AF_INET, SOCK_STREAM | 0x40000000,
					   0), EINVAL);
	bh_err("socket(STREAM, UDP)", socket(AF_INET, SOCK_STREAM,
					     IPPROTO_UDP), EPROTONOSUPPORT);
	bh_err("socketpair(AF_INET)", socketpair(AF_INET, SOCK_STREAM, 0, sv),
	       EOPNOTSUPP);
	bh_err("socketpair(bad domain)", socketpair(12345, SOCK_STREAM, 0, sv),
	       EAFNOSUPPORT);
	int *volatile badsv = (int *)8;
	bh_err("socketpair(bad pointer)",
	       socketpair(AF_UNIX, SOCK_STREAM, 0, badsv), EFAULT);

	/* Out of fds: socket() reports EMFILE, and nothing leaks. */
	struct rlimit rl, low;
	getrlimit(RLIMIT_NOFILE, &rl);
	int fds[64], nfds = 0, fd, err = 0;
	fd = dup(0);
	close(fd);
	low.rlim_cur = (rlim_t)fd + 8;
	low.rlim_max = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &low) == 0) {
		while (nfds < 64) {
			fd = socket(AF_INET, SOCK_DGRAM, 0);
			if (fd < 0) {
				err = errno;
				break;
			}
			fds[nfds++] = fd;
		}
		bh_say("socket() until the limit: %s", bh_errname(err));
		BH_CHECK(err == EMFILE);
		bh_err("socketpair at the limit",
		       socketpair(AF_UNIX, SOCK_STREAM, 0, sv), EMFILE);
		bh_err("dup at the limit", dup(0), EMFILE);
		while (nfds > 0)
			close(fds[--nfds]);
		setrlimit(RLIMIT_NOFILE, &rl);
	} else {
		bh_say("setrlimit failed: %s", bh_errname(errno));
		BH_CHECK(0);
	}
}

int main(void)
{
	struct rlimit rl;
	int pfd[2], null_fd;

	bh_start("errors");
	char path[] = "/tmp/bh_errors.XXXXXX";
	regular_file = mkstemp(path);
	if (regular_file < 0 || unlink(path) ||
	    write(regular_file, "0123456789", 10) != 10) {
		bh_fail(__FILE__, __LINE__, "temporary file");
		return bh_finish();
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	all_calls("closed fd", bh_closed_fd(), EBADF, EBADF);
	all_calls("fd -1", -1, EBADF, EBADF);
	all_calls("fd -100", -100, EBADF, EBADF);
	all_calls("fd == RLIMIT_NOFILE soft limit", (int)rl.rlim_cur, EBADF,
		  EBADF);
	all_calls("fd == RLIMIT_NOFILE + 1000", (int)rl.rlim_cur + 1000, EBADF,
		  EBADF);
	all_calls("fd INT_MAX", INT_MAX, EBADF, EBADF);
	pipe(pfd);
	all_calls("pipe (not a socket)", pfd[0], ENOTSOCK, ENOTSOCK);
	null_fd = open("/dev/null", O_RDWR);
	all_calls("/dev/null (not a socket)", null_fd, ENOTSOCK, ENOTSOCK);
	close(pfd[0]);
	close(pfd[1]);
	close(null_fd);
	test_bad_socket_args();
	close(regular_file);
	return bh_finish();
}
