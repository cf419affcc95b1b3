/* Blocking TCP over loopback: the whole life of a connection and every
 * data call (read/write, readv/writev, recv/send, recvfrom/sendto,
 * recvmsg/sendmsg), MSG_PEEK, MSG_WAITALL, FIONREAD, socket options,
 * names, shutdown and EOF, a 4 MiB transfer with a checksum. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_setup_and_names(void)
{
	struct sockaddr_in la, ca, peer, self, any = { .sin_family = AF_INET };
	socklen_t len;
	int lfd, cfd, sfd, val;

	bh_say("-- connection setup and names");
	lfd = bh_okfd("socket(AF_INET, SOCK_STREAM)",
		      socket(AF_INET, SOCK_STREAM, 0));
	val = 1;
	bh_ok("setsockopt(SO_REUSEADDR, 1)",
	      setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &val, sizeof(val)));
	any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bh_ok("bind(127.0.0.1:0)",
	      bind(lfd, (struct sockaddr *)&any, sizeof(any)));
	bh_err("bind again", bind(lfd, (struct sockaddr *)&any, sizeof(any)),
	       EINVAL);
	len = sizeof(val);
	bh_ok("getsockopt(SO_ACCEPTCONN) before listen",
	      getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len));
	bh_say("  acceptconn = %d", val);
	BH_CHECK(val == 0);
	bh_ok("listen(8)", listen(lfd, 8));
	len = sizeof(val);
	getsockopt(lfd, SOL_SOCKET, SO_ACCEPTCONN, &val, &len);
	bh_say("  acceptconn = %d", val);
	BH_CHECK(val == 1);
	len = sizeof(la);
	bh_ok("getsockname(listener)",
	      getsockname(lfd, (struct sockaddr *)&la, &len));
	bh_say("  len = %u family = %d addr = %s port != 0: %d", len,
	       la.sin_family, la.sin_addr.s_addr == htonl(INADDR_LOOPBACK) ?
	       "127.0.0.1" : "other", la.sin_port != 0);
	BH_CHECK(la.sin_port != 0);

	cfd = bh_okfd("socket(client)", socket(AF_INET, SOCK_STREAM, 0));
	bh_err("getpeername(unconnected)",
	       getpeername(cfd, (struct sockaddr *)&peer, &len), ENOTCONN);
	bh_ok("connect(listener)",
	      connect(cfd, (struct sockaddr *)&la, sizeof(la)));
	bh_err("connect again", connect(cfd, (struct sockaddr *)&la,
					sizeof(la)), EISCONN);
	len = sizeof(peer);
	sfd = bh_okfd("accept(listener, &peer)",
		      accept(lfd, (struct sockaddr *)&peer, &len));
	len = sizeof(ca);
	bh_ok("getsockname(client)",
	      getsockname(cfd, (struct sockaddr *)&ca, &len));
	bh_say("  accept's peer == client's name: %d", bh_same_addr(&peer, &ca));
	BH_CHECK(bh_same_addr(&peer, &ca));
	len = sizeof(peer);
	bh_ok("getpeername(client)",
	      getpeername(cfd, (struct sockaddr *)&peer, &len));
	bh_say("  client's peer == listener: %d", bh_same_addr(&peer, &la));
	BH_CHECK(bh_same_addr(&peer, &la));
	len = sizeof(self);
	bh_ok("getsockname(accepted)",
	      getsockname(sfd, (struct sockaddr *)&self, &len));
	bh_say("  accepted's name == listener: %d", bh_same_addr(&self, &la));
	BH_CHECK(bh_same_addr(&self, &la));
	/* A short buffer: the kernel truncates and reports the full length. */
	len = 4;
	bh_ok("getpeername(len 4)",
	      getpeername(sfd, (struct sockaddr *)&peer, &len));
	bh_say("  len = %u", len);
	BH_CHECK(len == sizeof(struct sockaddr_in));

	/* accept with NULL address, then accept4 with flags. */
	int c2 = socket(AF_INET, SOCK_STREAM, 0);
	int c3 = socket(AF_INET, SOCK_STREAM, 0);
	connect(c2, (struct sockaddr *)&la, sizeof(la));
	connect(c3, (struct sockaddr *)&la, sizeof(la));
	int s2 = bh_okfd("accept(NULL, NULL)", accept(lfd, NULL, NULL));
	int s3 = bh_okfd("accept4(SOCK_CLOEXEC|SOCK_NONBLOCK)",
			 accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK));
	bh_say("  accept: nonblock %d cloexec %d; accept4: nonblock %d cloexec %d",
	       bh_nonblock(s2), bh_cloexec(s2), bh_nonblock(s3), bh_cloexec(s3));
	BH_CHECK(bh_nonblock(s2) == 0 && bh_cloexec(s2) == 0);
	BH_CHECK(bh_nonblock(s3) == 1 && bh_cloexec(s3) == 1);
	bh_err("accept4(bad flags)", accept4(lfd, NULL, NULL, 0x4000000),
	       EINVAL);
	bh_ok("close x4", close(c2) | close(c3) | close(s2) | close(s3));

	bh_ok("close(listener)", close(lfd));
	bh_ok("close(client)", close(cfd));
	bh_ok("close(accepted)", close(sfd));
}

static void test_options(void)
{
	int cfd, sfd, val;
	socklen_t len;
	struct linger lg = { .l_onoff = 1, .l_linger = 3 };
	struct timeval tv = { .tv_sec = 2, .tv_usec = 500000 };

	bh_say("-- socket options");
	bh_tcp_pair(&cfd, &sfd, 0);
	len = sizeof(val);
	bh_ok("getsockopt(SO_TYPE)",
	      getsockopt(cfd, SOL_SOCKET, SO_TYPE, &val, &len));
	bh_say("  type = %d len = %u", val, len);
	BH_CHECK(val == SOCK_STREAM);
	bh_ok("getsockopt(SO_DOMAIN)",
	      getsockopt(cfd, SOL_SOCKET, SO_DOMAIN, &val, &len));
	bh_say("  domain = %d", val);
	BH_CHECK(val == AF_INET);
	bh_ok("getsockopt(SO_PROTOCOL)",
	      getsockopt(cfd, SOL_SOCKET, SO_PROTOCOL, &val, &len));
	bh_say("  protocol = %d", val);
	BH_CHECK(val == IPPROTO_TCP);
	bh_ok("getsockopt(SO_ERROR)",
	      getsockopt(cfd, SOL_SOCKET, SO_ERROR, &val, &len));
	bh_say("  error = %d", val);
	BH_CHECK(val == 0);
	val = 1;
	bh_ok("setsockopt(TCP_NODELAY, 1)",
	      setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &val, sizeof(val)));
	val = -1;
	len = sizeof(val);
	bh_ok("getsockopt(TCP_NODELAY)",
	      getsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &val, &len));
	bh_say("  nodelay = %d", val != 0);
	BH_CHECK(val != 0);
	val = 65536;
	bh_ok("setsockopt(SO_RCVBUF, 65536)",
	      setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &val, sizeof(val)));
	len = sizeof(val);
	bh_ok("getsockopt(SO_RCVBUF)",
	      getsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &val, &len));
	bh_say("  rcvbuf = %d (kernel doubles)", val);
	BH_CHECK(val == 131072);
	bh_ok("setsockopt(SO_LINGER 1,3)",
	      setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	memset(&lg, 0, sizeof(lg));
	len = sizeof(lg);
	bh_ok("getsockopt(SO_LINGER)",
	      getsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, &len));
	bh_say("  linger = %d,%d", lg.l_onoff, lg.l_linger);
	BH_CHECK(lg.l_onoff == 1 && lg.l_linger == 3);
	bh_ok("setsockopt(SO_RCVTIMEO 2.5s)",
	      setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	memset(&tv, 0, sizeof(tv));
	len = sizeof(tv);
	bh_ok("getsockopt(SO_RCVTIMEO)",
	      getsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
	bh_say("  rcvtimeo = %ld.%06ld", (long)tv.tv_sec, (long)tv.tv_usec);
	BH_CHECK(tv.tv_sec == 2 && tv.tv_usec == 500000);
	len = sizeof(val);
	bh_err("getsockopt(bad level)",
	       getsockopt(cfd, 12345, 1, &val, &len), EOPNOTSUPP);
	bh_err("setsockopt(SO_RCVBUF, short optlen)",
	       setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &val, 1), EINVAL);
	bh_err("getsockopt(TCP_MAXSEG, NULL optlen)",
	       getsockopt(cfd, IPPROTO_TCP, TCP_MAXSEG, &val, NULL), EFAULT);
	close(cfd);
	close(sfd);
}

static void test_data_calls(void)
{
	char out[256], in[256];
	int cfd, sfd, avail;
	ssize_t n;

	bh_say("-- data calls");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_fill(out, sizeof(out), 1, 0);

	n = bh_ok("write(100)", write(cfd, out, 100));
	BH_CHECK(n == 100);
	n = bh_ok("read(100)", bh_read_all(sfd, in, 100));
	BH_CHECK(n == 100 && !memcmp(in, out, 100));

	struct iovec wv[3] = {
		{ out, 10 }, { out + 10, 0 }, { out + 10, 90 } };
	n = bh_ok("writev(10+0+90)", writev(cfd, wv, 3));
	BH_CHECK(n == 100);
	memset(in, 0, sizeof(in));
	struct iovec rv[2] = { { in, 33 }, { in + 33, 67 } };
	/* Wait for all 100 bytes so one readv takes them together. */
	while (ioctl(sfd, FIONREAD, &avail) == 0 && avail < 100)
		bh_wait(sfd, POLLIN, 100);
	n = bh_ok("readv(33+67)", readv(sfd, rv, 2));
	BH_CHECK(n == 100 && !memcmp(in, out, 100));

	n = bh_ok("send(64, 0)", send(cfd, out, 64, 0));
	BH_CHECK(n == 64);
	while (ioctl(sfd, FIONREAD, &avail) == 0 && avail < 64)
		bh_wait(sfd, POLLIN, 100);
	bh_ok("ioctl(FIONREAD)", ioctl(sfd, FIONREAD, &avail));
	bh_say("  available = %d", avail);
	BH_CHECK(avail == 64);
	n = bh_ok("recv(16, MSG_PEEK)", recv(sfd, in, 16, MSG_PEEK));
	BH_CHECK(n == 16 && !memcmp(in, out, 16));
	ioctl(sfd, FIONREAD, &avail);
	bh_say("  available after peek = %d", avail);
	BH_CHECK(avail == 64);
	n = bh_ok("recv(64, MSG_WAITALL)", recv(sfd, in, 64, MSG_WAITALL));
	BH_CHECK(n == 64 && !memcmp(in, out, 64));
	n = bh_err("recv(MSG_DONTWAIT) empty",
		   recv(sfd, in, 64, MSG_DONTWAIT), EAGAIN);

	n = bh_ok("sendto(NULL addr)", sendto(cfd, out, 50, 0, NULL, 0));
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	memset(&from, 0xab, sizeof(from));
	n = bh_ok("recvfrom(50, &from)",
		  recvfrom(sfd, in, 50, MSG_WAITALL, (struct sockaddr *)&from,
			   &flen));
	/* On a connected TCP socket Linux leaves the address untouched and
	 * reports length 0. */
	bh_say("  fromlen = %u", flen);
	BH_CHECK(n == 50 && !memcmp(in, out, 50) && flen == 0);

	char hdr[5] = "HDR:";
	struct iovec mv[2] = { { hdr, 4 }, { out, 60 } };
	struct msghdr mh = { .msg_iov = mv, .msg_iovlen = 2 };
	n = bh_ok("sendmsg(4+60)", sendmsg(cfd, &mh, 0));
	BH_CHECK(n == 64);
	memset(in, 0, sizeof(in));
	struct iovec rmv[2] = { { in, 4 }, { in + 4, 200 } };
	struct msghdr rmh = { .msg_iov = rmv, .msg_iovlen = 2 };
	while (ioctl(sfd, FIONREAD, &avail) == 0 && avail < 64)
		bh_wait(sfd, POLLIN, 100);
	n = bh_ok("recvmsg(4+200)", recvmsg(sfd, &rmh, 0));
	bh_say("  flags = %d namelen = %u controllen = %zu", rmh.msg_flags,
	       rmh.msg_namelen, rmh.msg_controllen);
	BH_CHECK(n == 64 && !memcmp(in, "HDR:", 4) &&
		 !memcmp(in + 4, out, 60));

	/* Zero-length operations. */
	bh_ok("write(0)", write(cfd, out, 0));
	bh_ok("send(0)", send(cfd, out, 0, 0));
	bh_err("recv(0, MSG_DONTWAIT)", recv(sfd, in, 0, MSG_DONTWAIT), EAGAIN);

	/* Bad buffer. */
	void *volatile bad = (void *)8;
	bh_err("write(bad buffer)", write(cfd, bad, 10), EFAULT);
	bh_err("recv(MSG_OOB) without urgent data",
	       recv(sfd, in, 1, MSG_OOB | MSG_DONTWAIT), EINVAL);

	close(cfd);
	close(sfd);
}

static void test_shutdown_eof(void)
{
	char buf[64];
	int cfd, sfd;

	bh_say("-- shutdown and EOF");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("write(5)", write(cfd, "hello", 5));
	bh_ok("shutdown(client, SHUT_WR)", shutdown(cfd, SHUT_WR));
	bh_err("write after SHUT_WR", send(cfd, "x", 1, MSG_NOSIGNAL), EPIPE);
	ssize_t n = bh_ok("read(64) data", bh_read_all(sfd, buf, 64));
	BH_CHECK(n == 5 && !memcmp(buf, "hello", 5));
	bh_ok("read(64) at EOF", read(sfd, buf, 64));
	bh_ok("write back after peer SHUT_WR", write(sfd, "bye", 3));
	n = bh_ok("read(3) on half-closed client", bh_read_all(cfd, buf, 3));
	BH_CHECK(n == 3 && !memcmp(buf, "bye", 3));
	bh_ok("shutdown(server, SHUT_RDWR)", shutdown(sfd, SHUT_RDWR));
	bh_ok("read at EOF on client", read(cfd, buf, 64));
	bh_err("shutdown(bad how)", shutdown(sfd, 7), EINVAL);
	int u = socket(AF_INET, SOCK_STREAM, 0);
	bh_err("shutdown(unconnected)", shutdown(u, SHUT_RD), ENOTCONN);
	close(u);
	bh_ok("close(client)", close(cfd));
	bh_ok("close(server)", close(sfd));
	bh_err("close again", close(sfd), EBADF);

	/* Peer closed entirely: writing gets EPIPE (RST after the first
	 * write may take a round trip, so write until it fails). */
	bh_tcp_pair(&cfd, &sfd, 0);
	close(sfd);
	int err = 0;
	for (int i = 0; i < 100 && !err; i++) {
		if (send(cfd, "x", 1, MSG_NOSIGNAL) < 0)
			err = errno;
		else
			bh_wait(cfd, POLLIN, 10);
	}
	bh_say("write to closed peer fails: %s", bh_errname(err));
	BH_CHECK(err == EPIPE || err == ECONNRESET);
	close(cfd);
}

/* 4 MiB in both directions at once (a child writes while the parent
 * reads), checksummed: proves the data calls preserve every byte under
 * back-pressure. */
static void test_bulk(void)
{
	enum { TOTAL = 4 << 20, CHUNK = 65536 };
	static char buf[CHUNK];
	uint64_t sent = BH_SUM_INIT, got = BH_SUM_INIT;
	size_t off = 0;
	int cfd, sfd, status;
	pid_t pid;

	bh_say("-- bulk transfer");
	bh_tcp_pair(&cfd, &sfd, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* Child: write pseudo-random chunks of varying length. */
		close(sfd);
		for (size_t o = 0, i = 0; o < TOTAL; i++) {
			size_t len = 1 + (i * 7919) % CHUNK;

			if (len > TOTAL - o)
				len = TOTAL - o;
			bh_fill(buf, len, 7, o);
			if (bh_write_all(cfd, buf, len) != (ssize_t)len)
				_exit(3);
			o += len;
		}
		_exit(0);
	}
	close(cfd);
	for (size_t o = 0; o < TOTAL; o += CHUNK) {
		bh_fill(buf, CHUNK, 7, o);
		sent = bh_sum(sent, buf, CHUNK);
	}
	for (;;) {
		ssize_t n = recv(sfd, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		got = bh_sum(got, buf, (size_t)n);
		off += (size_t)n;
	}
	waitpid(pid, &status, 0);
	bh_say("  received %zu bytes, checksum %s, writer exit %d", off,
	       got == sent ? "match" : "MISMATCH", WEXITSTATUS(status));
	BH_CHECK(off == TOTAL && got == sent && WIFEXITED(status) &&
		 WEXITSTATUS(status) == 0);
	close(sfd);
}

int main(void)
{
	bh_start("tcp");
	test_setup_and_names();
	test_options();
	test_data_calls();
	test_shutdown_eof();
	test_bulk();
	return bh_finish();
}
