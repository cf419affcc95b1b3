/*
 * test_msg.c - unit tests of fdp_msg: FI_MSG/FI_TAGGED matching, directed
 * receives, the unexpected queue and its bound, truncation, remote CQ data,
 * source reporting, inject, cancel, limits, FI_PEEK/FI_CLAIM/FI_DISCARD.
 * Runs over rel_sim (lossless
 * unless a test says otherwise).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "rel_sim.h"

struct rx_rec {
	void *context;
	struct fdp_msg_rx_info info;
	int node;
	size_t iov_count;   /* 0: the completion carries no buffer */
};
struct tx_rec {
	void *context;
	int err;
};

static struct rx_rec g_rx[256];
static int g_nrx;
static struct tx_rec g_tx[256];
static int g_ntx;
static int g_inject_done, g_inject_err;

static void rec_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	(void)m;
	ck_assert_int_lt(g_ntx, 256);
	g_tx[g_ntx++] = (struct tx_rec){ tx->context, err };
}

static void rec_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			  const struct fdp_msg_rx_info *info)
{
	ck_assert_int_lt(g_nrx, 256);
	g_rx[g_nrx++] = (struct rx_rec){ rx->context, *info, sim_node_of(m)->id, rx->iov_count };
}

static void rec_inject_done(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, int err)
{
	(void)m;
	(void)peer;
	if (err)
		g_inject_err++;
	else
		g_inject_done++;
}

static const struct fdp_msg_ops rec_ops = {
	.send_done = rec_send_done,
	.recv_done = rec_recv_done,
	.inject_done = rec_inject_done,
};

static struct sim *mk(int n, struct fdp_msg_cfg *cfg_or_null)
{
	struct fdp_msg_cfg cfg;
	struct sim *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	fdp_msg_cfg_default(&cfg);
	if (cfg_or_null)
		cfg = *cfg_or_null;
	g_nrx = g_ntx = g_inject_done = g_inject_err = 0;
	sim_init(s, n, &cfg, &rec_ops, 42);
	return s;
}

static void done(struct sim *s)
{
	sim_fini(s);
	free(s);
}

static void idle(struct sim *s)
{
	for (long i = 0; i < 10000000L && sim_step(s); i++)
		;
}

static void tsend(struct sim *s, int from, int to, const void *buf, size_t len, uint8_t op,
		  uint64_t tag, void *ctx)
{
	struct iovec iov = { (void *)buf, len };
	/* transmit complete: send_done when the peer acknowledged */
	ck_assert_int_eq(fdp_msg_send(&s->nodes[from].m, &s->nodes[from].peers[to], &iov, 1, op,
				      tag, false, 0, ctx, FI_TRANSMIT_COMPLETE, s->now),
			 0);
}

static void trecv(struct sim *s, int at, void *buf, size_t len, fi_addr_t src, bool tagged,
		  uint64_t tag, uint64_t ignore, void *ctx)
{
	struct iovec iov = { buf, len };
	ck_assert_int_eq(fdp_msg_recv(&s->nodes[at].m, &iov, 1, src, tagged, tag, ignore, ctx, 0,
				      s->now),
			 0);
}

#define CTX(n) ((void *)(uintptr_t)(n))

START_TEST(test_tagged_matching)
{
	struct sim *s = mk(2, NULL);
	char b1[16] = { 0 }, b2[16] = { 0 }, b3[16] = { 0 }, bm[16] = { 0 };

	trecv(s, 1, b1, sizeof(b1), FI_ADDR_UNSPEC, true, 0x10, 0, CTX(1));
	trecv(s, 1, b2, sizeof(b2), FI_ADDR_UNSPEC, true, 0x20, 0x0F, CTX(2));
	trecv(s, 1, b3, sizeof(b3), FI_ADDR_UNSPEC, true, 0x30, 0, CTX(3));
	tsend(s, 0, 1, "msg", 4, FDP_MSG_OP_MSG, 0x10, CTX(10));   /* no tagged recv takes it */
	tsend(s, 0, 1, "t25", 4, FDP_MSG_OP_TAGGED, 0x25, CTX(11)); /* -> recv 2 (ignore 0x0F) */
	tsend(s, 0, 1, "t30", 4, FDP_MSG_OP_TAGGED, 0x30, CTX(12)); /* -> recv 3 */
	tsend(s, 0, 1, "t10", 4, FDP_MSG_OP_TAGGED, 0x10, CTX(13)); /* -> recv 1 */
	tsend(s, 0, 1, "t11", 4, FDP_MSG_OP_TAGGED, 0x11, CTX(14)); /* unexpected */
	idle(s);
	ck_assert_int_eq(g_ntx, 5);
	ck_assert_int_eq(g_nrx, 3);
	ck_assert_ptr_eq(g_rx[0].context, CTX(2));
	ck_assert_uint_eq(g_rx[0].info.tag, 0x25);
	ck_assert(g_rx[0].info.tagged);
	ck_assert_str_eq(b2, "t25");
	ck_assert_ptr_eq(g_rx[1].context, CTX(3));
	ck_assert_str_eq(b3, "t30");
	ck_assert_ptr_eq(g_rx[2].context, CTX(1));
	ck_assert_str_eq(b1, "t10");
	ck_assert_uint_eq(s->nodes[1].m.stats.rx_unexpected, 2);
	/* a plain receive gets the FI_MSG message, not the tagged one */
	trecv(s, 1, bm, sizeof(bm), FI_ADDR_UNSPEC, false, 0, 0, CTX(4));
	ck_assert_int_eq(g_nrx, 4);
	ck_assert_ptr_eq(g_rx[3].context, CTX(4));
	ck_assert(!g_rx[3].info.tagged);
	ck_assert_str_eq(bm, "msg");
	/* a tagged receive with a wide ignore mask takes the unexpected 0x11 */
	memset(b1, 0, sizeof(b1));
	trecv(s, 1, b1, sizeof(b1), FI_ADDR_UNSPEC, true, 0x00, 0xFF, CTX(5));
	ck_assert_int_eq(g_nrx, 5);
	ck_assert_uint_eq(g_rx[4].info.tag, 0x11);
	ck_assert_str_eq(b1, "t11");
	ck_assert_uint_eq(s->nodes[1].m.ux_count, 0);
	done(s);
}
END_TEST

START_TEST(test_directed_recv_and_source)
{
	struct sim *s = mk(3, NULL);
	char from2[8] = { 0 }, any[8] = { 0 };

	trecv(s, 0, from2, sizeof(from2), 2, false, 0, 0, CTX(2));
	trecv(s, 0, any, sizeof(any), FI_ADDR_UNSPEC, false, 0, 0, CTX(99));
	tsend(s, 1, 0, "one", 4, FDP_MSG_OP_MSG, 0, CTX(1));
	idle(s);
	ck_assert_int_eq(g_nrx, 1);
	ck_assert_ptr_eq(g_rx[0].context, CTX(99)); /* skipped the receive directed at 2 */
	ck_assert_ptr_eq(g_rx[0].info.peer, &s->nodes[0].peers[1]);
	ck_assert_uint_eq(g_rx[0].info.peer->addr, 1);
	tsend(s, 2, 0, "two", 4, FDP_MSG_OP_MSG, 0, CTX(2));
	idle(s);
	ck_assert_int_eq(g_nrx, 2);
	ck_assert_ptr_eq(g_rx[1].context, CTX(2));
	ck_assert_str_eq(from2, "two");
	ck_assert_uint_eq(g_rx[1].info.peer->addr, 2);
	/* a directed receive does not take an unexpected message from another peer */
	tsend(s, 1, 0, "uno", 4, FDP_MSG_OP_MSG, 0, CTX(3));
	idle(s);
	memset(from2, 0, sizeof(from2));
	trecv(s, 0, from2, sizeof(from2), 2, false, 0, 0, CTX(4));
	ck_assert_int_eq(g_nrx, 2);
	trecv(s, 0, any, sizeof(any), 1, false, 0, 0, CTX(5));
	ck_assert_int_eq(g_nrx, 3);
	ck_assert_str_eq(any, "uno");
	done(s);
}
END_TEST

START_TEST(test_unexpected_then_post)
{
	struct sim *s = mk(2, NULL);
	static uint8_t a[1], b[1024], c[100000], ra[1], rb[1024], rc[100000];
	uint8_t *big = malloc(1u << 20), *rbig = calloc(1, 1u << 20);

	ck_assert_ptr_nonnull(big);
	ck_assert_ptr_nonnull(rbig);
	a[0] = 7;
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 3);
	for (size_t i = 0; i < sizeof(c); i++)
		c[i] = (uint8_t)(i * 7 + 1);
	tsend(s, 0, 1, a, sizeof(a), FDP_MSG_OP_MSG, 0, NULL);
	tsend(s, 0, 1, b, sizeof(b), FDP_MSG_OP_MSG, 0, NULL);
	tsend(s, 0, 1, c, sizeof(c), FDP_MSG_OP_MSG, 0, NULL);
	idle(s);
	ck_assert_int_eq(g_ntx, 3);
	ck_assert_uint_eq(s->nodes[1].m.stats.rx_unexpected, 3);
	ck_assert_uint_eq(s->nodes[1].m.ux_count, 3);
	trecv(s, 1, ra, sizeof(ra), FI_ADDR_UNSPEC, false, 0, 0, CTX(1));
	trecv(s, 1, rb, sizeof(rb), FI_ADDR_UNSPEC, false, 0, 0, CTX(2));
	trecv(s, 1, rc, sizeof(rc), FI_ADDR_UNSPEC, false, 0, 0, CTX(3));
	ck_assert_int_eq(g_nrx, 3);
	ck_assert_ptr_eq(g_rx[0].context, CTX(1));
	ck_assert_ptr_eq(g_rx[2].context, CTX(3));
	ck_assert_uint_eq(g_rx[2].info.len, sizeof(c));
	ck_assert_int_eq(memcmp(a, ra, sizeof(a)), 0);
	ck_assert_int_eq(memcmp(b, rb, sizeof(b)), 0);
	ck_assert_int_eq(memcmp(c, rc, sizeof(c)), 0);
	ck_assert_uint_eq(s->nodes[1].m.ux_count, 0);
	ck_assert_uint_eq(s->nodes[1].m.ux_bytes, 0);

	/* a receive posted while an unexpected 1 MiB message is half-way in */
	for (size_t i = 0; i < (1u << 20); i++)
		big[i] = (uint8_t)(i ^ (i >> 8));
	tsend(s, 0, 1, big, 1u << 20, FDP_MSG_OP_MSG, 0, NULL);
	for (int i = 0; i < 100000 && !(s->nodes[1].peers[0].ux_cur &&
					 s->nodes[1].peers[0].rx_got > 100000);
	     i++)
		ck_assert(sim_step(s));
	ck_assert_ptr_nonnull(s->nodes[1].peers[0].ux_cur);
	trecv(s, 1, rbig, 1u << 20, FI_ADDR_UNSPEC, false, 0, 0, CTX(4));
	ck_assert_int_eq(g_nrx, 3); /* not complete yet */
	idle(s);
	ck_assert_int_eq(g_nrx, 4);
	ck_assert_ptr_eq(g_rx[3].context, CTX(4));
	ck_assert_int_eq(memcmp(big, rbig, 1u << 20), 0);
	free(big);
	free(rbig);
	done(s);
}
END_TEST

START_TEST(test_unexpected_bound_rnr)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	char bufs[5][8];
	char msgs[5][8] = { "m0", "m1", "m2", "m3", "m4" };

	fdp_msg_cfg_default(&cfg);
	cfg.ux_max_entries = 2;
	cfg.rel.unreach_ns = 100ull * 1000 * 1000;
	s = mk(2, &cfg);
	for (int i = 0; i < 5; i++)
		tsend(s, 0, 1, msgs[i], 3, FDP_MSG_OP_MSG, 0, CTX(i));
	/* far longer than the unreachability bound */
	sim_run_until(s, s->now + 3 * cfg.rel.unreach_ns);
	ck_assert_uint_eq(s->nodes[1].m.stats.rx_unexpected, 2);
	ck_assert_uint_eq(s->nodes[1].m.ux_count, 2);
	ck_assert_uint_gt(s->nodes[1].m.stats.rx_ux_refused, 0);
	ck_assert_uint_gt(s->nodes[1].m.rel.stats.rx_refused, 0);
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.peers_unreachable, 0); /* RNR = alive */
	ck_assert_int_eq(g_ntx, 2);
	for (int i = 0; i < 5; i++)
		trecv(s, 1, bufs[i], sizeof(bufs[i]), FI_ADDR_UNSPEC, false, 0, 0, CTX(i));
	sim_run_until(s, s->now + cfg.rel.rto_max_ns * 3);
	ck_assert_int_eq(g_nrx, 5);
	for (int i = 0; i < 5; i++) {
		ck_assert_ptr_eq(g_rx[i].context, CTX(i));
		ck_assert_str_eq(bufs[i], msgs[i]);
	}
	ck_assert_int_eq(g_ntx, 5);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(g_tx[i].err, 0);
	done(s);
}
END_TEST

START_TEST(test_truncation)
{
	struct sim *s = mk(2, NULL);
	uint8_t msg[5000], r1[10], r2[100];

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	trecv(s, 1, r1, sizeof(r1), FI_ADDR_UNSPEC, false, 0, 0, CTX(1));
	tsend(s, 0, 1, msg, sizeof(msg), FDP_MSG_OP_MSG, 0, NULL);
	idle(s);
	ck_assert_int_eq(g_nrx, 1);
	ck_assert_int_eq(g_rx[0].info.err, -FI_ETRUNC);
	ck_assert_uint_eq(g_rx[0].info.len, 10);
	ck_assert_uint_eq(g_rx[0].info.olen, sizeof(msg) - 10);
	ck_assert_int_eq(memcmp(r1, msg, 10), 0);
	ck_assert_uint_eq(s->nodes[1].m.stats.rx_truncated, 1);
	/* the same through the unexpected queue */
	tsend(s, 0, 1, msg, sizeof(msg), FDP_MSG_OP_MSG, 0, NULL);
	idle(s);
	trecv(s, 1, r2, sizeof(r2), FI_ADDR_UNSPEC, false, 0, 0, CTX(2));
	ck_assert_int_eq(g_nrx, 2);
	ck_assert_int_eq(g_rx[1].info.err, -FI_ETRUNC);
	ck_assert_uint_eq(g_rx[1].info.olen, sizeof(msg) - 100);
	ck_assert_int_eq(memcmp(r2, msg, 100), 0);
	/* the stream is intact afterwards */
	trecv(s, 1, r2, sizeof(r2), FI_ADDR_UNSPEC, false, 0, 0, CTX(3));
	tsend(s, 0, 1, "ok", 3, FDP_MSG_OP_MSG, 0, NULL);
	idle(s);
	ck_assert_int_eq(g_nrx, 3);
	ck_assert_int_eq(g_rx[2].info.err, 0);
	ck_assert_str_eq((char *)r2, "ok");
	done(s);
}
END_TEST

START_TEST(test_cq_data_and_iov)
{
	struct sim *s = mk(2, NULL);
	uint8_t a[700], b[1300], r1[1000], r2[1000];
	struct iovec siov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct iovec riov[2] = { { r1, sizeof(r1) }, { r2, sizeof(r2) } };

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i + 1);
	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 5);
	ck_assert_int_eq(fdp_msg_recv(&s->nodes[1].m, riov, 2, FI_ADDR_UNSPEC, true, 5, 0, CTX(1),
				      0, s->now),
			 0);
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], siov, 2,
				      FDP_MSG_OP_TAGGED, 5, true, 0xDEADBEEFCAFEull, CTX(7), 0,
				      s->now),
			 0);
	idle(s);
	ck_assert_int_eq(g_nrx, 1);
	ck_assert(g_rx[0].info.has_data);
	ck_assert_uint_eq(g_rx[0].info.data, 0xDEADBEEFCAFEull);
	ck_assert_uint_eq(g_rx[0].info.len, 2000);
	ck_assert_int_eq(memcmp(r1, a, 700), 0);
	ck_assert_int_eq(memcmp(r1 + 700, b, 300), 0);
	ck_assert_int_eq(memcmp(r2, b + 300, 1000), 0);
	ck_assert_int_eq(g_ntx, 1);
	ck_assert_ptr_eq(g_tx[0].context, CTX(7));
	ck_assert_int_eq(g_tx[0].err, 0);
	done(s);
}
END_TEST

START_TEST(test_inject)
{
	struct sim *s = mk(2, NULL);
	uint8_t buf[200], r[200];
	static uint8_t big[100000];
	size_t max = fdp_msg_inject_max(&s->nodes[0].m);
	struct iovec iov = { buf, sizeof(buf) };
	uint8_t *huge = malloc(max + 1);

	ck_assert_ptr_nonnull(huge);
	memset(buf, 0xAB, sizeof(buf));
	trecv(s, 1, r, sizeof(r), FI_ADDR_UNSPEC, false, 0, 0, CTX(1));
	ck_assert_int_eq(fdp_msg_inject(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
					FDP_MSG_OP_MSG, 0, false, 0, s->now),
			 0);
	memset(buf, 0, sizeof(buf)); /* reusable at once */
	idle(s);
	ck_assert_int_eq(g_nrx, 1);
	for (size_t i = 0; i < sizeof(r); i++)
		ck_assert_int_eq(r[i], 0xAB);
	ck_assert_int_eq(g_ntx, 0); /* no send completion */
	ck_assert_int_eq(g_inject_done, 1);
	ck_assert_int_eq(g_inject_err, 0);
	/* a multi-frame inject */
	{
		uint8_t *in = malloc(max), *out = calloc(1, max);
		ck_assert_ptr_nonnull(in);
		ck_assert_ptr_nonnull(out);
		for (size_t i = 0; i < max; i++)
			in[i] = (uint8_t)(i * 13);
		ck_assert_uint_gt(max, s->nodes[0].m.cfg.rel.frame_payload);
		trecv(s, 1, out, max, FI_ADDR_UNSPEC, false, 0, 0, CTX(2));
		iov = (struct iovec){ in, max };
		ck_assert_int_eq(fdp_msg_inject(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
						FDP_MSG_OP_MSG, 0, false, 0, s->now),
				 0);
		memset(in, 0, max);
		idle(s);
		ck_assert_int_eq(g_nrx, 2);
		ck_assert_uint_eq(g_rx[1].info.len, max);
		for (size_t i = 0; i < max; i++)
			ck_assert_int_eq(out[i], (uint8_t)(i * 13));
		ck_assert_int_eq(g_inject_done, 2);
		free(in);
		free(out);
	}
	/* too large */
	iov = (struct iovec){ huge, max + 1 };
	ck_assert_int_eq(fdp_msg_inject(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
					FDP_MSG_OP_MSG, 0, false, 0, s->now),
			 -FI_EMSGSIZE);
	/* behind a queued send: -FI_EAGAIN keeps send-after-send order */
	s->down[0][1] = true;
	for (int i = 0; i < 4; i++)
		tsend(s, 0, 1, big, sizeof(big), FDP_MSG_OP_MSG, 0, NULL);
	ck_assert_ptr_nonnull(s->nodes[0].peers[1].txq_head);
	iov = (struct iovec){ buf, 10 };
	ck_assert_int_eq(fdp_msg_inject(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
					FDP_MSG_OP_MSG, 0, false, 0, s->now),
			 -FI_EAGAIN);
	free(huge);
	done(s);
}
END_TEST

START_TEST(test_cancel_limits)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	uint8_t r[10];
	uint8_t *toobig;
	struct iovec iov;

	fdp_msg_cfg_default(&cfg);
	cfg.max_msg_size = 1u << 20;
	cfg.tx_ops = 4;
	s = mk(2, &cfg);
	trecv(s, 1, r, sizeof(r), FI_ADDR_UNSPEC, true, 1, 0, CTX(1));
	ck_assert_int_eq(fdp_msg_cancel(&s->nodes[1].m, CTX(1)), 0);
	ck_assert_int_eq(g_nrx, 1);
	ck_assert_int_eq(g_rx[0].info.err, -FI_ECANCELED);
	ck_assert_int_eq(fdp_msg_cancel(&s->nodes[1].m, CTX(1)), -FI_ENOENT);
	ck_assert_uint_eq(fdp_msg_rx_left(&s->nodes[1].m), cfg.rx_ops);

	toobig = malloc((1u << 20) + 1);
	ck_assert_ptr_nonnull(toobig);
	iov = (struct iovec){ toobig, (1u << 20) + 1 };
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, NULL, 0, s->now),
			 -FI_EMSGSIZE);
	free(toobig);
	/* descriptors run out: -FI_EAGAIN, then free again after completion */
	for (int i = 0; i < 4; i++)
		tsend(s, 0, 1, "", 0, FDP_MSG_OP_MSG, 0, CTX(i));
	iov = (struct iovec){ r, 0 };
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, NULL, FI_TRANSMIT_COMPLETE, s->now),
			 -FI_EAGAIN);
	ck_assert_uint_eq(fdp_msg_tx_left(&s->nodes[0].m), 0);
	for (int i = 0; i < 4; i++)
		trecv(s, 1, r, sizeof(r), FI_ADDR_UNSPEC, false, 0, 0, CTX(10 + i));
	idle(s);
	ck_assert_int_eq(g_ntx, 4);
	ck_assert_int_eq(g_nrx, 5); /* zero-length messages arrive */
	ck_assert_uint_eq(g_rx[4].info.len, 0);
	ck_assert_int_eq(g_rx[4].info.err, 0);
	ck_assert_uint_eq(fdp_msg_tx_left(&s->nodes[0].m), 4);
	done(s);
}
END_TEST

START_TEST(test_matching_under_loss)
{
	/* tagged traffic from two senders over a 10 % lossy link */
	struct sim *s = mk(3, NULL);
	static uint8_t bufs[2][50][3000];
	static uint8_t src[2][50][3000];

	s->drop = s->dup = s->reorder = 0.10;
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < 50; i++) {
			memset(src[p][i], p * 50 + i, sizeof(src[p][i]));
			trecv(s, 0, bufs[p][i], sizeof(bufs[p][i]), (fi_addr_t)(p + 1), true,
			      ((uint64_t)(p + 1) << 32) | (uint64_t)i, 0, CTX(p * 50 + i));
		}
	/* each sender sends its tags in reverse order: matching, not arrival order */
	for (int p = 0; p < 2; p++)
		for (int i = 49; i >= 0; i--)
			tsend(s, p + 1, 0, src[p][i], sizeof(src[p][i]), FDP_MSG_OP_TAGGED,
			      ((uint64_t)(p + 1) << 32) | (uint64_t)i, NULL);
	idle(s);
	ck_assert_int_eq(g_nrx, 100);
	ck_assert_int_eq(g_ntx, 100);
	for (int p = 0; p < 2; p++)
		for (int i = 0; i < 50; i++)
			ck_assert_int_eq(memcmp(bufs[p][i], src[p][i], sizeof(src[p][i])), 0);
	ck_assert_uint_gt(s->dropped, 0);
	done(s);
}
END_TEST

START_TEST(test_inject_complete)
{
	/* FI_INJECT_COMPLETE: a send completes once copied into the send
	 * window: at once when it fits, even if the peer is gone */
	struct sim *s = mk(2, NULL);
	uint8_t small[100], r[100];
	uint8_t *big = malloc(1u << 20), *rbig = malloc(1u << 20);
	struct iovec iov = { small, sizeof(small) };

	ck_assert_ptr_nonnull(big);
	ck_assert_ptr_nonnull(rbig);
	memset(small, 5, sizeof(small));
	memset(big, 6, 1u << 20);
	trecv(s, 1, r, sizeof(r), FI_ADDR_UNSPEC, false, 0, 0, CTX(1));
	trecv(s, 1, rbig, 1u << 20, FI_ADDR_UNSPEC, false, 0, 0, CTX(2));
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, CTX(7), FI_INJECT_COMPLETE, s->now),
			 0);
	ck_assert_int_eq(g_ntx, 1); /* completed inside the call */
	ck_assert_ptr_eq(g_tx[0].context, CTX(7));
	memset(small, 0, sizeof(small)); /* reusable: the copy is what goes */
	/* 1 MiB does not fit the window: it completes when its last frame
	 * is copied, which takes acks for the earlier ones */
	iov = (struct iovec){ big, 1u << 20 };
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, CTX(8), FI_INJECT_COMPLETE, s->now),
			 0);
	ck_assert_int_eq(g_ntx, 1);
	idle(s);
	ck_assert_int_eq(g_ntx, 2);
	ck_assert_int_eq(g_nrx, 2);
	ck_assert_int_eq(r[0], 5);
	ck_assert_int_eq(rbig[(1u << 20) - 1], 6);
	/* a dead peer: the copied send already succeeded, a queued one fails */
	s->down[0][1] = s->down[1][0] = true;
	iov = (struct iovec){ small, sizeof(small) };
	ck_assert_int_eq(fdp_msg_send(&s->nodes[0].m, &s->nodes[0].peers[1], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, CTX(9), FI_INJECT_COMPLETE, s->now),
			 0);
	ck_assert_int_eq(g_ntx, 3);
	ck_assert_int_eq(g_tx[2].err, 0);
	idle(s); /* runs until the peer is declared unreachable */
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.peers_unreachable, 1);
	ck_assert_int_eq(g_ntx, 3);
	ck_assert_int_eq(g_inject_err, 1); /* the lost copy is counted, not reported */
	free(big);
	free(rbig);
	done(s);
}
END_TEST

/* A tagged receive with FI_PEEK/FI_CLAIM/FI_DISCARD flags; returns its result. */
static int xrecv(struct sim *s, int at, void *buf, size_t len, uint64_t tag, uint64_t ignore,
		 void *ctx, uint64_t flags)
{
	struct iovec iov = { buf, len };

	return fdp_msg_recv(&s->nodes[at].m, &iov, buf ? 1 : 0, FI_ADDR_UNSPEC, true, tag, ignore,
			    ctx, flags, s->now);
}

START_TEST(test_peek_claim_discard)
{
	struct sim *s = mk(2, NULL);
	struct fdp_msg_ep *m = &s->nodes[1].m;
	size_t rx_left = fdp_msg_rx_left(m);
	char b[32];
	int n;

	/* nothing there: FI_ENOMSG, and the descriptor is back in the pool */
	ck_assert_int_eq(xrecv(s, 1, b, sizeof(b), 0x100, 0, CTX(1), FI_PEEK), 0);
	ck_assert_int_eq(g_nrx, 1);
	ck_assert_int_eq(g_rx[0].info.err, -FI_ENOMSG);
	ck_assert_ptr_eq(g_rx[0].context, CTX(1));
	ck_assert_uint_eq(fdp_msg_rx_left(m), rx_left);

	tsend(s, 0, 1, "alpha", 6, FDP_MSG_OP_TAGGED, 0x100, CTX(10));
	tsend(s, 0, 1, "bravo-a-longer-one", 19, FDP_MSG_OP_TAGGED, 0x200, CTX(11));
	tsend(s, 0, 1, "charlie", 8, FDP_MSG_OP_TAGGED, 0x300, CTX(12));
	tsend(s, 0, 1, "delta", 6, FDP_MSG_OP_MSG, 0x100, CTX(13)); /* untagged: never peeked */
	idle(s);
	ck_assert_uint_eq(m->ux_count, 4);

	/* peek into a short buffer: the message's length, its first bytes, it stays */
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(xrecv(s, 1, b, 3, 0x100, 0, CTX(2), FI_PEEK), 0);
	ck_assert_int_eq(g_nrx, 2);
	ck_assert_int_eq(g_rx[1].info.err, 0);
	ck_assert_uint_eq(g_rx[1].info.len, 6);
	ck_assert_uint_eq(g_rx[1].info.tag, 0x100);
	ck_assert_ptr_nonnull(g_rx[1].info.peer);
	ck_assert_uint_eq(g_rx[1].iov_count, 1);
	ck_assert_str_eq(b, "alp");
	ck_assert_uint_eq(m->ux_count, 4);
	/* peek without a buffer, through an ignore mask: no data, buf NULL */
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x1FF, 0xFF, CTX(3), FI_PEEK), 0);
	ck_assert_int_eq(g_rx[2].info.err, 0);
	ck_assert_uint_eq(g_rx[2].info.tag, 0x100);
	ck_assert_uint_eq(g_rx[2].iov_count, 0);

	/* peek + claim: reserved for CTX(4); ordinary receives and peeks no longer see it */
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x100, 0, CTX(4), FI_PEEK | FI_CLAIM), 0);
	ck_assert_int_eq(g_rx[3].info.err, 0);
	ck_assert_uint_eq(g_rx[3].info.len, 6);
	n = g_nrx;
	trecv(s, 1, b, sizeof(b), FI_ADDR_UNSPEC, true, 0x100, 0, CTX(5)); /* stays posted */
	ck_assert_int_eq(g_nrx, n);
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x100, 0, CTX(6), FI_PEEK), 0);
	ck_assert_int_eq(g_rx[n].info.err, -FI_ENOMSG);
	/* a claim with another context finds nothing: refused, no completion */
	n = g_nrx;
	ck_assert_int_eq(xrecv(s, 1, b, sizeof(b), 0x100, 0, CTX(7), FI_CLAIM), -FI_EINVAL);
	ck_assert_int_eq(g_nrx, n);
	ck_assert_uint_eq(fdp_msg_rx_left(m), rx_left - 1); /* only CTX(5) is posted */
	/* the paired claim receives it */
	memset(b, 0, sizeof(b));
	ck_assert_int_eq(xrecv(s, 1, b, sizeof(b), 0x100, 0, CTX(4), FI_CLAIM), 0);
	ck_assert_int_eq(g_nrx, n + 1);
	ck_assert_ptr_eq(g_rx[n].context, CTX(4));
	ck_assert_int_eq(g_rx[n].info.err, 0);
	ck_assert_uint_eq(g_rx[n].info.len, 6);
	ck_assert_str_eq(b, "alpha");
	ck_assert_uint_eq(m->ux_count, 3);

	/* peek + discard drops the message */
	n = g_nrx;
	ck_assert_int_eq(xrecv(s, 1, b, sizeof(b), 0x200, 0, CTX(8), FI_PEEK | FI_DISCARD), 0);
	ck_assert_int_eq(g_rx[n].info.err, 0);
	ck_assert_uint_eq(g_rx[n].info.len, 0);
	ck_assert_uint_eq(g_rx[n].info.tag, 0x200);
	ck_assert_uint_eq(g_rx[n].iov_count, 0);
	ck_assert_uint_eq(m->ux_count, 2);
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x200, 0, CTX(9), FI_PEEK), 0);
	ck_assert_int_eq(g_rx[n + 1].info.err, -FI_ENOMSG);

	/* claim, then discard the claimed message */
	n = g_nrx;
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x300, 0, CTX(20), FI_PEEK | FI_CLAIM), 0);
	ck_assert_int_eq(xrecv(s, 1, NULL, 0, 0x300, 0, CTX(20), FI_CLAIM | FI_DISCARD), 0);
	ck_assert_int_eq(g_nrx, n + 2);
	ck_assert_int_eq(g_rx[n + 1].info.err, 0);
	ck_assert_uint_eq(g_rx[n + 1].info.len, 0);
	ck_assert_uint_eq(m->ux_count, 1); /* the untagged "delta" */

	/* the receive left posted (CTX(5)) takes the next 0x100 message */
	n = g_nrx;
	tsend(s, 0, 1, "echo", 5, FDP_MSG_OP_TAGGED, 0x100, CTX(14));
	idle(s);
	ck_assert_int_eq(g_nrx, n + 1);
	ck_assert_ptr_eq(g_rx[n].context, CTX(5));
	ck_assert_str_eq(b, "echo");
	ck_assert_uint_eq(fdp_msg_rx_left(m), rx_left);
	done(s);
}
END_TEST

static Suite *msg_suite(void)
{
	Suite *s = suite_create("fdp_msg");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_tagged_matching);
	tcase_add_test(tc, test_directed_recv_and_source);
	tcase_add_test(tc, test_unexpected_then_post);
	tcase_add_test(tc, test_unexpected_bound_rnr);
	tcase_add_test(tc, test_truncation);
	tcase_add_test(tc, test_cq_data_and_iov);
	tcase_add_test(tc, test_inject);
	tcase_add_test(tc, test_cancel_limits);
	tcase_add_test(tc, test_matching_under_loss);
	tcase_add_test(tc, test_inject_complete);
	tcase_add_test(tc, test_peek_claim_discard);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(msg_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
