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
	FDP_DROP_IGMP,          /* IGMP message short or with a bad checksum */
	FDP_DROP__COUNT
};

enum fdp_frame_kind {
	FDP_FRAME_ARP = 1,
	FDP_FRAME_FDP = 2,          /* UDP carrying a valid provider header */
	FDP_FRAME_UDP = 3,          /* UDP, payload not interpreted (fdp_frame_parse_udp) */
	FDP_FRAME_IGMP = 4,         /* IGMP message (RFC 2236 / 3376 queries matter) */
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
	/* FDP_FRAME_UDP and FDP_FRAME_FDP: the UDP payload (== fdp, fdp_len) */
	const uint8_t *udp_payload;
	size_t udp_payload_len;
	/* FDP_FRAME_IGMP (src_ip, dst_ip set too) */
	uint8_t igmp_type;          /* 0x11 query, 0x16 v2 report, 0x17 leave, 0x22 v3 report */
	uint32_t igmp_group;        /* network order; 0 in a general query */
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
/* The same in two steps, for a receiver that picks the endpoint before it
 * knows whether the payload is a provider frame (raw UDP endpoints):
 * parse_udp checks Ethernet/IPv4/UDP (or ARP, IGMP) and leaves the UDP
 * payload uninterpreted (kind FDP_FRAME_UDP); parse_fdp then checks the
 * provider header of such a view (kind becomes FDP_FRAME_FDP). */
int fdp_frame_parse_udp(const uint8_t *buf, size_t len, unsigned int flags,
			struct fdp_frame_view *out) FDP_HIDDEN;
int fdp_frame_parse_fdp(struct fdp_frame_view *out) FDP_HIDDEN;
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

/* Multicast destination: the IPv4 group's MAC (01:00:5e + its low 23 bits,
 * RFC 1112) and TTL 1 in a frame fdp_frame_build_hdrs wrote (before
 * fdp_frame_csum). */
bool fdp_ip_is_multicast(uint32_t ip) FDP_HIDDEN;
void fdp_mcast_mac(uint32_t group, uint8_t mac[FDP_ETH_ALEN]) FDP_HIDDEN;
void fdp_frame_set_ttl(uint8_t *buf, uint8_t ttl) FDP_HIDDEN;

#define FDP_IPPROTO_IGMP 2
#define FDP_IGMP_QUERY 0x11
#define FDP_IGMP_V2_REPORT 0x16
#define FDP_IGMP_V2_LEAVE 0x17
#define FDP_IGMP_V3_REPORT 0x22
#define FDP_IGMP_ALL_ROUTERS 0xe0000002u  /* 224.0.0.2, host order */
/* Write an IGMPv2 message (report or leave, RFC 2236): IPv4 with the
 * Router Alert option, TTL 1, to dst_ip (the group for a report,
 * 224.0.0.2 for a leave) at its multicast MAC; padded to
 * FDP_ETH_MIN_FRAME; returns its length. Addresses in network order. */
size_t fdp_igmp_build(uint8_t *buf, const uint8_t *src_mac, uint32_t src_ip,
		      uint32_t dst_ip, uint8_t type, uint32_t group) FDP_HIDDEN;

/* Write an ARP frame (padded to FDP_ETH_MIN_FRAME); returns its length. */
size_t fdp_arp_build(uint8_t *buf, uint16_t op, const uint8_t *eth_dst,
		     const uint8_t *sha, uint32_t spa, const uint8_t *tha,
		     uint32_t tpa) FDP_HIDDEN;

#endif /* FDP_FRAME_H */
