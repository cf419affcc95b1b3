/* The real-symbol table: resolution, the system-call fallbacks used while it is
 * being resolved, and re-entrancy (a lookup that calls a wrapped function). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "preload/pl_real.h"
#include "unit.h"

/* This test program is not preloaded, so the "next" definition of every name is
 * libc's: resolution must find exactly those. */
START_TEST(test_resolves_libc)
{
	pl_real_resolve();
	ck_assert_ptr_eq((void *)pl_real.read, dlsym(RTLD_DEFAULT, "read"));
	ck_assert_ptr_eq((void *)pl_real.accept4, dlsym(RTLD_DEFAULT, "accept4"));
	ck_assert_ptr_eq((void *)pl_real.__recv_chk, dlsym(RTLD_DEFAULT, "__recv_chk"));
	ck_assert_ptr_eq((void *)pl_real.epoll_pwait2, dlsym(RTLD_DEFAULT, "epoll_pwait2"));
	ck_assert_ptr_eq((void *)PL_REAL(close), dlsym(RTLD_DEFAULT, "close"));
}
END_TEST

/* ---- every fallback does what the libc call does ---- */

START_TEST(test_raw_stream_calls)
{
	int sv[2];
	ck_assert_int_eq(pl_raw.socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(pl_raw.write(sv[0], "abc", 3), 3);
	struct iovec iov[2] = { { "de", 2 }, { "f", 1 } };
	ck_assert_int_eq(pl_raw.writev(sv[0], iov, 2), 3);
	ck_assert_int_eq(pl_raw.send(sv[0], "g", 1, 0), 1);
	int avail = 0;
	ck_assert_int_eq(pl_raw.ioctl(sv[1], FIONREAD, &avail), 0);
	ck_assert_int_eq(avail, 7);
	char buf[16] = { 0 };
	ck_assert_int_eq(pl_raw.recv(sv[1], buf, 2, MSG_PEEK), 2);
	ck_assert_int_eq(pl_raw.read(sv[1], buf, 3), 3);
	char a[2] = { 0 }, b[2] = { 0 };
	struct iovec riov[2] = { { a, 1 }, { b, 1 } };
	ck_assert_int_eq(pl_raw.readv(sv[1], riov, 2), 2);
	ck_assert_int_eq(pl_raw.__recv_chk(sv[1], buf + 5, 2, 2, 0), 2);
	ck_assert_int_eq(memcmp(buf, "abc", 3), 0);
	ck_assert(a[0] == 'd' && b[0] == 'e');
	ck_assert_int_eq(memcmp(buf + 5, "fg", 2), 0);
	ck_assert_int_eq(pl_raw.shutdown(sv[0], SHUT_WR), 0);
	ck_assert_int_eq(pl_raw.__read_chk(sv[1], buf, 1, sizeof(buf)), 0); /* EOF */
	ck_assert_int_eq(pl_raw.close(sv[0]), 0);
	ck_assert_int_eq(pl_raw.close(sv[1]), 0);
	ck_assert_int_eq(pl_raw.close(sv[1]), -1);
	ck_assert_int_eq(errno, EBADF);
}
END_TEST

START_TEST(test_raw_socket_calls)
{
	int lfd = pl_raw.socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(lfd, 0);
	int one = 1;
	ck_assert_int_eq(pl_raw.setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	ck_assert_int_eq(pl_raw.bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(pl_raw.listen(lfd, 4), 0);
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(pl_raw.getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	ck_assert_int_ne(sa.sin_port, 0);
	int cfd = pl_raw.socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(pl_raw.connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int afd = pl_raw.accept(lfd, NULL, NULL);
	ck_assert_int_ge(afd, 0);
	struct sockaddr_in peer;
	len = sizeof(peer);
	ck_assert_int_eq(pl_raw.getpeername(cfd, (struct sockaddr *)&peer, &len), 0);
	ck_assert_int_eq(peer.sin_port, sa.sin_port);
	int val = 0;
	len = sizeof(val);
	ck_assert_int_eq(pl_raw.getsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &val, &len), 0);
	ck_assert_int_eq(val, 1);
	/* datagram-style calls on the stream */
	ck_assert_int_eq(pl_raw.sendto(cfd, "xy", 2, 0, NULL, 0), 2);
	struct msghdr msg = { 0 };
	struct iovec iov = { "z", 1 };
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	ck_assert_int_eq(pl_raw.sendmsg(cfd, &msg, 0), 1);
	char buf[4] = { 0 };
	ck_assert_int_eq(pl_raw.__recvfrom_chk(afd, buf, 2, sizeof(buf), MSG_WAITALL, NULL, NULL),
			 2);
	struct iovec riov = { buf + 2, 1 };
	struct msghdr rmsg = { .msg_iov = &riov, .msg_iovlen = 1 };
	ck_assert_int_eq(pl_raw.recvmsg(afd, &rmsg, 0), 1);
	ck_assert_str_eq(buf, "xyz");
	/* accept4 with nothing pending, non-blocking */
	ck_assert_int_eq(pl_raw.fcntl(lfd, F_SETFL, O_NONBLOCK), 0);
	ck_assert_int_eq(pl_raw.fcntl(lfd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	ck_assert_int_eq(pl_raw.accept4(lfd, NULL, NULL, SOCK_CLOEXEC), -1);
	ck_assert_int_eq(errno, EAGAIN);
	pl_raw.close(afd);
	pl_raw.close(cfd);
	pl_raw.close(lfd);
}
END_TEST

START_TEST(test_raw_mmsg_and_sendfile)
{
	int sv[2];
	ck_assert_int_eq(pl_raw.socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
	struct iovec iov[2] = { { "one", 3 }, { "three", 5 } };
	struct mmsghdr out[2] = { 0 };
	out[0].msg_hdr.msg_iov = &iov[0];
	out[0].msg_hdr.msg_iovlen = 1;
	out[1].msg_hdr.msg_iov = &iov[1];
	out[1].msg_hdr.msg_iovlen = 1;
	ck_assert_int_eq(pl_raw.sendmmsg(sv[0], out, 2, 0), 2);
	char b0[8], b1[8];
	struct iovec riov[2] = { { b0, sizeof(b0) }, { b1, sizeof(b1) } };
	struct mmsghdr in[2] = { 0 };
	in[0].msg_hdr.msg_iov = &riov[0];
	in[0].msg_hdr.msg_iovlen = 1;
	in[1].msg_hdr.msg_iov = &riov[1];
	in[1].msg_hdr.msg_iovlen = 1;
	ck_assert_int_eq(pl_raw.recvmmsg(sv[1], in, 2, MSG_DONTWAIT, NULL), 2);
	ck_assert_uint_eq(in[0].msg_len, 3);
	ck_assert_uint_eq(in[1].msg_len, 5);
	pl_raw.close(sv[0]);
	pl_raw.close(sv[1]);

	char path[] = "/tmp/fsk-test-real-XXXXXX";
	int file = mkstemp(path);
	ck_assert_int_eq(write(file, "sendfile", 8), 8);
	unlink(path);
	ck_assert_int_eq(pl_raw.socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	off_t off = 4;
	ck_assert_int_eq(pl_raw.sendfile(sv[0], file, &off, 4), 4);
	ck_assert_int_eq(off, 8);
	off64_t off64 = 0;
	ck_assert_int_eq(pl_raw.sendfile64(sv[0], file, &off64, 4), 4);
	char buf[9] = { 0 };
	ck_assert_int_eq(pl_raw.recv(sv[1], buf, 8, MSG_WAITALL), 8);
	ck_assert_str_eq(buf, "filesend");
	pl_raw.close(file);
	pl_raw.close(sv[0]);
	pl_raw.close(sv[1]);
}
END_TEST

START_TEST(test_raw_dup_family)
{
	int fd = pl_raw.dup(0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pl_raw.dup2(fd, fd), fd);
	ck_assert_int_eq(pl_raw.dup2(fd, 100), 100);
	ck_assert_int_eq(pl_raw.dup3(fd, 101, O_CLOEXEC), 101);
	ck_assert_int_eq(pl_raw.fcntl(101, F_GETFD), FD_CLOEXEC);
	ck_assert_int_eq(pl_raw.fcntl64(100, F_GETFD), 0);
	ck_assert_int_eq(pl_raw.dup2(555, 556), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_int_eq(pl_raw.dup2(557, 557), -1); /* dup2(bad, bad) checks validity */
	ck_assert_int_eq(errno, EBADF);
	pl_raw.close(fd);
	pl_raw.close(100);
	pl_raw.close(101);
}
END_TEST

START_TEST(test_raw_readiness)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	struct pollfd pfd = { .fd = p[0], .events = POLLIN };
	ck_assert_int_eq(pl_raw.poll(&pfd, 1, 0), 0);
	ck_assert_int_eq(pl_raw.__poll_chk(&pfd, 1, 1, sizeof(pfd)), 0);
	struct timespec ts = { 0, 1000000 };
	ck_assert_int_eq(pl_raw.ppoll(&pfd, 1, &ts, NULL), 0);
	ck_assert_int_eq(ts.tv_nsec, 1000000); /* the caller's timeout is not modified */
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	ck_assert_int_eq(pl_raw.poll(&pfd, 1, -1), 1);
	ck_assert_int_eq(pfd.revents, POLLIN);
	sigset_t none;
	sigemptyset(&none);
	ck_assert_int_eq(pl_raw.__ppoll_chk(&pfd, 1, NULL, &none, sizeof(pfd)), 1);

	fd_set rfds;
	FD_ZERO(&rfds);
	FD_SET(p[0], &rfds);
	struct timeval tv = { 1, 0 };
	ck_assert_int_eq(pl_raw.select(p[0] + 1, &rfds, NULL, NULL, &tv), 1);
	ck_assert(FD_ISSET(p[0], &rfds));
	FD_ZERO(&rfds);
	FD_SET(p[1], &rfds); /* write end is never readable */
	struct timespec zero = { 0, 0 };
	ck_assert_int_eq(pl_raw.pselect(p[1] + 1, &rfds, NULL, NULL, &zero, &none), 0);

	int ep = pl_raw.epoll_create(1);
	ck_assert_int_ge(ep, 0);
	ck_assert_int_eq(pl_raw.epoll_create(0), -1);
	ck_assert_int_eq(errno, EINVAL);
	int ep1 = pl_raw.epoll_create1(EPOLL_CLOEXEC);
	ck_assert_int_ge(ep1, 0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 7 }, got[2];
	ck_assert_int_eq(pl_raw.epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev), 0);
	ck_assert_int_eq(pl_raw.epoll_wait(ep, got, 2, 0), 1);
	ck_assert_uint_eq(got[0].data.u32, 7);
	ck_assert_int_eq(pl_raw.epoll_pwait(ep, got, 2, 0, &none), 1);
	ck_assert_int_eq(pl_raw.epoll_pwait2(ep, got, 2, &zero, NULL), 1);
	pl_raw.close(ep);
	pl_raw.close(ep1);
	pl_raw.close(p[0]);
	pl_raw.close(p[1]);
}
END_TEST

START_TEST(test_raw_fork_refused)
{
	ck_assert_int_eq(pl_raw.fork(), -1);
	ck_assert_int_eq(errno, ENOSYS);
	ck_assert_int_eq(pl_raw.daemon(1, 1), -1);
	ck_assert_int_eq(errno, ENOSYS);
}
END_TEST

/* A lookup that, like an allocator called from inside dlsym, makes a wrapped call
 * before resolution has finished: the nested call must be served (by the system
 * call fallback), and resolution must still complete. Runs in a fresh process
 * (Check forks) so the table starts empty. */
static int nested_calls, nested_ok;

static void *reentrant_lookup(const char *name)
{
	if (strcmp(name, "socket") == 0) { /* the first name resolved */
		nested_calls++;
		char c = 0;
		int fd = open("/dev/zero", O_RDONLY);
		nested_ok = PL_REAL(read)(fd, &c, 1) == 1 && PL_REAL(close)(fd) == 0;
	}
	return dlsym(RTLD_NEXT, name);
}

START_TEST(test_reentrant_resolution)
{
	memset(&pl_real, 0, sizeof(pl_real));
	pl_real_lookup = reentrant_lookup;
	pl_real_resolve();
	ck_assert_int_eq(nested_calls, 1);
	ck_assert_int_eq(nested_ok, 1);
	ck_assert_ptr_nonnull((void *)pl_real.read);
	ck_assert_ptr_nonnull((void *)pl_real.epoll_pwait);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("real");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_resolves_libc);
	tcase_add_test(tc, test_raw_stream_calls);
	tcase_add_test(tc, test_raw_socket_calls);
	tcase_add_test(tc, test_raw_mmsg_and_sendfile);
	tcase_add_test(tc, test_raw_dup_family);
	tcase_add_test(tc, test_raw_readiness);
	tcase_add_test(tc, test_raw_fork_refused);
	suite_add_tcase(s, tc);
	TCase *re = tcase_create("reentrancy");
	tcase_add_test(re, test_reentrant_resolution);
	suite_add_tcase(s, re);
	return s;
}
