/*
 * test_rel_timers.c - unit tests of the reliability engine's timers and
 * retransmission over a simulated link (rel_sim): RTT estimation, RTO
 * bounds, fast retransmit, tail loss probe, unreachable peers, a peer that
 * restarts.
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

START_TEST(test_rtt_converges)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t buf[64], rbuf[64];
	struct fdp_rel_peer *p;

	fdp_msg_cfg_default(&cfg);
	cfg.rel.ack_every = 1; /* ack each frame at once: RTT == 2 x latency */
	cfg.rel.rto_min_ns = 1000;
	s = small_sim(&cfg, 5);
	p = &s->nodes[0].peers[1].rel;
	s->latency_ns = 10000;
	for (int i = 0; i < 100; i++) {
		buf[0] = (uint8_t)i;
		recv_bytes(s, 1, rbuf, sizeof(rbuf), i);
		send_bytes(s, 0, buf, sizeof(buf));
		run_until_idle(s, 10000);
	}
	ck_assert_int_eq(g_sent_ok, 100);
	ck_assert_int_eq(g_recv_ok, 100);
	ck_assert_uint_ge(s->nodes[0].m.rel.stats.rtt_samples, 100);
	ck_assert_uint_ge(p->srtt_ns, 19000);
	ck_assert_uint_le(p->srtt_ns, 21000);
	ck_assert_uint_le(p->rttvar_ns, 2000);
	/* RTO = SRTT + max(G, 4 RTTVAR) once the variance has decayed */
	ck_assert_uint_le(p->rto_base_ns, 30000);
	ck_assert_uint_ge(p->rto_base_ns, 20000);

	/* the path gets slower: the estimate follows */
	s->latency_ns = 50000;
	for (int i = 0; i < 100; i++) {
		buf[0] = (uint8_t)i;
		recv_bytes(s, 1, rbuf, sizeof(rbuf), i);
		send_bytes(s, 0, buf, sizeof(buf));
		run_until_idle(s, 10000);
	}
	ck_assert_uint_ge(p->srtt_ns, 95000);
	ck_assert_uint_le(p->srtt_ns, 105000);
	ck_assert_uint_ge(p->rto_base_ns, p->srtt_ns);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_rto_floor_and_cap)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t buf[64];
	struct fdp_rel_peer *p;

	fdp_msg_cfg_default(&cfg);
	s = small_sim(&cfg, 6);
	p = &s->nodes[0].peers[1].rel;
	/* a LAN-fast path: the floor holds */
	for (int i = 0; i < 20; i++) {
		send_bytes(s, 0, buf, sizeof(buf));
		run_until_idle(s, 10000);
	}
	ck_assert_uint_eq(p->rto_base_ns, cfg.rel.rto_min_ns);
	/* a dead path: exponential backoff up to the cap */
	s->down[0][1] = true;
	send_bytes(s, 0, buf, sizeof(buf));
	sim_run_until(s, s->now + 1500ull * 1000 * 1000);
	ck_assert_uint_eq(p->rto_ns, cfg.rel.rto_max_ns);
	ck_assert_uint_ge(s->nodes[0].m.rel.stats.tx_rto, 10);
	/* bounded: with a 100 ms cap, 1.5 s holds at most ~ 8 + 15 expiries */
	ck_assert_uint_le(s->nodes[0].m.rel.stats.tx_rto, 25);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_fast_retransmit)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t buf[20][100], rbuf[20][100];
	uint64_t t0;

	fdp_msg_cfg_default(&cfg);
	s = small_sim(&cfg, 7);
	s->drop_nth = 5; /* the 5th data frame 0 -> 1 is lost, once */
	s->drop_from = 0;
	s->drop_to = 1;
	t0 = s->now;
	for (int i = 0; i < 20; i++) {
		buf[i][0] = (uint8_t)i;
		recv_bytes(s, 1, rbuf[i], 100, i);
	}
	for (int i = 0; i < 20; i++)
		send_bytes(s, 0, buf[i], 100);
	for (long i = 0; i < 100000 && g_recv_ok < 20; i++)
		ck_assert(sim_step(s));
	ck_assert_int_eq(g_recv_ok, 20);
	/* recovered by fast retransmit, long before the first timeout */
	ck_assert_uint_ge(s->nodes[0].m.rel.stats.tx_fast_retx, 1);
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.tx_rto, 0);
	ck_assert_uint_lt(s->now - t0, cfg.rel.rto_init_ns / 4);
	run_until_idle(s, 100000);
	ck_assert_int_eq(g_sent_ok, 20);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_fast_retransmit_large)
{
	/* one hole early in a 200-frame message: SACK recovery, no timeout */
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t big[200 * 1424];
	static uint8_t rbig[sizeof(big)];

	fdp_msg_cfg_default(&cfg);
	s = small_sim(&cfg, 8);
	s->drop_nth = 2;
	s->drop_from = 0;
	s->drop_to = 1;
	big[0] = 9;
	recv_bytes(s, 1, rbig, sizeof(rbig), 9);
	send_bytes(s, 0, big, sizeof(big));
	for (long i = 0; i < 100000 && g_recv_ok < 1; i++)
		ck_assert(sim_step(s));
	ck_assert_int_eq(g_recv_ok, 1);
	ck_assert_uint_ge(s->nodes[0].m.rel.stats.tx_fast_retx, 1);
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.tx_rto, 0);
	ck_assert_int_eq(memcmp(big, rbig, sizeof(big)), 0);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_tail_loss_probe)
{
	/* a lone one-frame message is lost: no later frame can reveal the
	 * hole, the tail loss probe repairs it well before the RTO floor */
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t buf[100], rbuf[100];
	uint64_t t0;

	fdp_msg_cfg_default(&cfg);
	s = small_sim(&cfg, 12);
	for (int i = 0; i < 20; i++) {
		buf[0] = (uint8_t)i;
		recv_bytes(s, 1, rbuf, sizeof(rbuf), i);
		send_bytes(s, 0, buf, sizeof(buf));
		run_until_idle(s, 100000);
	}
	ck_assert_int_eq(g_recv_ok, 20);
	s->drop_nth = s->data_frames_sent[0][1] + 1; /* the next data frame 0 -> 1 */
	s->drop_from = 0;
	s->drop_to = 1;
	buf[0] = 77;
	recv_bytes(s, 1, rbuf, sizeof(rbuf), 77);
	t0 = s->now;
	send_bytes(s, 0, buf, sizeof(buf));
	for (long i = 0; i < 100000 && g_recv_ok < 21; i++)
		ck_assert(sim_step(s));
	ck_assert_int_eq(g_recv_ok, 21);
	ck_assert_uint_ge(s->nodes[0].m.rel.stats.tx_tlp, 1);
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.tx_rto, 0);
	ck_assert_uint_lt(s->now - t0, cfg.rel.rto_min_ns / 2);
	run_until_idle(s, 100000);
	ck_assert_int_eq(g_sent_ok, 21);
	sim_fini(s);
	free(s);
}
END_TEST

START_TEST(test_unreachable)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t small[100], rsmall[3][100];
	uint8_t *big = malloc(MIB);
	uint64_t t_cut;

	ck_assert_ptr_nonnull(big);
	memset(big, 0x55, MIB);
	fdp_msg_cfg_default(&cfg);
	cfg.rel.unreach_ns = 50ull * 1000 * 1000;
	s = small_sim(&cfg, 9);
	exchange(s, 0, small, rsmall[0], 1); /* a working exchange first */
	ck_assert_int_eq(g_recv_ok, 1);
	ck_assert_int_eq(g_sent_ok, 1);

	/* the peer dies: 1 MiB sends overflow the window, so some wait queued */
	s->down[0][1] = s->down[1][0] = true;
	t_cut = s->now;
	for (int i = 0; i < 3; i++)
		send_bytes(s, 0, big, MIB);
	send_bytes(s, 0, small, 100);
	/* (the last step may leave nothing pending: sim_step then says so) */
	for (long i = 0; i < 10000000L && g_sent_err < 4 && sim_step(s); i++)
		;
	ck_assert_int_eq(g_sent_err, 4); /* every pending send, exactly once */
	ck_assert_int_eq(g_sent_ok, 1);
	ck_assert_uint_eq(s->nodes[0].m.rel.stats.peers_unreachable, 1);
	/* within the bound: after unreach, before unreach + first RTO + one capped RTO */
	ck_assert_uint_ge(g_last_err_time - t_cut, cfg.rel.unreach_ns);
	ck_assert_uint_le(g_last_err_time - t_cut,
			  cfg.rel.unreach_ns + cfg.rel.rto_init_ns + cfg.rel.rto_max_ns);
	ck_assert_uint_eq(fdp_msg_tx_left(&s->nodes[0].m), cfg.tx_ops);

	/* the peer comes back: a new send gets through, the abandoned ones do not */
	s->down[0][1] = s->down[1][0] = false;
	small[0] = 2;
	recv_bytes(s, 1, rsmall[1], 100, 2);
	send_bytes(s, 0, small, 100);
	run_until_idle(s, 1000000);
	ck_assert_int_eq(g_sent_ok, 2);
	ck_assert_int_eq(g_recv_ok, 2);
	ck_assert_int_eq(rsmall[1][0], 2);
	ck_assert_uint_ge(s->nodes[1].m.rel.stats.rx_resets, 1);
	free(big);
	sim_fini(s);
	free(s);
}
END_TEST

/* The peer restarts (same address, new session) while frames we sent its
 * previous instance are unacknowledged: say its last reply's ack never left,
 * and the link was down for D (RTO backed off to its cap, or past unreach_ns).
 * The new instance and we must exchange new messages at once, not after
 * timers, and what we sent the old instance must not reach the new one. */
static void peer_restart_after(uint64_t down_ns)
{
	struct fdp_msg_cfg cfg;
	struct sim *s;
	static uint8_t buf[100], buf2[100], rbuf[4][100];
	uint64_t t0;

	fdp_msg_cfg_default(&cfg);
	s = small_sim(&cfg, 21);
	/* request 1 -> 0, reply 0 -> 1; the client dies before acking the reply */
	exchange(s, 1, buf, rbuf[0], 1);
	ck_assert_int_eq(g_recv_ok, 1);
	s->down[1][0] = true;
	buf[0] = 0x99;
	recv_bytes(s, 1, rbuf[1], 100, 0x99);
	send_bytes(s, 0, buf, 100);
	for (long i = 0; i < 100000 && g_recv_ok < 2; i++)
		ck_assert(sim_step(s));
	ck_assert_int_eq(g_recv_ok, 2);
	s->down[0][1] = true;
	sim_run_until(s, s->now + down_ns);
	ck_assert_int_eq(g_sent_ok, 1); /* the reply is still unacknowledged (or abandoned) */

	sim_restart(s, 1, 0x2001);
	s->down[0][1] = s->down[1][0] = false;
	t0 = s->now;
	/* both sides at once, as after a negotiation on another channel */
	buf[0] = 0x22;
	recv_bytes(s, 1, rbuf[2], 100, 0x22);
	send_bytes(s, 0, buf, 100);
	buf2[0] = 0x11;
	recv_bytes(s, 0, rbuf[3], 100, 0x11);
	send_bytes(s, 1, buf2, 100);
	for (long i = 0; i < 1000000 && g_recv_ok < 4 && s->now - t0 < 5000000000ull; i++)
		if (!sim_step(s))
			break;
	ck_assert_int_eq(g_recv_ok, 4);
	/* a few round trips, far below any retransmission timer */
	ck_assert_uint_lt(s->now - t0, cfg.rel.rto_min_ns / 2);
	run_until_idle(s, 1000000);
	ck_assert_int_eq(g_recv_ok, 4);
	sim_fini(s);
	free(s);
}

START_TEST(test_peer_restart)
{
	static const uint64_t down_ms[] = { 1, 50, 500, 2500 };

	peer_restart_after(down_ms[_i] * 1000 * 1000);
}
END_TEST
static Suite *rel_suite(void)
{
	Suite *s = suite_create("fdp_rel_timers");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_rtt_converges);
	tcase_add_test(tc, test_rto_floor_and_cap);
	tcase_add_test(tc, test_fast_retransmit);
	tcase_add_test(tc, test_fast_retransmit_large);
	tcase_add_test(tc, test_tail_loss_probe);
	tcase_add_test(tc, test_unreachable);
	tcase_add_loop_test(tc, test_peer_restart, 0, 4);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(rel_suite());
}
