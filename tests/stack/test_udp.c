/* The UDP socket's pure parts (stk_udp.h): the control messages recvmsg
 * adds to a datagram of the dpdk port (the kernel's layout, order and
 * truncation), and which datagrams to a group leave through the port. */
#include "config.h"

#include <check.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "stack/stk_udp.h"
#include "../lib/check_main.h"

static struct stk_udp udp;
static struct stk_udp_slot slot;

static void setup(unsigned cmsgs)
{
	memset(&udp, 0, sizeof(udp));
	udp.cmsgs = cmsgs;
	udp.local.sin_addr.s_addr = htonl(0xc6120001); /* 198.18.0.1 */
	memset(&slot, 0, sizeof(slot));
	slot.stamp.tv_sec = 1700000000;
	slot.stamp.tv_nsec = 123456789;
}

START_TEST(cmsgs_both)
{
	setup(STK_UDP_CMSG_TIMESTAMPNS | STK_UDP_CMSG_PKTINFO);
	union {
		struct cmsghdr align;
		char bytes[256];
	} control;
	struct msghdr m = { .msg_control = &control, .msg_controllen = sizeof(control) };
	stk_udp_cmsgs(&udp, &slot, &m);
	ck_assert_uint_eq(m.msg_controllen,
			  CMSG_SPACE(sizeof(struct timespec)) + CMSG_SPACE(sizeof(struct in_pktinfo)));
	ck_assert_int_eq(m.msg_flags, 0);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_level, SOL_SOCKET);
	ck_assert_int_eq(c->cmsg_type, SCM_TIMESTAMPNS);
	struct timespec ts;
	memcpy(&ts, CMSG_DATA(c), sizeof(ts));
	ck_assert_int_eq(ts.tv_sec, 1700000000);
	ck_assert_int_eq(ts.tv_nsec, 123456789);
	c = CMSG_NXTHDR(&m, c);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_level, IPPROTO_IP);
	ck_assert_int_eq(c->cmsg_type, IP_PKTINFO);
	struct in_pktinfo pi;
	memcpy(&pi, CMSG_DATA(c), sizeof(pi));
	ck_assert_uint_eq(pi.ipi_addr.s_addr, htonl(0xc6120001));
	ck_assert_uint_eq(pi.ipi_spec_dst.s_addr, htonl(0xc6120001));
	ck_assert_int_eq(pi.ipi_ifindex, 0);
	ck_assert_ptr_null(CMSG_NXTHDR(&m, c));
}
END_TEST

START_TEST(cmsgs_microseconds)
{
	setup(STK_UDP_CMSG_TIMESTAMP);
	union {
		struct cmsghdr align;
		char bytes[64];
	} control;
	struct msghdr m = { .msg_control = &control, .msg_controllen = sizeof(control) };
	stk_udp_cmsgs(&udp, &slot, &m);
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_type, SCM_TIMESTAMP);
	struct timeval tv;
	memcpy(&tv, CMSG_DATA(c), sizeof(tv));
	ck_assert_int_eq(tv.tv_usec, 123456);
}
END_TEST

/* As the kernel: what does not fit is left out and MSG_CTRUNC set, also
 * without a control buffer at all. */
START_TEST(cmsgs_truncated)
{
	setup(STK_UDP_CMSG_TIMESTAMPNS | STK_UDP_CMSG_PKTINFO);
	union {
		struct cmsghdr align;
		char bytes[CMSG_SPACE(sizeof(struct timespec))];
	} control;
	struct msghdr m = { .msg_control = &control, .msg_controllen = sizeof(control) };
	stk_udp_cmsgs(&udp, &slot, &m);
	ck_assert_uint_eq(m.msg_controllen, CMSG_SPACE(sizeof(struct timespec)));
	ck_assert_int_eq(m.msg_flags, MSG_CTRUNC);
	struct msghdr none = { 0 };
	stk_udp_cmsgs(&udp, &slot, &none);
	ck_assert_uint_eq(none.msg_controllen, 0);
	ck_assert_int_eq(none.msg_flags, MSG_CTRUNC);
	setup(0);
	struct msghdr off = { .msg_control = &control, .msg_controllen = sizeof(control) };
	stk_udp_cmsgs(&udp, &slot, &off);
	ck_assert_uint_eq(off.msg_controllen, 0);
	ck_assert_int_eq(off.msg_flags, 0);
}
END_TEST

START_TEST(multicast_path)
{
	uint32_t port_ip = htonl(0xc6120001);
	setup(0);
	udp.mc_ttl = 1;
	ck_assert(stk_udp_mc_via_port(&udp, port_ip));
	udp.mc_if = port_ip;
	ck_assert(stk_udp_mc_via_port(&udp, port_ip));
	udp.mc_if = htonl(0x7f000001);
	ck_assert(!stk_udp_mc_via_port(&udp, port_ip)); /* another interface: the kernel's */
	udp.mc_if = 0;
	udp.mc_ttl = 2;
	ck_assert(!stk_udp_mc_via_port(&udp, port_ip)); /* the port sends TTL 1 only */
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("udp");
	TCase *tc = tcase_create("udp");
	tcase_add_test(tc, cmsgs_both);
	tcase_add_test(tc, cmsgs_microseconds);
	tcase_add_test(tc, cmsgs_truncated);
	tcase_add_test(tc, multicast_path);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return check_main_run(suite());
}
