/* fdp_wait.c - wait objects and the fi_ops slots CQs, counters and EQs
 * share. */
#include "config.h"

#include "fabric/fdp_port.h"
#include "fabric/fdp_wait.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

bool fdp_wait_obj_supported(enum fi_wait_obj wait_obj)
{
	switch (wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
	case FI_WAIT_YIELD:
		return true;
	default:
		return false;
	}
}

int fdp_wait_open(struct fdp_wait *w, enum fi_wait_obj wait_obj, enum fi_log_subsys subsys)
{
	w->fd = -1;
	atomic_init(&w->armed, false);
	if (wait_obj != FI_WAIT_FD && wait_obj != FI_WAIT_UNSPEC)
		return 0;
	w->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->fd < 0) {
		FDP_WARN(subsys, "eventfd: %s\n", strerror(errno));
		return -FI_EMFILE;
	}
	return 0;
}

void fdp_wait_close(struct fdp_wait *w, struct fdp_port *port)
{
	if (atomic_exchange(&w->armed, false))
		fdp_port_waiter_del(port);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

void fdp_wait_signal(const struct fdp_wait *w)
{
	uint64_t one = 1;
	ssize_t n;

	if (w->fd < 0)
		return;
	n = write(w->fd, &one, sizeof(one));
	(void)n; /* a full eventfd counter is already a wake-up */
}

void fdp_wait_drain(const struct fdp_wait *w)
{
	uint64_t v;
	ssize_t n;

	n = read(w->fd, &v, sizeof(v));
	(void)n;
}

void fdp_wait_arm(struct fdp_wait *w, struct fdp_port *port)
{
	fdp_wait_drain(w);
	if (!atomic_exchange(&w->armed, true))
		fdp_port_waiter_add(port);
}

bool fdp_wait_disarm(struct fdp_wait *w, struct fdp_port *port)
{
	if (atomic_load_explicit(&w->armed, memory_order_relaxed) &&
	    atomic_exchange(&w->armed, false)) {
		fdp_port_waiter_del(port);
		return true;
	}
	return false;
}

static const struct fdp_wait *fid_wait(struct fid *fid)
{
	switch (fid->fclass) {
	case FI_CLASS_CQ:
		return &container_of(fid, struct fdp_cq, cq_fid.fid)->wait;
	case FI_CLASS_CNTR:
		return &container_of(fid, struct fdp_cntr, cntr_fid.fid)->wait;
	case FI_CLASS_EQ:
		return &container_of(fid, struct fdp_eq, eq_fid.fid)->wait;
	default:
		return NULL;
	}
}

int fdp_wait_fid_control(struct fid *fid, int command, void *arg)
{
	const struct fdp_wait *w = fid_wait(fid);
	int fd = w ? w->fd : -1;

	switch (command) {
	case FI_GETWAIT:
		if (fd < 0)
			return -FI_ENODATA;
		*(int *)arg = fd;
		return 0;
	case FI_GETWAITOBJ:
		*(enum fi_wait_obj *)arg = fd >= 0 ? FI_WAIT_FD : FI_WAIT_NONE;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

const char *fdp_wait_strerror(int prov_errno, char *buf, size_t len)
{
	const char *s = fi_strerror(prov_errno);

	if (buf && len) {
		strncpy(buf, s, len - 1);
		buf[len - 1] = '\0';
		return buf;
	}
	return s;
}
