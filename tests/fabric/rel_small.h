/*
 * rel_small.h - the small-scenario harness of the reliability tests
 * (test_rel, test_rel_timers): a few nodes on a simulated link (rel_sim.h)
 * whose completions are counted, and helpers to post one message at a time.
 * Helpers fail the running Check test on error.
 */
#ifndef REL_SMALL_H
#define REL_SMALL_H

#include <stddef.h>
#include <stdint.h>

#include "rel_sim.h"

#define MIB (1u << 20)

/* completions since the last small_sim_n: sends acknowledged / failed
 * (-FI_EHOSTUNREACH only, at g_last_err_time), receives done / failed; a
 * receive's context is the first byte it must hold */
extern int g_sent_ok, g_sent_err, g_recv_ok, g_recv_err;
extern uint64_t g_last_err_time;

/* A new simulation of n nodes (2 for small_sim) counting into the above;
 * the caller sim_fini()s and frees it. */
struct sim *small_sim_n(const struct fdp_msg_cfg *cfg, uint64_t seed, int n);
struct sim *small_sim(const struct fdp_msg_cfg *cfg, uint64_t seed);
/* transmit complete: send_done when the peer acknowledged */
void send_bytes(struct sim *s, int from, uint8_t *buf, size_t len);
void recv_bytes_from(struct sim *s, int at, uint8_t *buf, size_t len, int first_byte,
		     fi_addr_t src);
void recv_bytes(struct sim *s, int at, uint8_t *buf, size_t len, int first_byte);
void run_until_idle(struct sim *s, long max_steps);
/* One 100-byte message from -> the other node (first byte b), run to idle. */
void exchange(struct sim *s, int from, uint8_t *buf, uint8_t *rbuf, uint8_t b);

#endif /* REL_SMALL_H */
