/* Addresses the wrappers must look at without tripping: IPv6 TCP and UDP
 * over ::1 (and a v4-mapped peer on a dual-stack listener), AF_UNIX path
 * and abstract sockets, and malformed arguments to bind/connect/sendto/
 * accept/getsockname (NULL, short or huge lengths, wrong families, bad
 * pointers, ports in use, non-local addresses, wrong socket types). The
 * preload matches rules on these addresses, so each must reach the kernel
 * and come back with the kernel's answer. */
#include "config.h"
#include "bh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void test_ipv6(void)
{
	struct sockaddr_in6 la = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_in6 peer, name;
	socklen_t len = sizeof(la);
	char buf[32];
	int lfd, cfd, sfd, v = 0;

	bh_say("-- IPv6");
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&la, sizeof(la))) {
		/* Same answer on both runs; the rest needs ::1. */
		bh_say("IPv6 loopback unavailable: %s", bh_errname(errno));
		if (lfd >= 0)
			close(lfd);
		return;
	}
	bh_ok("listen([::1]:0)", listen(lfd, 4));
	getsockname(lfd, (struct sockaddr *)&la, &len);
	cfd = bh_okfd("socket(AF_INET6, STREAM)",
		      socket(AF_INET6, SOCK_STREAM, 0));
	bh_ok("connect([::1]:port)",
	      connect(cfd, (struct sockaddr *)&la, sizeof(la)));
	len = sizeof(peer);
	sfd = bh_okfd("accept(&peer6)",
		      accept(lfd, (struct sockaddr *)&peer, &len));
	bh_say("  peer len %u family AF_INET6 %d loopback %d", len,
	       peer.sin6_family == AF_INET6,
	       IN6_IS_ADDR_LOOPBACK(&peer.sin6_addr));
	BH_CHECK(len == sizeof(peer) && IN6_IS_ADDR_LOOPBACK(&peer.sin6_addr));
	bh_ok("send", send(cfd, "six", 3, 0));
	ssize_t n = bh_ok("recv", bh_read_all(sfd, buf, 3));
	BH_CHECK(n == 3 && !memcmp(buf, "six", 3));
	close(cfd);
	close(sfd);
	close(lfd);

	/* Dual-stack listener on [::]: an IPv4 client shows up v4-mapped. */
	struct sockaddr_in6 any6 = { .sin6_family = AF_INET6,
				     .sin6_addr = IN6ADDR_ANY_INIT };
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	bh_ok("setsockopt(IPV6_V6ONLY, 0)",
	      setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof(v)));
	bh_ok("bind([::]:0)", bind(lfd, (struct sockaddr *)&any6, sizeof(any6)));
	listen(lfd, 4);
	len = sizeof(name);
	getsockname(lfd, (struct sockaddr *)&name, &len);
	struct sockaddr_in v4 = { .sin_family = AF_INET,
				  .sin_port = name.sin6_port,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	bh_ok("connect(127.0.0.1) to the dual-stack listener",
	      connect(cfd, (struct sockaddr *)&v4, sizeof(v4)));
	len = sizeof(peer);
	sfd = bh_okfd("accept", accept(lfd, (struct sockaddr *)&peer, &len));
	bh_say("  peer is v4-mapped: %d", IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr));
	BH_CHECK(IN6_IS_ADDR_V4MAPPED(&peer.sin6_addr));
	close(cfd);
	close(sfd);
	close(lfd);

	/* UDP over ::1. */
	struct sockaddr_in6 ua = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int u1 = socket(AF_INET6, SOCK_DGRAM, 0);
	int u2 = socket(AF_INET6, SOCK_DGRAM, 0);
	bind(u2, (struct sockaddr *)&ua, sizeof(ua));
	len = sizeof(ua);
	getsockname(u2, (struct sockaddr *)&ua, &len);
	bh_ok("sendto([::1])", sendto(u1, "dgram6", 6, 0, (struct sockaddr *)&ua,
				     sizeof(ua)));
	bh_wait(u2, POLLIN, 5000);
	len = sizeof(peer);
	n = bh_ok("recvfrom(&from6)", recvfrom(u2, buf, sizeof(buf), 0,
					       (struct sockaddr *)&peer, &len));
	bh_say("  from len %u loopback %d", len,
	       IN6_IS_ADDR_LOOPBACK(&peer.sin6_addr));
	BH_CHECK(n == 6 && IN6_IS_ADDR_LOOPBACK(&peer.sin6_addr));
	/* An IPv4 address on a dual-stack IPv6 UDP socket: Linux sends it
	 * as IPv4 (to u2's port on 127.0.0.1, where nobody listens). */
	struct sockaddr_in v4u = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				   .sin_port = ua.sin6_port };
	bh_ok("sendto(AF_INET address on AF_INET6 socket)",
	      sendto(u1, "x", 1, 0, (struct sockaddr *)&v4u, sizeof(v4u)));
	close(u1);
	close(u2);
}

static void test_unix_paths(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char buf[16];
	int lfd, cfd, sfd;
	socklen_t len;

	bh_say("-- AF_UNIX path and abstract sockets");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/bh_addr.%d.sock",
		 (int)getpid());
	unlink(sa.sun_path);
	lfd = bh_okfd("socket(AF_UNIX, STREAM)", socket(AF_UNIX, SOCK_STREAM, 0));
	bh_ok("bind(path)", bind(lfd, (struct sockaddr *)&sa, sizeof(sa)));
	bh_err("bind(path in use)", bind(socket(AF_UNIX, SOCK_STREAM, 0),
					 (struct sockaddr *)&sa, sizeof(sa)),
	       EADDRINUSE);
	bh_ok("listen", listen(lfd, 4));
	cfd = socket(AF_UNIX, SOCK_STREAM, 0);
	bh_ok("connect(path)", connect(cfd, (struct sockaddr *)&sa, sizeof(sa)));
	sfd = bh_okfd("accept", accept(lfd, NULL, NULL));
	bh_ok("write", write(cfd, "unix", 4));
	bh_ok("read", bh_read_all(sfd, buf, 4));
	struct sockaddr_un got;
	len = sizeof(got);
	bh_ok("getpeername(client)", getpeername(cfd, (struct sockaddr *)&got,
						 &len));
	bh_say("  same path: %d", !strcmp(got.sun_path, sa.sun_path));
	close(cfd);
	close(sfd);
	close(lfd);
	unlink(sa.sun_path);

	/* Abstract namespace: sun_path[0] == 0, length counts the name. */
	struct sockaddr_un ab = { .sun_family = AF_UNIX };
	int nlen = snprintf(ab.sun_path + 1, sizeof(ab.sun_path) - 1,
			    "bh_addr.%d", (int)getpid());
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
				     1 + (size_t)nlen);
	int d1 = socket(AF_UNIX, SOCK_DGRAM, 0);
	int d2 = socket(AF_UNIX, SOCK_DGRAM, 0);
	bh_ok("bind(abstract)", bind(d1, (struct sockaddr *)&ab, alen));
	bh_ok("sendto(abstract)", sendto(d2, "abs", 3, 0, (struct sockaddr *)&ab,
					alen));
	bh_ok("recv", recv(d1, buf, sizeof(buf), 0));
	bh_err("connect(missing path)",
	       connect(d2, (struct sockaddr *)&(struct sockaddr_un){
			       .sun_family = AF_UNIX,
			       .sun_path = "/nonexistent/bh.sock" },
		       sizeof(struct sockaddr_un)), ENOENT);
	close(d1);
	close(d2);
}

static void test_malformed(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in in_use;
	socklen_t len;
	int t, u, l;
	char buf[8];
	void *volatile bad = (void *)8;

	bh_say("-- malformed addresses and wrong socket types");
	t = socket(AF_INET, SOCK_STREAM, 0);
	u = socket(AF_INET, SOCK_DGRAM, 0);
	bh_err("bind(NULL, 16)", bind(t, NULL, sizeof(sa)), EFAULT);
	bh_err("bind(len 0)", bind(t, (struct sockaddr *)&sa, 0), EINVAL);
	bh_err("bind(len 3)", bind(t, (struct sockaddr *)&sa, 3), EINVAL);
	bh_err("bind(bad pointer)", bind(t, bad, sizeof(sa)), EFAULT);
	bh_err("bind(len 1 MiB)", bind(t, (struct sockaddr *)&sa, 1 << 20),
	       EINVAL);
	struct sockaddr_in6 six = { .sin6_family = AF_INET6 };
	bh_err("bind(AF_INET6 address on AF_INET socket)",
	       bind(t, (struct sockaddr *)&six, sizeof(six)), EAFNOSUPPORT);
	struct sockaddr_in far = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(0xC6120001) };
	bh_err("bind(198.18.0.1: not local)",
	       bind(t, (struct sockaddr *)&far, sizeof(far)), EADDRNOTAVAIL);
	l = bh_listener(0);
	len = sizeof(in_use);
	getsockname(l, (struct sockaddr *)&in_use, &len);
	bh_err("bind(port in use)",
	       bind(t, (struct sockaddr *)&in_use, sizeof(in_use)), EADDRINUSE);

	bh_err("connect(NULL, 16)", connect(t, NULL, sizeof(sa)), EFAULT);
	bh_err("connect(len 2)", connect(t, (struct sockaddr *)&in_use, 2),
	       EINVAL);
	bh_err("connect(bad pointer)", connect(t, bad, sizeof(sa)), EFAULT);
	bh_err("connect(AF_INET6 on AF_INET socket)",
	       connect(t, (struct sockaddr *)&six, sizeof(six)), EAFNOSUPPORT);
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	bh_ok("connect(AF_UNSPEC) on unconnected TCP",
	      connect(t, &unspec, sizeof(unspec)));

	bh_err("sendto(NULL addr, len 16)",
	       sendto(u, "x", 1, 0, NULL, sizeof(sa)), EDESTADDRREQ);
	bh_err("sendto(len 4)", sendto(u, "x", 1, 0, (struct sockaddr *)&sa, 4),
	       EINVAL);
	bh_err("sendto(bad pointer)", sendto(u, "x", 1, 0, bad, sizeof(sa)),
	       EFAULT);
	sa.sin_port = 0;
	bh_err("sendto(port 0)", sendto(u, "x", 1, 0, (struct sockaddr *)&sa,
					sizeof(sa)), EINVAL);

	len = 3;
	bh_ok("getsockname(len 3: truncated)",
	      getsockname(l, (struct sockaddr *)&sa, &len));
	bh_say("  len now %u", len);
	bh_err("getsockname(NULL len)",
	       getsockname(l, (struct sockaddr *)&sa, NULL), EFAULT);
	bh_err("getsockname(bad address)",
	       getsockname(l, bad, &(socklen_t){ 16 }), EFAULT);
	len = (socklen_t)-1;
	bh_err("getsockname(len -1)", getsockname(l, (struct sockaddr *)&sa,
						  &len), EINVAL);

	/* The listener is a SOCK_STREAM: accept needs listen, UDP has none. */
	bh_err("listen(UDP)", listen(u, 1), EOPNOTSUPP);
	bh_err("accept(UDP)", accept(u, NULL, NULL), EOPNOTSUPP);
	bh_err("accept(unlistened TCP)", accept(t, NULL, NULL), EINVAL);
	/* A pending connection and a bad address buffer: the kernel fails
	 * the copy-out (and drops that connection). */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	connect(c, (struct sockaddr *)&in_use, sizeof(in_use));
	bh_err("accept(bad address buffer)",
	       accept4(l, bad, &(socklen_t){ 16 }, 0), EFAULT);
	close(c);
	bh_err("recv(unconnected TCP)", recv(t, buf, sizeof(buf), 0), ENOTCONN);
	bh_err("send(unconnected TCP)", send(t, "x", 1, MSG_NOSIGNAL), EPIPE);
	bh_err("shutdown(unconnected UDP)", shutdown(u, SHUT_RDWR), ENOTCONN);
	close(t);
	close(u);
	close(l);
}

int main(void)
{
	bh_start("addr");
	test_ipv6();
	test_unix_paths();
	test_malformed();
	return bh_finish();
}
