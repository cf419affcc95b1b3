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
 * low numbers applications count on. */
static int open_high(const char *path, struct stat *st)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
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

/* The fd to write to: our log file if the number still names it, else the file
 * reopened; never an fd the application has taken over. -1: nowhere to log. */
static int current_log_fd(void)
{
	if (!log_file.open)
		return log_fd;
	pthread_mutex_lock(&log_file_lock);
	struct stat st;
	int fd = log_fd;
	if (fstat(fd, &st) != 0 || st.st_dev != log_file.dev || st.st_ino != log_file.ino) {
		/* Closed, or the number is someone else's now: do not touch it. */
		fd = open_high(log_file.path, &st);
		if (fd >= 0) {
			log_file.dev = st.st_dev;
			log_file.ino = st.st_ino;
			log_fd = fd;
		}
	}
	pthread_mutex_unlock(&log_file_lock);
	return fd;
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
	int fd = current_log_fd();
	if (fd < 0)
		return;
	ssize_t ret = stk_sys.write(fd, line, len);
	(void)ret; /* nowhere left to report a failed log write */
}
