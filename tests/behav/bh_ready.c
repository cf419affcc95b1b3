/* Readiness and error semantics that must match the kernel's exactly:
 *  - shutdown(SHUT_RD): poll says POLLIN|POLLRDHUP, queued data stays
 *    readable, data arriving later is readable (then EOF again);
 *  - an epoll fd holding a connected socket, seen by poll, select and an
 *    outer epoll set: readable exactly while its ready list is not empty;
 *  - a nested epoll set reports in the inner epoll_wait what the outer one
 *    reported;
 *  - EPOLLET on a connection whose peer is a plain kernel server (under the
 *    launcher, ready.sh makes 127.0.0.2 a kernel server: the connection falls
 *    back): one event per arrival, none after a partial read (repeated);
 *  - a writer whose peer process was killed with unread data gets
 *    ECONNRESET, then EPIPE (repeated).
 * Events are printed by name, never by fd. */
#include "config.h"
#include "bh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ET_ROUNDS = 24, KILL_ROUNDS = 8 };

static const char *pev(short ev)
{
	static char s[64];

	snprintf(s, sizeof(s), "%s%s%s%s%s%s", ev & POLLIN ? "IN " : "", ev & POLLOUT ? "OUT " : "",
		 ev & POLLRDHUP ? "RDHUP " : "", ev & POLLHUP ? "HUP " : "",
		 ev & POLLERR ? "ERR " : "", ev & POLLNVAL ? "NVAL " : "");
	if (!s[0])
		strcpy(s, "- ");
	s[strlen(s) - 1] = '\0';
	return s;
}

static short poll1(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L };

	nanosleep(&ts, NULL);
}

/* A read that returns what arrives within ~2 s on a socket whose POLLIN is
 * always set (read shut down): retry while it says 0. */
static ssize_t read_arriving(int fd, char *buf, size_t len)
{
	ssize_t n = 0;

	for (int i = 0; i < 400 && n == 0; i++) {
		n = recv(fd, buf, len, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == EAGAIN)) {
			n = 0;
			sleep_ms(5);
		}
	}
	return n;
}

/* Data written by another thread while the caller sleeps (late data). */
struct late {
	pthread_t thread;
	int fd;
	const char *data;
};

static void *late_writer(void *arg)
{
	struct late *l = arg;

	sleep_ms(50);
	if (write(l->fd, l->data, strlen(l->data)) < 0)
		perror("late write");
	return NULL;
}

static void late_start(struct late *l, int fd, const char *data)
{
	l->fd = fd;
	l->data = data;
	if (pthread_create(&l->thread, NULL, late_writer, l)) {
		perror("pthread_create");
		_exit(2);
	}
}

static void shut_rd(void)
{
	int c, s;
	char buf[64];

	bh_say("-- shutdown(SHUT_RD)");
	bh_tcp_pair(&c, &s, 0);
	bh_ok("client write abc", write(c, "abc", 3));
	bh_say("server poll before = %s", pev(poll1(s, POLLIN | POLLOUT | POLLRDHUP, 2000)));
	bh_ok("server shutdown(SHUT_RD)", shutdown(s, SHUT_RD));
	bh_say("server poll after = %s", pev(poll1(s, POLLIN | POLLOUT | POLLRDHUP, 0)));
	BH_CHECK(bh_ok("server read queued", read(s, buf, sizeof(buf))) == 3);
	bh_ok("server read at end", read(s, buf, sizeof(buf)));
	bh_say("server poll at end = %s", pev(poll1(s, POLLIN | POLLOUT | POLLRDHUP, 0)));
	bh_ok("client write later", write(c, "later", 5));
	ssize_t n = bh_ok("server read later", read_arriving(s, buf, sizeof(buf)));
	BH_CHECK(n == 5 && memcmp(buf, "later", 5) == 0);
	bh_ok("server read at end again", read(s, buf, sizeof(buf)));
	bh_ok("server shutdown(SHUT_WR)", shutdown(s, SHUT_WR));
	bh_say("server poll shut both = %s", pev(poll1(s, POLLIN | POLLOUT | POLLRDHUP, 0)));
	close(c);
	close(s);
}

/* E (epoll with the server socket) as seen by poll, select and an outer epoll
 * set O that holds E (added before or after the socket, per `outer_first`). */
static void epoll_fd_ready(int outer_first)
{
	int c, s;
	char buf[16];
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 7 }, out[4];

	bh_say("-- poll/select on an epoll fd (outer set added %s)",
	       outer_first ? "first" : "last");
	bh_tcp_pair(&c, &s, 0);
	int e = bh_okfd("epoll_create1", epoll_create1(0));
	int o = bh_okfd("outer epoll_create1", epoll_create1(0));
	struct epoll_event oev = { .events = EPOLLIN, .data.u64 = 9 };
	if (outer_first)
		bh_ok("outer add E", epoll_ctl(o, EPOLL_CTL_ADD, e, &oev));
	bh_ok("E add server", epoll_ctl(e, EPOLL_CTL_ADD, s, &ev));
	if (!outer_first)
		bh_ok("outer add E", epoll_ctl(o, EPOLL_CTL_ADD, e, &oev));
	bh_say("poll E before data = %s", pev(poll1(e, POLLIN, 0)));
	bh_show("outer wait before data", epoll_wait(o, out, 4, 0));
	bh_ok("client write", write(c, "hello", 5));
	bh_say("poll E after data = %s", pev(poll1(e, POLLIN, 2000)));
	fd_set r;
	FD_ZERO(&r);
	FD_SET(e, &r);
	struct timeval tv = { .tv_sec = 2 };
	bh_show("select E after data", select(e + 1, &r, NULL, NULL, &tv));
	bh_say("select E is set = %d", FD_ISSET(e, &r) ? 1 : 0);
	int n = bh_show("outer wait after data", epoll_wait(o, out, 4, 2000));
	if (n == 1)
		bh_say("  outer cookie %llu", (unsigned long long)out[0].data.u64);
	bh_show("E wait after data", epoll_wait(e, out, 4, 0));
	BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 5);
	bh_say("poll E after read = %s", pev(poll1(e, POLLIN, 0)));
	bh_show("outer wait after read", epoll_wait(o, out, 4, 0));
	bh_show("E wait after read", epoll_wait(e, out, 4, 0));
	struct late l;
	late_start(&l, c, "late");
	bh_say("poll E while data arrives = %s", pev(poll1(e, POLLIN, 1500)));
	pthread_join(l.thread, NULL);
	BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 4);
	late_start(&l, c, "later");
	FD_ZERO(&r);
	FD_SET(e, &r);
	tv.tv_sec = 1;
	tv.tv_usec = 500000;
	bh_show("select E while data arrives", select(e + 1, &r, NULL, NULL, &tv));
	pthread_join(l.thread, NULL);
	BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 5);
	late_start(&l, c, "latest");
	n = bh_show("outer wait while data arrives", epoll_wait(o, out, 4, 1500));
	if (n == 1)
		bh_say("  outer cookie %llu", (unsigned long long)out[0].data.u64);
	pthread_join(l.thread, NULL);
	bh_show("E wait after it", epoll_wait(e, out, 4, 0));
	BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 6);
	close(o);
	close(e);
	close(c);
	close(s);
}

/* Outer set O holds inner set I, which holds the server socket: after O
 * reports I, I itself must report the socket. Repeated: it must hold on the
 * first arrival and on later ones. */
static void nested(void)
{
	int c, s;
	char buf[16];
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 5 }, out[4];

	bh_say("-- nested epoll sets");
	bh_tcp_pair(&c, &s, 0);
	int o = bh_okfd("outer epoll_create1", epoll_create1(0));
	int i = bh_okfd("inner epoll_create1", epoll_create1(0));
	bh_ok("inner add server", epoll_ctl(i, EPOLL_CTL_ADD, s, &ev));
	struct epoll_event oev = { .events = EPOLLIN, .data.u64 = 6 };
	bh_ok("outer add inner", epoll_ctl(o, EPOLL_CTL_ADD, i, &oev));
	for (int round = 0; round < 3; round++) {
		bh_say("round %d", round);
		bh_show("outer wait before data", epoll_wait(o, out, 4, 0));
		bh_ok("client write", write(c, "ping", 4));
		int n = bh_show("outer wait", epoll_wait(o, out, 4, 2000));
		if (n == 1)
			bh_say("  outer cookie %llu", (unsigned long long)out[0].data.u64);
		n = bh_show("inner wait", epoll_wait(i, out, 4, 0));
		if (n == 1)
			bh_say("  inner cookie %llu", (unsigned long long)out[0].data.u64);
		BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 4);
		bh_show("inner wait after read", epoll_wait(i, out, 4, 0));
	}
	struct late l;
	late_start(&l, c, "late");
	int n = bh_show("outer wait while data arrives", epoll_wait(o, out, 4, 1500));
	if (n == 1)
		bh_say("  outer cookie %llu", (unsigned long long)out[0].data.u64);
	pthread_join(l.thread, NULL);
	n = bh_show("inner wait", epoll_wait(i, out, 4, 0));
	if (n == 1)
		bh_say("  inner cookie %llu", (unsigned long long)out[0].data.u64);
	BH_CHECK(bh_ok("server read", read(s, buf, sizeof(buf))) == 4);
	close(o);
	close(i);
	close(c);
	close(s);
}

/* A connection from a client to a server listening on 127.0.0.2 (plain
 * kernel under ready.sh's rules: the client falls back). */
static void fallback_pair(int *client, int *server)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = inet_addr("127.0.0.2");
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		perror("fallback listener");
		_exit(2);
	}
	*client = socket(AF_INET, SOCK_STREAM, 0);
	if (*client < 0 || connect(*client, (struct sockaddr *)&a, sizeof(a))) {
		perror("fallback connect");
		_exit(2);
	}
	*server = accept(l, NULL, NULL);
	if (*server < 0) {
		perror("fallback accept");
		_exit(2);
	}
	close(l);
}

/* EPOLLET: the socket joins the set before the peer's first bytes; one event
 * for them, none after a partial read, one for the next arrival. */
static void et_fallback(void)
{
	struct epoll_event out[4];
	char buf[64];
	int events_first = 0, spurious = 0, events_next = 0, bytes = 0;

	bh_say("-- EPOLLET after a partial read (peer is a kernel server), %d rounds", ET_ROUNDS);
	for (int round = 0; round < ET_ROUNDS; round++) {
		int c, s;
		fallback_pair(&c, &s);
		int e = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = 3 };
		epoll_ctl(e, EPOLL_CTL_ADD, c, &ev);
		write(s, "0123456789abcdefghij", 20);
		if (epoll_wait(e, out, 4, 2000) == 1)
			events_first++;
		ssize_t n = read(c, buf, 5);
		bytes += n > 0 ? (int)n : 0;
		if (epoll_wait(e, out, 4, 0) != 0)
			spurious++;
		n = read(c, buf, 5);
		bytes += n > 0 ? (int)n : 0;
		if (epoll_wait(e, out, 4, 20) != 0)
			spurious++;
		write(s, "x", 1);
		if (epoll_wait(e, out, 4, 2000) == 1)
			events_next++;
		if (epoll_wait(e, out, 4, 0) != 0)
			spurious++;
		close(e);
		close(c);
		close(s);
	}
	bh_say("first arrival reported in %d rounds, next arrival in %d, spurious events %d, "
	       "bytes read %d", events_first, events_next, spurious, bytes);
	BH_CHECK(events_first == ET_ROUNDS && events_next == ET_ROUNDS && spurious == 0);
}

/* The server process is killed while data it has not read is queued: the
 * client's writes fail with ECONNRESET, then EPIPE. The kernel fails the
 * first write after the kill (the RST is back at once); a writer on the
 * fabric learns of the death when it must wait (the peer's window full), so
 * each round writes until an error, bounded. Odd write sizes make the write
 * that fills the window a partial one (the error belongs to the next). */
static void killed_peer(void)
{
	static char buf[100000];
	int econnreset = 0, epipe_after = 0, other = 0;

	bh_say("-- writer whose peer was killed with unread data, %d rounds", KILL_ROUNDS);
	memset(buf, 'k', sizeof(buf));
	signal(SIGPIPE, SIG_IGN);
	for (int round = 0; round < KILL_ROUNDS; round++) {
		size_t size = round % 2 ? sizeof(buf) : 1000;
		int l = bh_listener(0);
		struct sockaddr_in a;
		socklen_t len = sizeof(a);
		getsockname(l, (struct sockaddr *)&a, &len);
		pid_t pid = fork();
		if (pid == 0) {
			int s = accept(l, NULL, NULL);
			char b;
			/* "r" sent, one byte read (the connection is in use), the
			 * rest left unread until the kill */
			if (s >= 0 && write(s, "r", 1) == 1 && read(s, &b, 1) == 1)
				pause();
			_exit(1);
		}
		close(l);
		int c = socket(AF_INET, SOCK_STREAM, 0);
		char r;
		if (pid < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)) ||
		    read(c, &r, 1) != 1 || write(c, "g", 1) != 1 ||
		    write(c, buf, 256) != 256) {
			perror("killed peer setup");
			_exit(2);
		}
		sleep_ms(20); /* the unread bytes reach the server */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		int first = 0, second = 0;
		size_t total = 0;
		while (!first && total < (64u << 20)) {
			ssize_t n = write(c, buf, size);
			if (n < 0)
				first = errno;
			else
				total += (size_t)n;
		}
		if (write(c, buf, size) < 0)
			second = errno;
		if (first == ECONNRESET)
			econnreset++;
		else if (++other == 1)
			bh_say("round %d: first error %s", round, bh_errname(first));
		if (second == EPIPE)
			epipe_after++;
		close(c);
	}
	bh_say("first error ECONNRESET in %d rounds (other %d), then EPIPE in %d", econnreset,
	       other, epipe_after);
	BH_CHECK(econnreset == KILL_ROUNDS && epipe_after == KILL_ROUNDS);
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : "";

	bh_start("ready");
	if (!*only || !strcmp(only, "a"))
		shut_rd();
	if (!*only || !strcmp(only, "b")) {
		epoll_fd_ready(0);
		epoll_fd_ready(1);
	}
	if (!*only || !strcmp(only, "c"))
		nested();
	if (!*only || !strcmp(only, "d"))
		et_fallback();
	if (!*only || !strcmp(only, "e"))
		killed_peer();
	return bh_finish();
}
