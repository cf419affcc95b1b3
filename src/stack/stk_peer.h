/* stk_peer: what a peer said in the negotiation, checked before anything of
 * ours acts on it. The ONE place where a peer-supplied provider name, fabric
 * address, slot, connection id or credit reaches a decision: stk_conn.c hands
 * nothing from a HELLO or a REPLY to libfabric (fi_av_insert) or to the stream
 * layer (stk_conn_connect) that stk_peer_check() did not accept.
 *
 * The rules, per address format of the chosen provider (fi_info addr_format):
 *  - FI_SOCKADDR_IN / _IN6 (and FI_SOCKADDR with either family): exactly the
 *    size of the struct, the family of the format, a port, no bits in the
 *    padding (sin_zero, sin6_flowinfo), so that one peer has one byte form (the
 *    endpoint's AV cache dedups by bytes). For a provider that reaches peers
 *    through the kernel's own IP stack (every one but our dpdk, whose address
 *    lives on its own device), the IP must be the kernel connection's peer IP,
 *    or, when that peer is on this host (a loopback address), an address of
 *    this host: the server never connects to a third host on a client's word.
 *  - FI_ADDR_STR (shm): a NUL-terminated printable string filling len exactly;
 *    for shm, "fi_shm://" then digits and ':' only, and the message's boot id
 *    and network namespace must be ours (shm names a region of this kernel).
 *  - any other format: refused (no provider we open uses one).
 * Message fields: a provider name of [a-z0-9_;] only, conn_id != 0, slot below
 * STK_CONN_MAX, credits of at least 4096 bytes.
 * What the server may send to an address that passed: nothing before the
 * client's own first fabric message (right slot and connection id) arrived
 * (stk_nego.h rule 5, stk_conn_handshake_step).
 *
 * Pure functions (no lock, no allocation; stk_peer_ip_is_local makes one
 * socket+bind probe). Errors: -EINVAL with *why a static string saying which
 * rule failed (for the info-level log line). */
#ifndef STK_PEER_H
#define STK_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "stack/stk_nego.h"

/* The address prov (cfg name, e.g. "shm", "tcp", "dpdk") gave for itself,
 * in the provider's addr_format. kernel_peer: the kernel connection's peer
 * (getpeername), or NULL to skip the IP rule (tests). */
int stk_peer_addr_check(const char *prov, uint32_t addr_format, const uint8_t *addr,
			size_t len, const struct sockaddr *kernel_peer, const char **why);

/* The whole offer: msg is the peer's HELLO or REPLY, prov one of its
 * providers (the one we chose, or the one it chose). */
int stk_peer_check(const struct stk_nego_msg *msg, const struct stk_nego_prov *prov,
		   uint32_t addr_format, const struct sockaddr *kernel_peer, const char **why);

#endif
