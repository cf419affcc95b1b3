/* Checks of what a peer said in the negotiation (contract in stk_peer.h). */
#include "config.h"
#include "stack/stk_peer.h"
#include "stack/stk_stream_proto.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>

#define SHM_PREFIX "fi_shm://"

static int bad(const char **why, const char *rule)
{
	*why = rule;
	return -EINVAL;
}

static bool name_ok(const char *name)
{
	if (!name[0])
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == ';'))
			return false;
	return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* An address of this host: a socket can be bound to it. */
static bool ip_is_local(int family, const void *ip)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t len;
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, ip, 4);
		len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, ip, 16);
		len = sizeof(*sin6);
	}
	int fd = stk_sys.socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool ok = stk_sys.bind(fd, (struct sockaddr *)&ss, len) == 0;
	stk_sys.close(fd);
	return ok;
}

/* The kernel peer's IP as family + bytes (a v4-mapped IPv6 peer as IPv4). */
static bool peer_ip(const struct sockaddr *peer, int *family, uint8_t ip[16])
{
	if (peer->sa_family == AF_INET) {
		struct sockaddr_in sin;
		memcpy(&sin, peer, sizeof(sin));
		*family = AF_INET;
		memcpy(ip, &sin.sin_addr, 4);
		return true;
	}
	if (peer->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;
		memcpy(&sin6, peer, sizeof(sin6));
		if (IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr)) {
			*family = AF_INET;
			memcpy(ip, &sin6.sin6_addr.s6_addr[12], 4);
		} else {
			*family = AF_INET6;
			memcpy(ip, &sin6.sin6_addr, 16);
		}
		return true;
	}
	return false;
}

static bool is_loopback(int family, const uint8_t *ip)
{
	if (family == AF_INET)
		return ip[0] == 127;
	return IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)ip);
}

/* The IP rule (stk_peer.h): the kernel peer's IP, or for a peer on this host
 * an address of this host. */
static int ip_rule(int family, const uint8_t *ip, const struct sockaddr *kernel_peer,
		   const char **why)
{
	int pfam;
	uint8_t pip[16];
	if (!kernel_peer)
		return 0;
	if (!peer_ip(kernel_peer, &pfam, pip))
		return bad(why, "the kernel connection is not IP");
	size_t n = family == AF_INET ? 4 : 16;
	if (pfam == family && memcmp(pip, ip, n) == 0)
		return 0;
	if (is_loopback(pfam, pip) && ip_is_local(family, ip))
		return 0;
	return bad(why, "the address is not the kernel connection's peer IP");
}

static int sockaddr_check(const char *prov, int family, const uint8_t *addr, size_t len,
			  const struct sockaddr *kernel_peer, const char **why)
{
	/* our dpdk provider's address lives on its own device (stk_peer.h) */
	bool kernel_ip = strcmp(prov, "dpdk") != 0;
	if (family == AF_INET) {
		struct sockaddr_in sin;
		if (len != sizeof(sin))
			return bad(why, "IPv4 address of the wrong length");
		memcpy(&sin, addr, sizeof(sin));
		if (sin.sin_family != AF_INET || sin.sin_port == 0 ||
		    !all_zero(sin.sin_zero, sizeof(sin.sin_zero)) || sin.sin_addr.s_addr == 0)
			return bad(why, "malformed IPv4 address");
		return kernel_ip ? ip_rule(AF_INET, (const uint8_t *)&sin.sin_addr, kernel_peer, why)
				 : 0;
	}
	struct sockaddr_in6 sin6;
	if (len != sizeof(sin6))
		return bad(why, "IPv6 address of the wrong length");
	memcpy(&sin6, addr, sizeof(sin6));
	if (sin6.sin6_family != AF_INET6 || sin6.sin6_port == 0 || sin6.sin6_flowinfo != 0 ||
	    IN6_IS_ADDR_UNSPECIFIED(&sin6.sin6_addr))
		return bad(why, "malformed IPv6 address");
	return kernel_ip ? ip_rule(AF_INET6, (const uint8_t *)&sin6.sin6_addr, kernel_peer, why)
			 : 0;
}

static int string_check(const char *prov, const uint8_t *addr, size_t len, const char **why)
{
	if (len < 2 || addr[len - 1] != '\0')
		return bad(why, "address string not terminated at its length");
	for (size_t i = 0; i + 1 < len; i++)
		if (addr[i] < 0x21 || addr[i] > 0x7e)
			return bad(why, "address string with a NUL or unprintable byte");
	if (strcmp(prov, "shm") != 0)
		return 0;
	size_t plen = strlen(SHM_PREFIX);
	if (len - 1 <= plen || memcmp(addr, SHM_PREFIX, plen) != 0)
		return bad(why, "shm address without its prefix");
	for (size_t i = plen; i + 1 < len; i++)
		if (!((addr[i] >= '0' && addr[i] <= '9') || addr[i] == ':'))
			return bad(why, "shm address with a character other than digits and ':'");
	return 0;
}

int stk_peer_addr_check(const char *prov, uint32_t addr_format, const uint8_t *addr,
			size_t len, const struct sockaddr *kernel_peer, const char **why)
{
	if (len == 0 || len > STK_FAB_ADDR_MAX)
		return bad(why, "address length out of range");
	switch (addr_format) {
	case FI_SOCKADDR_IN:
		return sockaddr_check(prov, AF_INET, addr, len, kernel_peer, why);
	case FI_SOCKADDR_IN6:
		return sockaddr_check(prov, AF_INET6, addr, len, kernel_peer, why);
	case FI_SOCKADDR: {
		uint16_t family;
		if (len < sizeof(family))
			return bad(why, "address too short");
		memcpy(&family, addr, sizeof(family));
		if (family != AF_INET && family != AF_INET6)
			return bad(why, "socket address of another family");
		return sockaddr_check(prov, family, addr, len, kernel_peer, why);
	}
	case FI_ADDR_STR:
		return string_check(prov, addr, len, why);
	default:
		return bad(why, "address format we do not accept from a peer");
	}
}

int stk_peer_check(const struct stk_nego_msg *msg, const struct stk_nego_prov *prov,
		   uint32_t addr_format, const struct sockaddr *kernel_peer, const char **why)
{
	if (memchr(prov->name, '\0', sizeof(prov->name)) == NULL || !name_ok(prov->name))
		return bad(why, "malformed provider name");
	if (msg->conn_id == 0)
		return bad(why, "connection id 0");
	if (msg->slot >= STK_CONN_MAX)
		return bad(why, "slot out of range");
	if (msg->credits < 4096)
		return bad(why, "credit below 4096 bytes");
	if (strcmp(prov->name, "shm") == 0 && !stk_nego_same_host(msg))
		return bad(why, "shm from another boot or network namespace");
	return stk_peer_addr_check(prov->name, addr_format, prov->addr, prov->addr_len,
				   kernel_peer, why);
}
