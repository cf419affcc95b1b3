/*
 * xdp_probe.c - can this kernel/container run an AF_XDP port on an
 * interface? Asked without DPDK or the provider, so that a test can tell an
 * environment that cannot (SKIP) from our own failure (FAIL).
 *
 *   xdp_probe IFACE
 *
 * Does with raw system calls what DPDK's net_af_xdp needs: an AF_XDP
 * socket, an XSKMAP, an XDP program loaded and attached to IFACE (a bpf
 * link, detached when the probe exits), a UMEM with its fill/completion
 * rings and RX/TX rings, and a bind to IFACE's queue 0.
 * Exit 0: it all works; 77: a step the environment refuses (printed with
 * its errno); 2: usage or no such interface.
 */
#include "config.h"

#include <errno.h>
#include <linux/bpf.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define FRAMES 64
#define FRAME_SIZE 4096

static int refused(const char *step)
{
	printf("xdp_probe: %s: %s\n", step, strerror(errno));
	return 77;
}

static long sys_bpf(int cmd, union bpf_attr *attr)
{
	return syscall(__NR_bpf, cmd, attr, sizeof(*attr));
}

int main(int argc, char **argv)
{
	/* r0 = XDP_PASS; exit */
	struct bpf_insn prog[2] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS},
		{.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr attr;
	struct xdp_umem_reg umem;
	struct sockaddr_xdp sxdp;
	unsigned int ifindex;
	int xsk, map_fd, prog_fd, link_fd, ring = FRAMES;
	void *area;

	if (argc != 2) {
		fprintf(stderr, "usage: %s IFACE\n", argv[0]);
		return 2;
	}
	ifindex = if_nametoindex(argv[1]);
	if (!ifindex) {
		fprintf(stderr, "xdp_probe: no interface %s\n", argv[1]);
		return 2;
	}
	xsk = socket(AF_XDP, SOCK_RAW, 0);
	if (xsk < 0)
		return refused("socket(AF_XDP)");

	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_XSKMAP;
	attr.key_size = 4;
	attr.value_size = 4;
	attr.max_entries = 1;
	map_fd = (int)sys_bpf(BPF_MAP_CREATE, &attr);
	if (map_fd < 0)
		return refused("bpf(BPF_MAP_CREATE, XSKMAP)");

	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_XDP;
	attr.insns = (uint64_t)(uintptr_t)prog;
	attr.insn_cnt = 2;
	attr.license = (uint64_t)(uintptr_t)"GPL";
	prog_fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
	if (prog_fd < 0)
		return refused("bpf(BPF_PROG_LOAD, XDP)");

	memset(&attr, 0, sizeof(attr));
	attr.link_create.prog_fd = (uint32_t)prog_fd;
	attr.link_create.target_ifindex = ifindex;
	attr.link_create.attach_type = BPF_XDP;
	link_fd = (int)sys_bpf(BPF_LINK_CREATE, &attr);
	if (link_fd < 0)
		return refused("bpf(BPF_LINK_CREATE, XDP) on the interface");

	area = mmap(NULL, FRAMES * FRAME_SIZE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return refused("mmap of the UMEM");
	memset(&umem, 0, sizeof(umem));
	umem.addr = (uint64_t)(uintptr_t)area;
	umem.len = FRAMES * FRAME_SIZE;
	umem.chunk_size = FRAME_SIZE;
	if (setsockopt(xsk, SOL_XDP, XDP_UMEM_REG, &umem, sizeof(umem)))
		return refused("setsockopt(XDP_UMEM_REG)");
	if (setsockopt(xsk, SOL_XDP, XDP_UMEM_FILL_RING, &ring, sizeof(ring)) ||
	    setsockopt(xsk, SOL_XDP, XDP_UMEM_COMPLETION_RING, &ring, sizeof(ring)) ||
	    setsockopt(xsk, SOL_XDP, XDP_RX_RING, &ring, sizeof(ring)) ||
	    setsockopt(xsk, SOL_XDP, XDP_TX_RING, &ring, sizeof(ring)))
		return refused("setsockopt(XDP rings)");

	memset(&sxdp, 0, sizeof(sxdp));
	sxdp.sxdp_family = AF_XDP;
	sxdp.sxdp_ifindex = ifindex;
	sxdp.sxdp_queue_id = 0;
	if (bind(xsk, (struct sockaddr *)&sxdp, sizeof(sxdp)))
		return refused("bind(AF_XDP) to queue 0");

	printf("xdp_probe: AF_XDP works on %s (socket, XSKMAP, XDP program attached, "
	       "UMEM, bind)\n", argv[1]);
	close(xsk);
	close(link_fd);
	close(prog_fd);
	close(map_fd);
	munmap(area, FRAMES * FRAME_SIZE);
	return 0;
}
