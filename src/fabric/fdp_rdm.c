/*
 * fdp_rdm.c - the native FI_EP_RDM endpoint class: FI_MSG and FI_TAGGED over
 * the reliability protocol (fdp_rel*.c) and the message layer (fdp_msg*.c), on
 * the provider framework (fdp.h).
 *
 * Peers: one struct rdm_peer per remote endpoint (IPv4 + UDP port), created
 * on the first send to an AV address or the first valid frame from a source
 * (an RDM endpoint must accept messages from peers it has not inserted;
 * FI_SOURCE then reports FI_ADDR_NOTAVAIL). Found by fi_addr through a
 * direct-indexed cache (AV addresses are dense), by address through a hash.
 * At most RDM_MAX_PEERS peers: frames from more are dropped and counted.
 *
 * Completions: a send completes when the peer's provider has acknowledged
 * its last frame (transmit complete); inject and FI_INJECT copy at once.
 * Locking: every op takes ep->lock; hooks run with it held (fdp.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric/fdp.h"
#include "fabric/fdp_msg.h"

#define RDM_QUEUE 1024              /* tx/rx descriptors when the app gives no size */
#define RDM_MAX_MSG (4u << 20)      /* max_msg_size */
#define RDM_INJECT 4096             /* inject_size */
#define RDM_HASH_SIZE 1024          /* address hash buckets (power of two) */
#define RDM_MAX_PEERS 65536
#define RDM_LINGER_NS (30ull * 1000 * 1000 * 1000) /* polled that long after traffic */

struct rdm_peer {
	struct fdp_msg_peer mp;     /* engine state; mp.addr is the fi_addr or NOTAVAIL */
	struct sockaddr_in addr;    /* IPv4 + UDP port, network order */
	struct rdm_peer *hash_next;
};

struct rdm_state {
	struct fdp_msg_ep m;        /* first: the engines' callbacks find us from it */
	struct fdp_ep *ep;
	struct rdm_peer **by_fi_addr;   /* cache, indexed by fi_addr */
	size_t by_fi_addr_cap;
	struct rdm_peer *hash[RDM_HASH_SIZE];
	struct rdm_peer **peers;        /* every peer, for close */
	size_t npeers, peers_cap;
	uint64_t rx_too_many_peers;     /* frames dropped at RDM_MAX_PEERS */
	uint64_t last_progress_ns;      /* last rdm_progress, for the progress thread */
	uint64_t active_until_ns;       /* have the port polled until then */
	uint64_t seen_frames;           /* rel rx+tx data frames at the last progress */
	bool timers_attached;           /* registered with the progress thread */
};

static struct rdm_state *st_of(struct fdp_ep *ep)
{
	return ep->hook_ctx;
}

static struct rdm_state *st_of_msg(struct fdp_msg_ep *m)
{
	return (struct rdm_state *)m; /* m is the first member */
}

/* ---------------------------------------------------------------- peers */

static size_t addr_hash(const struct sockaddr_in *sa)
{
	uint32_t h = sa->sin_addr.s_addr * 2654435761u ^ (uint32_t)sa->sin_port * 40503u;

	return (h ^ (h >> 16)) & (RDM_HASH_SIZE - 1);
}

static void cache_fi_addr(struct rdm_state *s, struct rdm_peer *p, fi_addr_t fi_addr)
{
	if (fi_addr == FI_ADDR_NOTAVAIL || fi_addr == FI_ADDR_UNSPEC)
		return;
	p->mp.addr = fi_addr;
	if (fi_addr >= s->by_fi_addr_cap) {
		size_t cap = s->by_fi_addr_cap ? s->by_fi_addr_cap : 64;
		struct rdm_peer **n;

		while (cap <= fi_addr)
			cap *= 2;
		n = realloc(s->by_fi_addr, cap * sizeof(*n));
		if (!n)
			return; /* the hash still finds it */
		memset(n + s->by_fi_addr_cap, 0, (cap - s->by_fi_addr_cap) * sizeof(*n));
		s->by_fi_addr = n;
		s->by_fi_addr_cap = cap;
	}
	s->by_fi_addr[fi_addr] = p;
}

static struct rdm_peer *peer_by_addr(struct rdm_state *s, const struct sockaddr_in *sa,
				     bool create)
{
	size_t h = addr_hash(sa);
	struct rdm_peer *p;

	for (p = s->hash[h]; p; p = p->hash_next)
		if (p->addr.sin_addr.s_addr == sa->sin_addr.s_addr &&
		    p->addr.sin_port == sa->sin_port)
			return p;
	if (!create)
		return NULL;
	if (s->npeers >= RDM_MAX_PEERS) {
		s->rx_too_many_peers++;
		return NULL;
	}
	if (s->npeers == s->peers_cap) {
		size_t cap = s->peers_cap ? 2 * s->peers_cap : 16;
		struct rdm_peer **n = realloc(s->peers, cap * sizeof(*n));

		if (!n)
			return NULL;
		s->peers = n;
		s->peers_cap = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	if (fdp_msg_peer_init(&s->m, &p->mp, FI_ADDR_NOTAVAIL) != 0) {
		free(p);
		return NULL;
	}
	p->mp.user = p;
	p->addr.sin_family = AF_INET;
	p->addr.sin_addr = sa->sin_addr;
	p->addr.sin_port = sa->sin_port;
	p->hash_next = s->hash[h];
	s->hash[h] = p;
	s->peers[s->npeers++] = p;
	return p;
}

/* The peer for a destination fi_addr, created on first use. */
static struct rdm_peer *peer_by_fi_addr(struct rdm_state *s, fi_addr_t dest)
{
	struct sockaddr_in sa;
	struct rdm_peer *p;

	if (dest < s->by_fi_addr_cap && s->by_fi_addr[dest])
		return s->by_fi_addr[dest];
	if (!s->ep->av || fdp_av_lookup(s->ep->av, dest, &sa) != 0)
		return NULL;
	p = peer_by_addr(s, &sa, true);
	if (p)
		cache_fi_addr(s, p, dest);
	return p;
}

/* ---------------------------------------------------------------- engine callbacks */

static int rdm_tx(struct fdp_msg_ep *m, struct fdp_msg_peer *mp, const void *hdr, size_t hdr_len,
		  const void *payload, size_t len, const void *ext, size_t ext_len)
{
	struct rdm_state *s = st_of_msg(m);
	struct rdm_peer *p = mp->user;
	struct iovec iov[2];
	size_t n = 0;

	if (len)
		iov[n++] = (struct iovec){ .iov_base = (void *)payload, .iov_len = len };
	if (ext_len)
		iov[n++] = (struct iovec){ .iov_base = (void *)ext, .iov_len = ext_len };
	if (mp->addr != FI_ADDR_NOTAVAIL)
		return fdp_tx_frame(s->ep, mp->addr, hdr, hdr_len, iov, n);
	return fdp_tx_frame_to(s->ep, &p->addr, hdr, hdr_len, iov, n);
}

static uint64_t op_cq_flags(bool tagged)
{
	return tagged ? FI_TAGGED : FI_MSG;
}

static void rdm_send_done(struct fdp_msg_ep *m, struct fdp_msg_tx *tx, int err)
{
	struct fdp_ep *ep = st_of_msg(m)->ep;
	uint64_t cq_flags = FI_SEND | op_cq_flags(tx->op == FDP_MSG_OP_TAGGED);

	if (err)
		fdp_ep_tx_error(ep, tx->context, cq_flags, -err, tx->len);
	else
		fdp_ep_tx_done(ep, tx->context, tx->flags, cq_flags, tx->len);
}

static void rdm_inject_done(struct fdp_msg_ep *m, struct fdp_msg_peer *mp, int err)
{
	struct fdp_ep *ep = st_of_msg(m)->ep;

	(void)mp;
	if (err)
		fdp_cntr_inc_err(ep->send_cntr);
}

static void rdm_recv_done(struct fdp_msg_ep *m, struct fdp_msg_rx *rx,
			  const struct fdp_msg_rx_info *info)
{
	struct fdp_ep *ep = st_of_msg(m)->ep;
	uint64_t cq_flags = FI_RECV | op_cq_flags(info->tagged);
	void *buf = rx->iov_count ? rx->iov[0].iov_base : NULL;

	if (info->has_data)
		cq_flags |= FI_REMOTE_CQ_DATA;
	if (info->err) {
		fdp_ep_rx_error(ep, rx->context, cq_flags, -info->err, info->len, buf, info->data,
				info->tag, info->olen);
		return;
	}
	fdp_ep_rx_done(ep, rx->context, rx->flags | ep->rx_op_flags, cq_flags, info->len, buf,
		       info->data, info->tag,
		       info->peer ? info->peer->addr : FI_ADDR_NOTAVAIL);
}

static const struct fdp_msg_ops rdm_msg_ops = {
	.tx = rdm_tx,
	.send_done = rdm_send_done,
	.inject_done = rdm_inject_done,
	.recv_done = rdm_recv_done,
};

/* ---------------------------------------------------------------- data path */

/* Sends: flags are the operation's flags. With FI_INJECT the data is copied
 * before return; no_cq marks fi_inject/fi_injectdata/fi_tinject*, which
 * never generate a completion (the counter still counts them). */
static ssize_t do_send_x(struct fdp_ep *ep, const struct iovec *iov, size_t count,
			 fi_addr_t dest, void *context, bool tagged, uint64_t tag, uint64_t data,
			 uint64_t flags, bool no_cq)
{
	struct rdm_state *s = st_of(ep);
	uint8_t op = tagged ? FDP_MSG_OP_TAGGED : FDP_MSG_OP_MSG;
	bool has_data = flags & FI_REMOTE_CQ_DATA;
	struct rdm_peer *p;
	int ret;

	if (count > FDP_MSG_IOV_MAX)
		return -FI_EINVAL;
	fdp_lock(&ep->lock);
	if (!ep->enabled) {
		fdp_unlock(&ep->lock);
		return -FI_EOPBADSTATE;
	}
	p = peer_by_fi_addr(s, dest);
	if (!p) {
		fdp_unlock(&ep->lock);
		return -FI_EINVAL;
	}
	if (flags & FI_INJECT) {
		/* the buffer is the caller's again on return: copy it into the
		 * send window now (fi_inject, or fi_sendmsg with FI_INJECT) */
		ret = fdp_msg_inject(&s->m, &p->mp, iov, count, op, tag, has_data, data,
				     fdp_now_ns());
		if (ret == 0 && !no_cq)
			fdp_ep_tx_done(ep, context, flags, FI_SEND | op_cq_flags(tagged),
				       fdp_iov_len(iov, count));
		else if (ret == 0)
			fdp_cntr_inc(ep->send_cntr);
	} else {
		ret = fdp_msg_send(&s->m, &p->mp, iov, count, op, tag, has_data, data, context,
				   flags, fdp_now_ns());
	}
	/* an app that posts and then blocks elsewhere still gets its
	 * retransmissions: wake a blocked progress thread (one load) */
	if (ret == 0)
		fdp_progress_timers_kick(ep);
	fdp_unlock(&ep->lock);
	if (ret == -FI_EAGAIN)
		fdp_domain_progress(ep->domain); /* acks free the window: let them in */
	return ret;
}

static ssize_t do_send(struct fdp_ep *ep, const struct iovec *iov, size_t count, fi_addr_t dest,
		       void *context, bool tagged, uint64_t tag, uint64_t data, uint64_t flags)
{
	return do_send_x(ep, iov, count, dest, context, tagged, tag, data, flags, false);
}

static ssize_t do_inject(struct fdp_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			 bool tagged, uint64_t tag, uint64_t data, uint64_t flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return do_send_x(ep, &iov, 1, dest, NULL, tagged, tag, data, flags | FI_INJECT, true);
}

static ssize_t do_recv(struct fdp_ep *ep, const struct iovec *iov, size_t count, fi_addr_t src,
		       void *context, bool tagged, uint64_t tag, uint64_t ignore, uint64_t flags)
{
	struct rdm_state *s = st_of(ep);
	int ret;

	if (count > FDP_MSG_IOV_MAX)
		return -FI_EINVAL;
	if (flags & FI_MULTI_RECV)
		return -FI_EBADFLAGS; /* not implemented: refuse rather than ignore */
	/* fi_tagged(3) peek/claim/discard, on tagged receives only (fi_msg(3)
	 * does not define them); FI_DISCARD needs FI_PEEK or FI_CLAIM */
	if ((flags & (FI_PEEK | FI_CLAIM | FI_DISCARD)) &&
	    (!tagged || !(flags & (FI_PEEK | FI_CLAIM))))
		return -FI_EBADFLAGS;
	/* a peek always reports (found: success, else FI_ENOMSG) */
	if (flags & FI_PEEK)
		flags |= FI_COMPLETION;
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC;
	if (src == FI_ADDR_NOTAVAIL)
		src = FI_ADDR_UNSPEC;
	fdp_lock(&ep->lock);
	if (!ep->enabled) {
		fdp_unlock(&ep->lock);
		return -FI_EOPBADSTATE;
	}
	ret = fdp_msg_recv(&s->m, iov, count, src, tagged, tag, ignore, context, flags,
			   fdp_now_ns());
	fdp_unlock(&ep->lock);
	return ret;
}

#define EP_OF(fid) container_of(fid, struct fdp_ep, ep_fid)
#define IOV1(buf, len) (&(struct iovec){ .iov_base = (void *)(buf), .iov_len = (len) })

static ssize_t rdm_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src,
			void *context)
{
	(void)desc;
	return do_recv(EP_OF(f), IOV1(buf, len), 1, src, context, false, 0, 0, 0);
}

static ssize_t rdm_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, void *context)
{
	(void)desc;
	return do_recv(EP_OF(f), iov, count, src, context, false, 0, 0, 0);
}

static ssize_t rdm_recvmsg(struct fid_ep *f, const struct fi_msg *msg, uint64_t flags)
{
	return do_recv(EP_OF(f), msg->msg_iov, msg->iov_count, msg->addr, msg->context, false, 0,
		       0, flags);
}

static ssize_t rdm_send(struct fid_ep *f, const void *buf, size_t len, void *desc,
			fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, IOV1(buf, len), 1, dest, context, false, 0, 0, ep->tx_op_flags);
}

static ssize_t rdm_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, iov, count, dest, context, false, 0, 0, ep->tx_op_flags);
}

static ssize_t rdm_sendmsg(struct fid_ep *f, const struct fi_msg *msg, uint64_t flags)
{
	return do_send(EP_OF(f), msg->msg_iov, msg->iov_count, msg->addr, msg->context, false, 0,
		       msg->data, flags);
}

static ssize_t rdm_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	return do_inject(EP_OF(f), buf, len, dest, false, 0, 0, 0);
}

static ssize_t rdm_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, IOV1(buf, len), 1, dest, context, false, 0, data,
		       ep->tx_op_flags | FI_REMOTE_CQ_DATA);
}

static ssize_t rdm_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data,
			      fi_addr_t dest)
{
	return do_inject(EP_OF(f), buf, len, dest, false, 0, data, FI_REMOTE_CQ_DATA);
}

static const struct fi_ops_msg rdm_msg_fi_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = rdm_recv,
	.recvv = rdm_recvv,
	.recvmsg = rdm_recvmsg,
	.send = rdm_send,
	.sendv = rdm_sendv,
	.sendmsg = rdm_sendmsg,
	.inject = rdm_inject,
	.senddata = rdm_senddata,
	.injectdata = rdm_injectdata,
};

static ssize_t rdm_trecv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src,
			 uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return do_recv(EP_OF(f), IOV1(buf, len), 1, src, context, true, tag, ignore, 0);
}

static ssize_t rdm_trecvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
	(void)desc;
	return do_recv(EP_OF(f), iov, count, src, context, true, tag, ignore, 0);
}

static ssize_t rdm_trecvmsg(struct fid_ep *f, const struct fi_msg_tagged *msg, uint64_t flags)
{
	return do_recv(EP_OF(f), msg->msg_iov, msg->iov_count, msg->addr, msg->context, true,
		       msg->tag, msg->ignore, flags);
}

static ssize_t rdm_tsend(struct fid_ep *f, const void *buf, size_t len, void *desc,
			 fi_addr_t dest, uint64_t tag, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, IOV1(buf, len), 1, dest, context, true, tag, 0, ep->tx_op_flags);
}

static ssize_t rdm_tsendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count,
			  fi_addr_t dest, uint64_t tag, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, iov, count, dest, context, true, tag, 0, ep->tx_op_flags);
}

static ssize_t rdm_tsendmsg(struct fid_ep *f, const struct fi_msg_tagged *msg, uint64_t flags)
{
	return do_send(EP_OF(f), msg->msg_iov, msg->iov_count, msg->addr, msg->context, true,
		       msg->tag, msg->data, flags);
}

static ssize_t rdm_tinject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest,
			   uint64_t tag)
{
	return do_inject(EP_OF(f), buf, len, dest, true, tag, 0, 0);
}

static ssize_t rdm_tsenddata(struct fid_ep *f, const void *buf, size_t len, void *desc,
			     uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
	struct fdp_ep *ep = EP_OF(f);

	(void)desc;
	return do_send(ep, IOV1(buf, len), 1, dest, context, true, tag, data,
		       ep->tx_op_flags | FI_REMOTE_CQ_DATA);
}

static ssize_t rdm_tinjectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data,
			       fi_addr_t dest, uint64_t tag)
{
	return do_inject(EP_OF(f), buf, len, dest, true, tag, data, FI_REMOTE_CQ_DATA);
}

static const struct fi_ops_tagged rdm_tagged_fi_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = rdm_trecv,
	.recvv = rdm_trecvv,
	.recvmsg = rdm_trecvmsg,
	.send = rdm_tsend,
	.sendv = rdm_tsendv,
	.sendmsg = rdm_tsendmsg,
	.inject = rdm_tinject,
	.senddata = rdm_tsenddata,
	.injectdata = rdm_tinjectdata,
};

/* ---------------------------------------------------------------- hooks */

static void rdm_rx(struct fdp_ep *ep, fi_addr_t src, const struct sockaddr_in *src_addr,
		   const void *frame, size_t len, uint64_t now_ns)
{
	struct rdm_state *s = st_of(ep);
	struct rdm_peer *p = NULL;

	if (src != FI_ADDR_NOTAVAIL && src < s->by_fi_addr_cap)
		p = s->by_fi_addr[src];
	if (!p) {
		/* garbage must not create peers: check it first */
		if (fdp_rel_rx_check(&s->m.rel, frame, len) < 0)
			return;
		p = peer_by_addr(s, src_addr, true);
		if (!p)
			return;
		cache_fi_addr(s, p, src);
	}
	fdp_msg_rx_frame(&s->m, &p->mp, frame, len, now_ns);
}

static void rdm_progress(struct fdp_ep *ep, uint64_t now_ns)
{
	struct rdm_state *s = st_of(ep);

	uint64_t frames;

	s->last_progress_ns = now_ns;
	frames = s->m.rel.stats.rx_data + s->m.rel.stats.tx_data;
	if (fdp_msg_progress(&s->m, now_ns) != UINT64_MAX || frames != s->seen_frames) {
		/* timers pending, or traffic (a receiver often has no timer):
		 * make sure the progress thread watches us */
		s->seen_frames = frames;
		s->active_until_ns = now_ns + RDM_LINGER_NS;
		fdp_progress_timers_kick(ep);
	}
}

/* Besides its own timers, an endpoint that had traffic within RDM_LINGER_NS
 * asks for the port to be polled: a peer streaming to an application that
 * stopped calling in must still get acks (it declares us unreachable after
 * 2 s of silence). */
static uint64_t rdm_next_deadline(struct fdp_ep *ep, uint64_t now_ns, uint64_t *last_ns)
{
	struct rdm_state *s = st_of(ep);

	*last_ns = s->last_progress_ns;
	if (s->m.rel.next_deadline_ns == UINT64_MAX && now_ns < s->active_until_ns)
		return now_ns;
	return s->m.rel.next_deadline_ns;
}

static int rdm_enable(struct fdp_ep *ep)
{
	struct rdm_state *s = st_of(ep);
	int ret = 0;

	if (!s->timers_attached) {
		ret = fdp_progress_timers_attach(ep);
		s->timers_attached = ret == 0;
	}
	return ret;
}

static int rdm_cancel(struct fdp_ep *ep, void *context)
{
	return fdp_msg_cancel(&st_of(ep)->m, context);
}

static void rdm_flush(struct fdp_ep *ep, uint64_t now_ns)
{
	struct rdm_state *s = st_of(ep);

	for (size_t i = 0; s && i < s->npeers; i++)
		fdp_rel_ack_now(&s->m.rel, &s->peers[i]->mp.rel, now_ns);
}

static bool rdm_tx_pending(struct fdp_ep *ep)
{
	struct rdm_state *s = st_of(ep);

	for (size_t i = 0; s && i < s->npeers; i++) {
		const struct fdp_msg_peer *mp = &s->peers[i]->mp;

		if (mp->txq_head || mp->rel.snd_una != mp->rel.snd_nxt)
			return true;
	}
	return false;
}

static void rdm_close(struct fdp_ep *ep)
{
	struct rdm_state *s = st_of(ep);

	if (!s)
		return;
	if (s->timers_attached)
		fdp_progress_timers_detach(ep);
	for (size_t i = 0; i < s->npeers; i++) {
		const struct fdp_rel_peer *rp = &s->peers[i]->mp.rel;
		if (rp->srtt_ns)
			FDP_INFO(FI_LOG_EP_DATA, "rdm peer %zu: srtt %llu us, rttvar %llu us, "
				 "min rtt %llu us, rto %llu us\n", i,
				 (unsigned long long)rp->srtt_ns / 1000,
				 (unsigned long long)rp->rttvar_ns / 1000,
				 (unsigned long long)rp->min_rtt_ns / 1000,
				 (unsigned long long)rp->rto_base_ns / 1000);
	}
	FDP_INFO(FI_LOG_EP_DATA,
		 "rdm ep closed: tx %llu frames, %llu retx (%llu rto, %llu fast), rx %llu, "
		 "dup %llu, ooo %llu, out-of-window %llu, malformed %llu, refused %llu\n",
		 (unsigned long long)s->m.rel.stats.tx_data,
		 (unsigned long long)s->m.rel.stats.tx_retx,
		 (unsigned long long)s->m.rel.stats.tx_rto,
		 (unsigned long long)s->m.rel.stats.tx_fast_retx,
		 (unsigned long long)s->m.rel.stats.rx_data,
		 (unsigned long long)s->m.rel.stats.rx_dup,
		 (unsigned long long)s->m.rel.stats.rx_ooo,
		 (unsigned long long)s->m.rel.stats.rx_out_of_window,
		 (unsigned long long)(s->m.rel.stats.rx_malformed +
				      s->m.rel.stats.rx_bad_version + s->m.stats.rx_malformed),
		 (unsigned long long)s->m.rel.stats.rx_refused);
	for (size_t i = 0; i < s->npeers; i++) {
		fdp_msg_peer_fini(&s->m, &s->peers[i]->mp);
		free(s->peers[i]);
	}
	fdp_msg_fini(&s->m);
	free(s->peers);
	free(s->by_fi_addr);
	free(s);
	ep->hook_ctx = NULL;
}

static ssize_t rdm_rx_size_left(struct fdp_ep *ep)
{
	return (ssize_t)fdp_msg_rx_left(&st_of(ep)->m);
}

static ssize_t rdm_tx_size_left(struct fdp_ep *ep)
{
	return (ssize_t)fdp_msg_tx_left(&st_of(ep)->m);
}

static const struct fdp_ep_hooks rdm_hooks = {
	.rx_rdm = rdm_rx,
	.progress = rdm_progress,
	.next_deadline = rdm_next_deadline,
	.enable = rdm_enable,
	.cancel = rdm_cancel,
	.close = rdm_close,
	.flush = rdm_flush,
	.tx_pending = rdm_tx_pending,
	.rx_size_left = rdm_rx_size_left,
	.tx_size_left = rdm_tx_size_left,
};

/* A non-zero 32-bit value that differs between processes and endpoints. */
static uint32_t random_u32(const void *salt)
{
	uint64_t x = fdp_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)salt;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (uint32_t)x ? (uint32_t)x : 1;
}

static int rdm_open(struct fdp_ep *ep, const struct fi_info *info)
{
	struct rdm_state *s;
	struct fdp_msg_cfg cfg;
	int ret;

	if (ep->frame_payload_max < sizeof(struct fdp_rel_hdr) + 2 * FDP_MSG_HDR_LEN) {
		FDP_WARN(FI_LOG_EP_CTRL, "rdm: frame payload %zu too small\n",
			 ep->frame_payload_max);
		return -FI_EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -FI_ENOMEM;
	fdp_msg_cfg_default(&cfg);
	cfg.max_msg_size = RDM_MAX_MSG;
	cfg.inject_max = RDM_INJECT;
	cfg.tx_ops = info && info->tx_attr && info->tx_attr->size ?
		(uint32_t)info->tx_attr->size : RDM_QUEUE;
	cfg.rx_ops = info && info->rx_attr && info->rx_attr->size ?
		(uint32_t)info->rx_attr->size : RDM_QUEUE;
	cfg.rel.frame_payload = (uint32_t)(ep->frame_payload_max - sizeof(struct fdp_rel_hdr));
	cfg.rel.session = random_u32(ep);
	cfg.rel.isn = random_u32(s);
	ret = fdp_msg_init(&s->m, &cfg, &rdm_msg_ops, s);
	if (ret) {
		FDP_WARN(FI_LOG_EP_CTRL, "rdm: engine init failed: %d\n", ret);
		free(s);
		return ret;
	}
	s->ep = ep;
	ep->hook_ctx = s;
	ep->hooks = &rdm_hooks;
	ep->ep_fid.msg = (struct fi_ops_msg *)&rdm_msg_fi_ops;
	ep->ep_fid.tagged = (struct fi_ops_tagged *)&rdm_tagged_fi_ops;
	return 0;
}

const struct fdp_ep_class fdp_rdm_class = {
	.type = FI_EP_RDM,
	.caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_SOURCE | FI_DIRECTED_RECV |
		FI_LOCAL_COMM | FI_REMOTE_COMM,
	.mode = 0,
	.msg_order = FI_ORDER_SAS,
	.comp_order = FI_ORDER_NONE,
	.max_msg_size = RDM_MAX_MSG,
	.inject_size = RDM_INJECT,
	.tx_size = RDM_QUEUE,
	.rx_size = RDM_QUEUE,
	.iov_limit = FDP_MSG_IOV_MAX,
	.mem_tag_format_bits = 64,
	.protocol_version = FDP_REL_VERSION,
	.open = rdm_open,
};
