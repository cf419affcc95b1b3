#include "config.h"
#include "stack/stk_sock.h"
#include "stack/stk_accel.h"
#include "stack/stk_epoll.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_stat.h"
#include "stack/stk_udp.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

struct stk_sock *stk_sock_new(int domain, int type, int protocol)
{
	if (domain != AF_INET && domain != AF_INET6)
		return NULL;
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	enum stk_sock_kind kind;
	if (base == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP))
		kind = STK_SOCK_TCP;
	else if (base == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP))
		kind = STK_SOCK_UDP;
	else
		return NULL;
	struct stk_sock *sock = calloc(1, sizeof(*sock));
	if (!sock)
		return NULL;
	sock->refs = 1;
	sock->kind = kind;
	sock->ops = kind == STK_SOCK_TCP ? &stk_tcp_ops : NULL;
	sock->domain = domain;
	stk_stat_start();
	stk_count(STK_C_SOCKETS_TRACKED);
	return sock;
}

struct stk_sock *stk_sock_new_epoll(struct stk_epoll *ep)
{
	struct stk_sock *sock = calloc(1, sizeof(*sock));
	if (!sock)
		return NULL;
	sock->refs = 1;
	sock->kind = STK_SOCK_EPOLL;
	sock->decided = true;
	sock->epoll = ep;
	__atomic_fetch_add(&stk_epoll_live, 1, __ATOMIC_RELAXED);
	return sock;
}

void stk_sock_ref(struct stk_sock *sock)
{
	__atomic_fetch_add(&sock->refs, 1, __ATOMIC_RELAXED);
}

void stk_sock_unref(struct stk_sock *sock)
{
	if (__atomic_sub_fetch(&sock->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (sock->conn)
		stk_accel_close(sock);
	if (sock->udp)
		stk_udp_close(sock);
	if (sock->epoll) {
		stk_epoll_destroy(sock->epoll);
		__atomic_fetch_sub(&stk_epoll_live, 1, __ATOMIC_RELAXED);
	}
	free(sock);
}

/* Log a fallback reason at info level the first time it is seen per role. */
static void note_fallback_once(enum stk_role role, const char *reason)
{
	static int logged[STK_ROLE_COUNT]; /* atomic flags */
	if (__atomic_exchange_n(&logged[role], 1, __ATOMIC_RELAXED) == 0)
		STK_INFO("%s sockets use the kernel: %s (logged once, counted in "
			 "fallback_no_transport)", stk_role_name(role), reason);
}

/* The socket's record for fabsock-stat: on the kernel, by rule or for why. */
static void stat_kernel(int fd, const struct stk_rule *rule, const char *why)
{
	char buf[48];
	if (rule)
		snprintf(buf, sizeof(buf), "rule at line %u", rule->line);
	stk_stat_orphan(fd, STK_STAT_KERNEL, rule ? buf : why);
}

bool stk_sock_decide(struct stk_sock *sock, int fd, enum stk_role role,
		     const struct sockaddr *local, const struct sockaddr *remote)
{
	const struct stk_rule *rule = NULL;
	sock->decided = true;
	int action = stk_rules_match(&stk_cfg.rules, role, local, remote, &rule);
	bool by_rule = action >= 0;
	if (!by_rule)
		action = stk_cfg.default_action;

	if (stk_log_level >= STK_LOG_DEBUG) {
		char lbuf[64], rbuf[64], why[32] = "default";
		if (by_rule)
			snprintf(why, sizeof(why), "rule at line %u", rule->line);
		STK_DBG("fd %d: %s local %s remote %s -> %s (%s)", fd, stk_role_name(role),
			stk_sockaddr_str(local, lbuf, sizeof(lbuf)),
			stk_sockaddr_str(remote, rbuf, sizeof(rbuf)),
			stk_action_name((enum stk_action)action), why);
	}
	if (action == STK_ACTION_KERNEL) {
		stk_count(by_rule ? STK_C_KERNEL_BY_RULE : STK_C_KERNEL_BY_DEFAULT);
		stat_kernel(fd, by_rule ? rule : NULL, "the default is kernel");
		return false;
	}
	stk_count(STK_C_ACCEL_REQUESTED);
	if (sock->kind == STK_SOCK_TCP) {
		if (stk_cfg.tcp_accel)
			return true;
		stk_count(STK_C_FALLBACK_NO_TRANSPORT);
		note_fallback_once(role, "TCP acceleration is off (FABSOCK_TCP_ACCEL=0)");
		stat_kernel(fd, NULL, "TCP acceleration is off (FABSOCK_TCP_ACCEL=0)");
		return false;
	}
	const char *why = stk_udp_accelerate(sock, fd);
	if (!why)
		return true;
	stk_count(STK_C_FALLBACK_NO_TRANSPORT);
	note_fallback_once(role, why);
	stat_kernel(fd, NULL, why);
	return false;
}
