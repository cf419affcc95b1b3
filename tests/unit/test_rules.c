/* Rules parser and matcher: good inputs, bad inputs with exact positions, matching. */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stack/stk_rules.h"
#include "unit.h"

static struct stk_rules rules;
static struct stk_parse_error err;

static void setup(void)
{
	stk_rules_init(&rules);
	memset(&err, 0, sizeof(err));
}

static void teardown(void)
{
	stk_rules_free(&rules);
}

static struct sockaddr_in v4(const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	return sa;
}

static struct sockaddr_in6 v6(const char *ip, int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	ck_assert_int_eq(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
	return sa;
}

static int parse_ok(const char *text)
{
	int ret = stk_rules_parse(&rules, text, "test", &err);
	ck_assert_msg(ret == 0, "'%s' failed: %u:%u: %s", text, err.line, err.column, err.message);
	stk_rules_select_app(&rules, "prog", NULL);
	return ret;
}

static int match_remote(enum stk_role role, const struct sockaddr *remote)
{
	return stk_rules_match(&rules, role, NULL, remote, NULL);
}

static int match_local(enum stk_role role, const struct sockaddr *local)
{
	return stk_rules_match(&rules, role, local, NULL, NULL);
}

START_TEST(test_empty_and_comments)
{
	parse_ok("");
	parse_ok("# only a comment\n\n   \t\n;;");
	ck_assert_uint_eq(rules.count, 0);
	ck_assert_int_eq(rules.default_action, -1);
}
END_TEST

START_TEST(test_synonyms_and_roles)
{
	parse_ok("use vma tcp_server *:80; use os tcp_client *:*\n"
		 "use accel udp_receiver *:53 # trailing comment\n"
		 "use kernel udp_sender *:*; use accel udp_connect *:1-2");
	ck_assert_uint_eq(rules.count, 5);
	ck_assert_int_eq(rules.rules[0].action, STK_ACTION_ACCEL);
	ck_assert_int_eq(rules.rules[0].role, STK_ROLE_TCP_SERVER);
	ck_assert_int_eq(rules.rules[1].action, STK_ACTION_KERNEL);
	ck_assert_int_eq(rules.rules[1].role, STK_ROLE_TCP_CLIENT);
	ck_assert_int_eq(rules.rules[2].role, STK_ROLE_UDP_RECEIVER);
	ck_assert_uint_eq(rules.rules[2].line, 2);
	ck_assert_int_eq(rules.rules[3].role, STK_ROLE_UDP_SENDER);
	ck_assert_int_eq(rules.rules[4].role, STK_ROLE_UDP_CONNECT);
	ck_assert_uint_eq(rules.rules[4].remote.port_lo, 1);
	ck_assert_uint_eq(rules.rules[4].remote.port_hi, 2);
}
END_TEST

START_TEST(test_prefix_and_port_range_match)
{
	parse_ok("use kernel tcp_client 10.1.0.0/16:8000-8009; use accel tcp_client *:*");
	struct sockaddr_in in = v4("10.1.200.3", 8005), out = v4("10.2.0.1", 8005),
			   port_out = v4("10.1.0.1", 8010);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&in),
			 STK_ACTION_KERNEL);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&out),
			 STK_ACTION_ACCEL);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&port_out),
			 STK_ACTION_ACCEL);
	/* another role matches nothing */
	ck_assert_int_eq(match_remote(STK_ROLE_UDP_CONNECT, (struct sockaddr *)&in), -1);
}
END_TEST

START_TEST(test_odd_prefix_bits)
{
	parse_ok("use os tcp_server 192.168.1.128/25:*");
	struct sockaddr_in hi = v4("192.168.1.200", 1), lo = v4("192.168.1.100", 1);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&hi),
			 STK_ACTION_KERNEL);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&lo), -1);
}
END_TEST

START_TEST(test_first_match_wins)
{
	parse_ok("use os tcp_server *:6379\nuse vma tcp_server *:*");
	struct sockaddr_in redis = v4("0.0.0.0", 6379), other = v4("0.0.0.0", 80);
	const struct stk_rule *hit = NULL;
	ck_assert_int_eq(stk_rules_match(&rules, STK_ROLE_TCP_SERVER, (struct sockaddr *)&redis,
					 NULL, &hit), STK_ACTION_KERNEL);
	ck_assert_uint_eq(hit->line, 1);
	ck_assert_int_eq(stk_rules_match(&rules, STK_ROLE_TCP_SERVER, (struct sockaddr *)&other,
					 NULL, &hit), STK_ACTION_ACCEL);
	ck_assert_uint_eq(hit->line, 2);
}
END_TEST

START_TEST(test_ipv6_and_v4_mapped)
{
	parse_ok("use os tcp_client [2001:db8::]/32:443; use kernel tcp_client 127.0.0.0/8:*");
	struct sockaddr_in6 doc = v6("2001:db8::1", 443), mapped = v6("::ffff:127.0.0.5", 9),
			    other = v6("2001:db9::1", 443);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&doc),
			 STK_ACTION_KERNEL);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&mapped),
			 STK_ACTION_KERNEL);
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&other), -1);
}
END_TEST

START_TEST(test_libvma_four_part_client)
{
	parse_ok("use os tcp_client 10.0.0.1:*:10.0.0.2:80");
	ck_assert_uint_eq(rules.count, 1);
	struct sockaddr_in local = v4("10.0.0.1", 4000), bad_local = v4("10.0.0.9", 4000),
			   remote = v4("10.0.0.2", 80);
	ck_assert_int_eq(stk_rules_match(&rules, STK_ROLE_TCP_CLIENT, (struct sockaddr *)&local,
					 (struct sockaddr *)&remote, NULL), STK_ACTION_KERNEL);
	ck_assert_int_eq(stk_rules_match(&rules, STK_ROLE_TCP_CLIENT,
					 (struct sockaddr *)&bad_local, (struct sockaddr *)&remote,
					 NULL), -1);
	/* unknown local address: a rule that constrains it cannot match */
	ck_assert_int_eq(match_remote(STK_ROLE_TCP_CLIENT, (struct sockaddr *)&remote), -1);
}
END_TEST

START_TEST(test_two_endpoint_client)
{
	parse_ok("use os udp_sender *:5000 198.18.0.1:7000");
	ck_assert_uint_eq(rules.rules[0].local.port_lo, 5000);
	ck_assert_uint_eq(rules.rules[0].remote.port_lo, 7000);
}
END_TEST

START_TEST(test_application_id_blocks)
{
	ck_assert_int_eq(stk_rules_parse(&rules,
					 "use os tcp_server *:1\n"
					 "application-id redis-* *\n"
					 "use os tcp_server *:2\n"
					 "application-id nginx blue\n"
					 "use os tcp_server *:3\n",
					 "t", &err), 0);
	struct sockaddr_in p1 = v4("1.1.1.1", 1), p2 = v4("1.1.1.1", 2), p3 = v4("1.1.1.1", 3);
	stk_rules_select_app(&rules, "redis-server", NULL);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p1), 0);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p2), 0);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p3), -1);
	stk_rules_select_app(&rules, "nginx", "green");
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p2), -1);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p3), -1);
	stk_rules_select_app(&rules, "nginx", "blue");
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p3), 0);
	ck_assert_int_eq(match_local(STK_ROLE_TCP_SERVER, (struct sockaddr *)&p1), 0);
}
END_TEST

START_TEST(test_default_statement)
{
	parse_ok("default kernel");
	ck_assert_int_eq(rules.default_action, STK_ACTION_KERNEL);
	parse_ok("default vma");
	ck_assert_int_eq(rules.default_action, STK_ACTION_ACCEL);
}
END_TEST

/* Each bad input, the exact line:column, and a word the message must contain. */
static const struct {
	const char *text;
	unsigned line, column;
	const char *expect;
} bad_inputs[] = {
	{ "frobnicate", 1, 1, "expected use|application-id|default" },
	{ "use", 1, 4, "accel|kernel" },
	{ "use fast tcp_server *:1", 1, 5, "got 'fast'" },
	{ "use os tcp_sever *:1", 1, 8, "tcp_server|tcp_client" },
	{ "use os tcp_server", 1, 18, "expected an endpoint" },
	{ "use os tcp_server *", 1, 20, "expected ':'" },
	{ "use os tcp_server *:", 1, 21, "port" },
	{ "use os tcp_server *:65536", 1, 21, "port 0..65535" },
	{ "use os tcp_server *:90-80", 1, 24, "port range" },
	{ "use os tcp_server 1.2.3:80", 1, 19, "IPv4" },
	{ "use os tcp_server 1.2.3.4/33:80", 1, 27, "prefix length 0..32" },
	{ "use os tcp_server [::1:80", 1, 19, "']'" },
	{ "use os tcp_server [zz::1]:80", 1, 20, "IPv6" },
	{ "use os tcp_server *:1 *:2", 1, 23, "takes one endpoint" },
	{ "\n\n  use os tcp_server *:1x", 3, 24, "expected ':' or end" },
	{ "use os tcp_client *:1 *:2 *:3", 1, 27, "two endpoints" },
	{ "use os tcp_server *:1;;  default maybe", 1, 34, "accel|kernel" },
	{ "application-id", 1, 15, "program name" },
};

START_TEST(test_bad_input)
{
	int ret = stk_rules_parse(&rules, bad_inputs[_i].text, "SRC", &err);
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_str_eq(err.source, "SRC");
	ck_assert_msg(err.line == bad_inputs[_i].line && err.column == bad_inputs[_i].column,
		      "'%s': got %u:%u (%s), want %u:%u", bad_inputs[_i].text, err.line,
		      err.column, err.message, bad_inputs[_i].line, bad_inputs[_i].column);
	ck_assert_msg(strstr(err.message, bad_inputs[_i].expect) != NULL,
		      "'%s': message '%s' lacks '%s'", bad_inputs[_i].text, err.message,
		      bad_inputs[_i].expect);
}
END_TEST

START_TEST(test_sockaddr_str)
{
	char buf[64];
	struct sockaddr_in a = v4("198.18.0.1", 80);
	struct sockaddr_in6 b = v6("::1", 443);
	ck_assert_str_eq(stk_sockaddr_str((struct sockaddr *)&a, buf, sizeof(buf)),
			 "198.18.0.1:80");
	ck_assert_str_eq(stk_sockaddr_str((struct sockaddr *)&b, buf, sizeof(buf)), "[::1]:443");
	ck_assert_str_eq(stk_sockaddr_str(NULL, buf, sizeof(buf)), "?");
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("rules");
	TCase *tc = tcase_create("parse");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_empty_and_comments);
	tcase_add_test(tc, test_synonyms_and_roles);
	tcase_add_test(tc, test_prefix_and_port_range_match);
	tcase_add_test(tc, test_odd_prefix_bits);
	tcase_add_test(tc, test_first_match_wins);
	tcase_add_test(tc, test_ipv6_and_v4_mapped);
	tcase_add_test(tc, test_libvma_four_part_client);
	tcase_add_test(tc, test_two_endpoint_client);
	tcase_add_test(tc, test_application_id_blocks);
	tcase_add_test(tc, test_default_statement);
	tcase_add_loop_test(tc, test_bad_input, 0,
			    (int)(sizeof(bad_inputs) / sizeof(bad_inputs[0])));
	tcase_add_test(tc, test_sockaddr_str);
	suite_add_tcase(s, tc);
	return s;
}
