/* A connection's record in the statistics segment (stk_stat_conn.h). */
#include "config.h"
#include "stack/stk_stat_conn.h"
#include "stack/stk_fab.h"

void stk_stat_conn_open(struct stk_conn *conn, int app_fd)
{
	stk_stat_start();
	struct stk_stat_rec *rec = stk_stat_rec_new(app_fd);
	__atomic_store_n(&conn->stat, rec, __ATOMIC_RELEASE);
	stk_stat_conn_state(conn); /* it may have settled already */
}

void stk_stat_conn_state(struct stk_conn *conn)
{
	struct stk_stat_rec *rec = __atomic_load_n(&conn->stat, __ATOMIC_ACQUIRE);
	if (!rec || __atomic_load_n(&conn->migrated, __ATOMIC_ACQUIRE))
		return; /* a migrated one keeps its reason (stk_stat_conn_migrated) */
	int fd = __atomic_load_n(&conn->fd, __ATOMIC_ACQUIRE);
	stk_stat_rec_fill_remote(rec, fd); /* a connect that was in progress */
	switch (__atomic_load_n(&conn->phase, __ATOMIC_ACQUIRE)) {
	case STK_PHASE_FABRIC: {
		const struct stk_fab *fab = __atomic_load_n(&conn->fab, __ATOMIC_ACQUIRE);
		/* the peer's grant before any data (a credit already back makes it
		 * larger); never called under conn->lock (stk_conn_changed's callers) */
		pthread_mutex_lock(&conn->lock);
		if (!rec->tx_window)
			__atomic_store_n(&rec->tx_window, conn->tx_credits + conn->bytes_tx,
					 __ATOMIC_RELAXED);
		stk_stat_conn_io(conn);
		pthread_mutex_unlock(&conn->lock);
		stk_stat_rec_set(rec, STK_STAT_FABRIC, fab ? stk_fab_name(fab) : "", "");
		break;
	}
	case STK_PHASE_PENDING:
		stk_stat_rec_set(rec, STK_STAT_NEGOTIATING, NULL, NULL);
		break;
	default: { /* KERNEL, or STRIP: on the way there */
		const char *why = stk_stat_take_fallback();
		stk_stat_rec_set(rec, STK_STAT_KERNEL, NULL, why[0] ? why : NULL);
		break;
	}
	}
}

void stk_stat_conn_migrated(struct stk_conn *conn, const char *why)
{
	struct stk_stat_rec *rec = __atomic_load_n(&conn->stat, __ATOMIC_ACQUIRE);
	if (rec)
		stk_stat_rec_set(rec, STK_STAT_MIGRATED, NULL, why);
}

void stk_stat_conn_close(struct stk_conn *conn)
{
	struct stk_stat_rec *rec = __atomic_exchange_n(&conn->stat, NULL, __ATOMIC_ACQ_REL);
	stk_stat_rec_free(rec);
}

void stk_stat_conn_atfork_child(void)
{
	stk_stat_atfork_child();
	for (uint32_t slot = 0; slot < STK_CONN_MAX; slot++) {
		struct stk_conn *conn = stk_conn_at(slot);
		if (!conn || !conn->stat)
			continue;
		conn->stat = stk_stat_rebase(conn->stat);
		/* the child's figures start at zero, as its conn's statistics */
		if (conn->stat) {
			stk_stat_io(conn->stat, 0, 0, 0, 0, 0, 0, 0);
			conn->stat->tx_window = 0;
		}
	}
	stk_stat_rebase_done();
}
