/* stk_thread: the stack's own background threads (negotiation, cork flusher).
 *
 * They block every signal (the app's signals are for the app's threads), log
 * without ever reopening the log file (stk_log_thread_internal), and start
 * synchronously: stk_thread_start returns once the thread runs its function,
 * so its start-up (which allocates: thread state, TLS blocks) never overlaps a
 * fork() the app makes right after the call that started it (a child would
 * inherit an allocator lock held half-way, as ASan's allocator does). */
#ifndef STK_THREAD_H
#define STK_THREAD_H

#include <stddef.h>

/* Start fn(arg) in a detached thread with stack_size bytes of stack. Returns
 * 0 or an errno value (no thread). */
int stk_thread_start(void *(*fn)(void *), void *arg, size_t stack_size);

#endif
