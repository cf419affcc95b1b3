/*
 * rel_sim.h - a simulated lossy datagram link joining fdp_msg/fdp_rel
 * endpoints inside one process, with a virtual clock (for unit tests).
 *
 * Every frame an endpoint sends is copied into a priority queue ordered by
 * delivery time; the link drops, duplicates and delays (reorders) frames with
 * fixed probabilities drawn from a seeded PRNG, so every run is identical.
 * sim_step() advances the virtual clock to the next event (frame arrival or
 * engine timer) and runs it.
 */
#ifndef REL_SIM_H
#define REL_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "fabric/fdp_msg.h"

#define SIM_MAX_NODES 4

struct sim;

struct sim_node {
	struct fdp_msg_ep m;
	struct fdp_msg_peer peers[SIM_MAX_NODES]; /* state for node i, addr == i */
	int id;
	struct sim *sim;
	void *user;
};

struct sim_frame {
	uint64_t at;      /* delivery time */
	uint64_t order;   /* tie-breaker: send order */
	int from, to;
	size_t len;
	uint8_t *data;
};

struct sim {
	uint64_t now;
	int n;
	struct sim_node nodes[SIM_MAX_NODES];
	/* link model */
	double drop, dup, reorder;
	uint64_t latency_ns;      /* one-way */
	uint64_t reorder_ns;      /* extra delay of a reordered frame */
	bool down[SIM_MAX_NODES][SIM_MAX_NODES]; /* [from][to]: drop everything */
	/* drop exactly the nth DATA frame sent from->to (0 = off), once */
	uint64_t drop_nth;
	int drop_from, drop_to;
	uint64_t data_frames_sent[SIM_MAX_NODES][SIM_MAX_NODES];
	uint64_t rng;
	/* queue (binary heap) */
	struct sim_frame *heap;
	size_t heap_len, heap_cap;
	uint64_t order;
	/* statistics */
	uint64_t frames, dropped, duplicated, reordered;
	/* callbacks into the test */
	const struct fdp_msg_ops *ops; /* send_done/recv_done/inject_done used */
};

/* Set up n nodes, all with cfg, link model zeroed (perfect, 5 us latency). */
void sim_init(struct sim *s, int n, const struct fdp_msg_cfg *cfg,
	      const struct fdp_msg_ops *test_ops, uint64_t seed);
void sim_fini(struct sim *s);
/* Advance to the next event and run it; false when nothing can ever happen. */
bool sim_step(struct sim *s);
/* Run events until the virtual clock passes t (or nothing is pending). */
void sim_run_until(struct sim *s, uint64_t t);
uint64_t sim_rand(struct sim *s);
struct sim_node *sim_node_of(struct fdp_msg_ep *m);
/* Node i's process restarts: all its state is lost, it comes back at the
 * same address with a new session id (frames in flight still arrive). */
void sim_restart(struct sim *s, int i, uint32_t session);

#endif /* REL_SIM_H */
