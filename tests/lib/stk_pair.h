/* Both ends of an accelerated connection through the stack's own API, for
 * the stack's suites (tests/stack/test_stream.c, test_ready_pair.c): the
 * client's connect with the launcher's SYN mark, and the attach that moves
 * a connected socket to a provider. The listener and the waits are
 * tcp_pair.h's. */
#ifndef FSK_TESTS_STK_PAIR_H
#define FSK_TESTS_STK_PAIR_H

#include <netinet/in.h>
#include <stdbool.h>

#include "stack/stk_conn.h"

enum {
	STK_PAIR_MARK = 1,  /* mark the SYN as a launched client's */
	STK_PAIR_KNOWN = 2, /* the destination is known to run libfabsock: the
			     * first write waits up to 1 s for its greeting */
};

/* The stack's configuration for a pair on prov: enabled, 20 µs spin, a
 * 256 KiB window, batches of 16, the log level of FABSOCK_LOG (else warn). */
void stk_pair_config(const char *prov);

/* A connected TCP socket (SOCK_CLOEXEC) to addr. flags: STK_PAIR_*.
 * Returns the fd, or which step failed: -1 socket, -2 marking the SYN,
 * -3 connect, -4 unmarking. */
int stk_pair_connect(const struct sockaddr_in *addr, int flags);

/* stk_accel_attach on fd (client or server end) that must settle on prov.
 * Returns the connection, or NULL after one line on stderr saying why. */
struct stk_conn *stk_pair_attach(int fd, bool client, const char *prov);

#endif
