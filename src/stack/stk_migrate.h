/* stk_migrate: moving accelerated connections back to their kernel socket,
 * mid-stream and exactly, so that fork, exec and fd passing behave as with the
 * kernel.
 *
 * Protocol (both directions, on top of stk_stream's wire):
 *  - A side migrates by sending MIGRATE on the fabric after its last fabric data
 *    (a control message: no credit needed) and writes on the kernel connection
 *    from then on. It sends nothing more on the fabric (no CREDIT either).
 *  - A side keeps taking fabric data into its ring until the peer's MIGRATE, then
 *    reads the ring and after it the kernel connection. The kernel connection is
 *    never read before the peer's MIGRATE arrived, so order is kept.
 *  - A side that receives MIGRATE answers with its own at once (from the
 *    delivery, or from the next progress of any call when the provider was
 *    full). Simultaneous MIGRATEs need nothing special: each side's MIGRATE is
 *    the answer to the other's.
 *  - A peer that closed completely (FIN|CLOSE received) or reset never answers;
 *    its kernel socket tells the rest (EOF/RST). Its FIN|CLOSE or RST arriving
 *    after our MIGRATE left counts as its answer (it closed meanwhile).
 *  - Once both MIGRATEs passed, the bytes the app has not read yet move from the
 *    ring to a leftover buffer in a MAP_SHARED mapping with a process-shared
 *    lock: after a fork, whichever process reads first takes them, exactly once
 *    (as from a kernel receive queue). When the leftover is empty the connection
 *    is a plain kernel socket (conn->kernel_only): the preload stops routing it
 *    to the stack; readiness is the kernel's (plus POLLIN while leftover bytes
 *    remain).
 *
 *  - The answer does not depend on the peer's app: MIGRATE is preceded by a
 *    doorbell byte on the kernel connection (on every fabric), which wakes the
 *    peer's negotiation thread (it keeps watching the private fd of every conn
 *    on the fabric, stk_lazy.h); its progress delivers the MIGRATE and answers.
 *    So the migrating side waits for the answer without a deadline; only the
 *    peer's death ends the wait (its kernel connection ends: the bytes
 *    received before stay readable, then the kernel socket reports the end as
 *    it would for a dead kernel peer; counted in migrate_peer_gone). No byte
 *    the peer sends is ever dropped.
 *
 * Limits: a conn whose negotiation thread could not be started (logged at
 * start-up) is answered only from its app's calls. Leftover bytes cross an exec when
 * the new image runs libfabsock (the memfd and the fd are named in
 * FABSOCK_INHERIT, see stk_accel_adopt); not an SCM_RIGHTS transfer (they
 * stay readable through the sender's fd): counted in migrate_leftover_lost. */
#ifndef STK_MIGRATE_H
#define STK_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stack/stk_leftover.h"

struct stk_conn;

/* ---- whole-process operations ---- */
/* Migrate conns (n of them; NULL entries skipped): send every MIGRATE, then
 * drive progress until every peer answered or died. Returns the number of
 * peers that died first. */
unsigned stk_migrate_conns(struct stk_conn **conns, size_t n, enum stk_migrate_reason why);
/* Every accelerated connection of the process (before fork/daemon). */
unsigned stk_migrate_all(enum stk_migrate_reason why);

/* fork: register once (pthread_atfork) from the preload. prepare takes the
 * stack's locks (no other thread is inside them in the child); child abandons
 * the parent's fabric endpoints without touching them (new connections open
 * fresh ones), and makes every inherited connection a migrated one. */
void stk_migrate_atfork_prepare(void);
void stk_migrate_atfork_parent(void);
void stk_migrate_atfork_child(void);

#endif
