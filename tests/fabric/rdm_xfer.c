/*
 * rdm_xfer.c - byte-exact bulk transfer over FI_EP_RDM between two processes,
 * for the provider's behaviour tests (fabric_rdm_memif.sh).
 *
 *   rdm_xfer server|client -P oob_port [-n endpoints] [-b total_bytes]
 *            [-s msg_size] [-w window] [-t] [-p provider] [-T timeout_s]
 *            [-S stall_ms] [-H oob_addr]
 *
 * The server and client exchange their endpoint names over a TCP socket on
 * oob_addr:oob_port (default 127.0.0.1; another address for namespaces), then the client streams total_bytes on each of n
 * endpoint pairs (messages of msg_size, w in flight). Content is a function
 * of (endpoint, offset), so the server checks every byte as it lands, and
 * both sides hash the stream: the client sends its hashes, the server
 * compares (exit 0 only if every byte and every hash matched). With -t the
 * messages are tagged (tag = message index) and every receive is posted for
 * one exact tag, in reverse order within a window, so matching is by tag
 * (completions may then come in any order within the window: a message that
 * arrives before its receive is posted waits as unexpected while later ones
 * match; each is checked against its own tag, the stream in order).
 * The server also checks FI_SOURCE: each message's source fi_addr must be
 * the client endpoint paired with the receiving one.
 * -p selects the provider name exactly (default "dpdk": the native RDM
 * endpoint, never "dpdk;ofi_rxd").
 * -S checks progress without the application (fabric_rdm_stall.sh): once a
 * quarter of the messages went through (endpoint 0), the server tops up
 * its receives and then makes no libfabric call for 1.5 x stall_ms; the
 * client fills its window of sends, makes no call for stall_ms, and then
 * requires ONE fi_cq_read per endpoint to return every send of its window. Sends complete only when acknowledged, and with loss some
 * frames need a retransmission: without a provider progress thread running
 * both ends' timers while the applications are away this cannot happen.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#define MAX_EPS 16
#define MAX_WIN 64

struct xep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t peer;
	char name[64];
	size_t namelen;
	uint8_t *buf[MAX_WIN];
	uint64_t slot_tag[MAX_WIN];
	bool landed[MAX_WIN];     /* tagged: completed, waiting for those before it */
	uint64_t posted, done;    /* messages posted / completed in stream order */
	uint64_t bytes;           /* stream offset reached */
	uint64_t hash;
	uint64_t nmsgs;
	int inflight;
};

static struct {
	bool server, tagged;
	int neps, win, timeout_s;
	size_t total, msg;
	unsigned port;
	const char *prov;
	const char *oob_addr;
	int stall_ms;
} opt = { .neps = 1, .win = 8, .timeout_s = 60, .total = 16u << 20, .msg = 1u << 20,
	  .prov = "dpdk", .oob_addr = "127.0.0.1" };

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;

static void die(const char *what, long ret)
{
	fprintf(stderr, "rdm_xfer %s: %s: %ld (%s)\n", opt.server ? "server" : "client", what, ret,
		ret < 0 ? fi_strerror((int)-ret) : "");
	exit(1);
}

static uint64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* Content of stream e at offset off (8-byte blocks of a hash). */
static void gen(int e, uint64_t off, uint8_t *dst, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint64_t o = off + i, w = mix(((uint64_t)e << 48) ^ (o >> 3));
		size_t k = o & 7;
		for (; k < 8 && i < len; k++, i++)
			dst[i] = (uint8_t)(w >> (8 * k));
	}
}

static uint64_t hash_update(uint64_t h, const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* ---------------------------------------------------------------- OOB */

static int oob_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (inet_pton(AF_INET, opt.oob_addr, &sa.sin_addr) != 1)
		die("oob address", -EINVAL);
	if (fd < 0)
		die("socket", -errno);
	if (opt.server) {
		int lfd = fd;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1))
			die("oob bind/listen", -errno);
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		if (fd < 0)
			die("oob accept", -errno);
		return fd;
	}
	for (int i = 0; i < 100; i++) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		usleep(100 * 1000);
	}
	die("oob connect", -errno);
	return -1;
}

static struct xep eps[MAX_EPS];

/* Manual progress: while we wait on the OOB socket the provider must still
 * run, or a peer whose last acks were lost would retransmit into silence
 * and declare us unreachable. */
static void progress_all(void)
{
	struct fi_cq_tagged_entry c;

	for (int e = 0; e < opt.neps; e++)
		if (eps[e].cq)
			(void)fi_cq_read(eps[e].cq, &c, 0);
}

static void xfull(int fd, void *buf, size_t len, bool wr)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n;

		if (!wr) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			if (poll(&pfd, 1, 1) == 0) {
				progress_all();
				continue;
			}
		}
		n = wr ? write(fd, p, len) : read(fd, p, len);
		if (n <= 0)
			die(wr ? "oob write" : "oob read", n < 0 ? -errno : -FI_EIO);
		p += n;
		len -= (size_t)n;
	}
}

/* ---------------------------------------------------------------- setup */

static struct fi_info *pick_info(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *fi;
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_DIRECTED_RECV;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = 0;
	hints->fabric_attr->prov_name = strdup(opt.prov);
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret)
		die("fi_getinfo", ret);
	for (fi = info; fi; fi = fi->next)
		if (!strcmp(fi->fabric_attr->prov_name, opt.prov))
			break;
	if (!fi)
		die("no info with exactly this provider name", -FI_ENODATA);
	fi = fi_dupinfo(fi);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return fi;
}

static void open_all(struct fi_info *fi)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE,
				      .size = 1024 };
	int ret;

	ret = fi_fabric(fi->fabric_attr, &fabric, NULL);
	if (ret)
		die("fi_fabric", ret);
	ret = fi_domain(fabric, fi, &domain, NULL);
	if (ret)
		die("fi_domain", ret);
	ret = fi_av_open(domain, &av_attr, &av, NULL);
	if (ret)
		die("fi_av_open", ret);
	for (int e = 0; e < opt.neps; e++) {
		struct xep *x = &eps[e];
		/* every endpoint gets its own ephemeral UDP port */
		ret = fi_endpoint(domain, fi, &x->ep, NULL);
		if (ret)
			die("fi_endpoint", ret);
		ret = fi_cq_open(domain, &cq_attr, &x->cq, NULL);
		if (ret)
			die("fi_cq_open", ret);
		if ((ret = fi_ep_bind(x->ep, &av->fid, 0)) ||
		    (ret = fi_ep_bind(x->ep, &x->cq->fid, FI_TRANSMIT | FI_RECV)) ||
		    (ret = fi_enable(x->ep)))
			die("bind/enable", ret);
		x->namelen = sizeof(x->name);
		ret = fi_getname(&x->ep->fid, x->name, &x->namelen);
		if (ret)
			die("fi_getname", ret);
		x->nmsgs = (opt.total + opt.msg - 1) / opt.msg;
		x->hash = 0xcbf29ce484222325ull;
		for (int w = 0; w < opt.win; w++) {
			x->buf[w] = malloc(opt.msg);
			if (!x->buf[w])
				die("malloc", -FI_ENOMEM);
		}
	}
}

static void exchange_names(int fd)
{
	char remote[MAX_EPS][64];
	size_t len = eps[0].namelen;

	for (int e = 0; e < opt.neps; e++)
		xfull(fd, eps[e].name, len, true);
	for (int e = 0; e < opt.neps; e++)
		xfull(fd, remote[e], len, false);
	for (int e = 0; e < opt.neps; e++) {
		int ret = fi_av_insert(av, remote[e], 1, &eps[e].peer, 0, NULL);
		if (ret != 1)
			die("fi_av_insert", ret);
	}
}

/* ---------------------------------------------------------------- data */

static size_t msg_len(uint64_t i)
{
	uint64_t off = i * opt.msg;
	return opt.total - off < opt.msg ? opt.total - off : opt.msg;
}

static void post_recvs(int e)
{
	struct xep *x = &eps[e];

	/* tagged: post a whole window in reverse tag order */
	while (x->posted < x->nmsgs && x->posted - x->done < (uint64_t)opt.win) {
		uint64_t first = x->posted, n = (uint64_t)opt.win - (x->posted - x->done);
		if (n > x->nmsgs - first)
			n = x->nmsgs - first;
		for (uint64_t k = n; k-- > 0;) {
			uint64_t i = first + (opt.tagged ? k : n - 1 - k);
			int slot = (int)(i % (uint64_t)opt.win);
			ssize_t ret;

			x->slot_tag[slot] = i;
			do {
				ret = opt.tagged ?
					fi_trecv(x->ep, x->buf[slot], opt.msg, NULL, x->peer, i, 0,
						 (void *)(uintptr_t)(slot + 1)) :
					fi_recv(x->ep, x->buf[slot], opt.msg, NULL, x->peer,
						(void *)(uintptr_t)(slot + 1));
			} while (ret == -FI_EAGAIN);
			if (ret)
				die("fi_recv", ret);
		}
		x->posted += n;
	}
}

static int server_poll(int e, uint64_t *bad)
{
	struct xep *x = &eps[e];
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	ssize_t n = fi_cq_readfrom(x->cq, &c, 1, &src);

	if (n == -FI_EAGAIN)
		return 0;
	if (n < 0) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(x->cq, &err, 0);
		die("server cq error", -err.err);
	}
	int slot = (int)((uintptr_t)c.op_context - 1);
	uint64_t tag = opt.tagged ? c.tag : x->done;

	if (opt.tagged && (x->slot_tag[slot] != tag || tag < x->done ||
			   tag >= x->done + (uint64_t)opt.win || x->landed[slot]))
		die("tag mismatch", (long)c.tag);
	if (!opt.tagged && slot != (int)(x->done % (uint64_t)opt.win))
		die("completion out of order", slot);
	if (c.len != msg_len(tag))
		die("length mismatch", (long)c.len);
	if (src != x->peer)
		die("FI_SOURCE mismatch", (long)src);
	x->landed[slot] = true;
	/* the stream in order: every landed message from done on */
	while (x->done < x->nmsgs && x->landed[x->done % (uint64_t)opt.win]) {
		uint64_t i = x->done;
		size_t want = msg_len(i);
		static uint8_t *expect;

		slot = (int)(i % (uint64_t)opt.win);
		x->landed[slot] = false;
		if (!expect && !(expect = malloc(opt.msg)))
			die("malloc", -FI_ENOMEM);
		gen(e, x->bytes, expect, want);
		if (memcmp(expect, x->buf[slot], want) != 0)
			(*bad)++;
		x->hash = hash_update(x->hash, x->buf[slot], want);
		x->bytes += want;
		x->done++;
	}
	return 1;
}

static void run_server(int fd)
{
	uint64_t deadline = now_s() + (uint64_t)opt.timeout_s, bad = 0;
	int left = opt.neps;

	bool stalled = !opt.stall_ms;

	for (int e = 0; e < opt.neps; e++)
		post_recvs(e);
	while (left > 0) {
		if (!stalled && eps[0].done >= eps[0].nmsgs / 4) {
			struct timespec ts = { .tv_sec = opt.stall_ms * 3 / 2 / 1000,
					       .tv_nsec = (long)(opt.stall_ms * 3 / 2 % 1000) *
							  1000000L };
			stalled = true;
			/* no libfabric call: only the provider's thread acks */
			nanosleep(&ts, NULL);
		}
		left = 0;
		for (int e = 0; e < opt.neps; e++) {
			if (eps[e].done == eps[e].nmsgs)
				continue;
			left++;
			while (server_poll(e, &bad))
				;
			post_recvs(e);
		}
		if (now_s() > deadline)
			die("timeout (bytes stuck)", (long)eps[0].bytes);
	}
	for (int e = 0; e < opt.neps; e++) {
		uint64_t theirs;
		xfull(fd, &theirs, sizeof(theirs), false);
		printf("ep %d: %zu bytes, %llu messages, hash %016llx (client %016llx), %llu bad\n", e,
		       (size_t)eps[e].bytes, (unsigned long long)eps[e].done,
		       (unsigned long long)eps[e].hash, (unsigned long long)theirs,
		       (unsigned long long)bad);
		if (theirs != eps[e].hash || eps[e].bytes != opt.total)
			bad++;
	}
	xfull(fd, &bad, sizeof(bad), true);
	if (bad)
		die("data mismatch", (long)bad);
}

static void client_post(int e)
{
	struct xep *x = &eps[e];

	while (x->posted < x->nmsgs && x->inflight < opt.win) {
		uint64_t i = x->posted;
		int slot = (int)(i % (uint64_t)opt.win);
		size_t len = msg_len(i);
		ssize_t ret;

		gen(e, i * opt.msg, x->buf[slot], len);
		ret = opt.tagged ?
			fi_tsend(x->ep, x->buf[slot], len, NULL, x->peer, i,
				 (void *)(uintptr_t)(slot + 1)) :
			fi_send(x->ep, x->buf[slot], len, NULL, x->peer,
				(void *)(uintptr_t)(slot + 1));
		if (ret == -FI_EAGAIN)
			break;
		if (ret)
			die("fi_send", ret);
		x->hash = hash_update(x->hash, x->buf[slot], len);
		x->posted++;
		x->inflight++;
	}
}

/* -S: see the top comment */
static void client_stall(void)
{
	struct fi_cq_tagged_entry c[MAX_WIN];
	struct timespec ts = { .tv_sec = opt.stall_ms / 1000,
			       .tv_nsec = (long)(opt.stall_ms % 1000) * 1000000L };

	for (int e = 0; e < opt.neps; e++)
		client_post(e);
	nanosleep(&ts, NULL);
	for (int e = 0; e < opt.neps; e++) {
		struct xep *x = &eps[e];
		ssize_t n = fi_cq_read(x->cq, c, (size_t)x->inflight);

		if (n == -FI_EAGAIN)
			n = 0;
		if (n < 0) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(x->cq, &err, 0);
			die("client cq error after the stall", -err.err);
		}
		printf("client ep %d: %zd of %d sends complete after a %d ms stall\n", e, n,
		       x->inflight, opt.stall_ms);
		if (n != x->inflight)
			die("sends did not progress while the application stalled", (long)n);
		x->inflight = 0;
		x->done += (uint64_t)n;
	}
}

static void run_client(int fd)
{
	uint64_t deadline = now_s() + (uint64_t)opt.timeout_s, bad = 0;
	int left = opt.neps;
	bool stalled = !opt.stall_ms;

	while (left > 0) {
		if (!stalled && eps[0].done >= eps[0].nmsgs / 4) {
			stalled = true;
			client_stall();
		}
		left = 0;
		for (int e = 0; e < opt.neps; e++) {
			struct xep *x = &eps[e];
			struct fi_cq_tagged_entry c;
			ssize_t n;

			if (x->done == x->nmsgs)
				continue;
			left++;
			client_post(e);
			while ((n = fi_cq_read(x->cq, &c, 1)) == 1) {
				x->inflight--;
				x->done++;
			}
			if (n < 0 && n != -FI_EAGAIN) {
				struct fi_cq_err_entry err = { 0 };
				fi_cq_readerr(x->cq, &err, 0);
				die("client cq error", -err.err);
			}
		}
		if (now_s() > deadline)
			die("timeout", 0);
	}
	for (int e = 0; e < opt.neps; e++)
		xfull(fd, &eps[e].hash, sizeof(eps[e].hash), true);
	xfull(fd, &bad, sizeof(bad), false);
	printf("client: %d endpoint(s) x %zu bytes sent, server reports %llu bad\n", opt.neps,
	       opt.total, (unsigned long long)bad);
	if (bad)
		exit(1);
}

int main(int argc, char **argv)
{
	struct fi_info *fi;
	int c, fd;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: rdm_xfer server|client -P port [-n eps] [-b bytes] "
				"[-s msg] [-w win] [-t] [-p prov] [-T s] [-S stall_ms]\n");
		return 2;
	}
	opt.server = !strcmp(argv[1], "server");
	optind = 2;
	while ((c = getopt(argc, argv, "P:n:b:s:w:tp:T:S:H:")) != -1) {
		switch (c) {
		case 'P': opt.port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': opt.neps = atoi(optarg); break;
		case 'b': opt.total = strtoull(optarg, NULL, 0); break;
		case 's': opt.msg = strtoull(optarg, NULL, 0); break;
		case 'w': opt.win = atoi(optarg); break;
		case 't': opt.tagged = true; break;
		case 'p': opt.prov = optarg; break;
		case 'T': opt.timeout_s = atoi(optarg); break;
		case 'S': opt.stall_ms = atoi(optarg); break;
		case 'H': opt.oob_addr = optarg; break;
		default: return 2;
		}
	}
	if (!opt.port || opt.neps < 1 || opt.neps > MAX_EPS || opt.win < 1 || opt.win > MAX_WIN ||
	    !opt.msg || !opt.total || opt.stall_ms < 0 || opt.stall_ms > 10000) {
		fprintf(stderr, "rdm_xfer: bad arguments\n");
		return 2;
	}
	fi = pick_info();
	open_all(fi);
	fd = oob_connect();
	exchange_names(fd);
	if (opt.server)
		run_server(fd);
	else
		run_client(fd);
	close(fd);
	for (int e = 0; e < opt.neps; e++) {
		fi_close(&eps[e].ep->fid);
		fi_close(&eps[e].cq->fid);
		for (int w = 0; w < opt.win; w++)
			free(eps[e].buf[w]);
	}
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(fi);
	return 0;
}
