/* The negotiation records' wire codec (format in stk_nego.h): pure functions,
 * no system call, no lock, no allocation, every read bounds-checked (the
 * decoder is fuzzed: tests/stack/fuzz_nego.c). */
#include "config.h"
#include "stack/stk_nego.h"

#include <errno.h>
#include <string.h>

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
