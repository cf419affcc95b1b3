/* stk_conn: turn an already connected kernel TCP socket into an accelerated
 * stream (the rsocket-like entry point of the stack).
 *
 * Client: call stk_nego_mark_syn() before connect() and stk_nego_unmark() after it
 * completed, then stk_accel_attach(fd, true, ...). Server: stk_nego_listener_prepare()
 * on the listener before listen(), then stk_accel_attach(accepted_fd, false, ...).
 * The call blocks at most: client 5 ms (unknown destination), 0 (cached plain),
 * 1 s (cached capable, waiting for its HELLO); server 2 s for the client's REPLY
 * (a libfabsock client always answers at once). The fd may be blocking or not.
 *
 * Returns 0 with *out a connection (the kernel fd then belongs to it: stk_close
 * closes it), STK_ATTACH_KERNEL when the connection stays on the kernel
 * (info->reason says why; counted and logged once per reason; the fd is untouched
 * and the caller keeps using it, and when info->strip_late_hello is set must call
 * stk_nego_strip_late_hello() before the app's first read), or -errno when the
 * kernel connection itself failed (EOF, reset) during the negotiation. */
#ifndef STK_CONN_H
#define STK_CONN_H

#include <stdbool.h>

#include "stack/stk_fab.h"
#include "stack/stk_stream.h"

#define STK_ATTACH_KERNEL 1

struct stk_attach_info {
	char reason[128];                 /* why the kernel (empty when accelerated) */
	char provider[STK_FAB_NAME_MAX];  /* chosen provider when accelerated */
	bool strip_late_hello;            /* client fell back without a HELLO */
};

/* A listening socket that may accept accelerated connections: sets TCP_SAVE_SYN
 * (call before listen()) and opens the configured providers now, so that the
 * HELLO of the first accepted connection is not delayed by endpoint set-up (the
 * client waits only 5 ms for it). Returns 0 or -errno (TCP_SAVE_SYN failed). */
int stk_accel_listen(int listen_fd);

int stk_accel_attach(int fd, bool is_client, struct stk_conn **out,
		     struct stk_attach_info *info);

#endif
