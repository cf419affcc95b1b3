/* fdp_frame.c - bounds-checked frame parsing and header building. */
#include "config.h"

#include "fabric/fdp_frame.h"

#include <arpa/inet.h>
#include <endian.h>
#include <string.h>

static const char *const drop_names[FDP_DROP__COUNT] = {
	[FDP_DROP_NONE] = "none",
	[FDP_DROP_SHORT] = "short",
	[FDP_DROP_ETHERTYPE] = "ethertype",
	[FDP_DROP_ARP_FORMAT] = "arp-format",
	[FDP_DROP_IP_HDR] = "ip-header",
	[FDP_DROP_IP_LEN] = "ip-length",
	[FDP_DROP_IP_FRAG] = "ip-fragment",
	[FDP_DROP_IP_CSUM] = "ip-checksum",
	[FDP_DROP_PROTO] = "not-udp",
	[FDP_DROP_UDP_LEN] = "udp-length",
	[FDP_DROP_UDP_CSUM] = "udp-checksum",
	[FDP_DROP_MAGIC] = "magic",
	[FDP_DROP_VERSION] = "version",
	[FDP_DROP_TYPE] = "type",
	[FDP_DROP_LEN] = "length",
	[FDP_DROP_IGMP] = "igmp",
};

const char *fdp_drop_name(int reason)
{
	if (reason < 0 || reason >= FDP_DROP__COUNT)
		return "unknown";
	return drop_names[reason];
}

uint16_t fdp_csum_partial(const void *buf, size_t len, uint32_t init)
{
	const uint8_t *p = buf;
	uint64_t sum, w64;
	uint32_t w32;
	uint16_t w16, r;

	/* The one's complement sum does not care about byte order: sum the
	 * words in host order, 8 bytes per step into a 64-bit accumulator
	 * (carries are folded once at the end), and swap the result back to
	 * network order if the host is little-endian. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	sum = (uint64_t)__builtin_bswap16((uint16_t)init) + __builtin_bswap16((uint16_t)(init >> 16));
#else
	sum = (init & 0xffff) + (init >> 16);
#endif
	while (len >= 8) {
		memcpy(&w64, p, 8);
		sum += (w64 & 0xffffffffu) + (w64 >> 32);
		p += 8;
		len -= 8;
	}
	if (len >= 4) {
		memcpy(&w32, p, 4);
		sum += w32;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		memcpy(&w16, p, 2);
		sum += w16;
		p += 2;
		len -= 2;
	}
	if (len) {
		/* the last byte is the high half of a network-order word */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		sum += p[0];
#else
		sum += (uint32_t)p[0] << 8;
#endif
	}
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	r = (uint16_t)sum;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	r = __builtin_bswap16(r);
#endif
	return r;
}

uint16_t fdp_udp_phdr_sum(uint32_t src_ip, uint32_t dst_ip, uint16_t udp_len_host)
{
	uint32_t s = ntohl(src_ip), d = ntohl(dst_ip);
	uint64_t sum = (s >> 16) + (s & 0xffff) + (d >> 16) + (d & 0xffff) +
		       FDP_IPPROTO_UDP + udp_len_host;

	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

static int parse_arp(const uint8_t *buf, size_t len, struct fdp_frame_view *out)
{
	struct fdp_arp_hdr arp;
	uint16_t op;

	if (len < FDP_ETH_HLEN + sizeof(arp))
		return FDP_DROP_SHORT;
	memcpy(&arp, buf + FDP_ETH_HLEN, sizeof(arp));
	op = ntohs(arp.op);
	if (ntohs(arp.htype) != 1 || ntohs(arp.ptype) != FDP_ETHERTYPE_IPV4 ||
	    arp.hlen != FDP_ETH_ALEN || arp.plen != 4 ||
	    (op != FDP_ARP_REQUEST && op != FDP_ARP_REPLY))
		return FDP_DROP_ARP_FORMAT;
	out->kind = FDP_FRAME_ARP;
	out->arp_op = op;
	out->arp_sha = buf + FDP_ETH_HLEN + offsetof(struct fdp_arp_hdr, sha);
	out->arp_spa = arp.spa;
	out->arp_tpa = arp.tpa;
	return FDP_DROP_NONE;
}

int fdp_frame_parse_fdp(struct fdp_frame_view *out)
{
	const uint8_t *udp_payload = out->udp_payload;
	size_t udp_payload_len = out->udp_payload_len;
	struct fdp_hdr h;
	struct fdp_dgram_hdr dh;

	if (out->kind != FDP_FRAME_UDP)
		return FDP_DROP_PROTO;
	if (udp_payload_len < sizeof(h))
		return FDP_DROP_MAGIC; /* too short to be ours at all */
	memcpy(&h, udp_payload, sizeof(h));
	if (h.magic != FDP_MAGIC)
		return FDP_DROP_MAGIC;
	if (h.version != FDP_PROTO_VERSION)
		return FDP_DROP_VERSION;
	if (ntohs(h.len) != udp_payload_len)
		return FDP_DROP_LEN;
	out->fdp = udp_payload;
	out->fdp_len = udp_payload_len;
	out->type = h.type;
	out->flags = h.flags;
	out->data = 0;
	out->payload = NULL;
	out->payload_len = 0;
	if (h.type == FDP_TYPE_DGRAM) {
		if (udp_payload_len < sizeof(dh))
			return FDP_DROP_LEN;
		memcpy(&dh, udp_payload, sizeof(dh));
		out->data = be64toh(dh.data);
		out->payload = udp_payload + sizeof(dh);
		out->payload_len = udp_payload_len - sizeof(dh);
		out->kind = FDP_FRAME_FDP;
		return FDP_DROP_NONE;
	}
	if (h.type >= FDP_TYPE_RDM_FIRST && h.type <= FDP_TYPE_RDM_LAST) {
		out->kind = FDP_FRAME_FDP;
		return FDP_DROP_NONE;
	}
	return FDP_DROP_TYPE;
}

/* An IGMP message of igmp_len bytes (the IPv4 payload). Queries are 8
 * bytes (v1/v2) or at least 12 (v3); the group is at offset 4 in all. */
static int parse_igmp(const uint8_t *igmp, size_t igmp_len, struct fdp_frame_view *out)
{
	uint32_t group;

	if (igmp_len < 8 || fdp_csum_partial(igmp, igmp_len, 0) != 0xffff)
		return FDP_DROP_IGMP;
	memcpy(&group, igmp + 4, 4);
	out->kind = FDP_FRAME_IGMP;
	out->igmp_type = igmp[0];
	out->igmp_group = group;
	return FDP_DROP_NONE;
}

static int parse_ipv4(const uint8_t *buf, size_t len, unsigned int flags,
		      struct fdp_frame_view *out)
{
	struct fdp_ipv4_hdr ip;
	struct fdp_udp_hdr udp;
	size_t ihl, ip_total, udp_len;
	const uint8_t *l3 = buf + FDP_ETH_HLEN, *l4;

	if (len < FDP_ETH_HLEN + sizeof(ip))
		return FDP_DROP_SHORT;
	memcpy(&ip, l3, sizeof(ip));
	if ((ip.ver_ihl >> 4) != 4 || (ip.ver_ihl & 0xf) < 5)
		return FDP_DROP_IP_HDR;
	ihl = (size_t)(ip.ver_ihl & 0xf) * 4;
	ip_total = ntohs(ip.total_len);
	/* Ethernet may pad short frames: the IPv4 length, not the frame's,
	 * bounds the datagram. */
	if (ip_total < ihl || ip_total > len - FDP_ETH_HLEN)
		return FDP_DROP_IP_LEN;
	if (ntohs(ip.frag_off) & 0x3fff) /* MF or offset set */
		return FDP_DROP_IP_FRAG;
	if (!(flags & FDP_PARSE_IP_CSUM_OK) &&
	    fdp_csum_partial(l3, ihl, 0) != 0xffff)
		return FDP_DROP_IP_CSUM;
	out->src_ip = ip.src;
	out->dst_ip = ip.dst;
	l4 = l3 + ihl;
	if (ip.proto == FDP_IPPROTO_IGMP)
		return parse_igmp(l4, ip_total - ihl, out);
	if (ip.proto != FDP_IPPROTO_UDP)
		return FDP_DROP_PROTO;

	if (ip_total - ihl < sizeof(udp))
		return FDP_DROP_UDP_LEN;
	memcpy(&udp, l4, sizeof(udp));
	udp_len = ntohs(udp.len);
	if (udp_len < sizeof(udp) || udp_len > ip_total - ihl)
		return FDP_DROP_UDP_LEN;
	if (!(flags & FDP_PARSE_UDP_CSUM_OK) && udp.csum != 0) {
		uint16_t s = fdp_csum_partial(l4, udp_len,
			fdp_udp_phdr_sum(ip.src, ip.dst, (uint16_t)udp_len));
		if (s != 0xffff)
			return FDP_DROP_UDP_CSUM;
	}
	out->kind = FDP_FRAME_UDP;
	out->src_port = udp.src_port;
	out->dst_port = udp.dst_port;
	out->udp_payload = l4 + sizeof(udp);
	out->udp_payload_len = udp_len - sizeof(udp);
	out->fdp = out->udp_payload;
	out->fdp_len = out->udp_payload_len;
	return FDP_DROP_NONE;
}

int fdp_frame_parse_udp(const uint8_t *buf, size_t len, unsigned int flags,
			struct fdp_frame_view *out)
{
	struct fdp_eth_hdr eth;

	if (buf == NULL || len < FDP_ETH_HLEN)
		return FDP_DROP_SHORT;
	memcpy(&eth, buf, sizeof(eth));
	out->dst_mac = buf;
	out->src_mac = buf + FDP_ETH_ALEN;
	switch (ntohs(eth.ethertype)) {
	case FDP_ETHERTYPE_ARP:
		return parse_arp(buf, len, out);
	case FDP_ETHERTYPE_IPV4:
		return parse_ipv4(buf, len, flags, out);
	default:
		return FDP_DROP_ETHERTYPE;
	}
}

int fdp_frame_parse(const uint8_t *buf, size_t len, unsigned int flags,
		    struct fdp_frame_view *out)
{
	int reason = fdp_frame_parse_udp(buf, len, flags, out);

	if (reason != FDP_DROP_NONE || out->kind != FDP_FRAME_UDP)
		return reason;
	return fdp_frame_parse_fdp(out);
}

bool fdp_ip_is_multicast(uint32_t ip)
{
	return (ntohl(ip) >> 28) == 0xe;
}

void fdp_mcast_mac(uint32_t group, uint8_t mac[FDP_ETH_ALEN])
{
	uint32_t g = ntohl(group);

	mac[0] = 0x01;
	mac[1] = 0x00;
	mac[2] = 0x5e;
	mac[3] = (uint8_t)((g >> 16) & 0x7f);
	mac[4] = (uint8_t)(g >> 8);
	mac[5] = (uint8_t)g;
}

void fdp_frame_set_ttl(uint8_t *buf, uint8_t ttl)
{
	buf[FDP_ETH_HLEN + offsetof(struct fdp_ipv4_hdr, ttl)] = ttl;
}

size_t fdp_igmp_build(uint8_t *buf, const uint8_t *src_mac, uint32_t src_ip,
		      uint32_t dst_ip, uint8_t type, uint32_t group)
{
	/* IPv4 header with the Router Alert option (RFC 2113), which
	 * RFC 2236 asks of every IGMPv2 message */
	uint8_t ip[24] = {0x46, 0xc0, 0, 24 + 8, 0, 0, 0x40, 0, 1, FDP_IPPROTO_IGMP,
			  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x94, 0x04, 0, 0};
	uint8_t igmp[8] = {type, 0, 0, 0, 0, 0, 0, 0};
	uint8_t *l3 = buf + FDP_ETH_HLEN;
	uint16_t c, ethertype = htons(FDP_ETHERTYPE_IPV4);

	memset(buf, 0, FDP_ETH_MIN_FRAME);
	fdp_mcast_mac(dst_ip, buf);
	memcpy(buf + FDP_ETH_ALEN, src_mac, FDP_ETH_ALEN);
	memcpy(buf + 2 * FDP_ETH_ALEN, &ethertype, 2);
	memcpy(ip + 12, &src_ip, 4);
	memcpy(ip + 16, &dst_ip, 4);
	c = htons((uint16_t)~fdp_csum_partial(ip, sizeof(ip), 0));
	memcpy(ip + 10, &c, 2);
	memcpy(igmp + 4, &group, 4);
	c = htons((uint16_t)~fdp_csum_partial(igmp, sizeof(igmp), 0));
	memcpy(igmp + 2, &c, 2);
	memcpy(l3, ip, sizeof(ip));
	memcpy(l3 + sizeof(ip), igmp, sizeof(igmp));
	return FDP_ETH_MIN_FRAME;
}

void fdp_frame_build_hdrs(uint8_t *buf, const struct fdp_frame_addrs *a,
			  size_t udp_payload_len, uint16_t ip_id)
{
	struct fdp_eth_hdr eth;
	struct fdp_ipv4_hdr ip;
	struct fdp_udp_hdr udp;

	memcpy(eth.dst, a->dst_mac, FDP_ETH_ALEN);
	memcpy(eth.src, a->src_mac, FDP_ETH_ALEN);
	eth.ethertype = htons(FDP_ETHERTYPE_IPV4);
	ip.ver_ihl = 0x45;
	ip.tos = 0;
	ip.total_len = htons((uint16_t)(FDP_IPV4_HLEN + FDP_UDP_HLEN + udp_payload_len));
	ip.id = htons(ip_id);
	ip.frag_off = htons(0x4000);
	ip.ttl = 64;
	ip.proto = FDP_IPPROTO_UDP;
	ip.csum = 0;
	ip.src = a->src_ip;
	ip.dst = a->dst_ip;
	udp.src_port = a->src_port;
	udp.dst_port = a->dst_port;
	udp.len = htons((uint16_t)(FDP_UDP_HLEN + udp_payload_len));
	udp.csum = 0;
	memcpy(buf, &eth, sizeof(eth));
	memcpy(buf + FDP_ETH_HLEN, &ip, sizeof(ip));
	memcpy(buf + FDP_ETH_HLEN + FDP_IPV4_HLEN, &udp, sizeof(udp));
}

void fdp_frame_csum(uint8_t *buf, bool ip_csum, bool udp_csum)
{
	uint8_t *l3 = buf + FDP_ETH_HLEN, *l4 = l3 + FDP_IPV4_HLEN;
	struct fdp_ipv4_hdr ip;
	uint16_t c, udp_len;

	memcpy(&ip, l3, sizeof(ip));
	if (ip_csum) {
		/* Sum the header as five 32-bit words with the checksum field
		 * masked out, rather than zeroing it in a copy and summing
		 * that: a wide load over a fresh narrow store cannot be
		 * forwarded, and that stall showed as the hottest instruction
		 * of the send path. The one's complement sum is byte-order
		 * independent, so words summed as loaded give the field's
		 * bytes as stored. */
		uint32_t w[5];
		uint64_t sum;
		uint16_t folded;

		memcpy(w, l3, sizeof(w));
		sum = (uint64_t)w[0] + w[1] + (w[2] & htonl(0xffff0000u)) + w[3] + w[4];
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		folded = (uint16_t)~sum;
		memcpy(l3 + offsetof(struct fdp_ipv4_hdr, csum), &folded, 2);
	}
	if (udp_csum) {
		memcpy(&udp_len, l4 + offsetof(struct fdp_udp_hdr, len), 2);
		udp_len = ntohs(udp_len);
		memset(l4 + offsetof(struct fdp_udp_hdr, csum), 0, 2);
		c = (uint16_t)~fdp_csum_partial(l4, udp_len,
			fdp_udp_phdr_sum(ip.src, ip.dst, udp_len));
		if (c == 0) /* 0 means "no checksum" in IPv4 UDP */
			c = 0xffff;
		c = htons(c);
		memcpy(l4 + offsetof(struct fdp_udp_hdr, csum), &c, 2);
	}
}

size_t fdp_arp_build(uint8_t *buf, uint16_t op, const uint8_t *eth_dst,
		     const uint8_t *sha, uint32_t spa, const uint8_t *tha,
		     uint32_t tpa)
{
	struct fdp_eth_hdr eth;
	struct fdp_arp_hdr arp;

	memcpy(eth.dst, eth_dst, FDP_ETH_ALEN);
	memcpy(eth.src, sha, FDP_ETH_ALEN);
	eth.ethertype = htons(FDP_ETHERTYPE_ARP);
	arp.htype = htons(1);
	arp.ptype = htons(FDP_ETHERTYPE_IPV4);
	arp.hlen = FDP_ETH_ALEN;
	arp.plen = 4;
	arp.op = htons(op);
	memcpy(arp.sha, sha, FDP_ETH_ALEN);
	arp.spa = spa;
	memcpy(arp.tha, tha, FDP_ETH_ALEN);
	arp.tpa = tpa;
	memset(buf, 0, FDP_ETH_MIN_FRAME);
	memcpy(buf, &eth, sizeof(eth));
	memcpy(buf + FDP_ETH_HLEN, &arp, sizeof(arp));
	return FDP_ETH_MIN_FRAME;
}
