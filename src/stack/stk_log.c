#include "config.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

int stk_log_level = STK_LOG_WARN;
static int log_fd = 2;

/* The log file we own (stk_log_open_file), and its identity. */
static struct {
	char path[256];
	dev_t dev;
	ino_t ino;
	bool open;
} log_file;
static pthread_mutex_t log_file_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void stk_log_set_fd(int fd)
{
	log_fd = fd;
	log_file.open = false;
}

/* Open path and move the fd near the top of the fd space, out of the way of the
 * low numbers applications count on. A log the library creates is its user's
 * alone (0600: it names peers, addresses and ports); an existing file keeps
 * its mode. */
static int open_high(const char *path, struct stat *st)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 64) {
		int low = (int)(rl.rlim_cur > 4096 ? 4096 : rl.rlim_cur) - 32;
		int high = stk_sys.fcntl(fd, F_DUPFD_CLOEXEC, low);
		if (high >= 0) {
			stk_sys.close(fd);
			fd = high;
		}
	}
	if (fstat(fd, st) != 0) {
		int err = -errno;
		stk_sys.close(fd);
		return err;
	}
	return fd;
}

int stk_log_open_file(const char *path)
{
	struct stat st;
	if (strlen(path) >= sizeof(log_file.path))
		return -ENAMETOOLONG;
	int fd = open_high(path, &st);
	if (fd < 0)
		return fd;
	snprintf(log_file.path, sizeof(log_file.path), "%s", path);
	log_file.dev = st.st_dev;
	log_file.ino = st.st_ino;
	log_file.open = true;
	log_fd = fd;
	return 0;
}

/* Lines logged by the library's own threads (negotiation, cork flusher) while
 * the log file is closed behind our back (closefrom(3) in a daemon): an open()
 * there would take the lowest free number for a moment, the one the app's
 * next open() is owed. They wait here, and the next line logged by an app
 * thread (inside a call the app made, where a moment's fd is invisible) or the
 * end of the process reopens the file and writes them first. */
static struct {
	char buf[16384];
	size_t len;
	unsigned long dropped;
} pending;
static __thread bool thread_internal;

void stk_log_thread_internal(void)
{
	thread_internal = true;
}

/* log_file_lock held. Our log file's fd if the number still names it, else the
 * file reopened (not from an internal thread: -1). */
static int file_fd_locked(bool may_open)
{
	struct stat st;
	int fd = log_fd;
	if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == log_file.dev &&
	    st.st_ino == log_file.ino)
		return fd;
	/* Closed, or the number is someone else's now: do not touch it. */
	log_fd = -1;
	if (!may_open)
		return -1;
	fd = open_high(log_file.path, &st);
	if (fd >= 0) {
		log_file.dev = st.st_dev;
		log_file.ino = st.st_ino;
		log_fd = fd;
	}
	return fd;
}

static void queue_locked(const char *line, size_t len)
{
	if (pending.len + len > sizeof(pending.buf)) {
		pending.dropped++;
		return;
	}
	memcpy(pending.buf + pending.len, line, len);
	pending.len += len;
}

/* log_file_lock held, fd is the log file: the waiting lines go first. */
static void flush_pending_locked(int fd)
{
	if (pending.len) {
		ssize_t ret = stk_sys.write(fd, pending.buf, pending.len);
		(void)ret;
		pending.len = 0;
	}
	if (pending.dropped) {
		char note[128];
		int n = snprintf(note, sizeof(note),
				 "fabsock[%d]: warn: %lu log lines lost while the log file "
				 "was closed\n", (int)getpid(), pending.dropped);
		ssize_t ret = stk_sys.write(fd, note, (size_t)n);
		(void)ret;
		pending.dropped = 0;
	}
}

static void write_line(const char *line, size_t len)
{
	if (!log_file.open) {
		if (log_fd >= 0) {
			ssize_t ret = stk_sys.write(log_fd, line, len);
			(void)ret; /* nowhere left to report a failed log write */
		}
		return;
	}
	pthread_mutex_lock(&log_file_lock);
	int fd = file_fd_locked(!thread_internal);
	if (fd < 0) {
		if (thread_internal)
			queue_locked(line, len);
	} else {
		flush_pending_locked(fd);
		ssize_t ret = stk_sys.write(fd, line, len);
		(void)ret;
	}
	pthread_mutex_unlock(&log_file_lock);
}

void stk_log_flush(void)
{
	if (!log_file.open || thread_internal)
		return;
	pthread_mutex_lock(&log_file_lock);
	if (pending.len || pending.dropped) {
		int fd = file_fd_locked(true);
		if (fd >= 0)
			flush_pending_locked(fd);
	}
	pthread_mutex_unlock(&log_file_lock);
}

int stk_log_get_fd(void)
{
	return log_fd;
}

int stk_log_level_parse(const char *name)
{
	for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

const char *stk_log_level_name(int level)
{
	if (level < 0 || level > STK_LOG_DEBUG)
		return "?";
	return level_names[level];
}

void stk_log(enum stk_log_level level, const char *fmt, ...)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "fabsock[%d]: %s: ", (int)getpid(),
			 stk_log_level_name((int)level));
	if (n < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	size_t len = (size_t)n + (size_t)m;
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2; /* truncated: keep the newline */
	line[len++] = '\n';
	write_line(line, len);
}

void stk_log_atfork_prepare(void)
{
	pthread_mutex_lock(&log_file_lock);
}

void stk_log_atfork_parent(void)
{
	pthread_mutex_unlock(&log_file_lock);
}

void stk_log_atfork_child(void)
{
	pthread_mutex_init(&log_file_lock, NULL);
}
