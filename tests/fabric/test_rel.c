/*
 * test_rel.c - unit tests of the reliability engine (fdp_rel) and the
 * segmentation layer over a simulated lossy link (rel_sim): exactly-once,
 * in-order, byte-exact delivery under loss/duplication/reordering, sequence
 * wrap-around, the receive ring budget, malformed frames. Timers and
 * retransmission are test_rel_timers.c.
 */
#include "config.h"

#include <check.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_sim.h"
#include "rel_small.h"
#include "../lib/check_main.h"

/* ------------------------------------------------------------ stream harness */

/* Message i's size and content are functions of (seed, i), so the receiver
 * checks exactly-once, in order and byte-exact by comparing the k-th message
 * it gets with what message k must be. */
struct stream_msg {
	int idx;
	size_t len;
	uint8_t *buf;
};

struct stream {
	uint64_t seed;
	int nmsgs;
	int sent, send_done, recvd;
	int send_errors, recv_errors, order_errors, data_errors;
	int outstanding, max_outstanding;
	int repost[8];       /* receive slots waiting to be posted again */
	int nrepost;
};

static struct stream *g_stream[SIM_MAX_NODES]; /* per receiving node */
static uint64_t g_last_srtt_ns;                 /* node 0's SRTT after run_streams */
static uint8_t *g_rxbuf[SIM_MAX_NODES][8];

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static size_t msg_size(uint64_t seed, int i)
{
	uint64_t r = mix(seed * 1000003u + (uint64_t)i);

	if (i % 97 == 13)
		return MIB; /* the largest size, regularly */
	/* log-uniform over 1 B .. 1 MiB: every size class is exercised */
	unsigned bits = (unsigned)(r % 21);
	size_t base = (size_t)1 << bits;
	size_t len = base + (size_t)((r >> 8) % base);
	return len > MIB ? MIB : len;
}

static uint8_t msg_byte(uint64_t seed, int i, size_t j)
{
	return (uint8_t)(mix(seed + (uint64_t)i) + j * 131 + (j >> 9));
}

static void stream_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	struct stream_msg *sm = tx->context;
	struct stream *st = g_stream[1 - sim_node_of(m)->id];

	if (err)
		st->send_errors++;
	if (sm->idx != st->send_done)
		st->order_errors++; /* sends complete in posting order */
	st->send_done++;
	st->outstanding--;
	free(sm->buf);
	free(sm);
}

static void stream_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			     const struct fdp_msg_rx_info *info)
{
	struct sim_node *node = sim_node_of(m);
	struct stream *st = g_stream[node->id];
	int slot = (int)(uintptr_t)rx->context;
	int k = st->recvd++;
	size_t want = msg_size(st->seed, k);

	if (info->err || info->olen)
		st->recv_errors++;
	if (info->len != want || info->peer != &node->peers[1 - node->id]) {
		st->order_errors++;
	} else {
		const uint8_t *b = g_rxbuf[node->id][slot];
		for (size_t j = 0; j < want; j++)
			if (b[j] != msg_byte(st->seed, k, j)) {
				st->data_errors++;
				break;
			}
	}
	st->repost[st->nrepost++] = slot;
}

static const struct fdp_msg_ops stream_ops = {
	.send_done = stream_send_done,
	.recv_done = stream_recv_done,
};

static void post_rx(struct sim *s, int node, int slot)
{
	struct iovec iov = { .iov_base = g_rxbuf[node][slot], .iov_len = MIB + 64 };
	int ret = fdp_msg_recv(&s->nodes[node].m, &iov, 1, FI_ADDR_UNSPEC, false, 0, 0,
			       (void *)(uintptr_t)slot, 0, s->now);
	ck_assert_int_eq(ret, 0);
}

static void try_send(struct sim *s, int from, struct stream *st)
{
	while (st->sent < st->nmsgs && st->outstanding < st->max_outstanding) {
		struct stream_msg *sm = malloc(sizeof(*sm));
		int to = 1 - from;
		struct iovec iov[2];
		size_t half;
		int ret;

		ck_assert_ptr_nonnull(sm);
		sm->idx = st->sent;
		sm->len = msg_size(st->seed, sm->idx);
		sm->buf = malloc(sm->len);
		ck_assert_ptr_nonnull(sm->buf);
		for (size_t j = 0; j < sm->len; j++)
			sm->buf[j] = msg_byte(st->seed, sm->idx, j);
		/* two iov entries, split at an odd place */
		half = sm->len / 3;
		iov[0] = (struct iovec){ sm->buf, half };
		iov[1] = (struct iovec){ sm->buf + half, sm->len - half };
		ret = fdp_msg_send(&s->nodes[from].m, &s->nodes[from].peers[to], iov, 2,
				   FDP_MSG_OP_MSG, 0, false, 0, sm, 0, s->now);
		ck_assert_int_eq(ret, 0);
		st->sent++;
		st->outstanding++;
	}
}

/* Run nmsgs messages each way between two nodes over a link with the given
 * fault rates; assert exactly-once, in-order, byte-exact delivery. */
static void run_streams(double drop, double dup, double reorder, int nmsgs, uint32_t isn,
			uint64_t seed, struct fdp_rel_stats *out_a)
{
	struct fdp_msg_cfg cfg;
	struct sim *s = calloc(1, sizeof(*s));
	struct stream st[2];
	long steps = 0;

	ck_assert_ptr_nonnull(s);
	fdp_msg_cfg_default(&cfg);
	cfg.rel.isn = isn;
	sim_init(s, 2, &cfg, &stream_ops, seed);
	s->drop = drop;
	s->dup = dup;
	s->reorder = reorder;
	for (int n = 0; n < 2; n++) {
		st[n] = (struct stream){ .seed = seed + 17 * (uint64_t)n, .nmsgs = nmsgs,
					 .max_outstanding = 8 };
		g_stream[n] = &st[n];
		for (int k = 0; k < 4; k++) {
			g_rxbuf[n][k] = malloc(MIB + 64);
			ck_assert_ptr_nonnull(g_rxbuf[n][k]);
			post_rx(s, n, k);
		}
	}
	/* node n sends stream st[1-n] (the stream is named by its receiver) */
	while (st[0].recvd < nmsgs || st[1].recvd < nmsgs || st[0].send_done < nmsgs ||
	       st[1].send_done < nmsgs) {
		for (int n = 0; n < 2; n++) {
			try_send(s, n, &st[1 - n]);
			while (st[n].nrepost > 0)
				post_rx(s, n, st[n].repost[--st[n].nrepost]);
		}
		ck_assert_msg(sim_step(s), "simulation stalled at %llu ns",
			      (unsigned long long)s->now);
		ck_assert_msg(++steps < 50000000L, "too many steps");
	}
	for (int n = 0; n < 2; n++) {
		ck_assert_int_eq(st[n].send_errors, 0);
		ck_assert_int_eq(st[n].recv_errors, 0);
		ck_assert_int_eq(st[n].order_errors, 0);
		ck_assert_int_eq(st[n].data_errors, 0);
		ck_assert_int_eq(st[n].recvd, nmsgs);
		ck_assert_int_eq(s->nodes[n].m.rel.stats.peers_unreachable, 0);
	}
	/* one more step-free check: nothing was delivered twice */
	ck_assert_uint_eq(s->nodes[1].m.stats.rx_msgs, (uint64_t)nmsgs);
	if (out_a)
		*out_a = s->nodes[0].m.rel.stats;
	g_last_srtt_ns = s->nodes[0].peers[1].rel.srtt_ns;
	if (drop > 0)
		ck_assert_uint_gt(s->nodes[0].m.rel.stats.tx_retx, 0);
	if (dup > 0)
		ck_assert_uint_gt(s->nodes[0].m.rel.stats.rx_dup + s->nodes[1].m.rel.stats.rx_dup, 0);
	if (reorder > 0)
		ck_assert_uint_gt(s->nodes[1].m.rel.stats.rx_ooo, 0);
	for (int n = 0; n < 2; n++)
		for (int k = 0; k < 4; k++)
			free(g_rxbuf[n][k]);
	sim_fini(s);
	free(s);
}

START_TEST(test_lossless)
{
	struct fdp_rel_stats a;
	run_streams(0, 0, 0, 300, 0, 1, &a);
	ck_assert_uint_eq(a.tx_retx, 0);
	ck_assert_uint_eq(a.rx_dup, 0);
}
END_TEST

START_TEST(test_lossy_1pct)
{
	run_streams(0.01, 0.01, 0.01, 1500, 12345, 2, NULL);
}
END_TEST

START_TEST(test_lossy_10pct)
{
	struct fdp_rel_stats a;

	run_streams(0.10, 0.10, 0.10, 800, 777, 3, &a);
	/* losses are repaired by fast retransmit (SACK, RACK), hardly ever
	 * by waiting for a timeout */
	ck_assert_uint_gt(a.tx_fast_retx, 100);
	ck_assert_uint_lt(a.tx_rto * 20, a.tx_retx);
	/* and the RTT estimate stays true under steady loss: path RTT is
	 * 10 us (+15 us for a reordered frame, + ack delay), never ms */
	ck_assert_uint_gt(a.rtt_samples, 1000);
	ck_assert_uint_lt(g_last_srtt_ns, 100000);
}
END_TEST

START_TEST(test_seq_wrap)
{
	struct fdp_rel_stats a;
	/* start 256 frames before 2^32: the stream crosses the wrap under loss */
	run_streams(0.10, 0.05, 0.05, 400, 0xFFFFFF00u, 4, &a);
	ck_assert_uint_gt(a.tx_data, 256);
}
END_TEST

/* ------------------------------------------------------------ malformed frames */

static uint8_t g_captured[2048];
static size_t g_captured_len;

static void build_frame(struct sim *s, uint8_t *out, size_t *len, uint8_t type, uint32_t seq,
			uint32_t una, uint32_t ack, uint8_t uflags, const void *payload, size_t plen)
{
	struct fdp_rel_hdr h = { 0 };

	h.hdr.magic = FDP_MAGIC;
	h.hdr.version = FDP_PROTO_VERSION;
	h.hdr.type = type;
	h.hdr.flags = FDP_REL_F_ACK;
	h.hdr.len = htobe16((uint16_t)(sizeof(h) + plen));
	h.version = FDP_REL_VERSION;
	h.uflags = uflags;
	h.session = htobe32(s->nodes[0].m.rel.cfg.session);
	h.peer_session = htobe32(s->nodes[1].m.rel.cfg.session);
	h.seq = htobe32(seq);
	h.una = htobe32(una);
	h.ack = htobe32(ack);
	memcpy(out, &h, sizeof(h));
	if (plen)
		memcpy(out + sizeof(h), payload, plen);
	*len = sizeof(h) + plen;
}

/* Frames to B (node 1) from node 2, whose state there is pb; each feeder
 * sends one kind of bad frame and checks the counter that must see it. */
#define FEED(buf, l) fdp_msg_rx_frame(&b->m, &b->peers[2], (buf), (l), s->now)

static void feed_short_frames(struct sim *s, struct sim_node *b)
{
	uint8_t f[2048];
	uint64_t before;

	before = b->m.rel.stats.rx_malformed;
	memset(f, 0, sizeof(f));
	for (size_t l = 0; l < sizeof(struct fdp_rel_hdr); l++)
		FEED(f, l);
	ck_assert_uint_eq(b->m.rel.stats.rx_malformed - before, sizeof(struct fdp_rel_hdr));
}

/* unknown versions: provider magic/version, reliable-layer version */
static void feed_bad_versions(struct sim *s, struct sim_node *b, struct fdp_rel_peer *pb)
{
	uint8_t f[2048];
	size_t len;
	uint64_t before;

	before = b->m.rel.stats.rx_bad_version;
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "x", 1);
	f[0] ^= 0xff;
	FEED(f, len);
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "x", 1);
	f[1] = 99;
	FEED(f, len);
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "x", 1);
	f[8] = FDP_REL_VERSION + 1;
	FEED(f, len);
	ck_assert_uint_eq(b->m.rel.stats.rx_bad_version - before, 3);
}

/* inconsistent lengths, unknown type, ack with payload, zero session */
static void feed_bad_headers(struct sim *s, struct sim_node *b, struct fdp_rel_peer *pb)
{
	uint8_t f[2048];
	size_t len;
	uint64_t before;

	before = b->m.rel.stats.rx_malformed;
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "xyz", 3);
	FEED(f, len - 1);                          /* hdr.len past the frame */
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "xyz", 3);
	f[4] = 0;
	f[5] = 10;                                 /* hdr.len shorter than the header */
	FEED(f, len);
	build_frame(s, f, &len, 0x12, pb->rcv_nxt, pb->rcv_nxt, 0, 0, NULL, 0);
	FEED(f, len);                              /* unknown type in the RDM range */
	build_frame(s, f, &len, FDP_REL_T_ACK, 0, pb->rcv_nxt, 0, 0, "ab", 2);
	FEED(f, len);                              /* ACK with payload */
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "x", 1);
	memset(f + 12, 0, 4);                      /* session 0 */
	FEED(f, len);
	ck_assert_uint_eq(b->m.rel.stats.rx_malformed - before, 5);
}

/* out of the receive window, and old duplicates; an ack for data never sent */
static void feed_bad_sequence(struct sim *s, struct sim_node *b, struct fdp_rel_peer *pb,
			      uint32_t window)
{
	uint8_t f[2048];
	size_t len;
	uint64_t before;

	before = b->m.rel.stats.rx_out_of_window;
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt + window + 10, pb->rcv_nxt,
		    0, 0, "x", 1);
	FEED(f, len);
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt + 0x80000000u, pb->rcv_nxt, 0, 0,
		    "x", 1);
	FEED(f, len);
	ck_assert_uint_eq(b->m.rel.stats.rx_out_of_window - before, 1);
	ck_assert_uint_ge(b->m.rel.stats.rx_dup, 1); /* 2^31 behind counts as old */
	before = b->m.rel.stats.rx_dup;
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt - 1, pb->rcv_nxt - 1, 0, 0, "x", 1);
	FEED(f, len);
	ck_assert_uint_eq(b->m.rel.stats.rx_dup - before, 1);

	before = b->m.rel.stats.rx_bad_ack;
	build_frame(s, f, &len, FDP_REL_T_ACK, 0, pb->rcv_nxt, pb->snd_nxt + 100, 0, NULL, 0);
	FEED(f, len);
	ck_assert_uint_eq(b->m.rel.stats.rx_bad_ack - before, 1);
}

/* message layer: a first segment too short for its header, a bad op,
 * a length past the limit, a stray continuation */
static void feed_bad_messages(struct sim *s, struct sim_node *b, struct fdp_rel_peer *pb)
{
	uint8_t f[2048];
	size_t len;
	uint64_t before;

	before = b->m.stats.rx_malformed;
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, FDP_REL_UF_FIRST,
		    "abc", 3);
	FEED(f, len);
	{
		struct fdp_msg_hdr mh = { .op = 7, .len = htobe32(1) };
		uint8_t pl[sizeof(mh) + 1];
		memcpy(pl, &mh, sizeof(mh));
		build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0,
			    FDP_REL_UF_FIRST, pl, sizeof(pl));
		FEED(f, len);
		mh.op = FDP_MSG_OP_MSG;
		mh.len = htobe32(0x7fffffff);
		memcpy(pl, &mh, sizeof(mh));
		build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0,
			    FDP_REL_UF_FIRST, pl, sizeof(pl));
		FEED(f, len);
	}
	build_frame(s, f, &len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0, 0, "zz", 2);
	FEED(f, len);
	ck_assert_uint_eq(b->m.stats.rx_malformed - before, 4);
}

/* random garbage and random corruptions of a valid frame */
static void feed_garbage(struct sim *s, struct sim_node *b, struct fdp_rel_peer *pb)
{
	uint8_t f[2048];
	size_t len;

	build_frame(s, g_captured, &g_captured_len, FDP_REL_T_DATA, pb->rcv_nxt, pb->rcv_nxt, 0,
		    0, "hello", 5);
	for (int i = 0; i < 20000; i++) {
		uint64_t r = sim_rand(s);
		if (i & 1) {
			len = (size_t)(r % sizeof(f));
			for (size_t j = 0; j < len; j++)
				f[j] = (uint8_t)sim_rand(s);
			if (len > 2 && (r & 0x100))
				f[0] = FDP_MAGIC, f[1] = FDP_PROTO_VERSION;
		} else {
			memcpy(f, g_captured, g_captured_len);
			len = g_captured_len;
			f[(r >> 8) % len] ^= (uint8_t)(1u << ((r >> 20) % 8));
			f[(r >> 24) % len] = (uint8_t)(r >> 40);
		}
		FEED(f, len);
	}
}

START_TEST(test_malformed)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	struct sim_node *b;
	struct fdp_rel_peer *pb;
	static uint8_t small[100], rsmall[100];
	uint8_t f[2048];
	size_t len;

	fdp_msg_cfg_default(&cfg);
	/* Garbage goes to B's state for node 2, which never speaks: forged
	 * in-window frames would (legitimately) desynchronise a real stream,
	 * there is no authentication. Node 0 <-> B must keep working. */
	s = small_sim_n(&cfg, 10, 3);
	b = &s->nodes[1];
	pb = &b->peers[2].rel;
	small[0] = 1;
	recv_bytes(s, 1, rsmall, 100, 1);
	send_bytes(s, 0, small, 100);
	run_until_idle(s, 100000);
	ck_assert_int_eq(g_recv_ok, 1);

	/* first contact from the forger: a valid frame teaches its session */
	build_frame(s, f, &len, FDP_REL_T_DATA, 1000, 1000, 0, 0, "x", 1);
	FEED(f, len);
	ck_assert_uint_eq(pb->rcv_nxt, 1001);
	feed_short_frames(s, b);
	feed_bad_versions(s, b, pb);
	feed_bad_headers(s, b, pb);
	feed_bad_sequence(s, b, pb, cfg.rel.window);
	feed_bad_messages(s, b, pb);
	feed_garbage(s, b, pb);
	/* still works both ways after all that */
	run_until_idle(s, 1000000);
	{
		int ok0 = g_recv_ok;
		small[0] = 3;
		recv_bytes_from(s, 1, rsmall, 100, 3, 0);
		send_bytes(s, 0, small, 100);
		recv_bytes_from(s, 0, rsmall, 100, 3, 1);
		send_bytes(s, 1, small, 100);
		for (long i = 0; i < 10000000L && g_recv_ok < ok0 + 2; i++)
			ck_assert(sim_step(s));
		ck_assert_int_eq(g_recv_ok, ok0 + 2);
	}
	sim_fini(s);
	free(s);
}
END_TEST

#undef FEED

START_TEST(test_rx_ring_budget)
{
	/* one out-of-order ring for the whole endpoint, two lossy senders:
	 * the second sender's early arrivals are dropped and resent, and
	 * everything still arrives exactly once */
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t src[2][40][3000], dst[2][40][3000];

	fdp_msg_cfg_default(&cfg);
	cfg.rel.max_rx_rings = 1;
	s = small_sim_n(&cfg, 11, 3);
	s->drop = s->reorder = 0.1;
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < 40; i++) {
			memset(src[p][i], p * 40 + i, sizeof(src[p][i]));
			recv_bytes_from(s, 0, dst[p][i], sizeof(dst[p][i]), p * 40 + i,
					(fi_addr_t)(p + 1));
		}
	for (int i = 0; i < 40; i++)
		for (int p = 0; p < 2; p++) {
			struct iovec iov = { src[p][i], sizeof(src[p][i]) };
			ck_assert_int_eq(fdp_msg_send(&s->nodes[p + 1].m, &s->nodes[p + 1].peers[0],
						      &iov, 1, FDP_MSG_OP_MSG, 0, false, 0, NULL, 0,
						      s->now),
					 0);
		}
	run_until_idle(s, 10000000L);
	ck_assert_int_eq(g_recv_ok, 80);
	ck_assert_int_eq(g_sent_ok, 80);
	ck_assert_uint_eq(s->nodes[0].m.rel.rx_rings, 1);
	ck_assert_uint_gt(s->nodes[0].m.rel.stats.rx_nomem, 0);
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < 40; i++)
			ck_assert_int_eq(memcmp(src[p][i], dst[p][i], sizeof(src[p][i])), 0);
	/* peers that only ever received have no send ring */
	ck_assert_ptr_null(s->nodes[1].peers[2].rel.tx);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_cfg_rejected)
{
	struct fdp_rel rel;
	struct fdp_rel_cfg cfg;
	static const struct fdp_rel_ops none;

	fdp_rel_cfg_default(&cfg);
	cfg.window = 100; /* not a power of two */
	ck_assert_int_eq(fdp_rel_init(&rel, &cfg, &none, NULL), -FI_EINVAL);
	fdp_rel_cfg_default(&cfg);
	cfg.session = 0;
	ck_assert_int_eq(fdp_rel_init(&rel, &cfg, &none, NULL), -FI_EINVAL);
}
END_TEST

START_TEST(test_seq_compare)
{
	ck_assert(fdp_seq_lt(0xFFFFFFF0u, 5));
	ck_assert(fdp_seq_gt(5, 0xFFFFFFF0u));
	ck_assert(fdp_seq_le(7, 7));
	ck_assert(!fdp_seq_lt(7, 7));
	ck_assert(fdp_seq_lt(0x7FFFFFFFu, 0x80000000u));
}
END_TEST
static Suite *rel_suite(void)
{
	Suite *s = suite_create("fdp_rel");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_seq_compare);
	tcase_add_test(tc, test_cfg_rejected);
	tcase_add_test(tc, test_lossless);
	tcase_add_test(tc, test_lossy_1pct);
	tcase_add_test(tc, test_lossy_10pct);
	tcase_add_test(tc, test_seq_wrap);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_rx_ring_budget);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(rel_suite());
}
