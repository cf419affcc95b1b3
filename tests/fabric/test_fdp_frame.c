/* Unit tests of fdp_frame.c: building, parsing, checksums, drop reasons. */
#include <arpa/inet.h>
#include <check.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "fabric/fdp_frame.h"

static const uint8_t mac_a[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t mac_b[6] = {0x02, 0, 0, 0, 0, 0x0b};

/* Build a DGRAM frame carrying len bytes of pattern; returns frame length. */
/* The addresses every test frame carries: a (5000) to b (6000). */
static void test_addrs(struct fdp_frame_addrs *a)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->src_mac, mac_a, 6);
	memcpy(a->dst_mac, mac_b, 6);
	a->src_ip = htonl(0xc6120001);
	a->dst_ip = htonl(0xc6120002);
	a->src_port = htons(5000);
	a->dst_port = htons(6000);
}

static size_t build_dgram(uint8_t *buf, size_t len, uint8_t flags, uint64_t data)
{
	struct fdp_frame_addrs a;
	struct fdp_dgram_hdr dh;
	size_t i;

	test_addrs(&a);
	fdp_frame_build_hdrs(buf, &a, sizeof(dh) + len, 7);
	memset(&dh, 0, sizeof(dh));
	dh.hdr.magic = FDP_MAGIC;
	dh.hdr.version = FDP_PROTO_VERSION;
	dh.hdr.type = FDP_TYPE_DGRAM;
	dh.hdr.flags = flags;
	dh.hdr.len = htons((uint16_t)(sizeof(dh) + len));
	dh.data = htobe64(data);
	memcpy(buf + FDP_L2L4_HLEN, &dh, sizeof(dh));
	for (i = 0; i < len; i++)
		buf[FDP_L2L4_HLEN + sizeof(dh) + i] = (uint8_t)(i * 7 + 3);
	fdp_frame_csum(buf, true, true);
	return FDP_L2L4_HLEN + sizeof(dh) + len;
}

START_TEST(test_csum_rfc1071)
{
	/* RFC 1071 section 3 example: the sum of these words is 0xddf2. */
	const uint8_t v[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};

	ck_assert_uint_eq(fdp_csum_partial(v, sizeof(v), 0), 0xddf2);
	/* odd length: the last byte is the high half of a word */
	ck_assert_uint_eq(fdp_csum_partial(v, 3, 0), (0x0001 + 0xf200) & 0xffff);
}
END_TEST

/* The textbook definition: big-endian 16-bit words, carries folded. */
static uint16_t ref_csum(const uint8_t *p, size_t len, uint32_t init)
{
	uint64_t sum = init;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += ((uint32_t)p[i] << 8) | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

START_TEST(test_csum_matches_reference)
{
	uint8_t buf[300];
	size_t len, off, i;
	uint32_t init;

	srand(12345);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (len = 0; len <= 257; len++) {
		for (off = 0; off < 4; off++) {
			init = (uint32_t)rand() & 0xffff;
			ck_assert_uint_eq(fdp_csum_partial(buf + off, len, init),
					  ref_csum(buf + off, len, init));
		}
	}
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(fdp_csum_partial(buf, 256, 0xffff), ref_csum(buf, 256, 0xffff));
}
END_TEST

START_TEST(test_dgram_roundtrip)
{
	uint8_t buf[2048];
	struct fdp_frame_view v;
	size_t n = build_dgram(buf, 1000, FDP_DGRAM_F_DATA, 0x1122334455667788ull);
	size_t i;

	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_NONE);
	ck_assert_int_eq(v.kind, FDP_FRAME_FDP);
	ck_assert_uint_eq(ntohl(v.src_ip), 0xc6120001);
	ck_assert_uint_eq(ntohl(v.dst_ip), 0xc6120002);
	ck_assert_uint_eq(ntohs(v.src_port), 5000);
	ck_assert_uint_eq(ntohs(v.dst_port), 6000);
	ck_assert_uint_eq(v.type, FDP_TYPE_DGRAM);
	ck_assert_uint_eq(v.flags, FDP_DGRAM_F_DATA);
	ck_assert_uint_eq(v.data, 0x1122334455667788ull);
	ck_assert_uint_eq(v.payload_len, 1000);
	ck_assert_uint_eq(v.fdp_len, 1000 + sizeof(struct fdp_dgram_hdr));
	for (i = 0; i < 1000; i++)
		ck_assert_uint_eq(v.payload[i], (uint8_t)(i * 7 + 3));
	ck_assert(memcmp(v.src_mac, mac_a, 6) == 0);
	ck_assert(memcmp(v.dst_mac, mac_b, 6) == 0);
}
END_TEST

START_TEST(test_padding_accepted)
{
	/* A tiny frame padded to 60 bytes by Ethernet: IPv4 length rules. */
	uint8_t buf[128];
	struct fdp_frame_view v;
	size_t n = build_dgram(buf, 1, 0, 0);

	ck_assert_uint_lt(n, FDP_ETH_MIN_FRAME);
	memset(buf + n, 0xee, FDP_ETH_MIN_FRAME - n);
	ck_assert_int_eq(fdp_frame_parse(buf, FDP_ETH_MIN_FRAME, 0, &v), FDP_DROP_NONE);
	ck_assert_uint_eq(v.payload_len, 1);
}
END_TEST

START_TEST(test_every_truncation_dropped)
{
	uint8_t buf[512], *copy;
	struct fdp_frame_view v;
	size_t n = build_dgram(buf, 300, 0, 0), cut;

	for (cut = 0; cut < n; cut++) {
		/* an exact-size heap copy so ASan catches any overread */
		copy = malloc(cut ? cut : 1);
		memcpy(copy, buf, cut);
		ck_assert_int_ne(fdp_frame_parse(copy, cut, 0, &v), FDP_DROP_NONE);
		free(copy);
	}
}
END_TEST

START_TEST(test_udp_csum_corruption)
{
	uint8_t buf[512];
	struct fdp_frame_view v;
	size_t n = build_dgram(buf, 100, 0, 0);

	buf[n - 1] ^= 0x40;
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_UDP_CSUM);
	/* a device that verified it: trusted */
	ck_assert_int_eq(fdp_frame_parse(buf, n, FDP_PARSE_UDP_CSUM_OK, &v), FDP_DROP_NONE);
	/* checksum 0 means none in IPv4 */
	memset(buf + FDP_ETH_HLEN + FDP_IPV4_HLEN + 6, 0, 2);
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_NONE);
}
END_TEST

START_TEST(test_ip_errors)
{
	uint8_t buf[512], orig[512];
	struct fdp_frame_view v;
	size_t n = build_dgram(orig, 100, 0, 0);

	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN + 8] ^= 1; /* TTL: header checksum now wrong */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_IP_CSUM);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN] = 0x65; /* version 6 */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_IP_HDR);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN] = 0x44; /* IHL 4 */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_IP_HDR);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN + 2] = 0x7f; /* total length past the frame */
	ck_assert_int_eq(fdp_frame_parse(buf, n, FDP_PARSE_IP_CSUM_OK, &v), FDP_DROP_IP_LEN);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN + 6] = 0x20; /* more fragments */
	ck_assert_int_eq(fdp_frame_parse(buf, n, FDP_PARSE_IP_CSUM_OK, &v), FDP_DROP_IP_FRAG);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN + 9] = 6; /* TCP */
	ck_assert_int_eq(fdp_frame_parse(buf, n, FDP_PARSE_IP_CSUM_OK, &v), FDP_DROP_PROTO);
	memcpy(buf, orig, n);
	buf[12] = 0x86; buf[13] = 0xdd; /* IPv6 ethertype */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_ETHERTYPE);
	memcpy(buf, orig, n);
	buf[FDP_ETH_HLEN + FDP_IPV4_HLEN + 4] = 0xff; /* UDP length too big */
	ck_assert_int_eq(fdp_frame_parse(buf, n, FDP_PARSE_IP_CSUM_OK | FDP_PARSE_UDP_CSUM_OK, &v),
			 FDP_DROP_UDP_LEN);
}
END_TEST

START_TEST(test_provider_header_errors)
{
	uint8_t buf[512], orig[512];
	struct fdp_frame_view v;
	size_t n = build_dgram(orig, 100, 0, 0);
	const unsigned ok = FDP_PARSE_IP_CSUM_OK | FDP_PARSE_UDP_CSUM_OK;

	memcpy(buf, orig, n);
	buf[FDP_L2L4_HLEN] = 0x00;
	ck_assert_int_eq(fdp_frame_parse(buf, n, ok, &v), FDP_DROP_MAGIC);
	memcpy(buf, orig, n);
	buf[FDP_L2L4_HLEN + 1] = FDP_PROTO_VERSION + 1;
	ck_assert_int_eq(fdp_frame_parse(buf, n, ok, &v), FDP_DROP_VERSION);
	memcpy(buf, orig, n);
	buf[FDP_L2L4_HLEN + 2] = 0x7f;
	ck_assert_int_eq(fdp_frame_parse(buf, n, ok, &v), FDP_DROP_TYPE);
	memcpy(buf, orig, n);
	buf[FDP_L2L4_HLEN + 2] = FDP_TYPE_RDM_FIRST; /* RDM range: handed over */
	ck_assert_int_eq(fdp_frame_parse(buf, n, ok, &v), FDP_DROP_NONE);
	ck_assert_uint_eq(v.type, FDP_TYPE_RDM_FIRST);
	ck_assert_ptr_eq(v.fdp, buf + FDP_L2L4_HLEN);
	memcpy(buf, orig, n);
	buf[FDP_L2L4_HLEN + 5] ^= 1; /* provider length != UDP payload */
	ck_assert_int_eq(fdp_frame_parse(buf, n, ok, &v), FDP_DROP_LEN);
	ck_assert_str_eq(fdp_drop_name(FDP_DROP_LEN), "length");
	ck_assert_str_eq(fdp_drop_name(-1), "unknown");
}
END_TEST

START_TEST(test_arp)
{
	uint8_t buf[64], bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, zero[6] = {0};
	struct fdp_frame_view v;
	size_t n = fdp_arp_build(buf, FDP_ARP_REQUEST, bcast, mac_a, htonl(0xc6120001),
				 zero, htonl(0xc6120002));

	ck_assert_uint_eq(n, FDP_ETH_MIN_FRAME);
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_NONE);
	ck_assert_int_eq(v.kind, FDP_FRAME_ARP);
	ck_assert_uint_eq(v.arp_op, FDP_ARP_REQUEST);
	ck_assert_uint_eq(ntohl(v.arp_spa), 0xc6120001);
	ck_assert_uint_eq(ntohl(v.arp_tpa), 0xc6120002);
	ck_assert(memcmp(v.arp_sha, mac_a, 6) == 0);
	buf[FDP_ETH_HLEN + 7] = 9; /* unknown op */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_ARP_FORMAT);
	ck_assert_int_eq(fdp_frame_parse(buf, 30, 0, &v), FDP_DROP_SHORT);
}
END_TEST

/* A raw UDP payload (no provider header) parses in two steps: parse_udp
 * accepts it, parse_fdp then says it is not a provider frame. */
START_TEST(test_raw_udp)
{
	uint8_t buf[128];
	struct fdp_frame_addrs a;
	struct fdp_frame_view v;

	test_addrs(&a);
	fdp_frame_build_hdrs(buf, &a, 5, 1);
	memcpy(buf + FDP_L2L4_HLEN, "hello", 5);
	fdp_frame_csum(buf, true, true);
	ck_assert_int_eq(fdp_frame_parse_udp(buf, FDP_L2L4_HLEN + 5, 0, &v), FDP_DROP_NONE);
	ck_assert_int_eq(v.kind, FDP_FRAME_UDP);
	ck_assert_uint_eq(v.udp_payload_len, 5);
	ck_assert(memcmp(v.udp_payload, "hello", 5) == 0);
	ck_assert_int_eq(fdp_frame_parse_fdp(&v), FDP_DROP_MAGIC);
	ck_assert_int_eq(fdp_frame_parse(buf, FDP_L2L4_HLEN + 5, 0, &v), FDP_DROP_MAGIC);
	/* an empty datagram */
	fdp_frame_build_hdrs(buf, &a, 0, 2);
	fdp_frame_csum(buf, true, true);
	ck_assert_int_eq(fdp_frame_parse_udp(buf, FDP_L2L4_HLEN, 0, &v), FDP_DROP_NONE);
	ck_assert_uint_eq(v.udp_payload_len, 0);
}
END_TEST

/* IGMPv2 report/leave: group MAC, TTL 1, Router Alert, checksums; the
 * parser reads them back (a query the same way). */
START_TEST(test_igmp)
{
	uint8_t buf[FDP_ETH_MIN_FRAME], mac[6];
	const uint8_t want_mac[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
	uint32_t group = htonl(0xef810203); /* 239.129.2.3: bit 23 is not in the MAC */
	struct fdp_frame_view v;
	size_t n;

	fdp_mcast_mac(group, mac);
	ck_assert(memcmp(mac, want_mac, 6) == 0);
	ck_assert(fdp_ip_is_multicast(group));
	ck_assert(!fdp_ip_is_multicast(htonl(0xc6120001)));
	n = fdp_igmp_build(buf, mac_a, htonl(0xc6120001), group, FDP_IGMP_V2_REPORT, group);
	ck_assert_uint_eq(n, FDP_ETH_MIN_FRAME);
	ck_assert(memcmp(buf, want_mac, 6) == 0);
	ck_assert_uint_eq(buf[FDP_ETH_HLEN + 8], 1);            /* TTL */
	ck_assert_uint_eq(buf[FDP_ETH_HLEN + 20], 0x94);        /* Router Alert */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_NONE);
	ck_assert_int_eq(v.kind, FDP_FRAME_IGMP);
	ck_assert_uint_eq(v.igmp_type, FDP_IGMP_V2_REPORT);
	ck_assert_uint_eq(v.igmp_group, group);
	ck_assert_uint_eq(v.dst_ip, group);
	buf[FDP_ETH_HLEN + 24 + 5] ^= 1; /* IGMP checksum now wrong */
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_IGMP);
	n = fdp_igmp_build(buf, mac_a, htonl(0xc6120001), htonl(FDP_IGMP_ALL_ROUTERS),
			   FDP_IGMP_V2_LEAVE, group);
	ck_assert_int_eq(fdp_frame_parse(buf, n, 0, &v), FDP_DROP_NONE);
	ck_assert_uint_eq(v.igmp_type, FDP_IGMP_V2_LEAVE);
	ck_assert_uint_eq(ntohl(v.dst_ip), FDP_IGMP_ALL_ROUTERS);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fdp_frame");
	TCase *tc = tcase_create("frame");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_csum_rfc1071);
	tcase_add_test(tc, test_csum_matches_reference);
	tcase_add_test(tc, test_dgram_roundtrip);
	tcase_add_test(tc, test_padding_accepted);
	tcase_add_test(tc, test_every_truncation_dropped);
	tcase_add_test(tc, test_udp_csum_corruption);
	tcase_add_test(tc, test_ip_errors);
	tcase_add_test(tc, test_provider_header_errors);
	tcase_add_test(tc, test_arp);
	tcase_add_test(tc, test_raw_udp);
	tcase_add_test(tc, test_igmp);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
