/* Signals and blocking calls: a handler without SA_RESTART interrupts
 * blocking recv, accept, send, poll, epoll_wait and select with EINTR; with
 * SA_RESTART the kernel restarts recv and accept (but never poll,
 * epoll_wait, select, nor a recv with SO_RCVTIMEO); ppoll, pselect and
 * epoll_pwait install their signal mask atomically (a pending blocked
 * signal interrupts them at once). An interposer that loops on EINTR or
 * drops the mask changes all of these. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static timer_t timer;

static void on_signal(int sig)
{
	(void)sig;
	handled++;
}

static void set_handler(int restart)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

/* SIGUSR1 to this process in `ms` milliseconds (one shot). */
static void arm(int ms)
{
	struct itimerspec its = { .it_value = { ms / 1000,
						(ms % 1000) * 1000000L } };

	handled = 0;
	timer_settime(timer, 0, &its, NULL);
}

/* poll, epoll_wait and select with no timeout on a socket that stays idle:
 * the signal armed before each ends it with EINTR (never restarted, whatever
 * SA_RESTART says: signal(7)). */
static void multiplexers_interrupted(int sfd)
{
	struct pollfd p = { .fd = sfd, .events = POLLIN };
	arm(30);
	bh_err("poll (infinite)", poll(&p, 1, -1), EINTR);
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	arm(30);
	bh_err("epoll_wait (infinite)", epoll_wait(ep, &ev, 1, -1), EINTR);
	close(ep);
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(sfd, &rd);
	arm(30);
	bh_err("select (infinite)", select(sfd + 1, &rd, NULL, NULL, NULL), EINTR);
}

/* A child that writes `msg` on fd after `ms` milliseconds, then exits. */
static pid_t write_later(int fd, const char *msg, int ms)
{
	fflush(stdout);
	pid_t pid = fork();

	if (pid == 0) {
		usleep((useconds_t)ms * 1000);
		_exit(write(fd, msg, strlen(msg)) == (ssize_t)strlen(msg) ? 0 : 1);
	}
	return pid;
}

static void test_without_restart(void)
{
	int cfd, sfd, lfd;
	char buf[64];

	bh_say("-- handler without SA_RESTART: EINTR");
	set_handler(0);
	bh_tcp_pair(&cfd, &sfd, 0);

	arm(30);
	bh_err("recv (blocking)", recv(sfd, buf, sizeof(buf), 0), EINTR);
	bh_say("  handler ran: %d", handled);
	arm(30);
	bh_err("read (blocking)", read(sfd, buf, sizeof(buf)), EINTR);
	arm(30);
	struct iovec iv = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
	bh_err("recvmsg (blocking)", recvmsg(sfd, &mh, 0), EINTR);

	lfd = bh_listener(0);
	arm(30);
	bh_err("accept (blocking)", accept(lfd, NULL, NULL), EINTR);

	multiplexers_interrupted(sfd);

	/* A full send buffer: a blocking send waits, the signal ends it. */
	int fl = fcntl(cfd, F_GETFL);
	static char big[65536];
	fcntl(cfd, F_SETFL, fl | O_NONBLOCK);
	while (send(cfd, big, sizeof(big), 0) > 0)
		;
	fcntl(cfd, F_SETFL, fl);
	arm(30);
	bh_err("send (blocking, buffer full)", send(cfd, big, 1, 0), EINTR);
	close(cfd);
	close(sfd);
	close(lfd);
}

static void test_with_restart(void)
{
	int cfd, sfd, lfd, st;
	char buf[64];
	pid_t pid;

	bh_say("-- handler with SA_RESTART");
	set_handler(1);
	bh_tcp_pair(&cfd, &sfd, 0);

	/* recv restarts after the handler (30 ms) and gets the data written
	 * later (400 ms: margin for a loaded machine). */
	pid = write_later(cfd, "late", 400);
	arm(30);
	ssize_t n = bh_ok("recv (blocking, restarted)",
			  recv(sfd, buf, sizeof(buf), 0));
	bh_say("  handler ran: %d data ok: %d", handled,
	       n == 4 && !memcmp(buf, "late", 4));
	BH_CHECK(handled == 1 && n == 4);
	waitpid(pid, &st, 0);

	/* accept restarts too. */
	lfd = bh_listener(0);
	struct sockaddr_storage la;
	socklen_t len = sizeof(la);
	getsockname(lfd, (struct sockaddr *)&la, &len);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		usleep(400000);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		_exit(connect(c, (struct sockaddr *)&la, len) ? 1 : 0);
	}
	arm(30);
	int a = bh_okfd("accept (blocking, restarted)", accept(lfd, NULL, NULL));
	bh_say("  handler ran: %d", handled);
	BH_CHECK(handled == 1);
	waitpid(pid, &st, 0);
	close(a);

	/* Never restarted, whatever SA_RESTART says. */
	multiplexers_interrupted(sfd);
	struct timeval tv = { 5, 0 };
	setsockopt(sfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	arm(30);
	bh_err("recv with SO_RCVTIMEO", recv(sfd, buf, sizeof(buf), 0), EINTR);
	close(lfd);
	close(cfd);
	close(sfd);
}

static void test_masks(void)
{
	int cfd, sfd, ep;
	sigset_t block, empty, old;
	struct timespec ts = { 0, 50000000 };

	bh_say("-- atomic signal masks");
	set_handler(0);
	bh_tcp_pair(&cfd, &sfd, 0);
	sigemptyset(&empty);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &old);

	/* SIGUSR1 pending but blocked: calls that keep it blocked time out;
	 * calls whose mask unblocks it are interrupted at once. */
	struct pollfd p = { .fd = sfd, .events = POLLIN };
	handled = 0;
	raise(SIGUSR1);
	bh_ok("ppoll(mask keeps it blocked) times out",
	      ppoll(&p, 1, &ts, &block));
	bh_say("  handler ran: %d", handled);
	BH_CHECK(handled == 0);
	bh_err("ppoll(empty mask) interrupted", ppoll(&p, 1, &ts, &empty),
	       EINTR);
	bh_say("  handler ran: %d", handled);
	BH_CHECK(handled == 1);

	raise(SIGUSR1);
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(sfd, &rd);
	bh_ok("pselect(mask keeps it blocked) times out",
	      pselect(sfd + 1, &rd, NULL, NULL, &ts, &block));
	FD_SET(sfd, &rd);
	bh_err("pselect(empty mask) interrupted",
	       pselect(sfd + 1, &rd, NULL, NULL, &ts, &empty), EINTR);
	bh_say("  handler ran: %d", handled);
	BH_CHECK(handled == 2);

	ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN };
	epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	raise(SIGUSR1);
	bh_ok("epoll_pwait(mask keeps it blocked) times out",
	      epoll_pwait(ep, &ev, 1, 50, &block));
	bh_err("epoll_pwait(empty mask) interrupted",
	       epoll_pwait(ep, &ev, 1, 50, &empty), EINTR);
	raise(SIGUSR1);
	bh_ok("epoll_pwait2(mask keeps it blocked) times out",
	      epoll_pwait2(ep, &ev, 1, &ts, &block));
	bh_err("epoll_pwait2(empty mask) interrupted",
	       epoll_pwait2(ep, &ev, 1, &ts, &empty), EINTR);
	bh_say("  handler ran: %d", handled);
	BH_CHECK(handled == 4);

	/* After the calls, the original mask is back: still blocked. */
	sigset_t now;
	sigprocmask(SIG_BLOCK, NULL, &now);
	bh_say("SIGUSR1 still blocked after the calls: %d",
	       sigismember(&now, SIGUSR1));
	BH_CHECK(sigismember(&now, SIGUSR1) == 1);
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(ep);
	close(cfd);
	close(sfd);
}

int main(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL,
				.sigev_signo = SIGUSR1 };

	bh_start("signal");
	if (timer_create(CLOCK_MONOTONIC, &sev, &timer)) {
		bh_fail(__FILE__, __LINE__, "timer_create");
		return bh_finish();
	}
	test_without_restart();
	test_with_restart();
	test_masks();
	timer_delete(timer);
	return bh_finish();
}
