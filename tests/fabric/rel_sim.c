/* rel_sim.c - simulated lossy link for the reliability unit tests. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rel_sim.h"

uint64_t sim_rand(struct sim *s)
{
	/* splitmix64: tiny, seeded, good enough for fault injection */
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double sim_unit(struct sim *s)
{
	return (double)(sim_rand(s) >> 11) / (double)(1ull << 53);
}

struct sim_node *sim_node_of(struct fdp_msg_ep *m)
{
	return (struct sim_node *)((char *)m - offsetof(struct sim_node, m));
}

static bool frame_before(const struct sim_frame *a, const struct sim_frame *b)
{
	return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(struct sim *s, struct sim_frame f)
{
	size_t i;

	if (s->heap_len == s->heap_cap) {
		s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 1024;
		s->heap = realloc(s->heap, s->heap_cap * sizeof(*s->heap));
		if (!s->heap)
			abort();
	}
	i = s->heap_len++;
	while (i > 0 && frame_before(&f, &s->heap[(i - 1) / 2])) {
		s->heap[i] = s->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	s->heap[i] = f;
}

static struct sim_frame heap_pop(struct sim *s)
{
	struct sim_frame top = s->heap[0], last = s->heap[--s->heap_len];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= s->heap_len)
			break;
		if (c + 1 < s->heap_len && frame_before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!frame_before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->heap_len)
		s->heap[i] = last;
	return top;
}

static void enqueue(struct sim *s, int from, int to, const uint8_t *data, size_t len,
		    uint64_t extra)
{
	struct sim_frame f = {
		.at = s->now + s->latency_ns + extra,
		.order = s->order++,
		.from = from,
		.to = to,
		.len = len,
		.data = malloc(len),
	};
	if (!f.data)
		abort();
	memcpy(f.data, data, len);
	heap_push(s, f);
}

static int sim_tx(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, const void *hdr,
		  size_t hdr_len, const void *payload, size_t len, const void *ext,
		  size_t ext_len)
{
	struct sim_node *node = sim_node_of(m);
	struct sim *s = node->sim;
	int to = (int)(peer - node->peers);
	uint8_t buf[70000];
	uint64_t extra = 0;

	memcpy(buf, hdr, hdr_len);
	if (len)
		memcpy(buf + hdr_len, payload, len);
	if (ext_len)
		memcpy(buf + hdr_len + len, ext, ext_len);
	len += ext_len;
	s->frames++;
	if (((const uint8_t *)hdr)[2] == FDP_REL_T_DATA) {
		uint64_t nth = ++s->data_frames_sent[node->id][to];
		if (s->drop_nth && nth == s->drop_nth && node->id == s->drop_from &&
		    to == s->drop_to) {
			s->dropped++;
			return 0;
		}
	}
	if (s->down[node->id][to] || (s->drop > 0 && sim_unit(s) < s->drop)) {
		s->dropped++;
		return 0;
	}
	if (s->reorder > 0 && sim_unit(s) < s->reorder) {
		extra = s->reorder_ns;
		s->reordered++;
	}
	enqueue(s, node->id, to, buf, hdr_len + len, extra);
	if (s->dup > 0 && sim_unit(s) < s->dup) {
		enqueue(s, node->id, to, buf, hdr_len + len, extra + 1000);
		s->duplicated++;
	}
	return 0;
}

static void sim_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	struct sim *s = sim_node_of(m)->sim;
	if (s->ops && s->ops->send_done)
		s->ops->send_done(m, tx, err);
}

static void sim_inject_done(struct fdp_msg_ep *m, struct fdp_msg_peer *peer, int err)
{
	struct sim *s = sim_node_of(m)->sim;
	if (s->ops && s->ops->inject_done)
		s->ops->inject_done(m, peer, err);
}

static void sim_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			  const struct fdp_msg_rx_info *info)
{
	struct sim *s = sim_node_of(m)->sim;
	if (s->ops && s->ops->recv_done)
		s->ops->recv_done(m, rx, info);
}

static const struct fdp_msg_ops sim_ops = {
	.tx = sim_tx,
	.send_done = sim_send_done,
	.inject_done = sim_inject_done,
	.recv_done = sim_recv_done,
};

void sim_init(struct sim *s, int n, const struct fdp_msg_cfg *cfg,
	      const struct fdp_msg_ops *test_ops, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->n = n;
	s->rng = seed;
	s->latency_ns = 5000;
	s->reorder_ns = 15000;
	s->ops = test_ops;
	for (int i = 0; i < n; i++) {
		struct sim_node *node = &s->nodes[i];
		struct fdp_msg_cfg c = *cfg;

		c.rel.session = (uint32_t)(0x1000 + i); /* distinct instance ids */
		node->id = i;
		node->sim = s;
		if (fdp_msg_init(&node->m, &c, &sim_ops, node) != 0) {
			fprintf(stderr, "sim_init: fdp_msg_init failed\n");
			abort();
		}
		for (int j = 0; j < n; j++)
			if (fdp_msg_peer_init(&node->m, &node->peers[j], (fi_addr_t)j) != 0)
				abort();
	}
}

void sim_fini(struct sim *s)
{
	for (int i = 0; i < s->n; i++) {
		for (int j = 0; j < s->n; j++)
			fdp_msg_peer_fini(&s->nodes[i].m, &s->nodes[i].peers[j]);
		fdp_msg_fini(&s->nodes[i].m);
	}
	while (s->heap_len)
		free(heap_pop(s).data);
	free(s->heap);
	s->heap = NULL;
}

bool sim_step(struct sim *s)
{
	uint64_t next = UINT64_MAX;

	for (int i = 0; i < s->n; i++) {
		uint64_t d = fdp_msg_progress(&s->nodes[i].m, s->now);
		if (d < next)
			next = d;
	}
	if (s->heap_len && s->heap[0].at < next)
		next = s->heap[0].at;
	if (next == UINT64_MAX)
		return false;
	if (next > s->now)
		s->now = next;
	while (s->heap_len && s->heap[0].at <= s->now) {
		struct sim_frame f = heap_pop(s);
		struct sim_node *dst = &s->nodes[f.to];
		fdp_msg_rx_frame(&dst->m, &dst->peers[f.from], f.data, f.len, s->now);
		free(f.data);
	}
	return true;
}

void sim_run_until(struct sim *s, uint64_t t)
{
	for (long guard = 0; guard < 100000000L && s->now < t; guard++) {
		uint64_t next = UINT64_MAX;

		for (int i = 0; i < s->n; i++) {
			uint64_t d = fdp_msg_progress(&s->nodes[i].m, s->now);
			if (d < next)
				next = d;
		}
		if (s->heap_len && s->heap[0].at < next)
			next = s->heap[0].at;
		if (next > t) {
			s->now = t;
			return;
		}
		if (!sim_step(s)) {
			s->now = t;
			return;
		}
	}
}

void sim_restart(struct sim *s, int i, uint32_t session)
{
	struct sim_node *node = &s->nodes[i];
	struct fdp_msg_cfg c = node->m.cfg;

	for (int j = 0; j < s->n; j++)
		fdp_msg_peer_fini(&node->m, &node->peers[j]);
	fdp_msg_fini(&node->m);
	c.rel.session = session;
	if (fdp_msg_init(&node->m, &c, &sim_ops, node) != 0)
		abort();
	for (int j = 0; j < s->n; j++)
		if (fdp_msg_peer_init(&node->m, &node->peers[j], (fi_addr_t)j) != 0)
			abort();
}
