/* AF_UNIX: socketpair in stream, datagram and seqpacket flavours with
 * SOCK_NONBLOCK/SOCK_CLOEXEC, data calls on them, and an accepted TCP
 * socket passed to another process over SCM_RIGHTS (the receiver gets a
 * socket fd that was never created by socket() or accept() in it). */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_pairs(void)
{
	int sv[2], v;
	socklen_t len = sizeof(v);
	char buf[64];
	ssize_t n;

	bh_say("-- socketpair");
	bh_ok("socketpair(AF_UNIX, STREAM)",
	      socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	bh_ok("write", write(sv[0], "stream", 6));
	n = bh_ok("read", bh_read_all(sv[1], buf, 6));
	BH_CHECK(n == 6 && !memcmp(buf, "stream", 6));
	bh_ok("getsockopt(SO_TYPE)",
	      getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len));
	bh_say("  type = %d", v);
	bh_ok("shutdown(SHUT_WR)", shutdown(sv[0], SHUT_WR));
	bh_ok("read at EOF", read(sv[1], buf, 6));
	close(sv[0]);
	close(sv[1]);

	bh_ok("socketpair(AF_UNIX, DGRAM|NONBLOCK|CLOEXEC)",
	      socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
			 sv));
	bh_say("  nonblock %d %d cloexec %d %d", bh_nonblock(sv[0]),
	       bh_nonblock(sv[1]), bh_cloexec(sv[0]), bh_cloexec(sv[1]));
	BH_CHECK(bh_nonblock(sv[0]) == 1 && bh_cloexec(sv[1]) == 1);
	bh_err("recv(empty)", recv(sv[1], buf, sizeof(buf), 0), EAGAIN);
	bh_ok("send(a)", send(sv[0], "a", 1, 0));
	bh_ok("send(bcd)", send(sv[0], "bcd", 3, 0));
	bh_ok("recv -> one datagram", recv(sv[1], buf, sizeof(buf), 0));
	bh_ok("recv -> next datagram", recv(sv[1], buf, sizeof(buf), 0));
	close(sv[0]);
	close(sv[1]);

	bh_ok("socketpair(AF_UNIX, SEQPACKET)",
	      socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	struct iovec iv[2] = { { "12", 2 }, { "345", 3 } };
	struct msghdr mh = { .msg_iov = iv, .msg_iovlen = 2 };
	bh_ok("sendmsg(2+3)", sendmsg(sv[0], &mh, 0));
	n = bh_ok("recv(3) truncates a record", recv(sv[1], buf, 3, 0));
	BH_CHECK(n == 3 && !memcmp(buf, "123", 3));
	close(sv[0]);
	bh_ok("recv after peer close", recv(sv[1], buf, 3, 0));
	close(sv[1]);
}

static int send_fd(int via, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iv = { "F", 1 };
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return (int)sendmsg(via, &mh, 0);
}

static int recv_fd(int via)
{
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec iv = { &b, 1 };
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	int fd = -1;

	if (recvmsg(via, &mh, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

static void test_scm_rights(void)
{
	int sv[2], cfd, sfd, st;
	char buf[16];
	pid_t pid;

	bh_say("-- SCM_RIGHTS: a TCP socket handed to another process");
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* The child gets the accepted socket and serves it. */
		close(sv[0]);
		int fd = recv_fd(sv[1]);
		int fails = fd < 0;

		if (!fails && (bh_read_all(fd, buf, 4) != 4 ||
			       memcmp(buf, "ping", 4) ||
			       write(fd, "pong", 4) != 4))
			fails = 2;
		int v;
		socklen_t len = sizeof(v);
		if (!fails && (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) ||
			       v != SOCK_STREAM))
			fails = 3;
		close(fd);
		_exit(fails);
	}
	close(sv[1]);
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_ok("sendmsg(SCM_RIGHTS accepted socket)", send_fd(sv[0], sfd));
	bh_ok("close(own copy)", close(sfd));
	bh_ok("write ping", write(cfd, "ping", 4));
	ssize_t n = bh_read_all(cfd, buf, 4);
	bh_say("pong from the receiving process: %d", n == 4 &&
	       !memcmp(buf, "pong", 4));
	BH_CHECK(n == 4 && !memcmp(buf, "pong", 4));
	waitpid(pid, &st, 0);
	bh_say("receiver exit %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	BH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	bh_ok("EOF after the receiver closed it", bh_read_all(cfd, buf, 1));
	close(cfd);
	close(sv[0]);

	/* Within one process: pass a socket to ourselves and use the new fd. */
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	bh_tcp_pair(&cfd, &sfd, 0);
	send_fd(sv[0], cfd);
	int got = bh_okfd("recvmsg(SCM_RIGHTS) in the same process",
			  recv_fd(sv[1]));
	close(cfd);
	bh_ok("write on the received fd", write(got, "self", 4));
	n = bh_read_all(sfd, buf, 4);
	BH_CHECK(n == 4 && !memcmp(buf, "self", 4));
	close(got);
	bh_ok("peer EOF", bh_read_all(sfd, buf, 1));
	close(sfd);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	bh_start("unix");
	test_pairs();
	test_scm_rights();
	return bh_finish();
}
