/*
 * libFuzzer target: the reliability engine and the message layer (fdp_rel,
 * fdp_msg) fed arbitrary frames from a peer mid-conversation must never
 * crash, overrun, leak or hang, whatever the bytes.
 *
 * Each input is a list of frames: [op:1][len:2][bytes:len]... With op bit 0
 * the bytes are laid over a valid reliable header of the live session (seq,
 * una and ack near the receiver's real state, so the fuzzer reaches the
 * window, SACK, reassembly and matching code instead of failing the version
 * check); otherwise they are the raw frame. Between frames virtual time moves
 * on and both engines run their timers; at the end the link runs on for a
 * bounded virtual time.
 */
#include "config.h"

#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rel_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t rx_bufs[4][8192];

static void nop_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	(void)m;
	(void)tx;
	(void)err;
}

static void nop_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			  const struct fdp_msg_rx_info *info)
{
	(void)m;
	(void)rx;
	(void)info;
}

static const struct fdp_msg_ops fuzz_ops = {
	.send_done = nop_send_done,
	.recv_done = nop_recv_done,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sim s;
	static const char hello[] = "hello";
	struct fdp_msg_cfg cfg;
	struct fdp_rel_peer *pb;
	size_t off = 0;

	fdp_msg_cfg_default(&cfg);
	cfg.rel.window = 64;
	cfg.rel.frame_payload = 512;
	cfg.rel.unreach_ns = 20ull * 1000 * 1000;
	cfg.tx_ops = cfg.rx_ops = 16;
	cfg.ux_max_entries = 8;
	cfg.max_msg_size = 64 * 1024;
	cfg.ux_max_bytes = 64 * 1024;
	cfg.inject_max = 1024;
	sim_init(&s, 2, &cfg, &fuzz_ops, 1);
	for (int i = 0; i < 4; i++) {
		struct iovec iov = { rx_bufs[i], sizeof(rx_bufs[i]) };
		fdp_msg_recv(&s.nodes[1].m, &iov, 1, FI_ADDR_UNSPEC, i & 1, (uint64_t)i, 0, NULL, 0,
			     s.now);
	}
	/* a live session first: both sides know each other */
	for (int i = 0; i < 2; i++) {
		struct iovec iov = { (void *)hello, sizeof(hello) };
		fdp_msg_send(&s.nodes[0].m, &s.nodes[0].peers[1], &iov, 1, FDP_MSG_OP_MSG, 0, false,
			     0, NULL, 0, s.now);
		fdp_msg_send(&s.nodes[1].m, &s.nodes[1].peers[0], &iov, 1, FDP_MSG_OP_MSG, 0, false,
			     0, NULL, 0, s.now);
	}
	sim_run_until(&s, s.now + 1000 * 1000);
	pb = &s.nodes[1].peers[0].rel;

	while (size - off >= 3) {
		uint8_t op = data[off], frame[2048];
		size_t len = ((size_t)data[off + 1] << 8 | data[off + 2]) % sizeof(frame);

		off += 3;
		if (len > size - off)
			len = size - off;
		if (op & 1) {
			struct fdp_rel_hdr h = { 0 };
			size_t n = len < sizeof(frame) - sizeof(h) ? len : sizeof(frame) - sizeof(h);

			h.hdr.magic = FDP_MAGIC;
			h.hdr.version = FDP_PROTO_VERSION;
			h.hdr.type = (op & 2) ? FDP_REL_T_ACK : FDP_REL_T_DATA;
			h.hdr.flags = FDP_REL_F_ACK | (op & 0x30) >> 3;
			h.hdr.len = htobe16((uint16_t)(sizeof(h) + ((op & 2) ? 0 : n)));
			h.version = FDP_REL_VERSION;
			h.uflags = (op >> 2) & 1;
			h.session = htobe32(s.nodes[0].m.rel.cfg.session);
			h.peer_session = htobe32(s.nodes[1].m.rel.cfg.session);
			h.seq = htobe32(pb->rcv_nxt + (uint32_t)(int8_t)(n ? data[off] : 0));
			h.una = htobe32(pb->rcv_nxt - (op >> 6));
			h.ack = htobe32(pb->snd_una + (uint32_t)(n > 1 ? data[off + 1] % 8 : 0));
			if (n > 9)
				memcpy(&h.sack, data + off + 2, sizeof(h.sack));
			h.tsval = htobe32((uint32_t)(s.now / 1000));
			memcpy(frame, &h, sizeof(h));
			if (!(op & 2))
				memcpy(frame + sizeof(h), data + off, n);
			fdp_msg_rx_frame(&s.nodes[1].m, &s.nodes[1].peers[0], frame,
					 (op & 2) ? sizeof(h) : sizeof(h) + n, s.now);
		} else {
			memcpy(frame, data + off, len);
			fdp_msg_rx_frame(&s.nodes[1].m, &s.nodes[1].peers[0], frame, len, s.now);
		}
		off += len;
		s.now += 1000 + (op & 0x80) * 1000;
		for (int i = 0; i < 2; i++)
			fdp_msg_progress(&s.nodes[i].m, s.now);
	}
	/* bounded: timers may still fire (retransmissions, unreachability) */
	sim_run_until(&s, s.now + 50ull * 1000 * 1000);
	sim_fini(&s);
	return 0;
}
