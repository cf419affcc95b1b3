/* fdp_frame.h - parse and build provider frames (pure C, no DPDK).
 *
 * fdp_frame_parse() never reads outside [buf, buf+len) whatever the bytes
 * say; it is the only place that interprets received header bytes, and it is
 * fuzzed (tests/fabric/fuzz_frame.c).
 */
#ifndef FDP_FRAME_H
#define FDP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fdp_proto.h"

#ifndef FDP_HIDDEN
#define FDP_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Why a frame was dropped; 0 = accepted. Counted per reason by the port. */
enum fdp_drop {
	FDP_DROP_NONE = 0,
	FDP_DROP_SHORT,         /* shorter than the headers it claims */
	FDP_DROP_ETHERTYPE,     /* neither IPv4 nor ARP */
	FDP_DROP_ARP_FORMAT,    /* ARP not Ethernet/IPv4 or unknown op */
	FDP_DROP_IP_HDR,        /* version != 4 or IHL < 5 */
	FDP_DROP_IP_LEN,        /* total length below header or past the frame */
	FDP_DROP_IP_FRAG,       /* a fragment (we never send them) */
	FDP_DROP_IP_CSUM,       /* bad IPv4 header checksum */
	FDP_DROP_PROTO,         /* not UDP */
	FDP_DROP_UDP_LEN,       /* UDP length inconsistent with IPv4 length */
	FDP_DROP_UDP_CSUM,      /* bad UDP checksum */
	FDP_DROP_MAGIC,         /* UDP payload is not a provider frame */
	FDP_DROP_VERSION,       /* provider header of another version */
	FDP_DROP_TYPE,          /* unknown frame type */
	FDP_DROP_LEN,           /* provider length != UDP payload length, or
	                         * shorter than the type's header */
	FDP_DROP__COUNT
};

enum fdp_frame_kind {
	FDP_FRAME_ARP = 1,
	FDP_FRAME_FDP = 2,
};

/* What the parser found; pointers point into the parsed buffer. Addresses
 * and ports stay in network order. */
struct fdp_frame_view {
	enum fdp_frame_kind kind;
	const uint8_t *dst_mac, *src_mac;
	/* FDP_FRAME_ARP */
	uint16_t arp_op;            /* host order: FDP_ARP_REQUEST / FDP_ARP_REPLY */
	const uint8_t *arp_sha;
	uint32_t arp_spa, arp_tpa;
	/* FDP_FRAME_FDP */
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
	const uint8_t *fdp;         /* struct fdp_hdr, the start of the UDP payload */
	size_t fdp_len;             /* whole UDP payload */
	uint8_t type, flags;        /* from fdp_hdr */
	/* FDP_TYPE_DGRAM only: */
	uint64_t data;              /* host order */
	const uint8_t *payload;     /* message bytes after struct fdp_dgram_hdr */
	size_t payload_len;
};

/* Parse flags: checksums the device already verified (mbuf ol_flags). */
#define FDP_PARSE_IP_CSUM_OK 0x1u
#define FDP_PARSE_UDP_CSUM_OK 0x2u

/* Parse one received frame. Returns FDP_DROP_NONE and fills out, or the
 * drop reason (out is then partially filled and must not be used). */
int fdp_frame_parse(const uint8_t *buf, size_t len, unsigned int flags,
		    struct fdp_frame_view *out) FDP_HIDDEN;
const char *fdp_drop_name(int reason) FDP_HIDDEN;

/* One's complement sum of len bytes folded to 16 bits, started at init
 * (a partial sum); not inverted. */
uint16_t fdp_csum_partial(const void *buf, size_t len, uint32_t init) FDP_HIDDEN;

/* Addresses of an outgoing frame (network order). */
struct fdp_frame_addrs {
	uint8_t src_mac[FDP_ETH_ALEN], dst_mac[FDP_ETH_ALEN];
	uint32_t src_ip, dst_ip;
	uint16_t src_port, dst_port;
};

/* Write Ethernet/IPv4/UDP headers (FDP_L2L4_HLEN bytes) for a UDP payload
 * of udp_payload_len bytes; checksums are left 0. */
void fdp_frame_build_hdrs(uint8_t *buf, const struct fdp_frame_addrs *a,
			  size_t udp_payload_len, uint16_t ip_id) FDP_HIDDEN;
/* Compute the IPv4 header checksum and/or the UDP checksum of a frame built
 * by fdp_frame_build_hdrs whose payload is in place (contiguous). */
void fdp_frame_csum(uint8_t *buf, bool ip, bool udp) FDP_HIDDEN;
/* The UDP pseudo-header partial sum (for devices that offload the UDP
 * checksum and want it pre-seeded in the csum field). */
uint16_t fdp_udp_phdr_sum(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_len_host) FDP_HIDDEN;

/* Write an ARP frame (padded to FDP_ETH_MIN_FRAME); returns its length. */
size_t fdp_arp_build(uint8_t *buf, uint16_t op, const uint8_t *eth_dst,
		     const uint8_t *sha, uint32_t spa, const uint8_t *tha,
		     uint32_t tpa) FDP_HIDDEN;

#endif /* FDP_FRAME_H */
