/* A library whose constructor opens, uses and closes sockets, preloaded next to
 * libfabsock: depending on the order in LD_PRELOAD its constructor runs before
 * libfabsock's, so the wrappers must work before their own initialisation. */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void early_ctor(void) __attribute__((constructor));

void early_ctor(void)
{
	int sv[2];
	char buf[8] = { 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		 listen(fd, 1) == 0 && close(fd) == 0 &&
		 socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && write(sv[0], "early", 5) == 5 &&
		 read(sv[1], buf, sizeof(buf)) == 5 && strcmp(buf, "early") == 0 &&
		 close(sv[0]) == 0 && close(sv[1]) == 0;
	dprintf(2, "early constructor: %s\n", ok ? "ok" : "FAILED");
}
