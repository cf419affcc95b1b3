/* stk_counters: per-process event counters (relaxed atomics, slow paths only).
 * Readable by tests through fsk_counter() and dumped at exit with FABSOCK_LOG=info. */
#ifndef STK_COUNTERS_H
#define STK_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

#define STK_COUNTER_LIST(X) \
	X(SOCKETS_TRACKED, "sockets_tracked", "TCP/UDP sockets seen at creation") \
	X(KERNEL_BY_RULE, "kernel_by_rule", "sockets a rule sent to the kernel") \
	X(KERNEL_BY_DEFAULT, "kernel_by_default", "sockets the default sent to the kernel") \
	X(ACCEL_REQUESTED, "accel_requested", "sockets a rule or the default chose to accelerate") \
	X(FALLBACK_NO_TRANSPORT, "fallback_no_transport", \
	  "accelerations refused: no accelerated transport for this socket type yet") \
	X(ACCELERATED, "accelerated", "sockets running on a fabric provider") \
	X(FAB_OPEN_FAILED, "fab_open_failed", "fabric providers that failed to open") \
	X(FAB_CQ_ERRORS, "fab_cq_errors", "fabric completion errors") \
	X(FAB_STRAY_MSGS, "fab_stray_msgs", "fabric messages for no live connection (dropped)") \
	X(CONN_ACCEL_SHM, "conn_accel_shm", "TCP connections accelerated over shm") \
	X(CONN_ACCEL_TCP, "conn_accel_tcp", "TCP connections accelerated over tcp") \
	X(CONN_ACCEL_DPDK, "conn_accel_dpdk", "TCP connections accelerated over dpdk") \
	X(CONN_ACCEL_OTHER, "conn_accel_other", "TCP connections accelerated over another provider") \
	X(FALLBACK_PLAIN_PEER, "fallback_plain_peer", "kernel: the peer is not libfabsock") \
	X(FALLBACK_TIMEOUT, "fallback_timeout", "kernel: no hello from the server in time") \
	X(FALLBACK_NO_COMMON, "fallback_no_common", "kernel: no common provider") \
	X(FALLBACK_VERSION, "fallback_version", "kernel: peer speaks another protocol version") \
	X(FALLBACK_PROV_INIT, "fallback_prov_init", "kernel: provider init or address failure") \
	X(FALLBACK_GARBAGE, "fallback_garbage", "kernel: malformed negotiation message") \
	X(FALLBACK_IO, "fallback_io", "kernel: the kernel connection failed during negotiation") \
	X(FALLBACK_STDIO, "fallback_stdio", \
	  "kernel: while negotiating, the app used the socket where libfabsock cannot follow (stdio, aio, exec, fd passing, SO_ZEROCOPY)") \
	X(FALLBACK_ZEROCOPY, "fallback_zerocopy", \
	  "kernel: the app turned SO_ZEROCOPY on before the connection was accelerated") \
	X(NEGO_RECORDS_STRIPPED, "nego_records_stripped", \
	  "late negotiation records removed from a stream that went to the kernel") \
	X(FALLBACK_NO_FD, "fallback_no_fd", "kernel: no free fd for the liveness channel") \
	X(CONN_RESETS, "conn_resets", "accelerated connections reset (RST, peer death, protocol)") \
	X(BYTES_TX_SHM, "bytes_tx_shm", "payload bytes sent over shm") \
	X(BYTES_RX_SHM, "bytes_rx_shm", "payload bytes received over shm") \
	X(BYTES_TX_TCP, "bytes_tx_tcp", "payload bytes sent over tcp") \
	X(BYTES_RX_TCP, "bytes_rx_tcp", "payload bytes received over tcp") \
	X(BYTES_TX_DPDK, "bytes_tx_dpdk", "payload bytes sent over dpdk") \
	X(BYTES_RX_DPDK, "bytes_rx_dpdk", "payload bytes received over dpdk") \
	X(UDP_ACCEL_DPDK, "udp_accel_dpdk", "UDP sockets accelerated over dpdk (raw UDP endpoint)") \
	X(DATAGRAMS_TX_DPDK, "datagrams_tx_dpdk", "UDP datagrams sent through the dpdk port") \
	X(DATAGRAMS_RX_DPDK, "datagrams_rx_dpdk", "UDP datagrams received through the dpdk port") \
	X(UDP_KERNEL_RX, "udp_kernel_rx", \
	  "datagrams an accelerated UDP socket read from its kernel socket") \
	X(UDP_KERNEL_TX, "udp_kernel_tx", \
	  "datagrams an accelerated UDP socket sent through its kernel socket (off the port's subnet, too large)") \
	X(MSGS_TX, "msgs_tx", "fabric messages sent") \
	X(MSGS_RX, "msgs_rx", "fabric messages received") \
	X(SLEEP_LATE_WAKES, "sleep_late_wakes", \
	  "sleeps on accelerated sockets that ended at their safety cap with the socket ready") \
	X(DOORBELLS, "doorbells", \
	  "wake-ups of a peer asleep in the kernel (fabrics without a wait fd: shm)") \
	X(BELLS, "bells", \
	  "wake-ups of a peer process asleep on its shm endpoint (one pipe write each)") \
	X(MIGRATED_TO_KERNEL, "migrated_to_kernel", \
	  "accelerated connections moved to their kernel socket (fork, exec, fd passing, peer)") \
	X(MIGRATE_FORK, "migrate_fork", "connections migrated because the process forked") \
	X(MIGRATE_EXEC, "migrate_exec", "connections migrated because they survive an exec") \
	X(MIGRATE_PASS, "migrate_pass", "connections migrated because they were sent (SCM_RIGHTS)") \
	X(MIGRATE_PEER, "migrate_peer", "connections migrated because the peer asked") \
	X(MIGRATE_BYPASS, "migrate_bypass", "connections migrated because the app used stdio or aio on them") \
	X(MIGRATE_ZEROCOPY, "migrate_zerocopy", "connections migrated because the app turned SO_ZEROCOPY on") \
	X(MIGRATE_SENDFILE, "migrate_sendfile", "connections migrated for a sendfile of FABSOCK_SENDFILE_KERNEL bytes or more") \
	X(MIGRATE_PEER_GONE, "migrate_peer_gone", \
	  "migrations that ended without the peer's answer: its process died (a reset)") \
	X(MIGRATE_UNPREPARED, "migrate_unprepared", \
	  "connections a child inherited without migration (created during the fork)") \
	X(MIGRATE_LEFTOVER_LOST, "migrate_leftover_lost", \
	  "unread bytes of a migrated connection that an exec or fd passing left behind")

#define STK_COUNTER_ENUM(id, name, help) STK_C_##id,
enum stk_counter { STK_COUNTER_LIST(STK_COUNTER_ENUM) STK_C_COUNT };
#undef STK_COUNTER_ENUM

extern uint64_t stk_counters[STK_C_COUNT];
/* Where every count is added too, or NULL (atomic): the statistics
 * segment's copy (stk_stat.h), installed by stk_counters_set_mirror. */
extern uint64_t *stk_counters_mirror;

static inline void stk_count_add(enum stk_counter c, uint64_t n)
{
	__atomic_fetch_add(&stk_counters[c], n, __ATOMIC_RELAXED);
	uint64_t *mirror = __atomic_load_n(&stk_counters_mirror, __ATOMIC_RELAXED);
	if (mirror)
		__atomic_fetch_add(&mirror[c], n, __ATOMIC_RELAXED);
}

static inline void stk_count(enum stk_counter c)
{
	stk_count_add(c, 1);
}

/* Install (or remove: NULL) the mirror; it holds the counts so far. */
void stk_counters_set_mirror(uint64_t *mirror);

/* Adds to out[] what live objects hold but have not folded into stk_counters
 * yet (the stream's per-connection byte and message counts, folded at close):
 * readers of the counters then account for every byte even while connections
 * are open, or when the process exits without closing them. */
typedef void stk_counters_live_fn(uint64_t out[STK_C_COUNT]);
void stk_counters_set_live(stk_counters_live_fn *fn);

/* The per-provider counters of cfg provider name prov (conn_accel_<prov>,
 * bytes_tx_<prov>, bytes_rx_<prov>); false for a provider without its own
 * (then only conn_accel_other and the totals count it). */
struct stk_prov_counters {
	enum stk_counter conn, tx, rx;
};
bool stk_counters_of_prov(const char *prov, struct stk_prov_counters *out);

/* Value of the counter called name (live objects included); -1 if there is none. */
int stk_counter_get(const char *name, uint64_t *value);
/* One info line per non-zero counter (live objects included). */
void stk_counters_log(void);

#endif
