/* stk_wake: per-thread wake-up channels for threads sleeping on connections.
 *
 * A thread that sleeps in the kernel (poll family, blocking recv/send) on
 * accelerated connections is woken by fds: the connection's doorbell on its
 * kernel connection, or the fabric's wait fd. Both are shared by every thread
 * of the process: another thread may consume the doorbell or drain the
 * completions that carried our data (it delivers them into the connection)
 * and nothing signals us again. So each sleeping thread links a node onto every
 * connection it sleeps on, and whoever changes that connection (a delivery in
 * any thread, a shutdown, a reset) rings the node: one datagram on the
 * thread's own channel, which is in the thread's ppoll set.
 *
 * The channel is an AF_UNIX datagram socket pair created on the thread's first
 * sleep (in the upper half of the fd space, close-on-exec), closed at thread
 * exit, made anew in a forked child and when the app closed it behind our back
 * (closefrom): both ends are checked by inode before use, so a number the app
 * reused is never written to. When it cannot be made, sleeps stay bounded by
 * STK_SLEEP_CAP_NS.
 *
 * Usage (sleeper, in this order):
 *   struct stk_wake_node node;
 *   if (stk_wake_prepare(&node)) { link node on the conns (under their lock),
 *       look at readiness once more, add stk_wake_fd(&node) to the ppoll set }
 *   ppoll(...);  unlink; stk_wake_drain(&node) if its fd was readable.
 * Ringer (with the connection's lock held, so the node stays linked):
 *   stk_wake_ring(node) for every linked node. */
#ifndef STK_WAKE_H
#define STK_WAKE_H

#include <stdbool.h>

struct stk_wake;

struct stk_wake_node {
	struct stk_wake_node *next;  /* the connection's list (its lock) */
	struct stk_wake *wake;       /* the sleeping thread's channel */
	bool rung;                   /* rung once since linked: enough */
};

/* This thread's channel, checked (and made anew when needed) into node, which
 * is not linked yet. False: no channel (the caller sleeps with a bounded
 * timeout, as without this mechanism). */
bool stk_wake_prepare(struct stk_wake_node *node);
/* The fd to add to the sleeper's ppoll set (POLLIN). */
int stk_wake_fd(const struct stk_wake_node *node);
/* Wake the node's thread (any thread; the node is linked and its list's lock
 * held). Once per linking: later calls return at once. */
void stk_wake_ring(struct stk_wake_node *node);
/* After the sleep (node unlinked): consume what rang. */
void stk_wake_drain(struct stk_wake_node *node);
/* fork (stk_migrate's child handler): the channels inherited are the
 * parent's; each thread makes its own at its next sleep. */
void stk_wake_atfork_child(void);

#endif
