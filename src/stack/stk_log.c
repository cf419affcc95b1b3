#include "config.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

int stk_log_level = STK_LOG_WARN;
static int log_fd = 2;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void stk_log_set_fd(int fd)
{
	log_fd = fd;
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
	ssize_t ret = stk_sys.write(log_fd, line, len);
	(void)ret; /* nowhere left to report a failed log write */
}
