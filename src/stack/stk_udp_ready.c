/* Readiness of accelerated UDP sockets (stk_udp.h): the slots of
 * stk_ready_ops for a socket that stands where a connection does
 * (stk_ready_is_dgram). Readable when the fabric holds a datagram for it or
 * its kernel socket is readable; always writable (a datagram that finds no
 * room waits in the send call, as the kernel's). The sleep set holds the
 * kernel socket (its "liveness channel") and the completion queue's wait fd. */
#include "config.h"
#include "stack/stk_udp.h"
#include "stack/stk_epoll.h"
#include "stack/stk_ready.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>

static struct stk_udp *udp_of(struct stk_conn *obj)
{
	return (struct stk_udp *)((uintptr_t)obj & ~STK_READY_DGRAM_TAG);
}

static struct stk_udp_fab *fab_of(struct stk_fab *fab)
{
	return (struct stk_udp_fab *)((uintptr_t)fab & ~STK_READY_DGRAM_TAG);
}

struct stk_conn *stk_udp_ready_obj(struct stk_udp *udp)
{
	return (struct stk_conn *)((uintptr_t)udp | STK_READY_DGRAM_TAG);
}

/* The kernel socket's readable/error bits, without waiting. */
static short kernel_events(struct stk_udp *udp)
{
	int saved_errno = errno;
	struct pollfd p = { .fd = udp->kfd, .events = POLLIN };
	short ev = stk_sys.poll(&p, 1, 0) == 1 ? p.revents : 0;
	errno = saved_errno;
	return (short)(ev & (POLLIN | POLLERR));
}

static short udp_events_at(struct stk_conn *obj, bool progress)
{
	struct stk_udp *udp = udp_of(obj);
	if (stk_udp_rx_pending(udp, progress))
		return POLLIN | POLLOUT;
	return (short)(POLLOUT | kernel_events(udp));
}

static short udp_events(struct stk_conn *obj)
{
	return udp_events_at(obj, true);
}

static short udp_events_now(struct stk_conn *obj)
{
	return udp_events_at(obj, false);
}

static int udp_liveness_fd(struct stk_conn *obj)
{
	return udp_of(obj)->kfd;
}

/* The kernel socket moved: its watchers look again. */
static void udp_liveness(struct stk_conn *obj)
{
	struct stk_udp *udp = udp_of(obj);
	__atomic_fetch_add(&udp->generation, 1, __ATOMIC_RELEASE);
	stk_watch_notify(&udp->watch);
}

static uint64_t udp_generation(struct stk_conn *obj)
{
	return __atomic_load_n(&udp_of(obj)->generation, __ATOMIC_ACQUIRE);
}

static struct stk_fab *udp_fab(struct stk_conn *obj)
{
	(void)obj;
	struct stk_udp_fab *fab = stk_udp_fab_current();
	return fab ? (struct stk_fab *)((uintptr_t)fab | STK_READY_DGRAM_TAG) : NULL;
}

static int udp_progress(struct stk_fab *fab)
{
	return stk_udp_fab_progress(fab_of(fab));
}

static int udp_wait_fd(struct stk_fab *fab)
{
	return stk_udp_fab_wait_fd(fab_of(fab));
}

static bool udp_trywait(struct stk_fab *fab)
{
	return stk_udp_fab_trywait(fab_of(fab));
}

static void udp_quiesce(struct stk_fab *fab)
{
	stk_udp_fab_quiesce(fab_of(fab));
}

static struct stk_watch *udp_watch(struct stk_conn *obj)
{
	return &udp_of(obj)->watch;
}

static const struct stk_ready_ops udp_ready_ops = {
	.events = udp_events,
	.liveness_fd = udp_liveness_fd,
	.liveness = udp_liveness,
	.generation = udp_generation,
	.fab = udp_fab,
	.progress = udp_progress,
	.wait_fd = udp_wait_fd,
	.trywait = udp_trywait,
	.quiesce = udp_quiesce,
	.watch = udp_watch,
	.events_now = udp_events_now,
};

void stk_udp_ready_install(void)
{
	__atomic_store_n(&stk_ready_dgram_ops, &udp_ready_ops, __ATOMIC_RELEASE);
}

void stk_udp_ready_closed(struct stk_udp *udp)
{
	stk_epoll_conn_closed(stk_udp_ready_obj(udp));
}
