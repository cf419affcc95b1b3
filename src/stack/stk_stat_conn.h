/* stk_stat_conn: a connection's record in the statistics segment (stk_stat.h).
 *
 * The record is made when the socket layer adopts a connection
 * (stk_stat_conn_open), follows its state where the stream announces a
 * change (stk_conn_changed: negotiation settled; stk_migrate_note: migrated),
 * takes its I/O figures where the stream changes them anyway, under the
 * connection's lock (stk_stat_conn_io: stores only), and is freed with the
 * connection. conn->stat is NULL when the process has no segment or the
 * table was full. */
#ifndef STK_STAT_CONN_H
#define STK_STAT_CONN_H

#include "stack/stk_stat.h"
#include "stack/stk_stream.h"

/* The data path (conn->lock held). */
static inline void stk_stat_conn_io(struct stk_conn *conn)
{
	struct stk_stat_rec *rec = __atomic_load_n(&conn->stat, __ATOMIC_RELAXED);
	if (__builtin_expect(rec != NULL, 1))
		stk_stat_io(rec, conn->bytes_tx, conn->bytes_rx, conn->msgs_tx, conn->msgs_rx,
			    conn->ring_count, conn->tx_credits, conn->credit_owed);
}

/* A record for conn, whose application fd is app_fd. */
void stk_stat_conn_open(struct stk_conn *conn, int app_fd);
/* The conn's phase may have changed: its state (and a fallback's reason).
 * Takes conn->lock: never call it with that lock held. */
void stk_stat_conn_state(struct stk_conn *conn);
/* The conn finished migrating to its kernel socket, for why. */
void stk_stat_conn_migrated(struct stk_conn *conn, const char *why);
/* The conn is freed. */
void stk_stat_conn_close(struct stk_conn *conn);
/* fork child, after the stack's other child handlers (and with the counters'
 * mirror removed before them): the child's own segment, and every
 * connection's record moved into it. */
void stk_stat_conn_atfork_child(void);

#endif
