/* stk_conn: turn an already connected kernel TCP socket into an accelerated
 * stream (the rsocket-like entry point of the stack).
 *
 * Client: call stk_nego_mark_syn() before connect() and stk_nego_unmark() after it
 * completed, then stk_accel_attach(fd, true, ...). Server: stk_nego_listener_prepare()
 * on the listener before listen(), then stk_accel_attach(accepted_fd, false, ...).
 * The call blocks at most: client 5 ms (unknown destination), 0 (cached plain),
 * 1 s (cached capable, waiting for its HELLO), then 4 s for the server's
 * verdict (its first fabric message, or CANCEL); server 2 s for the client's
 * REPLY (a libfabsock client always answers at once), then 2 s for the
 * client's fabric message.
 * A client that sent its REPLY never falls back alone: without the server's
 * decision in time it returns -ETIMEDOUT (the connection is unusable).
 * The fd may be blocking or not. Protocol: stk_nego.h.
 *
 * Returns 0 with *out a connection (the kernel fd then belongs to it: stk_close
 * closes it), STK_ATTACH_KERNEL when the connection stays on the kernel
 * (info->reason says why; counted and logged once per reason; the fd is untouched
 * and the caller keeps using it, and when info->strip_late_hello is set must remove
 * a HELLO that arrives later (stk_nego_peek/consume) before the app's first read;
 * the preload does not use this blocking entry point, see stk_lazy.h), or -errno when the
 * kernel connection itself failed (EOF, reset) during the negotiation. */
#ifndef STK_CONN_H
#define STK_CONN_H

#include <stdbool.h>

#include "stack/stk_counters.h"
#include "stack/stk_fab.h"
#include "stack/stk_nego.h"
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

/* ---- building blocks of both negotiations (blocking above, lazy in stk_lazy.c) ---- */

/* Count a fallback, write its reason to info, log it once per counter (P4).
 * Returns STK_ATTACH_KERNEL. */
__attribute__((format(printf, 4, 5)))
int stk_conn_fall_back(struct stk_attach_info *info, enum stk_counter counter, int fd,
		       const char *fmt, ...);
void stk_conn_count_accel(const char *prov);
size_t stk_conn_window(void);
/* Load libfabric and open every configured provider that is not per-address
 * now (results cached by stk_fab_get): loading libfabric costs ~0.2 s the
 * first time, better spent before a HELLO waits. The per-address ones (tcp)
 * open when a connection offers or chooses them (stk_fab.h). */
void stk_conn_open_providers(void);
/* Server: the HELLO for conn (fabs[i] is the endpoint of hello->prov[i]). */
void stk_conn_build_hello(struct stk_conn *conn, const struct sockaddr *local,
			  struct stk_nego_msg *hello, struct stk_fab *fabs[STK_NEGO_PROV_MAX]);
/* Client: decide on the first record the server sent (decoded: stk_nego_decode's
 * code for it, -EPROTO for bytes that are not ours). 0: conn is connected to the
 * chosen provider and *reply is the ACCEPT to send; STK_ATTACH_KERNEL: fallback
 * counted, *reply is the REJECT to send (type REPLY) or nothing (type 0). Updates
 * the destination cache. */
int stk_conn_answer_hello(struct stk_conn *conn, int decoded, const struct stk_nego_msg *hello,
			  const struct sockaddr *peer, const struct sockaddr *local,
			  struct stk_nego_msg *reply, struct stk_attach_info *info);
/* Server: decide on the client's first record (decoded as above; peer: the
 * kernel connection's peer, for stk_peer_check). 0: conn is connected (its
 * first fabric message goes only after the client's, stk_conn_handshake_step);
 * STK_ATTACH_KERNEL: fallback counted, and when *cancel the client is waiting
 * for our decision: send a CANCEL. Both HELLO and REPLY fields reach libfabric
 * only through stk_peer_check(). */
int stk_conn_take_reply(struct stk_conn *conn, int decoded, const struct stk_nego_msg *reply,
			const struct stk_nego_msg *hello, struct stk_fab *const fabs[],
			const struct sockaddr *peer, bool *cancel, struct stk_attach_info *info);
/* An ACK or CANCEL record. */
void stk_conn_make_decision(struct stk_nego_msg *msg, uint16_t type, uint16_t status);

#endif
