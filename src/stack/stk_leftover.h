/* stk_leftover: the unread bytes of a connection that left the fabric
 * (stk_migrate.h), in a buffer that a fork shares (whichever process reads
 * first takes them, exactly once) and an exec can hand down (its memfd); and
 * why connections leave the fabric. */
#ifndef STK_LEFTOVER_H
#define STK_LEFTOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why a connection on the fabric moves to its kernel socket. */
enum stk_migrate_reason {
	STK_MIGRATE_REASON_FORK,
	STK_MIGRATE_REASON_EXEC,
	STK_MIGRATE_REASON_PASS,
	STK_MIGRATE_REASON_PEER,
	STK_MIGRATE_REASON_BYPASS, /* the app's next calls go around libfabsock */
	STK_MIGRATE_REASON_ZEROCOPY, /* SO_ZEROCOPY: completions come from the kernel */
	STK_MIGRATE_REASON_SENDFILE, /* a large sendfile: the kernel's copies fewer */
};

/* ---- leftover: unread bytes at migration, shareable across fork ---- */
struct stk_leftover;
/* A copy of count bytes of ring (size bytes, first at head). NULL when count
 * is 0. Shared memory when possible (a memfd, returned in *fd_out, close-on-
 * exec, or -1 when anonymous), else private (logged). */
struct stk_leftover *stk_leftover_new(const uint8_t *ring, size_t size, size_t head,
				      size_t count, int *fd_out);
/* Map the leftover of a memfd handed down through an exec (stk_accel_adopt);
 * NULL when it is not one. The caller may close memfd afterwards. */
struct stk_leftover *stk_leftover_open(int memfd);
/* Take (or peek) up to len bytes; returns how many. */
size_t stk_leftover_take(struct stk_leftover *left, void *dst, size_t len, bool peek);
size_t stk_leftover_count(struct stk_leftover *left);
void stk_leftover_free(struct stk_leftover *left);

#endif
