/* Datagrams of an accelerated UDP socket handed down through an exec
 * (stk_udp.h): the old image writes the ones the port took and the app did
 * not read into a memfd, the new image's socket serves them before its
 * kernel socket's. Format (host order, one machine): the header, then per
 * datagram a record and its bytes. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXEC_MAGIC "FSKUDP01"
#define EXEC_DGRAM_MAX 65535u

struct exec_hdr {
	char magic[8];
	uint32_t count;       /* records that follow */
	uint32_t reserved;
};

struct exec_rec {
	uint32_t len;         /* bytes that follow */
	uint32_t reserved;
	struct sockaddr_in src;
	struct timespec stamp;
};

static bool write_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = stk_sys.write(fd, p, len);
		if (n <= 0)
			return false;
		p = (const uint8_t *)p + n;
		len -= (size_t)n;
	}
	return true;
}

/* rx_lock held: the n slots from head; NULL for a failed receive. */
static const struct stk_udp_slot *pending_slot(const struct stk_udp *udp, unsigned i)
{
	const struct stk_udp_slot *slot = &udp->slots[(udp->head + i) & (udp->nslots - 1)];
	return slot->len == UINT32_MAX ? NULL : slot;
}

/* rx_lock held: the n unread slots' datagrams into memfd fd. */
static bool write_pending(struct stk_udp *udp, int fd, unsigned n)
{
	struct exec_hdr hdr = { .count = 0 };
	memcpy(hdr.magic, EXEC_MAGIC, sizeof(hdr.magic));
	for (unsigned i = 0; i < n; i++)
		hdr.count += pending_slot(udp, i) != NULL;
	if (!write_all(fd, &hdr, sizeof(hdr)))
		return false;
	for (unsigned i = 0; i < n; i++) {
		const struct stk_udp_slot *slot = pending_slot(udp, i);
		if (!slot)
			continue;
		struct exec_rec rec = { .len = slot->len, .src = slot->src, .stamp = slot->stamp };
		if (!write_all(fd, &rec, sizeof(rec)) || !write_all(fd, slot->data, rec.len))
			return false;
	}
	return true;
}

int stk_udp_exec_memfd(struct stk_udp *udp)
{
	if (udp->orphan || !udp->ep)
		return -1;
	int saved_errno = errno, fd = -1;
	stk_fi_enter();
	pthread_mutex_lock(&udp->rx_lock);
	struct stk_udp_fab *fab = stk_udp_fab_current();
	for (int i = 0; fab && i < 16 && stk_udp_fab_progress(fab) > 0; i++)
		;
	unsigned n = __atomic_load_n(&udp->done, __ATOMIC_ACQUIRE) - udp->head;
	if (n) {
		fd = memfd_create("fabsock-udp", MFD_CLOEXEC);
		if (fd >= 0 && !write_pending(udp, fd, n)) {
			stk_sys.close(fd);
			fd = -1;
		}
		if (fd < 0)
			STK_WARN("exec: %u unread datagram(s) of a UDP socket cannot be handed "
				 "down; they are lost", n);
		else
			STK_DBG("exec: %u unread datagram(s) of a UDP socket handed down", n);
	}
	pthread_mutex_unlock(&udp->rx_lock);
	stk_fi_leave();
	errno = saved_errno;
	return fd;
}

/* The records of the mapping (len bytes): their count and largest length,
 * or false when they do not fit in it. */
static bool scan(const uint8_t *map, size_t len, uint32_t count, size_t *max_len)
{
	size_t off = sizeof(struct exec_hdr);
	*max_len = 1;
	for (uint32_t i = 0; i < count; i++) {
		struct exec_rec rec;
		if (len - off < sizeof(rec))
			return false;
		memcpy(&rec, map + off, sizeof(rec));
		off += sizeof(rec);
		if (rec.len > EXEC_DGRAM_MAX || len - off < rec.len)
			return false;
		off += rec.len;
		if (rec.len > *max_len)
			*max_len = rec.len;
	}
	return true;
}

static struct stk_udp *fill(const uint8_t *map, uint32_t count, size_t max_len)
{
	unsigned nslots = 1;
	while (nslots < count)
		nslots *= 2;
	struct stk_udp *udp = stk_udp_alloc(max_len, nslots);
	size_t off = sizeof(struct exec_hdr);
	for (uint32_t i = 0; udp && i < count; i++) {
		struct exec_rec rec;
		memcpy(&rec, map + off, sizeof(rec));
		off += sizeof(rec);
		struct stk_udp_slot *slot = &udp->slots[i];
		slot->len = rec.len;
		slot->src = rec.src;
		slot->stamp = rec.stamp;
		memcpy(slot->data, map + off, rec.len);
		off += rec.len;
	}
	if (udp)
		udp->done = count;
	return udp;
}

int stk_udp_adopt(int fd, int memfd, struct stk_sock **out)
{
	struct exec_hdr hdr;
	*out = NULL;
	if (pread(memfd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
	    memcmp(hdr.magic, EXEC_MAGIC, sizeof(hdr.magic)) != 0)
		return 0;
	off_t size = lseek(memfd, 0, SEEK_END);
	void *map = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, memfd, 0)
			     : MAP_FAILED;
	size_t max_len;
	struct stk_udp *udp = NULL;
	struct stk_sock *sock = NULL;
	struct sockaddr_in local;
	socklen_t alen = sizeof(local);
	if (map != MAP_FAILED && hdr.count <= STK_UDP_SLOTS_MAX &&
	    scan(map, (size_t)size, hdr.count, &max_len) &&
	    stk_sys.getsockname(fd, (struct sockaddr *)&local, &alen) == 0 &&
	    local.sin_family == AF_INET)
		udp = fill(map, hdr.count, max_len);
	if (map != MAP_FAILED)
		munmap(map, (size_t)size);
	stk_sys.close(memfd);
	if (udp)
		sock = stk_sock_new(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
	if (udp && sock && (udp->kfd = stk_sys_dup_high(fd)) >= 0) {
		udp->local = local;
		stk_udp_opts_load(udp, fd);
		sock->decided = true;
		stk_udp_carry(sock, udp, fd);
		stk_udp_connected(sock, fd, 0); /* a connected socket keeps its peer */
		STK_DBG("fd %d: %u datagram(s) handed down by the exec", fd, hdr.count);
		*out = sock;
		return 1;
	}
	STK_WARN("fd %d: the datagrams handed down by the exec cannot be used; they are lost",
		 fd);
	if (udp)
		stk_udp_free(udp);
	if (sock)
		stk_sock_unref(sock);
	return 1;
}
