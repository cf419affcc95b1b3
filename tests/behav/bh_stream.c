/* TCP stream semantics under churn: both directions at once on a
 * non-blocking pair driven by poll, every write and read API mixed at
 * random sizes (seeded, so both runs make the same choices), MSG_PEEK
 * before some reads, MSG_WAITALL against a trickling writer, and the two
 * ways a connection ends badly: close with unread data and SO_LINGER 0
 * (both reset the peer). Whatever carries the bytes (the kernel, or a
 * fabric once libfabsock accelerates), the app must see exactly this. */
#include "config.h"
#include "bh.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

enum { TOTAL = 2 << 20, MAXOP = 70000 };

/* xorshift: the same sequence of choices in both runs. */
static uint32_t rng_state = 2463534242u;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

struct dir {
	int wfd, rfd;		/* writer end, reader end */
	size_t sent, got;
	uint64_t sum_sent, sum_got;
	int peek_mismatch;
};

/* One write of a random size through a random API; returns bytes or -1. */
static ssize_t some_write(struct dir *d, char *buf)
{
	size_t len = 1 + rnd() % MAXOP;
	ssize_t n;

	if (len > TOTAL - d->sent)
		len = TOTAL - d->sent;
	bh_fill(buf, len, 99, d->sent);
	switch (rnd() % 4) {
	case 0:
		n = write(d->wfd, buf, len);
		break;
	case 1:
		n = send(d->wfd, buf, len, MSG_NOSIGNAL);
		break;
	case 2: {
		size_t half = len / 2;
		struct iovec iv[3] = { { buf, half }, { buf, 0 },
				       { buf + half, len - half } };
		n = writev(d->wfd, iv, 3);
		break;
	}
	default: {
		struct iovec iv = { buf, len };
		struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
		n = sendmsg(d->wfd, &mh, MSG_NOSIGNAL);
		break;
	}
	}
	if (n > 0) {
		d->sum_sent = bh_sum(d->sum_sent, buf, (size_t)n);
		d->sent += (size_t)n;
	}
	return n;
}

/* One read of a random size through a random API, sometimes peeking
 * first (the peeked bytes must be the ones then read). */
static ssize_t some_read(struct dir *d, char *buf, char *peek)
{
	size_t len = 1 + rnd() % MAXOP;
	ssize_t n, p = -1;

	if (rnd() % 5 == 0)
		p = recv(d->rfd, peek, len, MSG_PEEK);
	switch (rnd() % 4) {
	case 0:
		n = read(d->rfd, buf, len);
		break;
	case 1:
		n = recv(d->rfd, buf, len, 0);
		break;
	case 2: {
		size_t third = len / 3;
		struct iovec iv[2] = { { buf, third }, { buf + third, len - third } };
		n = readv(d->rfd, iv, 2);
		break;
	}
	default: {
		struct iovec iv = { buf, len };
		struct msghdr mh = { .msg_iov = &iv, .msg_iovlen = 1 };
		n = recvmsg(d->rfd, &mh, 0);
		break;
	}
	}
	if (n > 0) {
		/* A read never returns fewer bytes than a preceding peek saw. */
		if (p > 0 && (n < p || memcmp(peek, buf, (size_t)p)))
			d->peek_mismatch++;
		d->sum_got = bh_sum(d->sum_got, buf, (size_t)n);
		d->got += (size_t)n;
	}
	return n;
}

/* connect_nonblocking: the pair is made with a non-blocking connect
 * (EINPROGRESS), else with a blocking one and O_NONBLOCK set afterwards;
 * an interposer may treat the two differently. */
static void test_bidirectional(int connect_nonblocking)
{
	static char wbuf[MAXOP], rbuf[MAXOP], pbuf[MAXOP];
	struct dir d[2];
	int cfd, sfd, rounds = 0;

	bh_say("-- both directions at once, mixed APIs, random sizes (%s connect)",
	       connect_nonblocking ? "non-blocking" : "blocking");
	bh_tcp_pair(&cfd, &sfd, connect_nonblocking ? SOCK_NONBLOCK : 0);
	fcntl(cfd, F_SETFL, O_NONBLOCK);
	fcntl(sfd, F_SETFL, O_NONBLOCK);
	d[0] = (struct dir){ .wfd = cfd, .rfd = sfd, .sum_sent = BH_SUM_INIT,
			     .sum_got = BH_SUM_INIT };
	d[1] = (struct dir){ .wfd = sfd, .rfd = cfd, .sum_sent = BH_SUM_INIT,
			     .sum_got = BH_SUM_INIT };
	while ((d[0].got < TOTAL || d[1].got < TOTAL) && rounds < 1000000) {
		struct pollfd p[2] = { { .fd = cfd }, { .fd = sfd } };

		rounds++;
		for (int i = 0; i < 2; i++) {
			if (d[i].sent < TOTAL)
				p[i].events |= POLLOUT;	/* i's writer end */
			if (d[1 - i].got < TOTAL)
				p[i].events |= POLLIN;	/* the other's reader */
		}
		if (poll(p, 2, 5000) <= 0)
			break;
		for (int i = 0; i < 2; i++) {
			if ((p[i].revents & POLLOUT) && d[i].sent < TOTAL)
				some_write(&d[i], wbuf);
			if ((p[i].revents & POLLIN) && d[1 - i].got < TOTAL)
				some_read(&d[1 - i], rbuf, pbuf);
		}
	}
	for (int i = 0; i < 2; i++) {
		bh_say("%s: sent %zu got %zu checksum %s, peek mismatches %d",
		       i ? "server->client" : "client->server", d[i].sent,
		       d[i].got, d[i].sum_got == d[i].sum_sent ? "match" :
		       "MISMATCH", d[i].peek_mismatch);
		BH_CHECK(d[i].sent == TOTAL && d[i].got == TOTAL &&
			 d[i].sum_got == d[i].sum_sent &&
			 d[i].peek_mismatch == 0);
	}
	/* Both ends idle now: nothing more to read. */
	bh_err("client read (drained)", read(cfd, rbuf, 1), EAGAIN);
	bh_err("server read (drained)", read(sfd, rbuf, 1), EAGAIN);
	close(cfd);
	close(sfd);
}

static void test_waitall(void)
{
	enum { CHUNK = 997, CHUNKS = 100 };
	static char buf[CHUNK * CHUNKS], want[CHUNK * CHUNKS];
	int cfd, sfd, st;
	pid_t pid;

	bh_say("-- MSG_WAITALL against a trickling writer");
	bh_tcp_pair(&cfd, &sfd, 0);
	bh_fill(want, sizeof(want), 5, 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (int i = 0; i < CHUNKS; i++) {
			if (write(cfd, want + i * CHUNK, CHUNK) != CHUNK)
				_exit(1);
			if (i % 10 == 0)
				usleep(2000);
		}
		_exit(0);
	}
	ssize_t n = bh_ok("recv(99700, MSG_WAITALL)",
			  recv(sfd, buf, sizeof(buf), MSG_WAITALL));
	bh_say("  bytes match: %d", n == (ssize_t)sizeof(buf) &&
	       !memcmp(buf, want, sizeof(buf)));
	BH_CHECK(n == (ssize_t)sizeof(buf) && !memcmp(buf, want, sizeof(buf)));
	waitpid(pid, &st, 0);
	/* MSG_WAITALL stops early at EOF with what there was. */
	write(cfd, "tail", 4);
	shutdown(cfd, SHUT_WR);
	n = bh_ok("recv(100, MSG_WAITALL) then EOF",
		  recv(sfd, buf, 100, MSG_WAITALL));
	BH_CHECK(n == 4);
	close(cfd);
	close(sfd);
}

static void test_resets(void)
{
	char buf[64];
	int cfd, sfd, rev;

	bh_say("-- connections that end with a reset");
	/* close() with unread data sends RST instead of FIN. */
	bh_tcp_pair(&cfd, &sfd, 0);
	write(cfd, "unread", 6);
	bh_wait(sfd, POLLIN, 5000);
	bh_ok("close(server) with 6 unread bytes", close(sfd));
	rev = bh_wait(cfd, POLLIN, 5000);
	bh_say("client poll: IN %d ERR %d HUP %d", !!(rev & POLLIN),
	       !!(rev & POLLERR), !!(rev & POLLHUP));
	bh_err("client read", read(cfd, buf, sizeof(buf)), ECONNRESET);
	bh_ok("client read again: EOF", read(cfd, buf, sizeof(buf)));
	bh_err("client write", send(cfd, "x", 1, MSG_NOSIGNAL), EPIPE);
	close(cfd);

	/* SO_LINGER {1, 0}: abortive close. */
	bh_tcp_pair(&cfd, &sfd, 0);
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	write(sfd, "to-client", 9);
	bh_ok("close(client) with SO_LINGER 0", close(cfd));
	rev = bh_wait(sfd, POLLIN, 5000);
	bh_say("server poll: IN %d ERR %d HUP %d", !!(rev & POLLIN),
	       !!(rev & POLLERR), !!(rev & POLLHUP));
	int err = 0;
	socklen_t len = sizeof(err);
	bh_ok("getsockopt(SO_ERROR)", getsockopt(sfd, SOL_SOCKET, SO_ERROR,
						 &err, &len));
	bh_say("  so_error = %s", bh_errname(err));
	BH_CHECK(err == ECONNRESET);
	bh_ok("server read after the error was taken: EOF",
	      read(sfd, buf, sizeof(buf)));
	close(sfd);
}

int main(void)
{
	bh_start("stream");
	test_bidirectional(1);
	test_bidirectional(0);
	test_waitall();
	test_resets();
	return bh_finish();
}
