#include "config.h"
#include "stack/stk_nego.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const uint8_t magic[8] = { 0x7f, 'f', 's', 'k', 'N', 'E', 'G', 'O' };

/* ---- encoding ---- */

struct wbuf {
	uint8_t *p;
	size_t len, cap;
	bool overflow;
};

static void put(struct wbuf *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return;
	}
	memcpy(w->p + w->len, src, n);
	w->len += n;
}

static void put_u8(struct wbuf *w, uint8_t v)
{
	put(w, &v, 1);
}

static void put_u16(struct wbuf *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	put(w, b, 2);
}

static void put_u32(struct wbuf *w, uint32_t v)
{
	put_u16(w, (uint16_t)v);
	put_u16(w, (uint16_t)(v >> 16));
}

static void put_u64(struct wbuf *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

static void put_prov(struct wbuf *w, const struct stk_nego_prov *prov)
{
	size_t n = strnlen(prov->name, sizeof(prov->name) - 1);
	put_u8(w, (uint8_t)n);
	put(w, prov->name, n);
	put_u16(w, prov->addr_len);
	put(w, prov->addr, prov->addr_len <= STK_FAB_ADDR_MAX ? prov->addr_len : 0);
}

/* The server's records: a status and nothing else. */
static bool is_decision(uint16_t type)
{
	return type == STK_NEGO_ACK || type == STK_NEGO_CANCEL || type == STK_NEGO_READY;
}

ssize_t stk_nego_encode(const struct stk_nego_msg *msg, uint8_t *buf, size_t cap)
{
	struct wbuf w = { .p = buf, .cap = cap < STK_NEGO_MSG_MAX ? cap : STK_NEGO_MSG_MAX };
	if (msg->nprov > STK_NEGO_PROV_MAX)
		return -EINVAL;
	put(&w, magic, sizeof(magic));
	put_u16(&w, msg->version);
	put_u16(&w, msg->type);
	put_u32(&w, 0); /* length, patched below */
	if (msg->type != STK_NEGO_HELLO)
		put_u16(&w, msg->status);
	if (is_decision(msg->type))
		goto done; /* the server's decision: a status and nothing else */
	put(&w, msg->boot_id, 16);
	put_u64(&w, msg->netns);
	put_u64(&w, msg->conn_id);
	put_u32(&w, msg->slot);
	put_u32(&w, msg->credits);
	if (msg->type == STK_NEGO_HELLO) {
		put_u8(&w, (uint8_t)msg->nprov);
		for (unsigned i = 0; i < msg->nprov; i++)
			put_prov(&w, &msg->prov[i]);
	} else {
		struct stk_nego_prov none = { .name = "" };
		put_prov(&w, msg->nprov ? &msg->prov[0] : &none);
	}
done:
	if (w.overflow)
		return -ENOSPC;
	uint32_t len = (uint32_t)w.len;
	uint8_t l[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16),
			 (uint8_t)(len >> 24) };
	memcpy(buf + 12, l, 4);
	return (ssize_t)w.len;
}

/* ---- decoding (every read bounds-checked) ---- */

struct rbuf {
	const uint8_t *p;
	size_t len, pos;
	bool short_read;
};

static void get(struct rbuf *r, void *dst, size_t n)
{
	if (r->short_read || n > r->len - r->pos) {
		r->short_read = true;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, r->p + r->pos, n);
	r->pos += n;
}

static uint8_t get_u8(struct rbuf *r)
{
	uint8_t v;
	get(r, &v, 1);
	return v;
}

static uint16_t get_u16(struct rbuf *r)
{
	uint8_t b[2];
	get(r, b, 2);
	return (uint16_t)(b[0] | b[1] << 8);
}

static uint32_t get_u32(struct rbuf *r)
{
	uint32_t lo = get_u16(r);
	return lo | (uint32_t)get_u16(r) << 16;
}

static uint64_t get_u64(struct rbuf *r)
{
	uint64_t lo = get_u32(r);
	return lo | (uint64_t)get_u32(r) << 32;
}

static int get_prov(struct rbuf *r, struct stk_nego_prov *prov)
{
	uint8_t n = get_u8(r);
	if (n >= sizeof(prov->name))
		return -EBADMSG;
	memset(prov->name, 0, sizeof(prov->name));
	get(r, prov->name, n);
	if (memchr(prov->name, '\0', n))
		return -EBADMSG;
	prov->addr_len = get_u16(r);
	if (prov->addr_len > STK_FAB_ADDR_MAX)
		return -EBADMSG;
	get(r, prov->addr, prov->addr_len);
	return 0;
}

int stk_nego_decode(const uint8_t *buf, size_t len, struct stk_nego_msg *msg, size_t *msg_len)
{
	size_t n = len < sizeof(magic) ? len : sizeof(magic);
	if (memcmp(buf, magic, n) != 0)
		return -EPROTO;
	if (len < STK_NEGO_HDR_LEN)
		return -EAGAIN;
	struct rbuf r = { .p = buf, .len = len, .pos = sizeof(magic) };
	memset(msg, 0, sizeof(*msg));
	msg->version = get_u16(&r);
	msg->type = get_u16(&r);
	uint32_t total = get_u32(&r);
	if (total < STK_NEGO_HDR_LEN || total > STK_NEGO_MSG_MAX)
		return -EBADMSG;
	*msg_len = total;
	if (len < total)
		return -EAGAIN;
	r.len = total;
	if (msg->type < STK_NEGO_HELLO || msg->type > STK_NEGO_READY)
		return -EBADMSG;
	if (msg->type != STK_NEGO_HELLO)
		msg->status = get_u16(&r);
	if (msg->version != STK_NEGO_VERSION)
		return r.short_read ? -EBADMSG : -EPROTONOSUPPORT;
	if (is_decision(msg->type))
		return r.short_read || r.pos != total ? -EBADMSG : 0;
	get(&r, msg->boot_id, 16);
	msg->netns = get_u64(&r);
	msg->conn_id = get_u64(&r);
	msg->slot = get_u32(&r);
	msg->credits = get_u32(&r);
	if (msg->type == STK_NEGO_HELLO) {
		msg->nprov = get_u8(&r);
		if (msg->nprov > STK_NEGO_PROV_MAX)
			return -EBADMSG;
		for (unsigned i = 0; i < msg->nprov; i++)
			if (get_prov(&r, &msg->prov[i]))
				return -EBADMSG;
	} else {
		if (get_prov(&r, &msg->prov[0]))
			return -EBADMSG;
		msg->nprov = msg->prov[0].name[0] ? 1 : 0;
		if (msg->status == STK_NEGO_ACCEPT && msg->nprov != 1)
			return -EBADMSG;
	}
	if (r.short_read || r.pos != total)
		return -EBADMSG;
	if (msg->type == STK_NEGO_HELLO || msg->status == STK_NEGO_ACCEPT) {
		if (msg->conn_id == 0 || msg->credits < 4096)
			return -EBADMSG;
		for (unsigned i = 0; i < msg->nprov; i++)
			if (msg->prov[i].addr_len == 0 || !msg->prov[i].name[0])
				return -EBADMSG;
	}
	return 0;
}

/* ---- host identity ---- */

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static uint8_t host_boot_id[16];
static uint64_t host_netns;

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void host_init(void)
{
	char text[64] = "";
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = stk_sys.read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = '\0';
		stk_sys.close(fd);
	}
	unsigned nib = 0;
	for (const char *p = text; *p && nib < 32; p++) {
		int v = hexval(*p);
		if (v < 0)
			continue;
		host_boot_id[nib / 2] |= (uint8_t)(nib % 2 ? v : v << 4);
		nib++;
	}
	if (nib < 32)
		FSK_WARN("cannot read /proc/sys/kernel/random/boot_id: shm will not be chosen");
	struct stat st;
	if (stat("/proc/self/ns/net", &st) == 0)
		host_netns = (uint64_t)st.st_ino;
}

void stk_nego_host_identity(uint8_t boot_id[16], uint64_t *netns)
{
	pthread_once(&host_once, host_init);
	memcpy(boot_id, host_boot_id, 16);
	*netns = host_netns;
}

bool stk_nego_same_host(const struct stk_nego_msg *peer)
{
	uint8_t boot[16], zero[16] = { 0 };
	uint64_t netns;
	stk_nego_host_identity(boot, &netns);
	return memcmp(boot, zero, 16) != 0 && memcmp(boot, peer->boot_id, 16) == 0 &&
	       netns == peer->netns;
}

/* ---- SYN marking ---- */

int stk_nego_listener_prepare(int listen_fd)
{
	int one = 1;
	if (stk_sys.setsockopt(listen_fd, IPPROTO_TCP, TCP_SAVE_SYN, &one, sizeof(one)) != 0)
		return -errno;
	return 0;
}

static int set_tos(int fd, int domain, int tos)
{
	int ret = domain == AF_INET6
		? stk_sys.setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos))
		: stk_sys.setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	return ret ? -errno : 0;
}

int stk_nego_mark_syn(int fd, int domain)
{
	return set_tos(fd, domain, STK_NEGO_SYN_TOS);
}

int stk_nego_unmark(int fd, int domain)
{
	return set_tos(fd, domain, 0);
}

int stk_nego_syn_marked(int fd)
{
	uint8_t syn[512];
	socklen_t len = sizeof(syn);
	if (stk_sys.getsockopt(fd, IPPROTO_TCP, TCP_SAVED_SYN, syn, &len) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (len < 2)
		return 0;
	unsigned version = syn[0] >> 4;
	unsigned tos;
	if (version == 4)
		tos = syn[1];
	else if (version == 6)
		tos = (unsigned)((syn[0] & 0x0f) << 4 | syn[1] >> 4);
	else
		return 0;
	/* ECN bits may be rewritten on the way; compare the DSCP only. */
	return (tos & 0xfc) == (STK_NEGO_SYN_TOS & 0xfc);
}

/* ---- per-destination cache ---- */

#define CACHE_SIZE 256

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_entry {
	uint8_t key[18];        /* IPv6 or v4-mapped address + port */
	bool used;
	enum stk_nego_peer state;
	time_t stamp;
} cache[CACHE_SIZE]; /* protected by cache_lock */

static bool cache_key(const struct sockaddr *dest, uint8_t key[18])
{
	memset(key, 0, 18);
	if (dest->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)dest;
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &sin->sin_addr, 4);
		memcpy(key + 16, &sin->sin_port, 2);
		return true;
	}
	if (dest->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)dest;
		memcpy(key, &sin6->sin6_addr, 16);
		memcpy(key + 16, &sin6->sin6_port, 2);
		return true;
	}
	return false;
}

static unsigned cache_hash(const uint8_t key[18])
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 18; i++)
		h = (h ^ key[i]) * 16777619u;
	return h % CACHE_SIZE;
}

static time_t mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

enum stk_nego_peer stk_nego_cache_get(const struct sockaddr *dest)
{
	uint8_t key[18];
	if (!dest || !cache_key(dest, key))
		return STK_PEER_UNKNOWN;
	enum stk_nego_peer state = STK_PEER_UNKNOWN;
	pthread_mutex_lock(&cache_lock);
	struct cache_entry *e = &cache[cache_hash(key)];
	if (e->used && memcmp(e->key, key, 18) == 0) {
		if (e->state == STK_PEER_PLAIN && mono_s() - e->stamp > STK_NEGO_CACHE_TTL_S)
			e->used = false; /* expired: try the destination again */
		else
			state = e->state;
	}
	pthread_mutex_unlock(&cache_lock);
	return state;
}

void stk_nego_cache_put(const struct sockaddr *dest, enum stk_nego_peer state)
{
	uint8_t key[18];
	if (!dest || !cache_key(dest, key))
		return;
	pthread_mutex_lock(&cache_lock);
	struct cache_entry *e = &cache[cache_hash(key)];
	memcpy(e->key, key, 18);
	e->used = true;
	e->state = state;
	e->stamp = mono_s();
	pthread_mutex_unlock(&cache_lock);
}

/* ---- I/O on the kernel connection ---- */

static int64_t ms_left(const struct timespec *deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
	       (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

static void deadline_in(struct timespec *deadline, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, deadline);
	deadline->tv_sec += timeout_ms / 1000;
	deadline->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (deadline->tv_nsec >= 1000000000) {
		deadline->tv_sec++;
		deadline->tv_nsec -= 1000000000;
	}
}

/* Wait for events on fd until the deadline; sub-millisecond precision with ppoll. */
static int wait_fd(int fd, short events, const struct timespec *deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ns = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000000000 +
		     (deadline->tv_nsec - now.tv_nsec);
	if (ns < 0)
		ns = 0;
	struct pollfd pfd = { .fd = fd, .events = events };
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000), .tv_nsec = (long)(ns % 1000000000) };
	int n = stk_sys.ppoll ? stk_sys.ppoll(&pfd, 1, &ts, NULL)
			      : stk_sys.poll(&pfd, 1, (int)((ns + 999999) / 1000000));
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n;
}

static int send_bytes(int fd, const uint8_t *buf, ssize_t len, int timeout_ms)
{
	struct timespec deadline;
	deadline_in(&deadline, timeout_ms);
	size_t done = 0;
	while (done < (size_t)len) {
		ssize_t n = stk_sys.send(fd, buf + done, (size_t)len - done,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (ms_left(&deadline) < 0)
			return -ETIMEDOUT;
		int w = wait_fd(fd, POLLOUT, &deadline);
		if (w < 0)
			return w;
	}
	return 0;
}

int stk_nego_send_msg(int fd, const struct stk_nego_msg *msg, int timeout_ms)
{
	uint8_t buf[STK_NEGO_MSG_MAX];
	ssize_t len = stk_nego_encode(msg, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	return send_bytes(fd, buf, len, timeout_ms);
}

static int send_tail(int fd, const uint8_t *buf, size_t len)
{
	return send_bytes(fd, buf, (ssize_t)len, STK_NEGO_REPLY_WAIT_MS);
}

/* A record was consumed. The peer's next record may follow with nothing from
 * us in between (a HOLD then the REPLY): under Nagle it would wait
 * for our delayed ACK of this one (40 ms). Acknowledge at once instead;
 * TCP_QUICKACK is transient and invisible to the app. */
static void ack_now(int fd)
{
	int one = 1;
	stk_sys.setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

int stk_nego_recv_msg(int fd, struct stk_nego_msg *msg, int timeout_ms)
{
	uint8_t buf[STK_NEGO_MSG_MAX];
	struct timespec deadline;
	deadline_in(&deadline, timeout_ms);
	for (;;) {
		ssize_t n = stk_sys.recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (n > 0) {
			size_t msg_len = 0;
			int ret = stk_nego_decode(buf, (size_t)n, msg, &msg_len);
			if (ret == 0 || ret == -EPROTONOSUPPORT) {
				/* the whole message is buffered: consume exactly it */
				ssize_t got = stk_sys.recv(fd, buf, msg_len, MSG_DONTWAIT);
				if (got != (ssize_t)msg_len)
					return got < 0 ? -errno : -EIO;
				ack_now(fd);
				return ret;
			}
			if (ret != -EAGAIN)
				return ret;
		}
		int64_t left = ms_left(&deadline);
		if (left < 0 || (left == 0 && timeout_ms == 0))
			return -ETIMEDOUT;
		int w = wait_fd(fd, POLLIN, &deadline);
		if (w < 0)
			return w;
		if (w == 0 && ms_left(&deadline) < 0)
			return -ETIMEDOUT;
	}
}

bool stk_nego_error_pending(int fd)
{
	/* poll and SIOCINQ leave the error in place; with bytes queued a recv
	 * returns them and leaves it too */
	struct pollfd p = { .fd = fd, .events = 0 };
	if (stk_sys.poll(&p, 1, 0) <= 0 || !(p.revents & POLLERR))
		return false;
	int inq = 0;
	return stk_sys.ioctl(fd, SIOCINQ, &inq) != 0 || inq <= 0;
}

int stk_nego_peek_at(int fd, size_t skip, struct stk_nego_msg *msg, size_t *msg_len)
{
	uint8_t buf[2 * STK_NEGO_MSG_MAX];
	if (skip > STK_NEGO_MSG_MAX)
		return -EINVAL;
	ssize_t n = stk_sys.recv(fd, buf, skip + STK_NEGO_MSG_MAX, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n > 0 && (size_t)n == skip))
		return n == 0 && skip == 0 ? -ECONNRESET : -EAGAIN;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	if ((size_t)n < skip)
		return -EAGAIN;
	*msg_len = 0;
	return stk_nego_decode(buf + skip, (size_t)n - skip, msg, msg_len);
}

int stk_nego_peek(int fd, struct stk_nego_msg *msg, size_t *msg_len)
{
	return stk_nego_peek_at(fd, 0, msg, msg_len);
}

int stk_nego_consume(int fd, size_t len)
{
	uint8_t buf[STK_NEGO_MSG_MAX];
	if (len > sizeof(buf))
		return -EINVAL;
	ssize_t got = stk_sys.recv(fd, buf, len, MSG_DONTWAIT);
	if (got == (ssize_t)len) {
		ack_now(fd);
		return 0;
	}
	return got < 0 ? -errno : -EIO;
}

int stk_nego_send_now(int fd, const struct stk_nego_msg *msg)
{
	uint8_t buf[STK_NEGO_MSG_MAX];
	ssize_t len = stk_nego_encode(msg, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	ssize_t n = stk_sys.send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n == len)
		return 0;
	if (n < 0)
		return -errno;
	/* Part of a record went: the stream is committed to it; finish (bounded). */
	return send_tail(fd, buf + n, (size_t)(len - n));
}
