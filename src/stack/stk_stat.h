/* stk_stat: the process's statistics segment, read by fabsock-stat(1).
 *
 * One file per process, /dev/shm/fsk-stat.<pid> (0600, the process's uid),
 * created when the process first tracks a socket (stk_stat_start), removed
 * at exit, replaced in a forked child by the child's own, reclaimed after a
 * kill by the next process of the user that creates one (and by the tool).
 * Layout: struct stk_stat_hdr, then STK_STAT_RECS records (docs/stat.md,
 * docs/wire.md "Statistics segment"); this header is the reference and the
 * tool includes it.
 *
 * Writers never wait for a reader: the reader maps the file read-only.
 * - counters: mirrored by stk_count (stk_counters.h), a relaxed add each;
 * - a record's identity (fd, addresses, state, provider, reason) changes on
 *   slow paths only, under its sequence number: odd while a writer changes
 *   it (writers take it by compare-and-swap: they exclude each other, never
 *   a reader), even when stable; a reader copies the record and retries a
 *   bounded number of times while seq is odd or moved;
 * - a record's I/O figures (stk_stat_io) are single relaxed stores made
 *   where the stream changes them anyway, under the connection's lock: each
 *   is exact, a set of them read together may be a message apart.
 * No system call, lock or allocation on the data path: stk_stat_io is a
 * NULL test and stores. Everything else here runs at socket creation,
 * decision, close, provider open, fork and exit. */
#ifndef STK_STAT_H
#define STK_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STK_STAT_DIR "/dev/shm"
#define STK_STAT_PREFIX "fsk-stat."
#define STK_STAT_MAGIC "fskstat1"  /* 8 bytes, no NUL */
#define STK_STAT_VERSION 1         /* bumped on any layout change */
#define STK_STAT_RECS 4096         /* sockets shown; more are counted in rec_overflow */
#define STK_STAT_COUNTERS_MAX 64
#define STK_STAT_NAME_LEN 32
#define STK_STAT_PROV_LEN 128
#define STK_STAT_REASON_LEN 96
#define STK_STAT_ADDR_LEN 28       /* a struct sockaddr_in6 */

/* A record's state (stk_stat_rec.state). */
enum stk_stat_state {
	STK_STAT_FREE = 0,
	STK_STAT_NEGOTIATING = 1, /* the negotiation has not decided yet */
	STK_STAT_FABRIC = 2,      /* accelerated on provider */
	STK_STAT_KERNEL = 3,      /* on the kernel; reason says why */
	STK_STAT_MIGRATED = 4,    /* was on the fabric, moved to the kernel; reason says why */
	STK_STAT_LISTENING = 5,   /* an accelerating listener */
};

struct stk_stat_hdr {
	uint64_t magic;           /* the bytes of STK_STAT_MAGIC, stored (release) last at creation */
	uint32_t version;         /* STK_STAT_VERSION */
	uint32_t hdr_size;        /* offset of the first record */
	uint32_t rec_size;        /* sizeof(struct stk_stat_rec) */
	uint32_t rec_max;         /* STK_STAT_RECS */
	uint32_t counter_count;   /* counters[] and counter_names[] used */
	uint32_t pid;
	uint64_t start_time;      /* field 22 of /proc/<pid>/stat: detects pid reuse */
	uint32_t uid;
	uint32_t prov_seq;        /* seqlock over providers (odd: being written) */
	char lib_version[32];     /* PACKAGE_VERSION */
	char providers[STK_STAT_PROV_LEN]; /* open providers, comma-separated */
	uint32_t rec_used;        /* atomic: records [0, rec_used) may be in use */
	uint32_t reserved;
	uint64_t rec_overflow;    /* atomic: sockets that found no free record */
	char counter_names[STK_STAT_COUNTERS_MAX][STK_STAT_NAME_LEN];
	uint64_t counters[STK_STAT_COUNTERS_MAX]; /* atomic; stk_counters' folded values */
};

/* One socket. The I/O figures are the stream's own (struct stk_conn): bytes
 * and messages each way on the fabric, rx_queue the receive ring's unread
 * bytes, tx_window the peer's initial grant (tx_window - tx_credits: sent or
 * staged bytes the peer has not granted back), tx_credits what the peer
 * accepts now, credit_owed bytes read but not granted back yet. */
struct stk_stat_rec {
	uint32_t used;            /* atomic: 0 free, 1 taken */
	uint32_t seq;             /* atomic: identity seqlock (see above) */
	int32_t fd;               /* the application's fd */
	uint8_t state;            /* enum stk_stat_state */
	uint8_t orphan;           /* a kernel socket the library no longer follows:
				   * valid while fd is still the socket ino */
	uint16_t reserved;
	uint64_t ino;             /* the socket's inode (socket:[ino]) */
	uint8_t local[STK_STAT_ADDR_LEN];  /* sockaddr_in/in6 or zeros (unknown) */
	uint8_t remote[STK_STAT_ADDR_LEN];
	char provider[16];
	char reason[STK_STAT_REASON_LEN];
	uint64_t bytes_tx, bytes_rx, msgs_tx, msgs_rx;
	uint64_t rx_queue, tx_window, tx_credits, credit_owed;
};

_Static_assert(sizeof(struct stk_stat_rec) == 256, "stat record layout");
/* copied by 8-byte words (fabsock-stat) */
_Static_assert(offsetof(struct stk_stat_hdr, providers) % 8 == 0, "stat header layout");

/* Offset of the records: the header rounded up to a cache-line multiple. */
#define STK_STAT_HDR_SIZE ((sizeof(struct stk_stat_hdr) + 63) & ~(size_t)63)
#define STK_STAT_SIZE (STK_STAT_HDR_SIZE + (size_t)STK_STAT_RECS * sizeof(struct stk_stat_rec))

/* ---- the library's side ---- */

/* Create the segment if the process has none (once; cheap afterwards). */
void stk_stat_start(void);
/* A record for fd (its inode and addresses filled in, state NEGOTIATING),
 * or NULL (no segment, or every record in use: counted). */
struct stk_stat_rec *stk_stat_rec_new(int fd);
void stk_stat_rec_free(struct stk_stat_rec *rec);
/* Set the identity: state, provider (NULL: keep), reason (NULL: keep; ""
 * clears). */
void stk_stat_rec_set(struct stk_stat_rec *rec, enum stk_stat_state state, const char *provider,
		      const char *reason);
/* The remote address was not known at creation (a connect in progress): read
 * it from fd now if it is still missing. */
void stk_stat_rec_fill_remote(struct stk_stat_rec *rec, int fd);
/* A socket the library does not follow to its close (one that stays on the
 * kernel, with why; a listener): an orphan record, shown while fd is still
 * that socket, freed when the table is full and it is not. */
void stk_stat_orphan(int fd, enum stk_stat_state state, const char *reason);

/* The latest fallback reason decided on this thread (stk_conn_fall_back):
 * noted, then taken (once) by the record whose connection settles on the
 * kernel in the same thread. */
void stk_stat_note_fallback(const char *reason);
const char *stk_stat_take_fallback(void);

/* A provider opened in this process (name: stk_cfg's spelling). */
void stk_stat_provider_open(const char *name);

/* fork child: the child's own segment, a copy of the parent's; records
 * pointers from the parent's segment must go through stk_stat_rebase. */
void stk_stat_atfork_child(void);
struct stk_stat_rec *stk_stat_rebase(struct stk_stat_rec *rec);
/* After every record pointer was rebased: unmap the parent's segment. */
void stk_stat_rebase_done(void);
/* exit, _exit: remove the file (the mapping stays for threads still running). */
void stk_stat_exit(void);

/* The data path: one record's I/O figures (relaxed stores, no fence). */
static inline void stk_stat_io(struct stk_stat_rec *rec, uint64_t bytes_tx, uint64_t bytes_rx,
			       uint64_t msgs_tx, uint64_t msgs_rx, uint64_t rx_queue,
			       uint64_t tx_credits, uint64_t credit_owed)
{
	__atomic_store_n(&rec->bytes_tx, bytes_tx, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->bytes_rx, bytes_rx, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->msgs_tx, msgs_tx, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->msgs_rx, msgs_rx, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->rx_queue, rx_queue, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->tx_credits, tx_credits, __ATOMIC_RELAXED);
	__atomic_store_n(&rec->credit_owed, credit_owed, __ATOMIC_RELAXED);
}

#endif
