/* stk_peer: what a peer says in the negotiation, checked before use. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>

#include "stack/stk_peer.h"
#include "unit.h"

static const char *why;

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, ip, &sin.sin_addr);
	return sin;
}

static int check_in(const char *prov, const struct sockaddr_in *addr, size_t len,
		    const char *kernel_peer)
{
	struct sockaddr_in peer = sin_of(kernel_peer, 40000);
	return stk_peer_addr_check(prov, FI_SOCKADDR_IN, (const uint8_t *)addr, len,
				   (struct sockaddr *)&peer, &why);
}

static int check_str(const char *prov, const char *addr, size_t len)
{
	return stk_peer_addr_check(prov, FI_ADDR_STR, (const uint8_t *)addr, len, NULL, &why);
}

START_TEST(test_sockaddr_in)
{
	struct sockaddr_in a = sin_of("10.1.2.3", 5000);
	ck_assert_int_eq(check_in("tcp", &a, sizeof(a), "10.1.2.3"), 0);
	/* another IP than the kernel connection's peer: never connected to */
	ck_assert_int_eq(check_in("tcp", &a, sizeof(a), "10.1.2.4"), -EINVAL);
	ck_assert_str_eq(why, "the address is not the kernel connection's peer IP");
	/* dpdk's address is on its own device: no IP rule, the form still */
	ck_assert_int_eq(check_in("dpdk", &a, sizeof(a), "10.1.2.4"), 0);
	/* exact length, family, port, zero padding */
	ck_assert_int_eq(check_in("tcp", &a, sizeof(a) - 1, "10.1.2.3"), -EINVAL);
	ck_assert_int_eq(check_in("tcp", &a, 3, "10.1.2.3"), -EINVAL);
	struct sockaddr_in b = a;
	b.sin_zero[3] = 1;
	ck_assert_int_eq(check_in("tcp", &b, sizeof(b), "10.1.2.3"), -EINVAL);
	b = a;
	b.sin_port = 0;
	ck_assert_int_eq(check_in("tcp", &b, sizeof(b), "10.1.2.3"), -EINVAL);
	b = a;
	b.sin_family = AF_INET6;
	ck_assert_int_eq(check_in("tcp", &b, sizeof(b), "10.1.2.3"), -EINVAL);
	/* a peer on this host: any address of this host, not a third one */
	struct sockaddr_in lo = sin_of("127.0.0.1", 5000);
	ck_assert_int_eq(check_in("tcp", &lo, sizeof(lo), "127.0.0.1"), 0);
	struct sockaddr_in far = sin_of("192.0.2.200", 5000);
	ck_assert_int_eq(check_in("tcp", &far, sizeof(far), "127.0.0.1"), -EINVAL);
}
END_TEST

START_TEST(test_shm_name)
{
	static const char ok[] = "fi_shm://2163:0:0";
	ck_assert_int_eq(check_str("shm", ok, sizeof(ok)), 0);
	/* the crash's kind of name, and other forms of one name */
	static const char mutated[] = "fi_shm://3|62:0:0";
	ck_assert_int_eq(check_str("shm", mutated, sizeof(mutated)), -EINVAL);
	static const char trailing[] = "fi_shm://2163:0:0\0x";
	ck_assert_int_eq(check_str("shm", trailing, sizeof(trailing)), -EINVAL);
	ck_assert_int_eq(check_str("shm", ok, sizeof(ok) - 1), -EINVAL); /* no NUL */
	static const char slash[] = "fi_shm://../x";
	ck_assert_int_eq(check_str("shm", slash, sizeof(slash)), -EINVAL);
	static const char bare[] = "fi_shm://";
	ck_assert_int_eq(check_str("shm", bare, sizeof(bare)), -EINVAL);
	ck_assert_int_eq(check_str("shm", ok, 0), -EINVAL);
}
END_TEST

START_TEST(test_message)
{
	struct stk_nego_msg msg = { .conn_id = 7, .slot = 3, .credits = 65536, .nprov = 1 };
	stk_nego_host_identity(msg.boot_id, &msg.netns);
	struct stk_nego_prov *prov = &msg.prov[0];
	static const char name[] = "fi_shm://2163:0:0";
	snprintf(prov->name, sizeof(prov->name), "shm");
	memcpy(prov->addr, name, sizeof(name));
	prov->addr_len = sizeof(name);
	ck_assert_int_eq(stk_peer_check(&msg, prov, FI_ADDR_STR, NULL, &why), 0);
	struct stk_nego_msg other = msg;
	other.netns ^= 1; /* another network namespace: its shm is not ours */
	ck_assert_int_eq(stk_peer_check(&other, &other.prov[0], FI_ADDR_STR, NULL, &why), -EINVAL);
	other = msg;
	other.slot = 1u << 30;
	ck_assert_int_eq(stk_peer_check(&other, &other.prov[0], FI_ADDR_STR, NULL, &why), -EINVAL);
	other = msg;
	other.conn_id = 0;
	ck_assert_int_eq(stk_peer_check(&other, &other.prov[0], FI_ADDR_STR, NULL, &why), -EINVAL);
	other = msg;
	snprintf(other.prov[0].name, sizeof(other.prov[0].name), "sh m");
	ck_assert_int_eq(stk_peer_check(&other, &other.prov[0], FI_ADDR_STR, NULL, &why), -EINVAL);
	/* a format we never open is refused */
	ck_assert_int_eq(stk_peer_check(&msg, prov, FI_ADDR_GNI, NULL, &why), -EINVAL);
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("peer");
	TCase *tc = tcase_create("checks");
	tcase_add_test(tc, test_sockaddr_in);
	tcase_add_test(tc, test_shm_name);
	tcase_add_test(tc, test_message);
	suite_add_tcase(s, tc);
	return s;
}
