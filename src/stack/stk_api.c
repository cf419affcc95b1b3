/* stk.h: start-up, socket life and the data calls' dispatch through each
 * socket's operations (stk_sock.h). Readiness: stk_api_ready.c; process
 * events: stk_api_proc.c. */
#include "config.h"
#include "stack/stk.h"
#include "stack/stk_accel.h"
#include "stack/stk_config.h"
#include "stack/stk_counters.h"
#include "stack/stk_hooks.h"
#include "stack/stk_log.h"
#include "stack/stk_sock.h"
#include "stack/stk_sys.h"
#include "stack/stk_udp.h"

#include <errno.h>

/* ---- start-up and exit ---- */

void stk_set_guard(void (*enter)(void), void (*leave)(void))
{
	stk_hooks.enter = enter;
	stk_hooks.leave = leave;
}

int stk_start(const char *(*getenv_fn)(const char *name), const char *program)
{
	if (stk_config_load(&stk_cfg, getenv_fn, program) != 0)
		return -EINVAL;
	return stk_cfg.enabled ? 1 : 0;
}

void stk_log_active(int fd_table_size)
{
	STK_INFO("libfabsock %s active: %zu rules, default %s, providers %s, profile %s, "
		 "spin %u us, fd table %d",
		 PACKAGE_VERSION, stk_cfg.rules.count,
		 stk_action_name((enum stk_action)stk_cfg.default_action), stk_cfg.providers,
		 stk_profile_name(stk_cfg.profile), stk_cfg.spin_us, fd_table_size);
}

void stk_log_no_fd_table(void)
{
	STK_ERR("cannot reserve the fd table: out of memory; libfabsock disabled, "
		"sockets use the kernel");
}

void stk_log_disabled(void)
{
	STK_INFO("libfabsock %s loaded but disabled (FABSOCK_DISABLE=1)", PACKAGE_VERSION);
}

void stk_log_exit(void)
{
	if (stk_log_level >= STK_LOG_INFO)
		stk_counters_log();
}

/* ---- socket life ---- */

static bool inet_addr(const struct sockaddr *addr, socklen_t len)
{
	return addr && len >= sizeof(sa_family_t) &&
	       (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
}

/* Decide with the socket's bound address as the local endpoint. */
static bool decide_local(struct stk_sock *sock, int fd, enum stk_role role)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	int saved_errno = errno;
	bool known = stk_sys.getsockname(fd, (struct sockaddr *)&local, &len) == 0;
	errno = saved_errno;
	return stk_sock_decide(sock, fd, role, known ? (struct sockaddr *)&local : NULL, NULL);
}

int stk_sock_bind_port_ip(struct stk_sock *sock, int fd, const struct sockaddr *addr,
			  socklen_t len)
{
	if (sock->decided || sock->kind != STK_SOCK_UDP)
		return -EADDRNOTAVAIL;
	return stk_udp_bind_port_ip(fd, addr, len);
}

bool stk_sock_bound(struct stk_sock *sock, int fd)
{
	if (sock->decided || sock->kind != STK_SOCK_UDP)
		return true;
	return decide_local(sock, fd, STK_ROLE_UDP_RECEIVER);
}

bool stk_sock_listen(struct stk_sock *sock, int fd)
{
	if (sock->decided || sock->kind != STK_SOCK_TCP)
		return true;
	return decide_local(sock, fd, STK_ROLE_TCP_SERVER) && stk_accel_listen_begin(sock, fd);
}

int stk_sock_connect_begin(struct stk_sock *sock, int fd, const struct sockaddr *addr,
			   socklen_t len)
{
	if (sock->udp)
		return STK_CONNECT_NEGOTIATE; /* its peer follows the kernel's */
	if (sock->decided || !inet_addr(addr, len))
		return STK_CONNECT_PLAIN;
	enum stk_role role =
		sock->kind == STK_SOCK_TCP ? STK_ROLE_TCP_CLIENT : STK_ROLE_UDP_CONNECT;
	if (!stk_sock_decide(sock, fd, role, NULL, addr))
		return STK_CONNECT_FORGET;
	if (sock->udp)
		return STK_CONNECT_NEGOTIATE;
	return stk_accel_connect_begin(sock, fd) ? STK_CONNECT_NEGOTIATE : STK_CONNECT_FORGET;
}

bool stk_sock_connect_end(struct stk_sock *sock, int fd, int kernel_ret)
{
	if (sock->udp) {
		stk_udp_connected(sock, fd, kernel_ret);
		return true;
	}
	stk_accel_connect_end(sock, fd, kernel_ret);
	return sock->conn != NULL;
}

bool stk_sock_send_to(struct stk_sock *sock, int fd, const struct sockaddr *dest,
		      socklen_t len)
{
	if (sock->decided || sock->kind != STK_SOCK_UDP || !inet_addr(dest, len))
		return true;
	return stk_sock_decide(sock, fd, STK_ROLE_UDP_SENDER, NULL, dest);
}

struct stk_sock *stk_sock_accepted(struct stk_sock *listener, int newfd)
{
	if (!listener->accel_listener)
		return NULL;
	return stk_accel_accepted(listener, newfd);
}

int stk_sock_setsockopt(struct stk_sock *sock, int fd, int level, int name, const void *val,
			socklen_t len)
{
	if (!sock->udp)
		return STK_KERNEL;
	return stk_udp_setsockopt(sock, fd, level, name, val, len);
}

bool stk_sock_zerocopy(struct stk_sock *sock, int fd)
{
	return !stk_accel_zerocopy(sock, fd);
}

unsigned stk_sock_state(const struct stk_sock *sock)
{
	struct stk_conn *conn = sock->conn;
	if (sock->udp)
		return sock->ops ? STK_SOCK_CARRIED | STK_SOCK_FABRIC : 0;
	if (!conn)
		return 0;
	unsigned state = STK_SOCK_CONN;
	if (!__atomic_load_n(&conn->kernel_only, __ATOMIC_RELAXED))
		state |= STK_SOCK_CARRIED;
	if (stk_conn_on_fabric(conn))
		state |= STK_SOCK_FABRIC;
	if (__atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		state |= STK_SOCK_MIGRATED;
	return state;
}

/* ---- data calls: through the socket's operations ---- */

ssize_t stk_sock_recvfrom(struct stk_sock *sock, void *buf, size_t len, int flags,
			  struct sockaddr *addr, socklen_t *alen)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->recvfrom(sock, buf, len, flags, addr, alen);
}

ssize_t stk_sock_sendto(struct stk_sock *sock, const void *buf, size_t len, int flags,
			const struct sockaddr *addr, socklen_t alen)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->sendto(sock, buf, len, flags, addr, alen);
}

ssize_t stk_sock_recvv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->recvv(sock, iov, iovcnt, flags);
}

ssize_t stk_sock_sendv(struct stk_sock *sock, const struct iovec *iov, int iovcnt, int flags)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->sendv(sock, iov, iovcnt, flags);
}

ssize_t stk_sock_recvmsg(struct stk_sock *sock, struct msghdr *msg, int flags)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->recvmsg(sock, msg, flags);
}

ssize_t stk_sock_sendmsg(struct stk_sock *sock, const struct msghdr *msg, int flags)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->sendmsg(sock, msg, flags);
}

int stk_sock_recvmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags,
		      struct timespec *timeout)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->recvmmsg(sock, vec, vlen, flags, timeout);
}

int stk_sock_sendmmsg(struct stk_sock *sock, struct mmsghdr *vec, unsigned int vlen, int flags)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->sendmmsg(sock, vec, vlen, flags);
}

ssize_t stk_sock_sendfile(struct stk_sock *sock, int in_fd, off_t *offset, size_t count)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->sendfile(sock, in_fd, offset, count);
}

int stk_sock_shutdown(struct stk_sock *sock, int how)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->shutdown(sock, how);
}

int stk_sock_ioctl(struct stk_sock *sock, unsigned long request, void *arg)
{
	if (!sock->ops)
		return STK_KERNEL;
	return sock->ops->ioctl(sock, request, arg);
}

int stk_sock_so_error(struct stk_sock *sock, int kernel_err)
{
	if (!sock->ops)
		return kernel_err;
	return sock->ops->so_error(sock, kernel_err);
}

void stk_sock_set_nonblock(struct stk_sock *sock, bool nonblock)
{
	if (sock->ops)
		sock->ops->set_nonblock(sock, nonblock);
}
