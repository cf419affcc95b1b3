/* stk_sock: the stack's view of one application socket it may accelerate.
 *
 * Created when the application makes an AF_INET/AF_INET6 TCP or UDP socket, while
 * the library is enabled. Shared by every fd that refers to the same open socket
 * (dup, dup2, fcntl F_DUPFD): reference counted, freed with the last reference.
 * The decision (accelerate or leave to the kernel) is taken once the socket's role
 * and addresses are known: connect (tcp_client, udp_connect), listen (tcp_server),
 * bind of a UDP socket (udp_receiver), or its first sendto (udp_sender). */
#ifndef STK_SOCK_H
#define STK_SOCK_H

#include <stdbool.h>
#include <sys/socket.h>

#include "stack/stk_rules.h"

enum stk_sock_kind {
	STK_SOCK_TCP,
	STK_SOCK_UDP,
	STK_SOCK_EPOLL, /* an app epoll fd holding accelerated sockets */
};

struct stk_epoll;

struct stk_conn;

struct stk_sock {
	int refs;                /* atomic */
	enum stk_sock_kind kind;
	int domain;
	bool decided;            /* the role was known and the decision taken */
	bool syn_marked;         /* client: SYN marked, negotiation after connect */
	bool accel_listener;     /* listener whose accepted connections are candidates */
	struct stk_conn *conn;   /* the stream (maybe still negotiating, or settled on the
				  * kernel: see its phase), or NULL (kernel) */
	struct stk_epoll *epoll; /* STK_SOCK_EPOLL: the object attached to the fd */
};

/* A new object for a socket(domain, type, protocol) just created, or NULL when the
 * socket is not a candidate (not IPv4/IPv6 TCP or UDP) or memory is short. */
struct stk_sock *stk_sock_new(int domain, int type, int protocol);
/* The object for an app epoll fd that now holds accelerated sockets (takes ep). */
struct stk_sock *stk_sock_new_epoll(struct stk_epoll *ep);
void stk_sock_ref(struct stk_sock *sock);
/* Dropping the last reference closes an accelerated connection (graceful, or
 * abortive when the app set SO_LINGER with a zero timeout), or destroys an epoll
 * object. Callers that use an object across a blocking call hold a reference. */
void stk_sock_unref(struct stk_sock *sock);

/* Decide for a socket whose role is now known (local/remote may be NULL when
 * unknown). Logs the outcome (debug), logs each distinct fallback reason once
 * (info), counts everything. Returns true when the socket stays a candidate for
 * acceleration (TCP, rules say accel); false means the kernel keeps it and the
 * caller may forget the object. */
bool stk_sock_decide(struct stk_sock *sock, int fd, enum stk_role role,
		     const struct sockaddr *local, const struct sockaddr *remote);

#endif
