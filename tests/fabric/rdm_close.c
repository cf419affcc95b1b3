/*
 * rdm_close.c - a send that completed must reach its peer even when the
 * sender closes its endpoint right after the completion (fabric_rdm_close.sh).
 *
 *   rdm_close server|client -P oob_port [-H oob_addr] [-n rounds]
 *             [-m inject|injcomp|sendmsg|reply] [-T timeout_s]
 *
 * The server opens one FI_EP_RDM endpoint, gives its name to the client over
 * a TCP socket on oob_addr:oob_port, posts `rounds` receives and waits for
 * that many messages. The client, for each round, opens a fresh endpoint,
 * sends one message "round N" to the server and closes the endpoint at once:
 * with -m inject right after fi_inject returns (no completion), with
 * injcomp after the FI_INJECT_COMPLETE completion of an fi_sendmsg, with
 * sendmsg after a default (transmit complete) fi_sendmsg's completion.
 * fabtests' fi_msg_inject does the same once per run. With -m reply the
 * server answers each message (a default fi_send to the endpoint name the
 * message carries) and the client closes its endpoint as soon as
 * fi_cq_sread returned the answer, as fabtests' fi_rdm_multi_client does:
 * the server's send must then complete without error, i.e. the closing
 * client still acknowledged it. The server exits 0 only when every round's
 * message arrived, each once (and, with reply, every answer completed).
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
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

#define MAX_ROUNDS 256
#define MSG_LEN 32
#define NAME_OFF 16  /* reply mode: the sender's endpoint name from here */

static struct {
	bool server;
	const char *host, *mode;
	unsigned port;
	int rounds, timeout_s;
} opt = {.host = "127.0.0.1", .mode = "injcomp", .rounds = 20, .timeout_s = 60};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static time_t deadline;

#define CHECK(call) do { int r_ = (int)(call); if (r_) { \
	fprintf(stderr, "%s: %d (%s)\n", #call, r_, fi_strerror(-r_)); exit(1); } } while (0)

static void open_common(void)
{
	struct fi_info *h = fi_allocinfo();
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT,
				     .wait_obj = FI_WAIT_UNSPEC};

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG;
	h->fabric_attr->prov_name = strdup("dpdk");
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	if (strcmp(info->fabric_attr->prov_name, "dpdk") != 0) {
		fprintf(stderr, "provider %s, not the native dpdk RDM\n",
			info->fabric_attr->prov_name);
		exit(1);
	}
	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	CHECK(fi_av_open(domain, &av_attr, &av, NULL));
	CHECK(fi_cq_open(domain, &cq_attr, &cq, NULL));
}

static struct fid_ep *open_ep(void)
{
	struct fid_ep *ep;

	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(ep));
	return ep;
}

static void close_common(void)
{
	CHECK(fi_close(&cq->fid));
	CHECK(fi_close(&av->fid));
	CHECK(fi_close(&domain->fid));
	CHECK(fi_close(&fabric->fid));
	fi_freeinfo(info);
}

/* The next completion (fi_cq_sread: sleeping, so that the provider's
 * progress thread receives it; else fi_cq_read). Exits on an error one. */
static void *wait_one(bool sleep)
{
	struct fi_cq_entry ent;
	struct fi_cq_err_entry err;
	ssize_t ret;

	for (;;) {
		ret = sleep ? fi_cq_sread(cq, &ent, 1, NULL, 1000) : fi_cq_read(cq, &ent, 1);
		if (ret == 1)
			return ent.op_context;
		if (ret == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "completion error %d (%s)\n", err.err, fi_strerror(err.err));
			exit(1);
		}
		if (ret != -FI_EAGAIN) {
			fprintf(stderr, "fi_cq_read: %zd\n", ret);
			exit(1);
		}
		if (time(NULL) > deadline) {
			fprintf(stderr, "timed out waiting for a completion\n");
			exit(1);
		}
	}
}

static int oob_server(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(opt.port)};
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), s;

	inet_pton(AF_INET, opt.host, &sa.sin_addr);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1)) {
		perror("oob bind/listen");
		exit(1);
	}
	s = accept(ls, NULL, NULL);
	close(ls);
	if (s < 0) {
		perror("oob accept");
		exit(1);
	}
	return s;
}

static int oob_client(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(opt.port)};
	int s;

	inet_pton(AF_INET, opt.host, &sa.sin_addr);
	for (int i = 0; i < 200; i++) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		close(s);
		usleep(50 * 1000);
	}
	perror("oob connect");
	exit(1);
}

static int server(void)
{
	static char bufs[MAX_ROUNDS][MSG_LEN];
	int seen[MAX_ROUNDS] = {0};
	bool reply = strcmp(opt.mode, "reply") == 0;
	struct fid_ep *ep;
	char name[64];
	size_t namelen = sizeof(name);
	int s, got = 0, r;

	ep = open_ep();
	CHECK(fi_getname(&ep->fid, name, &namelen));
	for (int i = 0; i < opt.rounds; i++)
		CHECK(fi_recv(ep, bufs[i], MSG_LEN, NULL, FI_ADDR_UNSPEC, bufs[i]));
	s = oob_server();
	if (write(s, name, namelen) != (ssize_t)namelen) {
		perror("oob write");
		return 1;
	}
	deadline = time(NULL) + opt.timeout_s;
	while (got < opt.rounds) {
		struct fi_cq_entry ent;
		ssize_t ret = fi_cq_read(cq, &ent, 1);
		char *b;

		if (ret == -FI_EAGAIN) {
			if (time(NULL) > deadline) {
				printf("server: %d of %d messages arrived; missing:", got, opt.rounds);
				for (int i = 0; i < opt.rounds; i++)
					if (!seen[i])
						printf(" %d", i);
				printf("\n");
				return 1;
			}
			continue;
		}
		if (ret != 1) {
			fprintf(stderr, "server: fi_cq_read %zd\n", ret);
			return 1;
		}
		b = ent.op_context;
		if (sscanf(b, "round %d", &r) != 1 || r < 0 || r >= opt.rounds || seen[r]) {
			fprintf(stderr, "server: unexpected message '%.*s'\n", MSG_LEN, b);
			return 1;
		}
		seen[r] = 1;
		got++;
		if (reply) {
			char ans[MSG_LEN];
			fi_addr_t to;

			CHECK(fi_av_insert(av, b + NAME_OFF, 1, &to, 0, NULL) == 1 ? 0 : -FI_EINVAL);
			snprintf(ans, sizeof(ans), "answer %d", r);
			while ((ret = fi_send(ep, ans, MSG_LEN, NULL, to, ans)) == -FI_EAGAIN)
				;
			CHECK(ret);
			/* an error completion (FI_EHOSTUNREACH: the client
			 * closed without acknowledging) fails the run */
			if (wait_one(false) != ans) {
				fprintf(stderr, "server: completion out of order\n");
				return 1;
			}
		}
	}
	printf("server: all %d messages arrived\n", got);
	close(s);
	CHECK(fi_close(&ep->fid));
	close_common();
	return 0;
}

static int client(void)
{
	char name[64], msg[MSG_LEN];
	fi_addr_t dest;
	ssize_t n;
	int s = oob_client();

	n = read(s, name, sizeof(name));
	if (n <= 0) {
		perror("oob read");
		return 1;
	}
	CHECK(fi_av_insert(av, name, 1, &dest, 0, NULL) == 1 ? 0 : -FI_EINVAL);
	deadline = time(NULL) + opt.timeout_s;
	for (int r = 0; r < opt.rounds; r++) {
		struct fid_ep *ep = open_ep();
		struct iovec iov = {.iov_base = msg, .iov_len = MSG_LEN};
		struct fi_msg m = {.msg_iov = &iov, .iov_count = 1, .addr = dest,
				   .context = msg};
		uint64_t flags = FI_COMPLETION;
		char ans[MSG_LEN];
		size_t namelen = MSG_LEN - NAME_OFF;
		ssize_t ret;

		memset(msg, 0, sizeof(msg));
		snprintf(msg, NAME_OFF, "round %u", (unsigned)r & 0xffffu); /* r < MAX_ROUNDS */
		if (strcmp(opt.mode, "reply") == 0) {
			CHECK(fi_getname(&ep->fid, msg + NAME_OFF, &namelen));
			CHECK(fi_recv(ep, ans, MSG_LEN, NULL, FI_ADDR_UNSPEC, ans));
		}
		if (strcmp(opt.mode, "inject") == 0) {
			while ((ret = fi_inject(ep, msg, MSG_LEN, dest)) == -FI_EAGAIN)
				;
		} else {
			if (strcmp(opt.mode, "injcomp") == 0)
				flags |= FI_INJECT_COMPLETE;
			while ((ret = fi_sendmsg(ep, &m, flags)) == -FI_EAGAIN)
				;
		}
		CHECK(ret);
		if (strcmp(opt.mode, "inject") != 0 && wait_one(false) != msg) {
			fprintf(stderr, "client: wrong completion context\n");
			return 1;
		}
		if (strcmp(opt.mode, "reply") == 0 && wait_one(true) != ans) {
			fprintf(stderr, "client: wrong completion context\n");
			return 1;
		}
		/* the buffer is the application's again: reuse it at once, as
		 * fabtests does (memset after the completion) */
		memset(msg, 0xb, sizeof(msg));
		CHECK(fi_close(&ep->fid));
	}
	printf("client: %d %s sends completed, each endpoint closed right after\n",
	       opt.rounds, opt.mode);
	close(s);
	close_common();
	return 0;
}

int main(int argc, char **argv)
{
	int c;

	if (argc < 2) {
		fprintf(stderr, "usage: %s server|client -P port [-H addr] [-n rounds] "
			"[-m inject|injcomp|sendmsg|reply] [-T timeout_s]\n", argv[0]);
		return 2;
	}
	opt.server = strcmp(argv[1], "server") == 0;
	optind = 2;
	while ((c = getopt(argc, argv, "P:H:n:m:T:")) != -1) {
		switch (c) {
		case 'P': opt.port = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'H': opt.host = optarg; break;
		case 'n': opt.rounds = (int)strtol(optarg, NULL, 10); break;
		case 'm': opt.mode = optarg; break;
		case 'T': opt.timeout_s = (int)strtol(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (!opt.port || opt.rounds < 1 || opt.rounds > MAX_ROUNDS) {
		fprintf(stderr, "bad -P or -n (1..%d)\n", MAX_ROUNDS);
		return 2;
	}
	open_common();
	return opt.server ? server() : client();
}
