/* fork, exec and daemon with inherited sockets: parent and child both use the
 * same TCP connection, UDP socket and listener; the child opens sockets of
 * its own; a socket closed in the child stays open in the parent; daemon()
 * keeps inherited sockets usable in the daemonised grandchild; sockets
 * inherited across fork + execve work in the new image (whose library copy
 * never saw them) and close-on-exec ones are gone there. All child output
 * goes through sockets back to the parent, so the transcript is written by
 * one process only. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int child_status(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The sockets parent and child share in test_fork_shared. */
struct shared {
	int cfd, sfd;                /* the TCP connection's two ends */
	int u1, u2;                  /* UDP sockets; ua: u2's address */
	int lfd;                     /* a listener; la: its address */
	int ep;                      /* an epoll set holding sfd (data 9) */
	struct sockaddr_in ua, la;
};

/* Child: talk on every inherited socket, then open and use a connection of
 * its own to the inherited listener. The failed steps, one bit each. */
static int fork_shared_child(const struct shared *sh)
{
	int fails = 0, c;
	struct epoll_event got;
	char buf[64];

	if (write(sh->cfd, "from-child", 10) != 10)
		fails |= 1;
	if (bh_read_all(sh->cfd, buf, 11) != 11 ||
	    memcmp(buf, "from-parent", 11))
		fails |= 2;
	if (sendto(sh->u1, "udp-child", 9, 0, (const struct sockaddr *)&sh->ua,
		   sizeof(sh->ua)) != 9)
		fails |= 4;
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (const struct sockaddr *)&sh->la, sizeof(sh->la)) ||
	    write(c, "new", 3) != 3)
		fails |= 8;
	/* The inherited epoll set sees the inherited socket. */
	if (bh_read_all(sh->cfd, buf, 4) != 4 || memcmp(buf, "ping", 4))
		fails |= 16;
	/* The inherited epoll set is the parent's too: nothing is
	 * readable on sfd until the child answers. */
	if (epoll_wait(sh->ep, &got, 1, 0) != 0)
		fails |= 64;
	if (write(sh->cfd, "ok", 2) != 2)
		fails |= 32;
	/* Closing inherited fds in the child must not close the
	 * parent's sockets. */
	close(sh->sfd);
	close(sh->u2);
	close(sh->lfd);
	close(c);
	return fails;
}

/* Parent: what the child sent arrives on every shared socket; after the
 * child exited, the parent's copies still work. */
static void fork_shared_parent(const struct shared *sh, pid_t pid)
{
	char buf[64];
	ssize_t n = bh_read_all(sh->sfd, buf, 10);
	bh_say("parent read child's bytes: %d", n == 10 &&
	       !memcmp(buf, "from-child", 10));
	BH_CHECK(n == 10 && !memcmp(buf, "from-child", 10));
	bh_ok("parent write", write(sh->sfd, "from-parent", 11));
	bh_wait(sh->u2, POLLIN, 5000);
	n = recv(sh->u2, buf, sizeof(buf), 0);
	bh_say("parent got child's datagram: %d", n == 9 &&
	       !memcmp(buf, "udp-child", 9));
	BH_CHECK(n == 9);
	int a = bh_okfd("parent accept child's connection",
			accept(sh->lfd, NULL, NULL));
	n = bh_read_all(a, buf, 3);
	bh_say("  bytes: %d", n == 3 && !memcmp(buf, "new", 3));
	BH_CHECK(n == 3 && !memcmp(buf, "new", 3));
	bh_ok("parent write ping", write(sh->sfd, "ping", 4));
	struct epoll_event got;
	n = epoll_wait(sh->ep, &got, 1, 5000);
	bh_say("parent epoll sees the reply: %zd cookie %llu", n,
	       (unsigned long long)got.data.u64);
	BH_CHECK(n == 1 && got.data.u64 == 9);
	n = bh_read_all(sh->sfd, buf, 2);
	BH_CHECK(n == 2 && !memcmp(buf, "ok", 2));
	int st = child_status(pid);
	bh_say("child exit status %d", st);
	BH_CHECK(st == 0);
	/* After the child closed its copies, the parent's still work. */
	bh_ok("parent sendto after child exit",
	      sendto(sh->u1, "again", 5, 0, (const struct sockaddr *)&sh->ua, sizeof(sh->ua)));
	bh_wait(sh->u2, POLLIN, 5000);
	bh_ok("parent recv on u2 (closed in child)", recv(sh->u2, buf, 64, 0));
	bh_ok("parent write on tcp", write(sh->cfd, "z", 1));
	bh_ok("parent read on tcp", bh_read_all(sh->sfd, buf, 1));
	int c = socket(AF_INET, SOCK_STREAM, 0);
	bh_ok("connect to listener (closed in child)",
	      connect(c, (const struct sockaddr *)&sh->la, sizeof(sh->la)));
	int b = bh_okfd("accept", accept(sh->lfd, NULL, NULL));
	close(b);
	close(c);
	close(a);
}

static void test_fork_shared(void)
{
	struct shared sh;
	socklen_t len = sizeof(sh.ua);
	pid_t pid;

	bh_say("-- fork: parent and child share sockets");
	bh_tcp_pair(&sh.cfd, &sh.sfd, 0);
	sh.u1 = bh_udp_bound(0);
	sh.u2 = bh_udp_bound(0);
	getsockname(sh.u2, (struct sockaddr *)&sh.ua, &len);
	sh.lfd = bh_listener(0);
	len = sizeof(sh.la);
	getsockname(sh.lfd, (struct sockaddr *)&sh.la, &len);
	sh.ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 9 };
	epoll_ctl(sh.ep, EPOLL_CTL_ADD, sh.sfd, &ev);

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		bh_ok("fork", pid);
		return;
	}
	if (pid == 0)
		_exit(fork_shared_child(&sh));
	fork_shared_parent(&sh, pid);
	close(sh.cfd);
	close(sh.sfd);
	close(sh.u1);
	close(sh.u2);
	close(sh.lfd);
	close(sh.ep);
}

/* The child closes its copy of a connection: the parent's copy keeps it
 * alive; when the parent closes too, the peer sees EOF. */
static void test_fork_close_order(void)
{
	int cfd, sfd;
	char c;
	pid_t pid;

	bh_say("-- fork: EOF only after both processes closed");
	bh_tcp_pair(&cfd, &sfd, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(cfd);
		_exit(0);
	}
	int st = child_status(pid);
	bh_say("child closed its copy and exited: %d", st);
	bh_err("peer: no EOF while the parent holds it",
	       recv(sfd, &c, 1, MSG_DONTWAIT), EAGAIN);
	close(cfd);
	bh_ok("peer: EOF after the parent closed", bh_read_all(sfd, &c, 1));
	close(sfd);

	/* Nested fork: the grandchild writes on the inherited socket. */
	bh_tcp_pair(&cfd, &sfd, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		pid_t g = fork();

		if (g == 0)
			_exit(write(cfd, "gc", 2) == 2 ? 0 : 1);
		_exit(child_status(g));
	}
	char buf[2];
	ssize_t n = bh_read_all(sfd, buf, 2);
	bh_say("grandchild's bytes: %d, status %d", n == 2 &&
	       !memcmp(buf, "gc", 2), child_status(pid));
	BH_CHECK(n == 2);
	close(cfd);
	close(sfd);
}

static void test_daemon(void)
{
	int sv[2], cfd, sfd;
	char buf[64];
	pid_t pid;

	bh_say("-- daemon with inherited sockets");
	bh_tcp_pair(&cfd, &sfd, 0);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* daemon(1, 1): keep cwd and stdio; the caller's process
		 * exits, the daemon (a new session) continues. */
		close(sv[0]);
		if (daemon(1, 1) != 0)
			_exit(2);
		pid_t sid = getsid(0);
		char msg[64];
		int len = snprintf(msg, sizeof(msg), "daemon session-leader=%d",
				   sid == getpid());
		/* Report over the inherited AF_UNIX socket, echo over the
		 * inherited TCP connection. */
		if (write(sv[1], msg, (size_t)len) != len)
			_exit(3);
		if (bh_read_all(cfd, buf, 5) != 5 || write(cfd, buf, 5) != 5)
			_exit(4);
		close(sv[1]);
		close(cfd);
		_exit(0);
	}
	close(sv[1]);
	close(cfd);
	int st = child_status(pid);
	bh_say("daemon()'s caller exited with %d", st);
	BH_CHECK(st == 0);
	bh_ok("write to the daemon over TCP", write(sfd, "hello", 5));
	ssize_t n = bh_read_all(sfd, buf, 5);
	bh_say("daemon echoed: %d", n == 5 && !memcmp(buf, "hello", 5));
	BH_CHECK(n == 5 && !memcmp(buf, "hello", 5));
	n = bh_read_all(sv[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	bh_say("daemon says: %s", buf);
	BH_CHECK(!strcmp(buf, "daemon session-leader=1"));
	/* The daemon closed both: EOF on both. */
	bh_ok("EOF from the daemon's TCP end", bh_read_all(sfd, buf, 1));
	close(sv[0]);
	close(sfd);
}

/* The exec'd image: argv = --exec-child <tcp fd> <udp fd> <cloexec fd>.
 * Sockets inherited across execve were never seen by this image's copy of
 * the library. Prints nothing; the exit status says what failed. */
static int exec_child(char **argv)
{
	int tcp = atoi(argv[2]), udp = atoi(argv[3]), gone = atoi(argv[4]);
	int fails = 0, v;
	socklen_t len = sizeof(v);
	char buf[8];
	struct pollfd p = { .fd = tcp, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1 || bh_read_all(tcp, buf, 4) != 4 ||
	    memcmp(buf, "ping", 4))
		fails |= 1;
	if (write(tcp, "pong", 4) != 4)
		fails |= 2;
	if (getsockopt(udp, SOL_SOCKET, SO_TYPE, &v, &len) || v != SOCK_DGRAM)
		fails |= 4;
	if (send(udp, "dgram", 5, 0) != 5)
		fails |= 8;
	if (fcntl(gone, F_GETFD) != -1 || errno != EBADF)
		fails |= 16;
	if (close(tcp) || close(udp))
		fails |= 32;
	return fails;
}

static void test_exec(void)
{
	int cfd, sfd, u1, u2, ce, ce_peer, st;
	struct sockaddr_in a2;
	socklen_t len = sizeof(a2);
	char buf[8], a[3][16];
	pid_t pid;

	bh_say("-- fork + exec with inherited sockets");
	bh_tcp_pair(&cfd, &sfd, 0);
	u1 = bh_udp_bound(0);
	u2 = bh_udp_bound(0);
	getsockname(u2, (struct sockaddr *)&a2, &len);
	connect(u1, (struct sockaddr *)&a2, len);
	bh_tcp_pair(&ce, &ce_peer, SOCK_CLOEXEC);
	snprintf(a[0], sizeof(a[0]), "%d", cfd);
	snprintf(a[1], sizeof(a[1]), "%d", u1);
	snprintf(a[2], sizeof(a[2]), "%d", ce);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sfd);
		close(u2);
		execl("/proc/self/exe", "bh_fork", "--exec-child", a[0], a[1],
		      a[2], (char *)NULL);
		_exit(127);
	}
	close(cfd);
	close(u1);
	bh_ok("write ping to the exec'd process", write(sfd, "ping", 4));
	ssize_t n = bh_read_all(sfd, buf, 4);
	bh_say("pong: %d", n == 4 && !memcmp(buf, "pong", 4));
	BH_CHECK(n == 4 && !memcmp(buf, "pong", 4));
	bh_wait(u2, POLLIN, 5000);
	n = recv(u2, buf, sizeof(buf), MSG_DONTWAIT);
	bh_say("datagram from the exec'd process: %zd", n);
	BH_CHECK(n == 5);
	waitpid(pid, &st, 0);
	bh_say("exec'd process exit %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	BH_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	bh_ok("EOF after it closed", bh_read_all(sfd, buf, 1));
	/* The close-on-exec socket was closed in the child only. */
	bh_ok("close-on-exec socket still works here", write(ce, "x", 1));
	bh_ok("  its peer reads it", bh_read_all(ce_peer, buf, 1));
	close(ce);
	close(ce_peer);
	close(sfd);
	close(u2);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--exec-child"))
		return exec_child(argv);
	bh_start("fork");
	test_exec();
	test_fork_shared();
	test_fork_close_order();
	test_daemon();
	return bh_finish();
}
