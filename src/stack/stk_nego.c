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
		STK_WARN("cannot read /proc/sys/kernel/random/boot_id: shm will not be chosen");
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
