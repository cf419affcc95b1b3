/* Loopback TCP connections for the test suites (tests/stack, tests/behav):
 * a listener on 127.0.0.1 with a port the kernel picks, an accept with a
 * bounded wait, and a bounded wait for a forked peer. Plain libc, no Check:
 * every function reports failure by its return value and the caller asserts
 * (or prints, in a behaviour transcript). */
#ifndef FSK_TESTS_TCP_PAIR_H
#define FSK_TESTS_TCP_PAIR_H

#include <netinet/in.h>
#include <sys/types.h>

/* A listening TCP socket on 127.0.0.1, port chosen by the kernel.
 * type_flags: SOCK_CLOEXEC, SOCK_NONBLOCK or 0, or-ed into the socket type.
 * On success returns the fd and, when addr is not NULL, stores the bound
 * address there; on failure returns -1 with errno set (no fd left open). */
int tcp_pair_listen(struct sockaddr_in *addr, int type_flags, int backlog);

/* Waits up to timeout_ms for a connection on lfd, then accept4s it with
 * SOCK_CLOEXEC. Returns the fd, or -1 with errno set (ETIMEDOUT when no
 * connection came). */
int tcp_pair_accept(int lfd, int timeout_ms);

/* Waits up to timeout_ms for child to exit. Returns its exit status, 128 +
 * the signal that ended it, or -1 after the wait ran out (the child is then
 * killed with SIGKILL and reaped). */
int tcp_pair_wait_child(pid_t child, int timeout_ms);

#endif
