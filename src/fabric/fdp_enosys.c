/* fdp_enosys.c - ops tables for what an endpoint class does not support:
 * every slot named, every call answers -FI_ENOSYS (never a NULL pointer,
 * since libfabric's inline wrappers call through without checking). */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_enosys.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>

#define NS (void)ep; return -FI_ENOSYS

/* FI_MSG */
static ssize_t m_recv(struct fid_ep *ep, void *b, size_t l, void *d, fi_addr_t s, void *c)
{ (void)b; (void)l; (void)d; (void)s; (void)c; NS; }
static ssize_t m_recvv(struct fid_ep *ep, const struct iovec *i, void **d, size_t n,
		       fi_addr_t s, void *c)
{ (void)i; (void)d; (void)n; (void)s; (void)c; NS; }
static ssize_t m_recvmsg(struct fid_ep *ep, const struct fi_msg *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t m_send(struct fid_ep *ep, const void *b, size_t l, void *d, fi_addr_t a, void *c)
{ (void)b; (void)l; (void)d; (void)a; (void)c; NS; }
static ssize_t m_sendv(struct fid_ep *ep, const struct iovec *i, void **d, size_t n,
		       fi_addr_t a, void *c)
{ (void)i; (void)d; (void)n; (void)a; (void)c; NS; }
static ssize_t m_sendmsg(struct fid_ep *ep, const struct fi_msg *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t m_inject(struct fid_ep *ep, const void *b, size_t l, fi_addr_t a)
{ (void)b; (void)l; (void)a; NS; }
static ssize_t m_senddata(struct fid_ep *ep, const void *b, size_t l, void *d, uint64_t x,
			  fi_addr_t a, void *c)
{ (void)b; (void)l; (void)d; (void)x; (void)a; (void)c; NS; }
static ssize_t m_injectdata(struct fid_ep *ep, const void *b, size_t l, uint64_t x, fi_addr_t a)
{ (void)b; (void)l; (void)x; (void)a; NS; }

const struct fi_ops_msg fdp_enosys_msg = {
	.size = sizeof(struct fi_ops_msg),
	.recv = m_recv,
	.recvv = m_recvv,
	.recvmsg = m_recvmsg,
	.send = m_send,
	.sendv = m_sendv,
	.sendmsg = m_sendmsg,
	.inject = m_inject,
	.senddata = m_senddata,
	.injectdata = m_injectdata,
};

/* FI_TAGGED */
static ssize_t t_recv(struct fid_ep *ep, void *b, size_t l, void *d, fi_addr_t s,
		      uint64_t t, uint64_t i, void *c)
{ (void)b; (void)l; (void)d; (void)s; (void)t; (void)i; (void)c; NS; }
static ssize_t t_recvv(struct fid_ep *ep, const struct iovec *v, void **d, size_t n,
		       fi_addr_t s, uint64_t t, uint64_t i, void *c)
{ (void)v; (void)d; (void)n; (void)s; (void)t; (void)i; (void)c; NS; }
static ssize_t t_recvmsg(struct fid_ep *ep, const struct fi_msg_tagged *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t t_send(struct fid_ep *ep, const void *b, size_t l, void *d, fi_addr_t a,
		      uint64_t t, void *c)
{ (void)b; (void)l; (void)d; (void)a; (void)t; (void)c; NS; }
static ssize_t t_sendv(struct fid_ep *ep, const struct iovec *v, void **d, size_t n,
		       fi_addr_t a, uint64_t t, void *c)
{ (void)v; (void)d; (void)n; (void)a; (void)t; (void)c; NS; }
static ssize_t t_sendmsg(struct fid_ep *ep, const struct fi_msg_tagged *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t t_inject(struct fid_ep *ep, const void *b, size_t l, fi_addr_t a, uint64_t t)
{ (void)b; (void)l; (void)a; (void)t; NS; }
static ssize_t t_senddata(struct fid_ep *ep, const void *b, size_t l, void *d, uint64_t x,
			  fi_addr_t a, uint64_t t, void *c)
{ (void)b; (void)l; (void)d; (void)x; (void)a; (void)t; (void)c; NS; }
static ssize_t t_injectdata(struct fid_ep *ep, const void *b, size_t l, uint64_t x,
			    fi_addr_t a, uint64_t t)
{ (void)b; (void)l; (void)x; (void)a; (void)t; NS; }

const struct fi_ops_tagged fdp_enosys_tagged = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = t_recv,
	.recvv = t_recvv,
	.recvmsg = t_recvmsg,
	.send = t_send,
	.sendv = t_sendv,
	.sendmsg = t_sendmsg,
	.inject = t_inject,
	.senddata = t_senddata,
	.injectdata = t_injectdata,
};

/* FI_RMA */
static ssize_t r_read(struct fid_ep *ep, void *b, size_t l, void *d, fi_addr_t s,
		      uint64_t a, uint64_t k, void *c)
{ (void)b; (void)l; (void)d; (void)s; (void)a; (void)k; (void)c; NS; }
static ssize_t r_readv(struct fid_ep *ep, const struct iovec *v, void **d, size_t n,
		       fi_addr_t s, uint64_t a, uint64_t k, void *c)
{ (void)v; (void)d; (void)n; (void)s; (void)a; (void)k; (void)c; NS; }
static ssize_t r_readmsg(struct fid_ep *ep, const struct fi_msg_rma *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t r_write(struct fid_ep *ep, const void *b, size_t l, void *d, fi_addr_t s,
		       uint64_t a, uint64_t k, void *c)
{ (void)b; (void)l; (void)d; (void)s; (void)a; (void)k; (void)c; NS; }
static ssize_t r_writev(struct fid_ep *ep, const struct iovec *v, void **d, size_t n,
			fi_addr_t s, uint64_t a, uint64_t k, void *c)
{ (void)v; (void)d; (void)n; (void)s; (void)a; (void)k; (void)c; NS; }
static ssize_t r_writemsg(struct fid_ep *ep, const struct fi_msg_rma *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t r_inject(struct fid_ep *ep, const void *b, size_t l, fi_addr_t s,
			uint64_t a, uint64_t k)
{ (void)b; (void)l; (void)s; (void)a; (void)k; NS; }
static ssize_t r_writedata(struct fid_ep *ep, const void *b, size_t l, void *d, uint64_t x,
			   fi_addr_t s, uint64_t a, uint64_t k, void *c)
{ (void)b; (void)l; (void)d; (void)x; (void)s; (void)a; (void)k; (void)c; NS; }
static ssize_t r_injectdata(struct fid_ep *ep, const void *b, size_t l, uint64_t x,
			    fi_addr_t s, uint64_t a, uint64_t k)
{ (void)b; (void)l; (void)x; (void)s; (void)a; (void)k; NS; }

const struct fi_ops_rma fdp_enosys_rma = {
	.size = sizeof(struct fi_ops_rma),
	.read = r_read,
	.readv = r_readv,
	.readmsg = r_readmsg,
	.write = r_write,
	.writev = r_writev,
	.writemsg = r_writemsg,
	.inject = r_inject,
	.writedata = r_writedata,
	.injectdata = r_injectdata,
};

/* FI_ATOMIC */
static ssize_t a_write(struct fid_ep *ep, const void *b, size_t n, void *d, fi_addr_t s,
		       uint64_t a, uint64_t k, enum fi_datatype t, enum fi_op o, void *c)
{ (void)b; (void)n; (void)d; (void)s; (void)a; (void)k; (void)t; (void)o; (void)c; NS; }
static ssize_t a_writev(struct fid_ep *ep, const struct fi_ioc *v, void **d, size_t n,
			fi_addr_t s, uint64_t a, uint64_t k, enum fi_datatype t,
			enum fi_op o, void *c)
{ (void)v; (void)d; (void)n; (void)s; (void)a; (void)k; (void)t; (void)o; (void)c; NS; }
static ssize_t a_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *m, uint64_t f)
{ (void)m; (void)f; NS; }
static ssize_t a_inject(struct fid_ep *ep, const void *b, size_t n, fi_addr_t s,
			uint64_t a, uint64_t k, enum fi_datatype t, enum fi_op o)
{ (void)b; (void)n; (void)s; (void)a; (void)k; (void)t; (void)o; NS; }
static ssize_t a_readwrite(struct fid_ep *ep, const void *b, size_t n, void *d, void *r,
			   void *rd, fi_addr_t s, uint64_t a, uint64_t k,
			   enum fi_datatype t, enum fi_op o, void *c)
{ (void)b; (void)n; (void)d; (void)r; (void)rd; (void)s; (void)a; (void)k; (void)t;
  (void)o; (void)c; NS; }
static ssize_t a_readwritev(struct fid_ep *ep, const struct fi_ioc *v, void **d, size_t n,
			    struct fi_ioc *rv, void **rd, size_t rn, fi_addr_t s,
			    uint64_t a, uint64_t k, enum fi_datatype t, enum fi_op o, void *c)
{ (void)v; (void)d; (void)n; (void)rv; (void)rd; (void)rn; (void)s; (void)a; (void)k;
  (void)t; (void)o; (void)c; NS; }
static ssize_t a_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *m,
			      struct fi_ioc *rv, void **rd, size_t rn, uint64_t f)
{ (void)m; (void)rv; (void)rd; (void)rn; (void)f; NS; }
static ssize_t a_compwrite(struct fid_ep *ep, const void *b, size_t n, void *d,
			   const void *cmp, void *cd, void *r, void *rd, fi_addr_t s,
			   uint64_t a, uint64_t k, enum fi_datatype t, enum fi_op o, void *c)
{ (void)b; (void)n; (void)d; (void)cmp; (void)cd; (void)r; (void)rd; (void)s; (void)a;
  (void)k; (void)t; (void)o; (void)c; NS; }
static ssize_t a_compwritev(struct fid_ep *ep, const struct fi_ioc *v, void **d, size_t n,
			    const struct fi_ioc *cv, void **cd, size_t cn,
			    struct fi_ioc *rv, void **rd, size_t rn, fi_addr_t s,
			    uint64_t a, uint64_t k, enum fi_datatype t, enum fi_op o, void *c)
{ (void)v; (void)d; (void)n; (void)cv; (void)cd; (void)cn; (void)rv; (void)rd; (void)rn;
  (void)s; (void)a; (void)k; (void)t; (void)o; (void)c; NS; }
static ssize_t a_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *m,
			      const struct fi_ioc *cv, void **cd, size_t cn,
			      struct fi_ioc *rv, void **rd, size_t rn, uint64_t f)
{ (void)m; (void)cv; (void)cd; (void)cn; (void)rv; (void)rd; (void)rn; (void)f; NS; }
static int a_valid(struct fid_ep *ep, enum fi_datatype t, enum fi_op o, size_t *n)
{ (void)t; (void)o; (void)n; NS; }

const struct fi_ops_atomic fdp_enosys_atomic = {
	.size = sizeof(struct fi_ops_atomic),
	.write = a_write,
	.writev = a_writev,
	.writemsg = a_writemsg,
	.inject = a_inject,
	.readwrite = a_readwrite,
	.readwritev = a_readwritev,
	.readwritemsg = a_readwritemsg,
	.compwrite = a_compwrite,
	.compwritev = a_compwritev,
	.compwritemsg = a_compwritemsg,
	.writevalid = a_valid,
	.readwritevalid = a_valid,
	.compwritevalid = a_valid,
};

/* FI_COLLECTIVE */
static ssize_t c_barrier(struct fid_ep *ep, fi_addr_t a, void *c)
{ (void)a; (void)c; NS; }
static ssize_t c_broadcast(struct fid_ep *ep, void *b, size_t n, void *d, fi_addr_t ca,
			   fi_addr_t ra, enum fi_datatype t, uint64_t f, void *c)
{ (void)b; (void)n; (void)d; (void)ca; (void)ra; (void)t; (void)f; (void)c; NS; }
static ssize_t c_alltoall(struct fid_ep *ep, const void *b, size_t n, void *d, void *r,
			  void *rd, fi_addr_t ca, enum fi_datatype t, uint64_t f, void *c)
{ (void)b; (void)n; (void)d; (void)r; (void)rd; (void)ca; (void)t; (void)f; (void)c; NS; }
static ssize_t c_allreduce(struct fid_ep *ep, const void *b, size_t n, void *d, void *r,
			   void *rd, fi_addr_t ca, enum fi_datatype t, enum fi_op o,
			   uint64_t f, void *c)
{ (void)b; (void)n; (void)d; (void)r; (void)rd; (void)ca; (void)t; (void)o; (void)f;
  (void)c; NS; }
static ssize_t c_reduce(struct fid_ep *ep, const void *b, size_t n, void *d, void *r,
			void *rd, fi_addr_t ca, fi_addr_t ra, enum fi_datatype t,
			enum fi_op o, uint64_t f, void *c)
{ (void)b; (void)n; (void)d; (void)r; (void)rd; (void)ca; (void)ra; (void)t; (void)o;
  (void)f; (void)c; NS; }
static ssize_t c_scatter(struct fid_ep *ep, const void *b, size_t n, void *d, void *r,
			 void *rd, fi_addr_t ca, fi_addr_t ra, enum fi_datatype t,
			 uint64_t f, void *c)
{ (void)b; (void)n; (void)d; (void)r; (void)rd; (void)ca; (void)ra; (void)t; (void)f;
  (void)c; NS; }
static ssize_t c_msg(struct fid_ep *ep, const struct fi_msg_collective *m,
		     struct fi_ioc *rv, void **rd, size_t rn, uint64_t f)
{ (void)m; (void)rv; (void)rd; (void)rn; (void)f; NS; }
static ssize_t c_barrier2(struct fid_ep *ep, fi_addr_t a, uint64_t f, void *c)
{ (void)a; (void)f; (void)c; NS; }

const struct fi_ops_collective fdp_enosys_collective = {
	.size = sizeof(struct fi_ops_collective),
	.barrier = c_barrier,
	.broadcast = c_broadcast,
	.alltoall = c_alltoall,
	.allreduce = c_allreduce,
	.allgather = c_alltoall,
	.reduce_scatter = c_allreduce,
	.reduce = c_reduce,
	.scatter = c_scatter,
	.gather = c_scatter,
	.msg = c_msg,
	.barrier2 = c_barrier2,
};

int fdp_enosys_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	(void)fid; (void)bfid; (void)flags;
	return -FI_ENOSYS;
}

int fdp_enosys_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
			void *context)
{
	(void)fid; (void)name; (void)flags; (void)ops; (void)context;
	return -FI_ENOSYS;
}
