/* pl_wrap: helpers shared by the wrapper files. */
#ifndef PL_WRAP_H
#define PL_WRAP_H

#include <errno.h>
#include <sys/socket.h>

#include "preload/pl_fdtab.h"
#include "preload/pl_guard.h"
#include "preload/pl_init.h"
#include "preload/pl_real.h"
#include "stack/stk.h"

#define PL_EXPORT __attribute__((visibility("default")))

/* The tracked socket behind fd, or NULL (the common case: one lookup). Always
 * NULL while the library's own code runs (guard). */
static inline struct stk_sock *pl_tracked(int fd)
{
	if (pl_guarded())
		return NULL;
	return pl_fdtab_get(&pl_fdtab, fd);
}

/* Forget fd's entry (the kernel keeps the socket). errno is preserved. */
void pl_untrack(int fd);

/* A UDP socket's first datagram to an explicit destination decides udp_sender
 * (sock: fd's tracked socket). */
/* Returns true when the socket became carried by the stack just now (the
 * caller sends again there). */
bool pl_decide_sender(int fd, struct stk_sock *sock, const void *dest, socklen_t dest_len);

/* -errno results of the stack become errno here, once. */
static inline ssize_t pl_ret(ssize_t ret)
{
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* A new fd number came from the kernel: drop any stale entry left by a close we
 * could not see (fclose, close_range...). One lookup when there is none. */
void pl_forget_stale(int fd);

/* The byte paths glibc takes around the wrappers (pl_wrap_bypass.c). */
/* The tracked socket behind fd when its data calls still go to the stack. */
struct stk_sock *pl_stack_sock(int fd);
/* Code we never see is about to use sock's fd: a negotiating connection
 * settles on the kernel, one on the fabric migrates. errno is preserved. */
void pl_to_kernel(struct stk_sock *sock);

/* fd (0, 1 or 2) was just made a copy of a tracked socket: stdio's standard
 * streams reach it behind the wrappers' back (pl_wrap_bypass.c). */
void pl_std_stream(int fd);
/* Before an exec: a memfd holding the socket bytes pl_std_stream pushed into
 * stdin that stdin has not read yet (the new image reads them from fd 0
 * first), or -1. */
int pl_stdin_pushed_fd(void);

/* At start-up (pl_init): take over the unread bytes of migrated connections an
 * exec handed down (FABSOCK_INHERIT, see pl_wrap_proc.c). */
void pl_adopt_inherited(void);

#endif
