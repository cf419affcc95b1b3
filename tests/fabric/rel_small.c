/*
 * rel_small.c - the small-scenario harness of the reliability tests
 * (rel_small.h).
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "rel_small.h"

int g_sent_ok, g_sent_err, g_recv_ok, g_recv_err;
uint64_t g_last_err_time;
static struct sim *g_sim;

static void count_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	(void)m;
	(void)tx;
	if (err) {
		ck_assert_int_eq(err, -FI_EHOSTUNREACH);
		g_sent_err++;
		g_last_err_time = g_sim->now;
	} else {
		g_sent_ok++;
	}
}

static void count_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			    const struct fdp_msg_rx_info *info)
{
	(void)m;
	if (info->err)
		g_recv_err++;
	else
		g_recv_ok++;
	/* context holds the expected first byte */
	if (!info->err && info->len > 0)
		ck_assert_int_eq(((uint8_t *)rx->iov[0].iov_base)[0], (int)(uintptr_t)rx->context);
}

static const struct fdp_msg_ops count_ops = {
	.send_done = count_send_done,
	.recv_done = count_recv_done,
};

struct sim *small_sim_n(const struct fdp_msg_cfg *cfg, uint64_t seed, int n)
{
	struct sim *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	g_sent_ok = g_sent_err = g_recv_ok = g_recv_err = 0;
	g_last_err_time = 0;
	sim_init(s, n, cfg, &count_ops, seed);
	g_sim = s;
	return s;
}

struct sim *small_sim(const struct fdp_msg_cfg *cfg, uint64_t seed)
{
	return small_sim_n(cfg, seed, 2);
}

void send_bytes(struct sim *s, int from, uint8_t *buf, size_t len)
{
	struct iovec iov = { buf, len };
	ck_assert_int_eq(fdp_msg_send(&s->nodes[from].m, &s->nodes[from].peers[1 - from], &iov, 1,
				      FDP_MSG_OP_MSG, 0, false, 0, NULL, FI_TRANSMIT_COMPLETE,
				      s->now),
			 0);
}

void recv_bytes_from(struct sim *s, int at, uint8_t *buf, size_t len, int first_byte,
		     fi_addr_t src)
{
	struct iovec iov = { buf, len };
	ck_assert_int_eq(fdp_msg_recv(&s->nodes[at].m, &iov, 1, src, false, 0, 0,
				      (void *)(uintptr_t)first_byte, 0, s->now),
			 0);
}

void recv_bytes(struct sim *s, int at, uint8_t *buf, size_t len, int first_byte)
{
	struct iovec iov = { buf, len };
	ck_assert_int_eq(fdp_msg_recv(&s->nodes[at].m, &iov, 1, FI_ADDR_UNSPEC, false, 0, 0,
				      (void *)(uintptr_t)first_byte, 0, s->now),
			 0);
}

void run_until_idle(struct sim *s, long max_steps)
{
	for (long i = 0; i < max_steps && sim_step(s); i++)
		;
}

void exchange(struct sim *s, int from, uint8_t *buf, uint8_t *rbuf, uint8_t b)
{
	buf[0] = b;
	recv_bytes(s, 1 - from, rbuf, 100, b);
	send_bytes(s, from, buf, 100);
	run_until_idle(s, 100000);
}
