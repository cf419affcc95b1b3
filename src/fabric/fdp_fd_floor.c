/* fdp_fd_floor.c - DPDK's file descriptors above the application's.
 *
 * rte_eal_init and a port's set-up open about twenty descriptors (memfds,
 * eventfds, the interrupt thread's epoll, a vhost-user socket) at the lowest
 * free numbers. Applications size tables by the numbers they expect: wrk's
 * event loop holds 10 + 3 x connections descriptors, and a socket it opens
 * after DPDK took twenty low numbers is beyond it (a "connect" error). While
 * the floor is up, every free number below FDP_FD_FLOOR_MAX (or half the
 * soft RLIMIT_NOFILE, if lower) is held by a placeholder, so DPDK's land
 * above; the floor stays under FD_SETSIZE / 2, so that a descriptor another
 * thread of the application opens meanwhile still fits select(). */
#include "config.h"

#include "fabric/fdp.h"
#include "fabric/fdp_eal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>

#define FDP_FD_FLOOR_MAX 512
#define FDP_FD_FLOOR_MIN 64

void fdp_fd_floor_begin(struct fdp_fd_floor *f)
{
	struct rlimit rl;
	int limit, fd, anchor;

	f->held = NULL;
	f->n = 0;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	limit = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > FDP_FD_FLOOR_MAX ?
		FDP_FD_FLOOR_MAX : (int)(rl.rlim_cur / 2);
	if (limit < FDP_FD_FLOOR_MIN)
		return;
	f->held = malloc(sizeof(*f->held) * (size_t)limit);
	anchor = f->held ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
	if (anchor < 0 || anchor >= limit) {
		if (anchor >= 0)
			close(anchor);
		free(f->held);
		f->held = NULL;
		return;
	}
	f->held[f->n++] = anchor;
	while (f->n < limit) {
		fd = fcntl(anchor, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (fd >= limit) {
			close(fd);
			break;
		}
		f->held[f->n++] = fd;
	}
}

void fdp_fd_floor_end(struct fdp_fd_floor *f)
{
	int i;

	for (i = 0; i < f->n; i++)
		close(f->held[i]);
	free(f->held);
	f->held = NULL;
	f->n = 0;
}
