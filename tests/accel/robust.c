/* robust.c - an application that watches what a launcher may change in it.
 *
 *   robust server PORT      accept one connection, echo it to EOF
 *   robust client PORT N    send N bytes in 1 KiB writes, each echo read back
 *
 * Before its first socket it records the CPU affinity of its main thread and
 * of one application thread it starts, and installs its own handlers for
 * SIGINT, SIGTERM, SIGUSR1, SIGPIPE and SIGCHLD. After the connection's bytes
 * have gone both ways it checks that all of these are as it left them, then
 * prints "waiting for signals" and waits (10 s at most) for a SIGUSR1 and a
 * SIGINT sent by the test; their handlers must run on one of the
 * application's two threads (not on a thread a library started). Then the
 * client sends one more byte and reads its echo: the connection still works.
 *
 * Everything it prints on stdout is deterministic (no pids, ports, times),
 * so the test compares stdout byte for byte with a run on the kernel; each
 * line is flushed at once, so a stray write by a library would land between
 * them. Problems go to stderr and make the exit status 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static const int watched[] = {SIGINT, SIGTERM, SIGUSR1, SIGPIPE, SIGCHLD};
#define NWATCHED (sizeof(watched) / sizeof(watched[0]))

static atomic_int got_usr1, got_int;
static atomic_long usr1_tid, int_tid;
static pid_t main_tid, app_tid;
static int failures;

static pid_t my_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&usr1_tid, (long)my_tid());
	atomic_store(&got_usr1, 1);
}

static void on_int(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	atomic_store(&int_tid, (long)my_tid());
	atomic_store(&got_int, 1);
}

static void on_other(int sig)
{
	(void)sig;
}

/* the test's cleanup ends a stuck run with SIGTERM */
static void on_term(int sig)
{
	_exit(128 + sig);
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static void fail(const char *what)
{
	fprintf(stderr, "robust: FAIL: %s\n", what);
	failures++;
}

/* Distinct handlers, flags and masks per signal, so a library that
 * installs its own (or re-installs ours differently) is seen. */
static void install_handlers(struct sigaction *saved)
{
	size_t i;

	for (i = 0; i < NWATCHED; i++) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sigemptyset(&sa.sa_mask);
		switch (watched[i]) {
		case SIGINT:
			sa.sa_sigaction = on_int;
			sa.sa_flags = SA_SIGINFO | SA_RESTART;
			sigaddset(&sa.sa_mask, SIGTERM);
			break;
		case SIGUSR1:
			sa.sa_handler = on_usr1;
			sa.sa_flags = SA_RESTART;
			break;
		case SIGPIPE:
			sa.sa_handler = SIG_IGN;
			break;
		case SIGTERM:
			sa.sa_handler = on_term;
			sa.sa_flags = SA_RESETHAND;
			break;
		default:
			sa.sa_handler = on_other;
			sa.sa_flags = watched[i] == SIGCHLD ? SA_NOCLDSTOP : 0;
			sigaddset(&sa.sa_mask, SIGUSR2);
		}
		if (sigaction(watched[i], &sa, NULL) != 0)
			fail("sigaction");
		sigaction(watched[i], NULL, &saved[i]);
	}
}

static int same_action(const struct sigaction *a, const struct sigaction *b)
{
	int s;

	if (a->sa_handler != b->sa_handler || a->sa_flags != b->sa_flags)
		return 0;
	for (s = 1; s < NSIG; s++)
		if (sigismember(&a->sa_mask, s) != sigismember(&b->sa_mask, s))
			return 0;
	return 1;
}

static void cpus_text(const cpu_set_t *set, char *buf, size_t cap)
{
	size_t off = 0;
	int c;

	buf[0] = '\0';
	for (c = 0; c < CPU_SETSIZE && off + 8 < cap; c++)
		if (CPU_ISSET(c, set))
			off += (size_t)snprintf(buf + off, cap - off, "%s%d", off ? "," : "", c);
}

/* The application's own thread: sleeps on a pipe until the end. */
static int app_pipe[2];
static void *app_thread(void *arg)
{
	char c;

	(void)arg;
	app_tid = my_tid();
	while (read(app_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void check_unchanged(const cpu_set_t *main0, const cpu_set_t *app0,
			    const struct sigaction *saved)
{
	cpu_set_t now;
	char a[256], b[256];
	size_t i;
	int ok = 1;

	if (sched_getaffinity(main_tid, sizeof(now), &now) != 0 || !CPU_EQUAL(&now, main0)) {
		cpus_text(main0, a, sizeof(a));
		cpus_text(&now, b, sizeof(b));
		fprintf(stderr, "robust: main thread affinity %s -> %s\n", a, b);
		fail("main thread affinity changed");
		ok = 0;
	}
	if (sched_getaffinity(app_tid, sizeof(now), &now) != 0 || !CPU_EQUAL(&now, app0)) {
		fail("application thread affinity changed");
		ok = 0;
	}
	out("affinity after the connection: %s\n", ok ? "unchanged" : "CHANGED");
	ok = 1;
	for (i = 0; i < NWATCHED; i++) {
		struct sigaction sa;

		sigaction(watched[i], NULL, &sa);
		if (!same_action(&sa, &saved[i])) {
			fprintf(stderr, "robust: handler of %s changed\n", strsignal(watched[i]));
			fail("signal handler changed");
			ok = 0;
		}
	}
	out("handlers of INT TERM USR1 PIPE CHLD after the connection: %s\n",
	    ok ? "unchanged" : "CHANGED");
}

/* Both signals handled within 10 s, on the application's threads. */
static void wait_signals(void)
{
	struct timespec ts = {0, 10 * 1000 * 1000};
	int i;
	long t1, t2;

	out("waiting for signals\n");
	for (i = 0; i < 1000 && !(atomic_load(&got_usr1) && atomic_load(&got_int)); i++)
		nanosleep(&ts, NULL);
	if (!atomic_load(&got_usr1) || !atomic_load(&got_int)) {
		fail("SIGUSR1 or SIGINT not handled within 10 s");
		out("signals: NOT handled\n");
		return;
	}
	t1 = atomic_load(&usr1_tid);
	t2 = atomic_load(&int_tid);
	if ((t1 != main_tid && t1 != app_tid) || (t2 != main_tid && t2 != app_tid)) {
		fprintf(stderr, "robust: handlers ran on threads %ld, %ld (app: %d, %d)\n",
			t1, t2, (int)main_tid, (int)app_tid);
		fail("a handler ran on a thread the application did not start");
	}
	out("signals: USR1 and INT handled on application threads\n");
}

/* What the launcher may change in the process, recorded before its first
 * socket: compared after the first round by check_unchanged. */
struct before {
	cpu_set_t main0, app0;
	struct sigaction saved[NWATCHED];
};

/* Server: accept one connection, echo it to EOF. 1 when it cannot start. */
static int run_server(const struct sockaddr_in *sin, const struct before *b)
{
	char buf[1024];
	int fd, lfd, one = 1;
	long n;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (const struct sockaddr *)sin, sizeof(*sin)) || listen(lfd, 4)) {
		perror("robust: bind/listen");
		return 1;
	}
	out("listening\n");
	do
		fd = accept(lfd, NULL, NULL);
	while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		perror("robust: accept");
		return 1;
	}
	out("accepted\n");
	/* echo until the client's first pause (it waits for its echo) */
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write_all(fd, buf, (size_t)n))
			break;
		if (buf[n - 1] == '!')
			break; /* the client's last byte of the first round */
	}
	out("echoed the first round\n");
	check_unchanged(&b->main0, &b->app0, b->saved);
	wait_signals();
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || write_all(fd, buf, (size_t)n))
			break;
	}
	out("peer closed\n");
	close(fd);
	close(lfd);
	return 0;
}

/* Client: send want bytes in 1 KiB writes, each echo read back, then one more
 * after the signals. 1 when it cannot start. */
static int run_client(const struct sockaddr_in *sin, long want, const struct before *b)
{
	char buf[1024];
	char *tx, *rx;
	int fd;
	long n;

	if (want < 1)
		want = 1;
	tx = malloc((size_t)want);
	rx = malloc((size_t)want);
	if (!tx || !rx)
		return 1;
	for (n = 0; n < want; n++)
		tx[n] = (char)('a' + n % 26);
	tx[want - 1] = '!';
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (const struct sockaddr *)sin, sizeof(*sin))) {
		perror("robust: connect");
		return 1;
	}
	out("connected\n");
	/* 1 KiB at a time, each echo read before the next write */
	for (n = 0; n < want; n += (long)sizeof(buf)) {
		size_t k = (size_t)(want - n < (long)sizeof(buf) ? want - n : (long)sizeof(buf));

		if (write_all(fd, tx + n, k) || read_all(fd, rx + n, k))
			break;
	}
	if (n < want || memcmp(tx, rx, (size_t)want))
		fail("first round: echo differs");
	out("first round: %ld bytes echoed\n", want);
	check_unchanged(&b->main0, &b->app0, b->saved);
	wait_signals();
	if (write_all(fd, "x", 1) || read_all(fd, buf, 1) || buf[0] != 'x')
		fail("the connection does not work after the signals");
	out("after the signals: the connection works\n");
	close(fd);
	free(tx);
	free(rx);
	return 0;
}

int main(int argc, char **argv)
{
	struct before b;
	struct sockaddr_in sin = {.sin_family = AF_INET};
	pthread_t th;
	char cpus[256];
	int server, i, ret;

	if (argc < 3 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (argv[1][0] == 'c' && argc < 4)) {
		fprintf(stderr, "usage: robust server PORT | client PORT BYTES\n");
		return 2;
	}
	server = argv[1][0] == 's';
	main_tid = my_tid();
	sched_getaffinity(0, sizeof(b.main0), &b.main0);
	cpus_text(&b.main0, cpus, sizeof(cpus));
	out("affinity at launch: %s\n", cpus);
	install_handlers(b.saved);
	if (pipe(app_pipe) != 0 || pthread_create(&th, NULL, app_thread, NULL) != 0)
		return 1;
	for (i = 0; i < 1000 && !app_tid; i++)
		usleep(1000);
	sched_getaffinity(app_tid, sizeof(b.app0), &b.app0);

	sin.sin_port = htons((uint16_t)atoi(argv[2]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ret = server ? run_server(&sin, &b) : run_client(&sin, atol(argv[3]), &b);
	if (ret)
		return ret;
	if (write(app_pipe[1], "", 1) != 1)
		fail("app thread pipe");
	pthread_join(th, NULL);
	out("done\n");
	return failures ? 1 : 0;
}
