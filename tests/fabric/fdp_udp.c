/* fdp_udp: a libfabric program (public API only) on the dpdk provider's
 * raw UDP endpoint (FI_EP_DGRAM, FI_PROTO_UDP), driven line by line on
 * stdin by fabric_udp.py, which runs the kernel peer. Two endpoints, on the
 * UDP ports given as arguments, share an AV, an EQ and nothing else.
 *
 * Commands (E = endpoint 0 or 1; every reply is one line on stdout):
 *   recv E N MS ECHO   post buffers ("posted K"), take N datagrams within
 *                      MS ms (E 2: N on each endpoint); per datagram
 *                      "rx E LEN HASH IP PORT" (the source, from the
 *                      AV or, for an unknown one, from FI_SOURCE_ERR's
 *                      err_data, then "unknown IP PORT" first); ECHO 1
 *                      sends each back to its source; ends "done K0 K1".
 *   trunc E SIZE MS    one buffer of SIZE bytes ("posted 1"), then
 *                      "trunc ERR LEN OLEN".
 *   send E IP PORT LEN SEED   "sent RET"
 *   big E IP PORT      send the largest datagram and one byte more:
 *                      "big MAX RET_MAX RET_OVER"
 *   join E GROUP PORT  fi_join, FI_JOIN_COMPLETE read from the EQ: "joined"
 *   mcsend E LEN SEED  fi_send to fi_mc_addr: "sent RET"
 *   leave E            fi_close of the membership: "left"
 *   quit
 * Payload bytes: an LCG (seed), hash: FNV-1a 64, as fabric_udp.py. */
#include "config.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define NPOST 32
#define BUF_SIZE 9216

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_eq *eq;
static struct fid_ep *ep[2];
static struct fid_cq *cq[2];
static struct fid_mc *mc[2];
static size_t max_msg;
static uint8_t bufs[NPOST][BUF_SIZE];
static uint8_t out[BUF_SIZE];

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed;

	for (size_t i = 0; i < len; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(x >> 56);
	}
}

static uint64_t fnv(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void die(const char *what, int ret)
{
	printf("error %s: %s\n", what, fi_strerror(ret < 0 ? -ret : ret));
	fflush(stdout);
	exit(1);
}

static fi_addr_t peer(const char *ip, unsigned int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	fi_addr_t a = FI_ADDR_NOTAVAIL;

	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1 || fi_av_insert(av, &sa, 1, &a, 0, NULL) != 1)
		die("fi_av_insert", -FI_EINVAL);
	return a;
}

static ssize_t send_wait(int e, const void *buf, size_t len, fi_addr_t dest)
{
	struct fi_cq_msg_entry ce;
	uint64_t end = now_ms() + 5000;
	ssize_t ret;

	do {
		ret = fi_send(ep[e], buf, len, NULL, dest, out);
		if (ret == -FI_EAGAIN)
			(void)fi_cq_read(cq[e], &ce, 0);
	} while (ret == -FI_EAGAIN && now_ms() < end);
	return ret;
}

static void open_ep(struct fi_info *info, int e, unsigned int port)
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_MSG, .size = 1024};
	struct sockaddr_in *sa = info->src_addr, name;
	size_t len = sizeof(name);
	int ret;

	sa->sin_port = htons((uint16_t)port);
	ret = fi_endpoint(domain, info, &ep[e], NULL);
	if (ret)
		die("fi_endpoint", ret);
	ret = fi_cq_open(domain, &cqa, &cq[e], NULL);
	if (!ret)
		ret = fi_ep_bind(ep[e], &cq[e]->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_ep_bind(ep[e], &av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(ep[e], &eq->fid, 0);
	if (!ret)
		ret = fi_enable(ep[e]);
	if (!ret)
		ret = fi_getname(&ep[e]->fid, &name, &len);
	if (ret)
		die("endpoint set-up", ret);
	if (ntohs(name.sin_port) != port)
		die("fi_getname: not the requested port", -FI_EINVAL);
}

static void setup(unsigned int port0, unsigned int port1)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	char ip[INET_ADDRSTRLEN];
	int ret;

	if (!hints)
		die("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->ep_attr->protocol = FI_PROTO_UDP;
	hints->caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_SOURCE_ERR | FI_MULTICAST;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->fabric_attr->prov_name = strdup("dpdk");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret)
		die("fi_getinfo", ret);
	if (info->ep_attr->protocol != FI_PROTO_UDP || !(info->caps & FI_SOURCE_ERR) ||
	    !(info->caps & FI_MULTICAST) || info->addr_format != FI_SOCKADDR_IN)
		die("fi_getinfo: not the raw UDP endpoint asked for", -FI_ENODATA);
	max_msg = info->ep_attr->max_msg_size;
	ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (!ret)
		ret = fi_av_open(domain, &ava, &av, NULL);
	if (!ret)
		ret = fi_eq_open(fabric, &eqa, &eq, NULL);
	if (ret)
		die("fabric/domain/av/eq", ret);
	open_ep(info, 0, port0);
	open_ep(info, 1, port1);
	inet_ntop(AF_INET, &((struct sockaddr_in *)info->src_addr)->sin_addr, ip, sizeof(ip));
	printf("ready %s %u %u %zu\n", ip, port0, port1, max_msg);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void print_addr(const char *what, const struct sockaddr_in *sa)
{
	char ip[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof(ip));
	printf("%s %s %u", what, ip, ntohs(sa->sin_port));
}

/* Cancel what is still posted and take the cancellations (bounded). */
static void unpost(int e, int posted)
{
	struct fi_cq_msg_entry ce;
	struct fi_cq_err_entry err;
	uint64_t end = now_ms() + 2000;

	for (int i = 0; i < NPOST; i++)
		if (fi_cancel(&ep[e]->fid, bufs[i]) == 0)
			continue;
	while (posted > 0 && now_ms() < end) {
		ssize_t n = fi_cq_read(cq[e], &ce, 1);

		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(cq[e], &err, 0) == 1 && err.err == FI_ECANCELED)
				posted--;
		} else if (n == 1 && (ce.flags & FI_RECV)) {
			posted--;
		}
	}
}

/* One receive completion (or error) into a line; returns 1 for a datagram. */
static int take(int e, int echo, int *posted)
{
	struct fi_cq_msg_entry ce;
	struct fi_cq_err_entry err;
	struct sockaddr_in src;
	fi_addr_t from = FI_ADDR_NOTAVAIL;
	size_t len;
	ssize_t n = fi_cq_readfrom(cq[e], &ce, 1, &from);

	if (n == -FI_EAGAIN || (n == 1 && !(ce.flags & FI_RECV)))
		return 0;
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		err.err_data = &src;
		err.err_data_size = sizeof(src);
		if (fi_cq_readerr(cq[e], &err, 0) != 1)
			return 0;
		if (err.err != FI_EADDRNOTAVAIL || err.err_data_size != sizeof(src) ||
		    !(err.flags & FI_RECV)) {
			printf("cqerr %d %s\n", err.err, fi_strerror(err.err));
			return 0;
		}
		print_addr("unknown", &src);
		printf("\n");
		if (fi_av_insert(av, &src, 1, &from, 0, NULL) != 1)
			die("fi_av_insert of the unknown source", -FI_EINVAL);
		ce.op_context = err.op_context;
		ce.len = err.len;
	} else if (n != 1) {
		die("fi_cq_readfrom", (int)n);
	}
	(*posted)--;
	len = ce.len;
	memset(&src, 0, sizeof(src));
	{
		size_t alen = sizeof(src);

		if (from == FI_ADDR_NOTAVAIL || fi_av_lookup(av, from, &src, &alen))
			die("no source address", -FI_EADDRNOTAVAIL);
	}
	printf("rx %d %zu %016" PRIx64, e, len, fnv(ce.op_context, len));
	print_addr("", &src);
	printf("\n");
	if (echo) {
		memcpy(out, ce.op_context, len);
		if (send_wait(e, out, len, from))
			die("echo fi_send", -FI_EIO);
	}
	if (fi_recv(ep[e], ce.op_context, BUF_SIZE, NULL, FI_ADDR_UNSPEC, ce.op_context) == 0)
		(*posted)++;
	return 1;
}

/* E 2: both endpoints, each wanting count datagrams (buffers split). */
static void cmd_recv(unsigned int which, int count, unsigned int ms, int echo)
{
	uint64_t end = now_ms() + ms;
	int got[2] = {0, 0}, posted[2] = {0, 0};
	int first = which == 2 ? 0 : (int)which, last = which == 2 ? 1 : (int)which;

	for (int i = 0; i < NPOST; i++) {
		int e = which == 2 ? i % 2 : (int)which;

		if (fi_recv(ep[e], bufs[i], BUF_SIZE, NULL, FI_ADDR_UNSPEC, bufs[i]) == 0)
			posted[e]++;
	}
	printf("posted %d\n", posted[0] + posted[1]);
	fflush(stdout);
	while ((got[first] < count || got[last] < count) && now_ms() < end)
		for (int e = first; e <= last; e++)
			got[e] += take(e, echo, &posted[e]);
	for (int e = first; e <= last; e++)
		unpost(e, posted[e]);
	printf("done %d %d\n", got[first], got[last]);
}

static void cmd_trunc(int e, size_t size, unsigned int ms)
{
	struct fi_cq_msg_entry ce;
	struct fi_cq_err_entry err;
	uint64_t end = now_ms() + ms;
	ssize_t n = -FI_EAGAIN;

	if (size > BUF_SIZE || fi_recv(ep[e], bufs[0], size, NULL, FI_ADDR_UNSPEC, bufs[0]))
		die("fi_recv", -FI_EINVAL);
	printf("posted 1\n");
	fflush(stdout);
	while (now_ms() < end && ((n = fi_cq_read(cq[e], &ce, 1)) == -FI_EAGAIN ||
				  (n == 1 && !(ce.flags & FI_RECV))))
		;
	if (n != -FI_EAVAIL) {
		printf("trunc none %zd\n", n);
		unpost(e, 1);
		return;
	}
	memset(&err, 0, sizeof(err));
	if (fi_cq_readerr(cq[e], &err, 0) != 1)
		die("fi_cq_readerr", -FI_EIO);
	printf("trunc %d %zu %zu\n", err.err, err.len, err.olen);
}

static void cmd_join(int e, const char *group, unsigned int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct fi_eq_entry entry;
	uint32_t event = 0;
	ssize_t n;
	int ret;

	if (inet_pton(AF_INET, group, &sa.sin_addr) != 1)
		die("group address", -FI_EINVAL);
	ret = fi_join(ep[e], &sa, 0, &mc[e], &mc[e]);
	if (ret)
		die("fi_join", ret);
	n = fi_eq_sread(eq, &event, &entry, sizeof(entry), 2000, 0);
	if (n != sizeof(entry) || event != FI_JOIN_COMPLETE || entry.fid != &mc[e]->fid ||
	    entry.context != &mc[e])
		die("FI_JOIN_COMPLETE", n < 0 ? (int)n : -FI_EOTHER);
	printf("joined %" PRIu64 "\n", (uint64_t)fi_mc_addr(mc[e]));
}

static void cmd_big(int e, const char *ip, unsigned int port)
{
	fi_addr_t dest = peer(ip, port);
	ssize_t at_max, over;

	fill(out, max_msg, 99);
	at_max = send_wait(e, out, max_msg, dest);
	over = fi_send(ep[e], out, max_msg + 1, NULL, dest, out);
	printf("big %zu %zd %zd\n", max_msg, at_max, over);
}

static int dispatch(char *line)
{
	char a[64], b[64];
	unsigned int e = 0, x = 0, y = 0, z = 0;
	unsigned long long seed = 0;

	if (sscanf(line, "recv %u %u %u %u", &e, &x, &y, &z) == 4 && e <= 2)
		cmd_recv(e, (int)x, y, (int)z);
	else if (sscanf(line, "trunc %u %u %u", &e, &x, &y) == 3 && e < 2)
		cmd_trunc((int)e, x, y);
	else if (sscanf(line, "send %u %63s %u %u %llu", &e, a, &x, &y, &seed) == 5 && e < 2 &&
		 y <= BUF_SIZE) {
		fill(out, y, seed);
		printf("sent %zd\n", send_wait((int)e, out, y, peer(a, x)));
	} else if (sscanf(line, "big %u %63s %u", &e, a, &x) == 3 && e < 2 && max_msg < BUF_SIZE)
		cmd_big((int)e, a, x);
	else if (sscanf(line, "join %u %63s %u", &e, b, &x) == 3 && e < 2)
		cmd_join((int)e, b, x);
	else if (sscanf(line, "mcsend %u %u %llu", &e, &y, &seed) == 3 && e < 2 && mc[e] &&
		 y <= BUF_SIZE) {
		fill(out, y, seed);
		printf("sent %zd\n", send_wait((int)e, out, y, fi_mc_addr(mc[e])));
	} else if (sscanf(line, "leave %u", &e) == 1 && e < 2 && mc[e]) {
		printf("left %d\n", fi_close(&mc[e]->fid));
		mc[e] = NULL;
	} else if (strncmp(line, "quit", 4) == 0)
		return 0;
	else
		printf("bad command: %s", line);
	return 1;
}

int main(int argc, char **argv)
{
	char line[256];

	if (argc != 3) {
		fprintf(stderr, "usage: fdp_udp PORT0 PORT1 (commands on stdin)\n");
		return 2;
	}
	setup((unsigned int)strtoul(argv[1], NULL, 10), (unsigned int)strtoul(argv[2], NULL, 10));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		int more = dispatch(line);

		fflush(stdout);
		if (!more)
			break;
	}
	for (int e = 0; e < 2; e++) {
		if (mc[e])
			fi_close(&mc[e]->fid);
		fi_close(&ep[e]->fid);
		fi_close(&cq[e]->fid);
	}
	fi_close(&av->fid);
	fi_close(&eq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	printf("bye\n");
	return 0;
}
