#include "config.h"

#include "tcp_pair.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int tcp_pair_listen(struct sockaddr_in *addr, int type_flags, int backlog)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | type_flags, 0);
	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || listen(fd, backlog) != 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	if (addr)
		*addr = sa;
	return fd;
}

int tcp_pair_accept(int lfd, int timeout_ms)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int n = poll(&pfd, 1, timeout_ms);
	if (n < 0)
		return -1;
	if (n == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

int tcp_pair_wait_child(pid_t child, int timeout_ms)
{
	int status = 0;
	for (int waited = 0;; waited += 10) {
		if (waitpid(child, &status, WNOHANG) == child)
			break;
		if (waited >= timeout_ms) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return -1;
		}
		usleep(10000);
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
