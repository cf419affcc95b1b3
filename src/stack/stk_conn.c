#include "config.h"
#include "stack/stk_conn.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"
#include "stack/stk_peer.h"
#include "stack/stk_stat.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void count_accel(const char *prov)
{
	struct stk_prov_counters c;
	stk_count(stk_counters_of_prov(prov, &c) ? c.conn : STK_C_CONN_ACCEL_OTHER);
	stk_count(STK_C_ACCELERATED);
}

static size_t window(void)
{
	return stk_cfg.window_bytes ? stk_cfg.window_bytes : 256 * 1024;
}

/* Next provider name of the comma list at *cursor; false at the end. */
static bool next_provider(const char **cursor, char name[STK_FAB_NAME_MAX])
{
	const char *p = *cursor;
	if (!*p)
		return false;
	size_t n = strcspn(p, ",");
	snprintf(name, STK_FAB_NAME_MAX, "%.*s", (int)(n < STK_FAB_NAME_MAX ? n : STK_FAB_NAME_MAX - 1), p);
	*cursor = p + n + (p[n] == ',');
	return true;
}

static void local_identity(struct stk_nego_msg *msg, uint16_t type, const struct stk_conn *conn)
{
	msg->version = STK_NEGO_VERSION;
	msg->type = type;
	stk_nego_host_identity(msg->boot_id, &msg->netns);
	if (conn) {
		msg->conn_id = conn->local_id;
		msg->slot = conn->slot;
		msg->credits = (uint32_t)conn->ring_size;
	}
}

static int fill_prov(struct stk_fab *fab, const struct sockaddr *local,
		     struct stk_nego_prov *prov)
{
	snprintf(prov->name, sizeof(prov->name), "%s", stk_fab_name(fab));
	size_t len = sizeof(prov->addr);
	int ret = stk_fab_getname(fab, local, prov->addr, &len);
	prov->addr_len = (uint16_t)len;
	return ret;
}

static const struct stk_nego_prov *offered(const struct stk_nego_msg *hello, const char *name)
{
	for (unsigned i = 0; i < hello->nprov; i++)
		if (strcmp(hello->prov[i].name, name) == 0)
			return &hello->prov[i];
	return NULL;
}

/* ---- building blocks, shared with the lazy negotiation (stk_lazy.c) ---- */

int stk_conn_fall_back(struct stk_attach_info *info, enum stk_counter counter, int fd,
		       const char *fmt, ...)
{
	static int logged[STK_C_COUNT]; /* atomic flags */
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(info->reason, sizeof(info->reason), fmt, ap);
	va_end(ap);
	stk_stat_note_fallback(info->reason);
	stk_count(counter);
	if (__atomic_exchange_n(&logged[counter], 1, __ATOMIC_RELAXED) == 0)
		STK_INFO("fd %d: TCP connection stays on the kernel: %s (logged once per "
			 "reason, counted)", fd, info->reason);
	else
		STK_DBG("fd %d: TCP connection stays on the kernel: %s", fd, info->reason);
	return STK_ATTACH_KERNEL;
}

void stk_conn_count_accel(const char *prov)
{
	count_accel(prov);
}

size_t stk_conn_window(void)
{
	return window();
}

/* Is the peer of this kernel connection on this host, in this network
 * namespace? Loopback addresses, or the peer uses our own local IP (the
 * kernel routes that over lo). */
static bool peer_is_local(int fd, const struct sockaddr *local)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	if (!local || stk_sys.getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
	    peer.ss_family != local->sa_family)
		return false;
	if (peer.ss_family == AF_INET) {
		struct sockaddr_in p, l;
		memcpy(&p, &peer, sizeof(p));
		memcpy(&l, local, sizeof(l));
		return (ntohl(p.sin_addr.s_addr) >> 24) == 127 ||
		       p.sin_addr.s_addr == l.sin_addr.s_addr;
	}
	if (peer.ss_family == AF_INET6) {
		struct sockaddr_in6 p, l;
		memcpy(&p, &peer, sizeof(p));
		memcpy(&l, local, sizeof(l));
		return IN6_IS_ADDR_LOOPBACK(&p.sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&p.sin6_addr) && p.sin6_addr.s6_addr[12] == 127) ||
		       IN6_ARE_ADDR_EQUAL(&p.sin6_addr, &l.sin6_addr);
	}
	return false;
}

static bool addr_is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in sin;
		memcpy(&sin, sa, sizeof(sin));
		return sin.sin_addr.s_addr == htonl(INADDR_ANY);
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;
		memcpy(&sin6, sa, sizeof(sin6));
		return IN6_IS_ADDR_UNSPECIFIED(&sin6.sin6_addr);
	}
	return true;
}

/* A per-address provider not open yet for this local address is not offered
 * to this client (its open starts in the background, for the next ones): the
 * client waits for the HELLO a few milliseconds only. Unless wait (nothing
 * else to offer: without it the connection is on the kernel anyway; a
 * prefork worker's first client, as the parent's endpoints are not its own). */
static void offer(struct stk_nego_msg *hello, struct stk_fab *fabs[], const char *name,
		  const struct sockaddr *local, bool wait)
{
	struct stk_fab *fab;
	if (hello->nprov >= STK_NEGO_PROV_MAX)
		return;
	int ret = stk_fab_per_address(name) && !wait ? stk_fab_get_ready(name, local, &fab)
						     : stk_fab_get(name, local, &fab);
	if (ret == 0 && fill_prov(fab, local, &hello->prov[hello->nprov]) == 0)
		fabs[hello->nprov++] = fab;
}

void stk_conn_build_hello(struct stk_conn *conn, const struct sockaddr *local,
			  struct stk_nego_msg *hello, struct stk_fab *fabs[STK_NEGO_PROV_MAX])
{
	/* Offer every configured provider that opens here (maybe none: the client
	 * waits for a HELLO and must get one to know the outcome), except that the
	 * IP-listening ones (opened per local address, stk_fab.h; tcp costs ~70 MiB
	 * of buffers) are left out for a client on this host when shm is offered:
	 * the client chooses shm, or stays on the kernel when it runs as another
	 * user. The client chooses by its own order; the HELLO's does not matter. */
	memset(hello, 0, sizeof(*hello));
	local_identity(hello, STK_NEGO_HELLO, conn);
	char name[STK_FAB_NAME_MAX];
	const char *cursor = stk_cfg.providers;
	bool shm_offered = false;
	while (next_provider(&cursor, name)) {
		if (stk_fab_per_address(name))
			continue;
		unsigned before = hello->nprov;
		offer(hello, fabs, name, local, true);
		if (hello->nprov > before && strcmp(name, "shm") == 0)
			shm_offered = true;
	}
	if (shm_offered && peer_is_local(conn->fd, local))
		return;
	cursor = stk_cfg.providers;
	while (next_provider(&cursor, name))
		if (stk_fab_per_address(name))
			offer(hello, fabs, name, local, hello->nprov == 0);
}

static void make_reject(struct stk_nego_msg *reply, uint16_t status)
{
	memset(reply, 0, sizeof(*reply));
	local_identity(reply, STK_NEGO_REPLY, NULL);
	reply->status = status;
}

int stk_conn_answer_hello(struct stk_conn *conn, int decoded, const struct stk_nego_msg *hello,
			  const struct sockaddr *peer, const struct sockaddr *local,
			  struct stk_nego_msg *reply, struct stk_attach_info *info)
{
	int fd = conn->fd;
	memset(reply, 0, sizeof(*reply));
	if (decoded == -EPROTO) {
		stk_nego_cache_put(peer, STK_PEER_PLAIN);
		return stk_conn_fall_back(info, STK_C_FALLBACK_PLAIN_PEER, fd,
					  "the server spoke first and is not libfabsock");
	}
	if (decoded == -EPROTONOSUPPORT) {
		make_reject(reply, STK_NEGO_REJECT_VERSION);
		stk_nego_cache_put(peer, STK_PEER_PLAIN);
		return stk_conn_fall_back(info, STK_C_FALLBACK_VERSION, fd,
					  "server speaks negotiation version %u, we speak %u",
					  hello->version, STK_NEGO_VERSION);
	}
	if (decoded != 0 || hello->type != STK_NEGO_HELLO) {
		/* our magic, so the peer is libfabsock: tell it we give up */
		make_reject(reply, STK_NEGO_REJECT_BAD_HELLO);
		return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
					  "malformed HELLO from the server");
	}
	/* Choose: the first of the configured order (FABSOCK_PROVIDERS, default
	 * shm,tcp) both offer; shm only when both share a host and namespace. */
	bool same_host = stk_nego_same_host(hello);
	/* A provider is chosen once it opens here (per-address ones on this
	 * connection's local IP) and takes the server's address (shm: a peer of
	 * another user is refused); else the next common one. */
	struct stk_fab *fab = NULL;
	const struct stk_nego_prov *theirs = NULL;
	bool common = false, other_user = false;
	fi_addr_t peer_addr = 0;
	char name[STK_FAB_NAME_MAX];
	const char *cursor = stk_cfg.providers;
	while (!fab && next_provider(&cursor, name)) {
		if (strcmp(name, "shm") == 0 && !same_host)
			continue;
		theirs = offered(hello, name);
		if (!theirs)
			continue;
		common = true;
		if (stk_fab_get(name, local, &fab) != 0) {
			fab = NULL;
			continue;
		}
		const char *why;
		if (stk_peer_check(hello, theirs, stk_fab_addr_format(fab), peer, &why) != 0) {
			make_reject(reply, STK_NEGO_REJECT_BAD_HELLO);
			return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
						  "the server's HELLO for %s refused: %s", name, why);
		}
		int ins = stk_fab_av_insert(fab, theirs->addr, theirs->addr_len, &peer_addr);
		if (ins != 0) {
			other_user |= ins == -EPERM;
			fab = NULL;
		}
	}
	stk_nego_cache_put(peer, STK_PEER_CAPABLE);
	if (!fab) {
		make_reject(reply, common ? STK_NEGO_REJECT_PROV_INIT : STK_NEGO_REJECT_NO_COMMON);
		if (other_user)
			return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
						  "the server runs as another user (its shm region "
						  "is private) and offers no other common provider");
		if (common)
			return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
						  "every common provider failed to open here or "
						  "refused the server's address");
		return stk_conn_fall_back(info, STK_C_FALLBACK_NO_COMMON, fd,
					  "no common provider (server offers %u, we have '%s'%s)",
					  hello->nprov, stk_cfg.providers,
					  same_host ? "" : ", not on the same host");
	}
	local_identity(reply, STK_NEGO_REPLY, conn);
	reply->nprov = 1;
	if (fill_prov(fab, local, &reply->prov[0]) != 0) {
		stk_fab_av_release(fab, peer_addr);
		make_reject(reply, STK_NEGO_REJECT_PROV_INIT);
		return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
					  "%s: cannot get our own address", name);
	}
	stk_conn_connect(conn, fab, peer_addr, hello->slot, hello->conn_id, hello->credits);
	return 0;
}

int stk_conn_take_reply(struct stk_conn *conn, int decoded, const struct stk_nego_msg *reply,
			const struct stk_nego_msg *hello, struct stk_fab *const fabs[],
			const struct sockaddr *peer, bool *cancel, struct stk_attach_info *info)
{
	int fd = conn->fd;
	*cancel = false;
	if (decoded == -EPROTO)
		return stk_conn_fall_back(info, STK_C_FALLBACK_TIMEOUT, fd,
					  "the client gave up waiting for our HELLO and sent data");
	if (decoded == -EPROTONOSUPPORT ||
	    (decoded == 0 && reply->type == STK_NEGO_REPLY &&
	     reply->status == STK_NEGO_REJECT_VERSION))
		return stk_conn_fall_back(info, STK_C_FALLBACK_VERSION, fd,
					  "client speaks negotiation version %u, we speak %u",
					  reply->version, STK_NEGO_VERSION);
	if (decoded != 0 || reply->type != STK_NEGO_REPLY)
		return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
					  "malformed REPLY from the client");
	switch (reply->status) {
	case STK_NEGO_ACCEPT:
		break;
	case STK_NEGO_REJECT_NO_COMMON:
		return stk_conn_fall_back(info, STK_C_FALLBACK_NO_COMMON, fd,
					  "no common provider (we offered %u of '%s')", hello->nprov,
					  stk_cfg.providers);
	case STK_NEGO_REJECT_PROV_INIT:
		return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
					  "the client could not open a common provider");
	default:
		return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
					  "the client rejected our HELLO (status %u)", reply->status);
	}
	struct stk_fab *fab = NULL;
	for (unsigned i = 0; i < hello->nprov; i++)
		if (strcmp(hello->prov[i].name, reply->prov[0].name) == 0)
			fab = fabs[i];
	*cancel = true; /* the client offered: we decide, and say so */
	if (!fab)
		return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
					  "the client chose a provider we did not offer");
	const char *why;
	if (stk_peer_check(reply, &reply->prov[0], stk_fab_addr_format(fab), peer, &why) != 0)
		return stk_conn_fall_back(info, STK_C_FALLBACK_GARBAGE, fd,
					  "the client's REPLY for %s refused: %s", stk_fab_name(fab),
					  why);
	fi_addr_t peer_addr;
	if (stk_fab_av_insert(fab, reply->prov[0].addr, reply->prov[0].addr_len, &peer_addr) != 0)
		return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
					  "client chose '%s' which we cannot use", stk_fab_name(fab));
	*cancel = false;
	stk_conn_connect(conn, fab, peer_addr, reply->slot, reply->conn_id, reply->credits);
	return 0;
}

void stk_conn_make_decision(struct stk_nego_msg *msg, uint16_t type, uint16_t status)
{
	memset(msg, 0, sizeof(*msg));
	msg->version = STK_NEGO_VERSION;
	msg->type = type;
	msg->status = status;
}

/* ---- the blocking entry point (stk_accel_attach) ---- */

static int accelerated(struct stk_conn *conn, struct stk_conn **out, struct stk_attach_info *info)
{
	snprintf(info->provider, sizeof(info->provider), "%s", stk_fab_name(conn->fab));
	count_accel(info->provider);
	STK_DBG("fd %d: accelerated over %s (slot %u)", conn->fd, info->provider, conn->slot);
	*out = conn;
	return 0;
}

/* Server after a usable REPLY: it alone decides whether the fabric works
 * (stk_nego.h, rule 5): its first fabric message says yes, a CANCEL on the
 * kernel stream no. */
static int server_finish(struct stk_conn *conn, struct stk_conn **out,
			 struct stk_attach_info *info)
{
	int fd = conn->fd;
	if (stk_conn_handshake(conn, STK_NEGO_HANDSHAKE_MS) == 0)
		return accelerated(conn, out, info);
	struct stk_nego_msg verdict;
	stk_conn_make_decision(&verdict, STK_NEGO_CANCEL, STK_NEGO_CANCEL_HANDSHAKE);
	int ret = stk_nego_send_msg(fd, &verdict, STK_NEGO_REPLY_WAIT_MS);
	const char *name = stk_fab_name(conn->fab);
	stk_conn_destroy(conn);
	if (ret)
		return ret;
	return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
				  "%s: no fabric message from the client within %d ms", name,
				  STK_NEGO_HANDSHAKE_MS);
}

/* Client after its REPLY: its fabric message, then the server's first fabric
 * message or its CANCEL. It never decides alone (that could split the
 * connection): when no verdict comes in time the connection is unusable,
 * -ETIMEDOUT. Bytes that are not a record are the doorbells of a server on
 * the fabric: its message is on its way. */
static int client_finish(struct stk_conn *conn, bool posted, struct stk_conn **out,
			 struct stk_attach_info *info)
{
	int fd = conn->fd;
	int waited_ms = 0;
	for (;;) {
		/* post ours, drive progress */
		if (stk_conn_handshake_step(conn, &posted, false) > 0)
			return accelerated(conn, out, info);
		struct stk_nego_msg verdict;
		size_t len = 0;
		int r = stk_nego_peek(fd, &verdict, &len);
		bool bells = r == -EPROTO; /* they stay readable: do not poll for them */
		if (bells)
			r = -EAGAIN;
		if (r != 0 && r != -EAGAIN && stk_conn_handshake_step(conn, &posted, false) > 0)
			return accelerated(conn, out, info); /* it closed once we had it */
		if (r == 0 && verdict.type == STK_NEGO_CANCEL) {
			stk_nego_consume(fd, len);
			const char *name = stk_fab_name(conn->fab);
			stk_conn_destroy(conn);
			return stk_conn_fall_back(info, STK_C_FALLBACK_PROV_INIT, fd,
						  "%s: the server saw no fabric message from us "
						  "(status %u)", name, verdict.status);
		}
		if (r != -EAGAIN || waited_ms >= STK_NEGO_REPLY_WAIT_MS + STK_NEGO_HANDSHAKE_MS) {
			stk_conn_destroy(conn);
			return r == -EAGAIN ? -ETIMEDOUT : r == 0 ? -EBADMSG : r;
		}
		struct pollfd pfd = { .fd = bells ? -1 : fd, .events = POLLIN };
		stk_sys.poll(&pfd, 1, 1);
		waited_ms++;
	}
}

static int attach_client(int fd, struct stk_conn **out, struct stk_attach_info *info)
{
	struct sockaddr_storage peer, local;
	socklen_t plen = sizeof(peer), llen = sizeof(local);
	if (stk_sys.getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
	    stk_sys.getsockname(fd, (struct sockaddr *)&local, &llen) != 0)
		return -errno;
	enum stk_nego_peer known = stk_nego_cache_get((struct sockaddr *)&peer);
	int wait_ms = known == STK_PEER_CAPABLE ? STK_NEGO_WAIT_CAPABLE_MS
		    : known == STK_PEER_PLAIN ? 0 : (int)stk_cfg.nego_wait_ms;

	struct stk_nego_msg hello;
	int ret = stk_nego_recv_msg(fd, &hello, wait_ms);
	if (ret == -ETIMEDOUT) {
		info->strip_late_hello = true;
		stk_nego_cache_put((struct sockaddr *)&peer, STK_PEER_PLAIN);
		if (known == STK_PEER_PLAIN)
			return stk_conn_fall_back(info, STK_C_FALLBACK_PLAIN_PEER, fd,
					 "destination cached as not libfabsock");
		return stk_conn_fall_back(info, STK_C_FALLBACK_TIMEOUT, fd,
				 "no HELLO from the server within %d ms (plain server?)", wait_ms);
	}
	if (ret < 0 && ret != -EPROTO && ret != -EPROTONOSUPPORT && ret != -EBADMSG)
		return ret;
	struct stk_conn *conn;
	int cret = stk_conn_create(fd, window(), &conn);
	if (cret)
		return cret;
	struct stk_nego_msg reply;
	ret = stk_conn_answer_hello(conn, ret, &hello, (struct sockaddr *)&peer,
				    (struct sockaddr *)&local, &reply, info);
	if (ret != 0) {
		if (reply.type)
			stk_nego_send_msg(fd, &reply, 100);
		stk_conn_destroy(conn);
		return ret;
	}
	/* Our fabric message goes first: the server finds it when the REPLY
	 * arrives (stk_nego.h rule 5) and answers with its own or CANCEL. */
	bool posted = false;
	stk_conn_handshake_step(conn, &posted, false);
	ret = stk_nego_send_msg(fd, &reply, STK_NEGO_REPLY_WAIT_MS);
	if (ret) {
		stk_conn_destroy(conn);
		return ret;
	}
	return client_finish(conn, posted, out, info);
}

static int attach_server(int fd, struct stk_conn **out, struct stk_attach_info *info)
{
	int marked = stk_nego_syn_marked(fd);
	if (marked <= 0)
		return stk_conn_fall_back(info, STK_C_FALLBACK_PLAIN_PEER, fd,
				 marked < 0 ? "cannot read the saved SYN: %s"
					    : "the client's SYN was not marked%s (plain client)",
				 marked < 0 ? strerror(-marked) : "");
	struct sockaddr_storage local, peer;
	socklen_t llen = sizeof(local), plen = sizeof(peer);
	if (stk_sys.getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
	    stk_sys.getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
		return -errno;

	struct stk_conn *conn;
	int ret = stk_conn_create(fd, window(), &conn);
	if (ret)
		return ret;
	struct stk_nego_msg hello;
	struct stk_fab *fabs[STK_NEGO_PROV_MAX];
	stk_conn_build_hello(conn, (struct sockaddr *)&local, &hello, fabs);
	ret = stk_nego_send_msg(fd, &hello, STK_NEGO_REPLY_WAIT_MS);
	if (ret) {
		stk_conn_destroy(conn);
		return ret;
	}
	struct stk_nego_msg reply;
	ret = stk_nego_recv_msg(fd, &reply, STK_NEGO_REPLY_WAIT_MS);
	if (ret == -ETIMEDOUT) {
		stk_conn_destroy(conn);
		return stk_conn_fall_back(info, STK_C_FALLBACK_TIMEOUT, fd,
				 "no REPLY from the client within %d ms", STK_NEGO_REPLY_WAIT_MS);
	}
	if (ret < 0 && ret != -EPROTO && ret != -EPROTONOSUPPORT && ret != -EBADMSG) {
		stk_conn_destroy(conn);
		return ret;
	}
	bool cancel;
	ret = stk_conn_take_reply(conn, ret, &reply, &hello, fabs, (struct sockaddr *)&peer,
				  &cancel, info);
	if (ret) {
		struct stk_nego_msg decision;
		stk_conn_make_decision(&decision, STK_NEGO_CANCEL, STK_NEGO_CANCEL_UNUSABLE);
		if (cancel)
			stk_nego_send_msg(fd, &decision, STK_NEGO_REPLY_WAIT_MS);
		stk_conn_destroy(conn);
		return ret;
	}
	return server_finish(conn, out, info);
}

static void open_providers(bool listener)
{
	const char *cursor = stk_cfg.providers;
	char name[STK_FAB_NAME_MAX];
	struct stk_fab *fab;
	/* libfabric itself first: its load is most of the cost, also for the
	 * per-address providers opened later, per connection */
	if (stk_fab_load() != 0)
		return;
	while (next_provider(&cursor, name))
		if (!stk_fab_per_address(name) && !(listener && stk_fab_opens_at_accept(name)))
			stk_fab_get(name, NULL, &fab); /* failures are cached and logged there */
}

void stk_conn_open_providers(void)
{
	open_providers(false);
}

/* Is a provider that is not per-address (shm) open here? */
static bool shared_provider_open(void)
{
	const char *cursor = stk_cfg.providers;
	char name[STK_FAB_NAME_MAX];
	struct stk_fab *fab;
	while (next_provider(&cursor, name))
		if (!stk_fab_per_address(name) && !stk_fab_opens_at_accept(name) &&
		    stk_fab_get(name, NULL, &fab) == 0)
			return true;
	return false;
}

int stk_accel_listen(int listen_fd)
{
	int ret = stk_nego_listener_prepare(listen_fd);
	if (ret)
		return ret;
	stk_sys_dup_high_reserve(listen_fd);
	open_providers(true);
	/* A listener on one address whose clients can only get a per-address
	 * provider (no shm here): open them for that address now, as the HELLO
	 * of the first client will offer them (stk_conn_build_hello). A wildcard
	 * listener learns its local addresses from its connections. */
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	if (stk_sys.getsockname(listen_fd, (struct sockaddr *)&local, &llen) == 0 &&
	    !addr_is_wildcard((struct sockaddr *)&local) && !shared_provider_open()) {
		const char *cursor = stk_cfg.providers;
		char name[STK_FAB_NAME_MAX];
		struct stk_fab *fab;
		while (next_provider(&cursor, name))
			if (stk_fab_per_address(name))
				stk_fab_get(name, (struct sockaddr *)&local, &fab);
	}
	return 0;
}

int stk_accel_attach(int fd, bool is_client, struct stk_conn **out,
		     struct stk_attach_info *info)
{
	struct stk_attach_info scratch;
	if (!info)
		info = &scratch;
	memset(info, 0, sizeof(*info));
	*out = NULL;
	int ret = is_client ? attach_client(fd, out, info) : attach_server(fd, out, info);
	if (ret < 0) {
		stk_count(STK_C_FALLBACK_IO);
		snprintf(info->reason, sizeof(info->reason), "kernel connection failed: %s",
			 strerror(-ret));
	}
	return ret;
}
