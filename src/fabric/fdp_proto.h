/* fdp_proto.h - wire format of the libfabric "dpdk" provider.
 *
 * Every provider frame is a plain Ethernet II / IPv4 / UDP datagram, so it
 * crosses real switches and routers and NIC flow steering can pick a queue by
 * UDP port, followed by a versioned provider header:
 *
 *   +----------------+----------------+-----------+------------------+------+
 *   | Ethernet (14)  | IPv4 (20, no   | UDP (8)   | struct fdp_hdr   | type |
 *   | type 0x0800    | options sent,  | dst port: | (8): magic,      | hdr  |
 *   |                | DF set, TTL 64)| the ep    | version, type... | data |
 *   +----------------+----------------+-----------+------------------+------+
 *
 * All multi-byte fields are big-endian (network order) on the wire; the
 * structs below are packed and their integer fields hold network-order
 * values (convert with htons/ntohs/htobe64...). No DPDK types here: the
 * parser (fdp_frame.c) is pure C so it can be unit-tested and fuzzed.
 *
 * Version rule: a receiver drops (and counts) frames whose magic or version
 * it does not know. A change of any header layout bumps FDP_PROTO_VERSION.
 *
 * Raw UDP endpoints (FI_EP_DGRAM with FI_PROTO_UDP) send and receive frames
 * that end at the UDP header: no fdp_hdr, the UDP payload is the message.
 *
 * Frame types: FDP_TYPE_DGRAM (FI_EP_DGRAM data) is defined here. The range
 * FDP_TYPE_RDM_FIRST..FDP_TYPE_RDM_LAST belongs to the reliable RDM engine,
 * whose type-specific headers live in fdp_rel_proto.h; the framework hands
 * such frames to the endpoint's rx_rdm hook untouched.
 */
#ifndef FDP_PROTO_H
#define FDP_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FDP_PACKED __attribute__((packed))

#define FDP_ETHERTYPE_IPV4 0x0800
#define FDP_ETHERTYPE_ARP 0x0806
#define FDP_IPPROTO_UDP 17

#define FDP_ETH_ALEN 6
#define FDP_ETH_HLEN 14
#define FDP_IPV4_HLEN 20
#define FDP_UDP_HLEN 8
/* Bytes in front of the UDP payload in every frame we send. */
#define FDP_L2L4_HLEN (FDP_ETH_HLEN + FDP_IPV4_HLEN + FDP_UDP_HLEN)
#define FDP_ETH_MIN_FRAME 60 /* without FCS: shorter frames are padded */

struct fdp_eth_hdr {
	uint8_t dst[FDP_ETH_ALEN];  /* destination MAC */
	uint8_t src[FDP_ETH_ALEN];  /* source MAC */
	uint16_t ethertype;         /* 0x0800 IPv4, 0x0806 ARP; VLAN tags not handled */
} FDP_PACKED;

struct fdp_ipv4_hdr {
	uint8_t ver_ihl;            /* 0x45: version 4, header 5 words (options accepted on RX) */
	uint8_t tos;                /* 0 */
	uint16_t total_len;         /* IPv4 header + UDP header + UDP payload */
	uint16_t id;                /* per-frame counter (DF set, never fragmented) */
	uint16_t frag_off;          /* 0x4000 (DF); fragments are dropped on RX */
	uint8_t ttl;                /* 64 */
	uint8_t proto;              /* 17 (UDP) */
	uint16_t csum;              /* header checksum (computed or offloaded) */
	uint32_t src;               /* sender's FI_DPDK_IP */
	uint32_t dst;               /* destination endpoint's IP */
} FDP_PACKED;

struct fdp_udp_hdr {
	uint16_t src_port;          /* sending endpoint's UDP port */
	uint16_t dst_port;          /* receiving endpoint's UDP port: selects the ep */
	uint16_t len;               /* UDP header + payload */
	uint16_t csum;              /* over pseudo-header + UDP; 0 = none (accepted on RX) */
} FDP_PACKED;

/* ARP over Ethernet for IPv4 (RFC 826): 28 bytes after the Ethernet header. */
struct fdp_arp_hdr {
	uint16_t htype;             /* 1 (Ethernet) */
	uint16_t ptype;             /* 0x0800 (IPv4) */
	uint8_t hlen;               /* 6 */
	uint8_t plen;               /* 4 */
	uint16_t op;                /* 1 request, 2 reply */
	uint8_t sha[FDP_ETH_ALEN];  /* sender MAC */
	uint32_t spa;               /* sender IPv4 */
	uint8_t tha[FDP_ETH_ALEN];  /* target MAC (zero in requests) */
	uint32_t tpa;               /* target IPv4 */
} FDP_PACKED;
#define FDP_ARP_REQUEST 1
#define FDP_ARP_REPLY 2

/* ---- provider header: first bytes of every UDP payload we send ---- */

#define FDP_MAGIC 0xFD
#define FDP_PROTO_VERSION 1

enum fdp_frame_type {
	FDP_TYPE_DGRAM = 0x01,      /* FI_EP_DGRAM message, struct fdp_dgram_hdr */
	FDP_TYPE_RDM_FIRST = 0x10,  /* reliable RDM engine: see fdp_rel_proto.h */
	FDP_TYPE_RDM_LAST = 0x3f,
};

struct fdp_hdr {
	uint8_t magic;              /* FDP_MAGIC: anything else is not ours */
	uint8_t version;            /* FDP_PROTO_VERSION */
	uint8_t type;               /* enum fdp_frame_type */
	uint8_t flags;              /* per type (FDP_DGRAM_F_*) */
	uint16_t len;               /* bytes from this header to the end of the
	                             * UDP payload; must equal UDP len - 8 */
	uint16_t reserved;          /* 0 on TX, ignored on RX */
} FDP_PACKED;

#define FDP_DGRAM_F_DATA 0x01       /* data carries FI_REMOTE_CQ_DATA */

struct fdp_dgram_hdr {
	struct fdp_hdr hdr;         /* type FDP_TYPE_DGRAM */
	uint64_t data;              /* remote CQ data (FI_REMOTE_CQ_DATA) if
	                             * FDP_DGRAM_F_DATA, else 0 */
} FDP_PACKED;                       /* message bytes follow */

_Static_assert(sizeof(struct fdp_eth_hdr) == 14, "eth");
_Static_assert(sizeof(struct fdp_ipv4_hdr) == 20, "ipv4");
_Static_assert(sizeof(struct fdp_udp_hdr) == 8, "udp");
_Static_assert(sizeof(struct fdp_arp_hdr) == 28, "arp");
_Static_assert(sizeof(struct fdp_hdr) == 8, "fdp_hdr");
_Static_assert(sizeof(struct fdp_dgram_hdr) == 16, "dgram");

#endif /* FDP_PROTO_H */
