/* fdp_av.c - address vectors of FI_SOCKADDR_IN addresses.
 *
 * fi_addr_t values are dense indices for both FI_AV_TABLE and FI_AV_MAP.
 * The data path reads entries without a lock: the entry array only grows by
 * publishing a new copy (old copies are kept until close), and entries are
 * written before count is raised (release/acquire). A fixed-size hash on
 * (IPv4, port) serves reverse lookups for FI_SOURCE. */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_port.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AV_DEFAULT_COUNT 64

static uint32_t sa_hash(const struct sockaddr_in *sa, size_t size)
{
	uint64_t k = ((uint64_t)sa->sin_addr.s_addr << 16) | sa->sin_port;

	k *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)((k >> 32) % size);
}

fi_addr_t fdp_av_reverse(struct fdp_av *av, const struct sockaddr_in *sa)
{
	struct fdp_av_entry *e;
	uint32_t i;
	size_t count;

	count = atomic_load_explicit(&av->count, memory_order_acquire);
	e = atomic_load_explicit(&av->entries, memory_order_acquire);
	i = __atomic_load_n(&av->hash[sa_hash(sa, av->hash_size)], __ATOMIC_ACQUIRE);
	while (i != UINT32_MAX && i < count) {
		if (e[i].addr.sin_family == AF_INET &&
		    e[i].addr.sin_addr.s_addr == sa->sin_addr.s_addr &&
		    e[i].addr.sin_port == sa->sin_port)
			return i;
		i = e[i].hash_next;
	}
	return FI_ADDR_NOTAVAIL;
}

int fdp_av_lookup(struct fdp_av *av, fi_addr_t fi_addr, struct sockaddr_in *out)
{
	struct fdp_av_entry *e;

	if (fi_addr >= atomic_load_explicit(&av->count, memory_order_acquire))
		return -FI_EINVAL;
	e = &atomic_load_explicit(&av->entries, memory_order_acquire)[fi_addr];
	if (e->addr.sin_family != AF_INET)
		return -FI_EINVAL;
	*out = e->addr;
	return 0;
}

/* av->lock held */
static int av_append(struct fdp_av *av, const struct sockaddr_in *sa, fi_addr_t *out)
{
	struct fdp_av_entry *e = atomic_load(&av->entries), *n;
	size_t count = atomic_load(&av->count);
	uint32_t h;

	if (count == av->cap) {
		void **olds = realloc(av->old_arrays, (av->old_count + 1) * sizeof(void *));

		if (!olds)
			return -FI_ENOMEM;
		av->old_arrays = olds;
		n = calloc(av->cap * 2, sizeof(*n));
		if (!n)
			return -FI_ENOMEM;
		memcpy(n, e, count * sizeof(*n));
		av->old_arrays[av->old_count++] = e;
		atomic_store_explicit(&av->entries, n, memory_order_release);
		av->cap *= 2;
		e = n;
	}
	e[count].addr = *sa;
	e[count].addr.sin_family = AF_INET;
	memset(e[count].addr.sin_zero, 0, sizeof(e[count].addr.sin_zero));
	/* a multicast group has no ARP entry: its MAC follows from its address */
	e[count].arp_slot = fdp_ip_is_multicast(sa->sin_addr.s_addr) ? UINT32_MAX :
		fdp_port_arp_slot(av->domain->port, sa->sin_addr.s_addr);
	h = sa_hash(sa, av->hash_size);
	e[count].hash_next = av->hash[h];
	atomic_store_explicit(&av->count, count + 1, memory_order_release);
	__atomic_store_n(&av->hash[h], (uint32_t)count, __ATOMIC_RELEASE);
	*out = count;
	return 0;
}

int fdp_av_insert_one(struct fdp_av *av, const struct sockaddr_in *sa, fi_addr_t *out)
{
	int ret;

	fdp_lock(&av->lock);
	ret = av_append(av, sa, out);
	fdp_unlock(&av->lock);
	return ret;
}

void fdp_av_remove_one(struct fdp_av *av, fi_addr_t fi_addr)
{
	fdp_lock(&av->lock);
	if (fi_addr < atomic_load(&av->count))
		atomic_load(&av->entries)[fi_addr].addr.sin_family = 0;
	fdp_unlock(&av->lock);
}

/* fi_av(3): a synchronous AV returns how many addresses went in, and with
 * FI_SYNC_ERR writes each address's status (0 or a positive FI_E* value) to
 * the int array context points to; an AV opened with FI_EVENT returns 0
 * and reports on its EQ, one error entry per failed address before the
 * insert's FI_AV_COMPLETE. Either way a failed address's fi_addr is
 * FI_ADDR_NOTAVAIL. */
static int av_insert(struct fid_av *av_fid, const void *addr, size_t count,
		     fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct fdp_av *av = container_of(av_fid, struct fdp_av, av_fid);
	int *sync_err = NULL;
	struct sockaddr_in sa;
	size_t i, done = 0;
	fi_addr_t a;
	int err;

	if (count && !addr)
		return -FI_EINVAL;
	if (flags & FI_SYNC_ERR) {
		if (av->async)
			return -FI_EBADFLAGS;
		if (count && !context)
			return -FI_EINVAL;
		sync_err = context;
	}
	if (av->async && !av->eq)
		return -FI_ENOEQ;
	fdp_lock(&av->lock);
	for (i = 0; i < count; i++) {
		/* the caller's bytes need not be aligned (an address taken out of a
		 * wire message): copy each one */
		memcpy(&sa, (const char *)addr + i * sizeof(sa), sizeof(sa));
		a = FI_ADDR_NOTAVAIL;
		err = sa.sin_family != AF_INET ? -FI_EINVAL : av_append(av, &sa, &a);
		if (err) {
			char ip[INET_ADDRSTRLEN] = "?";

			inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
			FDP_WARN(FI_LOG_AV, "fi_av_insert: %s family %d: %s\n", ip, sa.sin_family,
				 err == -FI_EINVAL ? "not an IPv4 sockaddr" : fi_strerror(-err));
			if (av->async)
				fdp_eq_av_error(av->eq, &av->av_fid.fid, context, i, -err);
		} else {
			done++;
		}
		if (sync_err)
			sync_err[i] = -err;
		if (fi_addr)
			fi_addr[i] = a;
	}
	fdp_unlock(&av->lock);
	if (av->async) {
		fdp_eq_av_complete(av->eq, &av->av_fid.fid, context, done);
		return 0;
	}
	return (int)done;
}

static int av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct sockaddr_in sa;
	char *end;
	unsigned long port;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (!node || inet_pton(AF_INET, node, &sa.sin_addr) != 1 || !service)
		return -FI_EINVAL;
	port = strtoul(service, &end, 10);
	if (*end || port > 65535)
		return -FI_EINVAL;
	sa.sin_port = htons((uint16_t)port);
	return av_insert(av_fid, &sa, 1, fi_addr, flags, context);
}

static int av_insertsym(struct fid_av *av_fid, const char *node, size_t nodecnt,
			const char *service, size_t svccnt, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	(void)av_fid; (void)node; (void)nodecnt; (void)service; (void)svccnt;
	(void)fi_addr; (void)flags; (void)context;
	return -FI_ENOSYS;
}

static int av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
		     uint64_t flags)
{
	struct fdp_av *av = container_of(av_fid, struct fdp_av, av_fid);
	struct fdp_av_entry *e;
	size_t i;

	(void)flags;
	if (count && !fi_addr)
		return -FI_EINVAL;
	fdp_lock(&av->lock);
	e = atomic_load(&av->entries);
	for (i = 0; i < count; i++)
		if (fi_addr[i] < atomic_load(&av->count))
			e[fi_addr[i]].addr.sin_family = 0; /* stays in its hash chain */
	fdp_unlock(&av->lock);
	return 0;
}

static int av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
		     size_t *addrlen)
{
	struct fdp_av *av = container_of(av_fid, struct fdp_av, av_fid);
	struct sockaddr_in sa;
	int ret = fdp_av_lookup(av, fi_addr, &sa);

	if (ret)
		return ret;
	if (addr && *addrlen)
		memcpy(addr, &sa, *addrlen < sizeof(sa) ? *addrlen : sizeof(sa));
	*addrlen = sizeof(sa);
	return 0;
}

static const char *av_straddr(struct fid_av *av_fid, const void *addr, char *buf,
			      size_t *len)
{
	struct sockaddr_in sa;
	char ip[INET_ADDRSTRLEN] = "?", tmp[64];
	int n;

	(void)av_fid;
	memcpy(&sa, addr, sizeof(sa)); /* may be unaligned */
	inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof(ip));
	n = snprintf(tmp, sizeof(tmp), "fi_sockaddr_in://%s:%u", ip, ntohs(sa.sin_port));
	if (buf && *len)
		snprintf(buf, *len, "%s", tmp);
	*len = (size_t)n + 1;
	return buf;
}

static int av_close(struct fid *fid)
{
	struct fdp_av *av = container_of(fid, struct fdp_av, av_fid.fid);
	size_t i;

	if (atomic_load(&av->ref))
		return -FI_EBUSY;
	for (i = 0; i < av->old_count; i++)
		free(av->old_arrays[i]);
	free(av->old_arrays);
	free(atomic_load(&av->entries));
	free(av->hash);
	fdp_lock_destroy(&av->lock);
	atomic_fetch_sub(&av->domain->ref, 1);
	free(av);
	return 0;
}

static int av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct fdp_av *av = container_of(fid, struct fdp_av, av_fid.fid);

	(void)flags;
	if (bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	av->eq = container_of(bfid, struct fdp_eq, eq_fid.fid);
	return 0;
}

static int av_control(struct fid *fid, int command, void *arg)
{
	(void)fid; (void)command; (void)arg;
	return -FI_ENOSYS;
}

static int av_ops_open(struct fid *fid, const char *name, uint64_t flags,
		       void **ops, void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}

static const struct fi_ops av_fid_ops = {
	.size = sizeof(struct fi_ops),
	.close = av_close,
	.bind = av_bind,
	.control = av_control,
	.ops_open = av_ops_open,
	.tostr = NULL,
	.ops_set = NULL,
};

static const struct fi_ops_av av_ops = {
	.size = sizeof(struct fi_ops_av),
	.insert = av_insert,
	.insertsvc = av_insertsvc,
	.insertsym = av_insertsym,
	.remove = av_remove,
	.lookup = av_lookup,
	.straddr = av_straddr,
	.av_set = NULL,
};

int fdp_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr,
		struct fid_av **av_fid, void *context)
{
	struct fdp_domain *domain = container_of(domain_fid, struct fdp_domain, domain_fid);
	struct fdp_av *av;
	size_t i;

	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE &&
	    attr->type != FI_AV_MAP)
		return -FI_EINVAL;
	if (attr->name || attr->rx_ctx_bits || (attr->flags & FI_READ))
		return -FI_ENOSYS; /* named/shared and scalable AVs */
	av = calloc(1, sizeof(*av));
	if (!av)
		return -FI_ENOMEM;
	av->cap = attr->count ? attr->count : AV_DEFAULT_COUNT;
	av->hash_size = av->cap * 2 < 256 ? 256 : av->cap * 2;
	av->entries = calloc(av->cap, sizeof(struct fdp_av_entry));
	av->hash = malloc(av->hash_size * sizeof(uint32_t));
	if (!av->entries || !av->hash) {
		free(av->entries);
		free(av->hash);
		free(av);
		return -FI_ENOMEM;
	}
	for (i = 0; i < av->hash_size; i++)
		av->hash[i] = UINT32_MAX;
	av->domain = domain;
	av->type = attr->type == FI_AV_MAP ? FI_AV_MAP : FI_AV_TABLE;
	av->async = attr->flags & FI_EVENT;
	fdp_lock_init(&av->lock);
	av->av_fid.fid.fclass = FI_CLASS_AV;
	av->av_fid.fid.context = context;
	av->av_fid.fid.ops = (struct fi_ops *)&av_fid_ops;
	av->av_fid.ops = (struct fi_ops_av *)&av_ops;
	atomic_fetch_add(&domain->ref, 1);
	*av_fid = &av->av_fid;
	return 0;
}
