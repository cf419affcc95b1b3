/* stk_log: one-line diagnostics to stderr or FABSOCK_LOG_FILE, never stdout.
 *
 * Every line is "fabsock[pid]: <level>: <message>\n", written with a single
 * write() through stk_sys so it is atomic with respect to other writers and
 * never re-enters the interposition layer. Safe from any thread; no allocation. */
#ifndef STK_LOG_H
#define STK_LOG_H

enum stk_log_level {
	STK_LOG_ERROR = 0,
	STK_LOG_WARN = 1,
	STK_LOG_INFO = 2,
	STK_LOG_DEBUG = 3,
};

extern int stk_log_level; /* current threshold; written at start-up only */

/* Route log lines to fd (default 2). The fd is owned by the caller. */
void stk_log_set_fd(int fd);
int stk_log_get_fd(void);

/* Log to the file at path (appending). The library owns that fd: it is kept
 * high and close-on-exec, and because applications close fds behind our back
 * (closefrom(3), close_range, fclose(fdopen(fd))) and reuse the numbers, its
 * identity is checked before each line and the file reopened when the number
 * now belongs to something else: a log line never lands in an app's file.
 * Returns 0 or -errno. */
int stk_log_open_file(const char *path);

/* The calling thread is one of the library's own: it never reopens the log
 * file (an open() takes the lowest free fd number for a moment, which a
 * single-threaded app's next open() is owed). Its lines wait for an app
 * thread's next line or for stk_log_flush. */
void stk_log_thread_internal(void);

/* Write lines still waiting for the log file (end of process). */
void stk_log_flush(void);

/* fork: no other thread is half-way through a line (taken last: any holder of
 * the stack's other locks may log). */
void stk_log_atfork_prepare(void);
void stk_log_atfork_parent(void);
void stk_log_atfork_child(void);

void stk_log(enum stk_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parse "error|warn|info|debug" (case-insensitive); -1 when unknown. */
int stk_log_level_parse(const char *name);
const char *stk_log_level_name(int level);

#define STK_LOG_AT(lvl, ...) \
	do { \
		if ((lvl) <= stk_log_level) \
			stk_log((lvl), __VA_ARGS__); \
	} while (0)
#define STK_ERR(...) STK_LOG_AT(STK_LOG_ERROR, __VA_ARGS__)
#define STK_WARN(...) STK_LOG_AT(STK_LOG_WARN, __VA_ARGS__)
#define STK_INFO(...) STK_LOG_AT(STK_LOG_INFO, __VA_ARGS__)
#define STK_DBG(...) STK_LOG_AT(STK_LOG_DEBUG, __VA_ARGS__)

#endif
