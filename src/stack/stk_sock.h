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

#include "stack/stk.h"
#include "stack/stk_rules.h"

enum stk_sock_kind {
	STK_SOCK_TCP,
	STK_SOCK_UDP,
	STK_SOCK_EPOLL, /* an app epoll fd holding accelerated sockets */
};

struct stk_epoll;

struct stk_conn;
struct stk_udp;

/* The operations of one kind of socket behind stk.h's data calls. Each returns
 * what stk.h says of its call (result, -errno or STK_KERNEL). A socket whose
 * ops is NULL (UDP sockets, epoll objects) has every data call carried by the
 * kernel: stk.h's functions return STK_KERNEL without a further call. Another
 * kind has a table beside stk_tcp_ops: accelerated UDP sockets stk_udp_ops
 * (stk_udp.h), set when the socket is attached; a table sets every slot. */
struct stk_sock_ops {
	ssize_t (*recvfrom)(struct stk_sock *sock, void *buf, size_t len, int flags,
			    struct sockaddr *addr, socklen_t *alen);
	ssize_t (*sendto)(struct stk_sock *sock, const void *buf, size_t len, int flags,
			  const struct sockaddr *addr, socklen_t alen);
	ssize_t (*recvv)(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
	ssize_t (*sendv)(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags);
	ssize_t (*recvmsg)(struct stk_sock *sock, struct msghdr *msg, int flags);
	ssize_t (*sendmsg)(struct stk_sock *sock, const struct msghdr *msg, int flags);
	int (*recvmmsg)(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
			struct timespec *timeout);
	int (*sendmmsg)(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags);
	ssize_t (*sendfile)(struct stk_sock *sock, int in_fd, off_t *offset, size_t count);
	int (*shutdown)(struct stk_sock *sock, int how);
	int (*ioctl)(struct stk_sock *sock, unsigned long request, void *arg);
	int (*so_error)(struct stk_sock *sock, int kernel_err);
	void (*set_nonblock)(struct stk_sock *sock, bool nonblock);
};

/* The preload's fd table (stk_set_fd_table; the default knows no fd). */
extern struct stk_fd_table stk_fds;

/* The TCP stream's operations (stk_tcp.c). */
extern const struct stk_sock_ops stk_tcp_ops;

struct stk_sock {
	int refs;                /* atomic */
	enum stk_sock_kind kind;
	const struct stk_sock_ops *ops; /* TCP stk_tcp_ops, accelerated UDP stk_udp_ops,
					 * others NULL */
	int domain;
	bool decided;            /* the role was known and the decision taken */
	bool syn_marked;         /* client: SYN marked, negotiation after connect */
	bool accel_listener;     /* listener whose accepted connections are candidates */
	struct stk_conn *conn;   /* the stream (maybe still negotiating, or settled on the
				  * kernel: see its phase), or NULL (kernel) */
	struct stk_epoll *epoll; /* STK_SOCK_EPOLL: the object attached to the fd */
	struct stk_udp *udp;     /* UDP on the dpdk port (stk_udp.h), or NULL (kernel) */
};

/* stk_sock_new, stk_sock_ref, stk_sock_unref: stk.h. */
/* The object for an app epoll fd that now holds accelerated sockets (takes ep). */
struct stk_sock *stk_sock_new_epoll(struct stk_epoll *ep);

/* Decide for a socket whose role is now known (local/remote may be NULL when
 * unknown). Logs the outcome (debug), logs each distinct fallback reason once
 * (info), counts everything. Returns true when the socket stays a candidate for
 * acceleration (TCP the rules accelerate, or UDP attached to the dpdk port
 * here, stk_udp.h); false means the kernel keeps it and the caller may
 * forget the object. */
bool stk_sock_decide(struct stk_sock *sock, int fd, enum stk_role role,
		     const struct sockaddr *local, const struct sockaddr *remote);

#endif
