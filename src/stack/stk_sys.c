#include "config.h"
#include "stack/stk_sys.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
	.recvmsg = recvmsg,
	.sendmsg = sendmsg,
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

/* Where the stack's duplicates start: half the soft limit, at most
 * HIGH_BASE_MAX (a huge limit must not make every process's fd table huge). */
#define HIGH_BASE_MAX 65536

int stk_sys_dup_high(int fd)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 128) {
		rlim_t base = rl.rlim_cur == RLIM_INFINITY ? HIGH_BASE_MAX : rl.rlim_cur / 2;
		int high = stk_sys.fcntl(fd, F_DUPFD_CLOEXEC, (int)(base < HIGH_BASE_MAX ? base
										 : HIGH_BASE_MAX));
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

bool stk_sys_fd_is(int fd, ino_t ino)
{
	struct stat st;
	return fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == ino;
}

void stk_sys_fd_table_reserve(void)
{
	int probe = eventfd(0, EFD_CLOEXEC);
	if (probe < 0)
		return;
	stk_sys_dup_high_reserve(probe);
	stk_sys.close(probe);
}
