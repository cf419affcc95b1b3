#include "config.h"
#include "stack/stk_sys.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

struct stk_sys stk_sys = {
	.read = read,
	.write = write,
	.close = close,
	.socket = socket,
	.bind = bind,
	.listen = listen,
	.accept4 = accept4,
	.connect = connect,
	.shutdown = shutdown,
	.recv = recv,
	.send = send,
	.getsockopt = getsockopt,
	.setsockopt = setsockopt,
	.getsockname = getsockname,
	.getpeername = getpeername,
	.fcntl = fcntl,
	.poll = poll,
	.epoll_create1 = epoll_create1,
	.epoll_ctl = epoll_ctl,
	.epoll_wait = epoll_wait,
	.ppoll = ppoll,
	.ioctl = ioctl,
};

void stk_sys_install(const struct stk_sys *real)
{
	stk_sys = *real;
}

int stk_sys_dup_high(int fd)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 128 && rl.rlim_cur != RLIM_INFINITY) {
		int high = stk_sys.fcntl(fd, F_DUPFD_CLOEXEC, (int)(rl.rlim_cur / 2));
		if (high >= 0)
			return high;
	}
	return stk_sys.fcntl(fd, F_DUPFD_CLOEXEC, 0); /* the upper half is full */
}

void stk_sys_dup_high_reserve(int fd)
{
	int high = stk_sys_dup_high(fd);
	if (high >= 0)
		stk_sys.close(high);
}
