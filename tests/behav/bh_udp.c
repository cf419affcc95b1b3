/* UDP over loopback: unconnected sendto/recvfrom with source addresses,
 * connected UDP (send/recv, write/read, peer filtering), datagram
 * boundaries, MSG_PEEK, MSG_TRUNC, FIONREAD, zero-length datagrams,
 * sendmsg/recvmsg with a name, sendmmsg/recvmmsg batches, EAGAIN, errors. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static void name_of(int fd, struct sockaddr_in *sa)
{
	socklen_t len = sizeof(*sa);

	getsockname(fd, (struct sockaddr *)sa, &len);
}

static void test_unconnected(void)
{
	struct sockaddr_in aa, ba, from;
	socklen_t flen;
	char out[1500], in[2000];
	int a, b, avail, val;
	ssize_t n;

	bh_say("-- unconnected datagrams");
	a = bh_okfd("socket(AF_INET, SOCK_DGRAM)",
		    socket(AF_INET, SOCK_DGRAM, 0));
	struct sockaddr_in lo = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	bh_ok("bind(127.0.0.1:0)", bind(a, (struct sockaddr *)&lo, sizeof(lo)));
	b = bh_udp_bound(0);
	name_of(a, &aa);
	name_of(b, &ba);
	socklen_t len = sizeof(val);
	bh_ok("getsockopt(SO_TYPE)",
	      getsockopt(a, SOL_SOCKET, SO_TYPE, &val, &len));
	bh_say("  type = %d", val);
	BH_CHECK(val == SOCK_DGRAM);
	bh_err("send(unconnected, no address)", send(a, "x", 1, 0),
	       EDESTADDRREQ);
	flen = sizeof(from);
	bh_err("getpeername(unconnected)",
	       getpeername(a, (struct sockaddr *)&from, &flen), ENOTCONN);

	bh_fill(out, sizeof(out), 11, 0);
	/* Three datagrams of different sizes keep their boundaries. */
	bh_ok("sendto(100)", sendto(a, out, 100, 0, (struct sockaddr *)&ba,
				   sizeof(ba)));
	bh_ok("sendto(1400)", sendto(a, out, 1400, 0, (struct sockaddr *)&ba,
				    sizeof(ba)));
	bh_ok("sendto(0)", sendto(a, out, 0, 0, (struct sockaddr *)&ba,
				 sizeof(ba)));
	bh_wait(b, POLLIN, 5000);
	bh_ok("ioctl(FIONREAD)", ioctl(b, FIONREAD, &avail));
	bh_say("  next datagram size = %d", avail);
	BH_CHECK(avail == 100);
	flen = sizeof(from);
	n = bh_ok("recvfrom(MSG_PEEK)", recvfrom(b, in, sizeof(in), MSG_PEEK,
						 (struct sockaddr *)&from,
						 &flen));
	bh_say("  from == sender: %d", bh_same_addr(&from, &aa));
	BH_CHECK(n == 100 && bh_same_addr(&from, &aa));
	flen = sizeof(from);
	n = bh_ok("recvfrom()", recvfrom(b, in, sizeof(in), 0,
					 (struct sockaddr *)&from, &flen));
	BH_CHECK(n == 100 && !memcmp(in, out, 100));
	/* A short buffer truncates; MSG_TRUNC returns the real size. */
	n = bh_ok("recv(10, MSG_TRUNC)", recv(b, in, 10, MSG_TRUNC));
	BH_CHECK(n == 1400 && !memcmp(in, out, 10));
	n = bh_ok("recv(zero-length datagram)", recv(b, in, sizeof(in), 0));
	BH_CHECK(n == 0);
	bh_err("recv(MSG_DONTWAIT, empty)",
	       recv(b, in, sizeof(in), MSG_DONTWAIT), EAGAIN);

	/* recvmsg reports truncation in msg_flags and fills the name. */
	bh_ok("sendto(300)", sendto(a, out, 300, 0, (struct sockaddr *)&ba,
				   sizeof(ba)));
	struct iovec iv[2] = { { in, 100 }, { in + 100, 50 } };
	struct msghdr mh = { .msg_name = &from, .msg_namelen = sizeof(from),
			     .msg_iov = iv, .msg_iovlen = 2 };
	n = bh_ok("recvmsg(150 of 300)", recvmsg(b, &mh, 0));
	bh_say("  MSG_TRUNC %d namelen %u from == sender %d",
	       !!(mh.msg_flags & MSG_TRUNC), mh.msg_namelen,
	       bh_same_addr(&from, &aa));
	BH_CHECK(n == 150 && (mh.msg_flags & MSG_TRUNC) &&
		 !memcmp(in, out, 150) && bh_same_addr(&from, &aa));

	/* sendmsg with a destination, writev-style gather. */
	struct iovec ov[3] = { { out, 7 }, { out + 7, 0 }, { out + 7, 93 } };
	struct msghdr om = { .msg_name = &ba, .msg_namelen = sizeof(ba),
			     .msg_iov = ov, .msg_iovlen = 3 };
	bh_ok("sendmsg(7+0+93, name)", sendmsg(a, &om, 0));
	bh_wait(b, POLLIN, 5000);
	n = bh_ok("read(datagram)", read(b, in, sizeof(in)));
	BH_CHECK(n == 100 && !memcmp(in, out, 100));
	static char big[65536];
	bh_err("sendto(65536: too big)",
	       sendto(a, big, sizeof(big), 0, (struct sockaddr *)&ba, sizeof(ba)),
	       EMSGSIZE);
	close(a);
	close(b);
}

static void test_connected(void)
{
	struct sockaddr_in aa, ba, peer;
	char in[256];
	int a, b, c;
	socklen_t len = sizeof(peer);
	ssize_t n;

	bh_say("-- connected datagrams");
	a = bh_udp_bound(0);
	b = bh_udp_bound(0);
	c = bh_udp_bound(0);
	name_of(a, &aa);
	name_of(b, &ba);
	bh_ok("connect(a -> b)", connect(a, (struct sockaddr *)&ba, sizeof(ba)));
	bh_ok("connect(b -> a)", connect(b, (struct sockaddr *)&aa, sizeof(aa)));
	bh_ok("getpeername(a)", getpeername(a, (struct sockaddr *)&peer, &len));
	bh_say("  peer == b: %d", bh_same_addr(&peer, &ba));
	BH_CHECK(bh_same_addr(&peer, &ba));
	/* b is connected to a: a datagram from c is filtered out. */
	sendto(c, "intruder", 8, 0, (struct sockaddr *)&ba, sizeof(ba));
	bh_ok("send(a, 5)", send(a, "hello", 5, 0));
	bh_ok("write(a, 5)", write(a, "world", 5));
	bh_wait(b, POLLIN, 5000);
	n = bh_ok("recv(b)", recv(b, in, sizeof(in), 0));
	BH_CHECK(n == 5 && !memcmp(in, "hello", 5));
	bh_wait(b, POLLIN, 5000);
	n = bh_ok("read(b)", read(b, in, sizeof(in)));
	BH_CHECK(n == 5 && !memcmp(in, "world", 5));
	bh_err("recv(b, MSG_DONTWAIT): intruder filtered",
	       recv(b, in, sizeof(in), MSG_DONTWAIT), EAGAIN);
	struct iovec iv[2] = { { "ab", 2 }, { "cd", 2 } };
	bh_ok("writev(a, 2+2)", writev(a, iv, 2));
	char r1[3] = "", r2[3] = "";
	struct iovec rv[2] = { { r1, 1 }, { r2, 3 } };
	bh_wait(b, POLLIN, 5000);
	n = bh_ok("readv(b, 1+3)", readv(b, rv, 2));
	BH_CHECK(n == 4 && r1[0] == 'a' && !memcmp(r2, "bcd", 3));

	/* Sending to a connected UDP socket's closed peer: ICMP port
	 * unreachable comes back as ECONNREFUSED on a later call. */
	close(b);
	bh_ok("send(a) to closed port", send(a, "x", 1, 0));
	bh_wait(a, POLLIN, 1000);
	bh_err("recv(a) after ICMP unreachable",
	       recv(a, in, sizeof(in), MSG_DONTWAIT), ECONNREFUSED);
	/* Disconnect with AF_UNSPEC. */
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	bh_ok("connect(AF_UNSPEC)", connect(a, &unspec, sizeof(unspec)));
	bh_err("getpeername after disconnect",
	       getpeername(a, (struct sockaddr *)&peer, &len), ENOTCONN);
	close(a);
	close(c);
}

static void test_mmsg(void)
{
	enum { N = 8 };
	struct sockaddr_in ba, from[N];
	struct mmsghdr out[N], in[N];
	struct iovec ov[N], iv[N];
	char obuf[N][200], ibuf[N][256];
	int a, b, ok = 1;

	bh_say("-- sendmmsg / recvmmsg");
	a = bh_udp_bound(0);
	b = bh_udp_bound(0);
	name_of(b, &ba);
	memset(out, 0, sizeof(out));
	memset(in, 0, sizeof(in));
	for (int i = 0; i < N; i++) {
		bh_fill(obuf[i], sizeof(obuf[i]), 20 + i, 0);
		ov[i].iov_base = obuf[i];
		ov[i].iov_len = (size_t)(10 + 20 * i);
		out[i].msg_hdr.msg_iov = &ov[i];
		out[i].msg_hdr.msg_iovlen = 1;
		out[i].msg_hdr.msg_name = &ba;
		out[i].msg_hdr.msg_namelen = sizeof(ba);
		iv[i].iov_base = ibuf[i];
		iv[i].iov_len = sizeof(ibuf[i]);
		in[i].msg_hdr.msg_iov = &iv[i];
		in[i].msg_hdr.msg_iovlen = 1;
		in[i].msg_hdr.msg_name = &from[i];
		in[i].msg_hdr.msg_namelen = sizeof(from[i]);
	}
	int sent = (int)bh_ok("sendmmsg(8)", sendmmsg(a, out, N, 0));
	for (int i = 0; i < N; i++)
		ok &= out[i].msg_len == ov[i].iov_len;
	bh_say("  msg_len all set: %d", ok);
	BH_CHECK(sent == N && ok);
	bh_wait(b, POLLIN, 5000);
	/* Ask for 8 with MSG_WAITFORONE: returns what is queued (all 8 on
	 * loopback, since sendmmsg queued them synchronously). */
	int got = (int)bh_ok("recvmmsg(8, MSG_WAITFORONE)",
			     recvmmsg(b, in, N, MSG_WAITFORONE, NULL));
	ok = got == N;
	for (int i = 0; i < got && i < N; i++)
		ok &= in[i].msg_len == ov[i].iov_len &&
		      !memcmp(ibuf[i], obuf[i], ov[i].iov_len);
	bh_say("  every datagram intact and in order: %d", ok);
	BH_CHECK(ok);
	struct timespec ts = { 0, 1000000 };
	bh_err("recvmmsg(empty, MSG_DONTWAIT)",
	       recvmmsg(b, in, N, MSG_DONTWAIT, &ts), EAGAIN);
	bh_ok("sendmmsg(0)", sendmmsg(a, out, 0, 0));
	close(a);
	close(b);
}

int main(void)
{
	bh_start("udp");
	test_unconnected();
	test_connected();
	test_mmsg();
	return bh_finish();
}
