#include "config.h"
#include "stack/stk_config.h"
#include "stack/stk_log.h"
#include "stack/stk_sys.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct stk_config stk_cfg;

#define DISABLED_SUFFIX "; libfabsock disabled, sockets use the kernel"
#define CONFIG_FILE_MAX (1u << 20)

static const struct {
	const char *name;
	enum stk_profile profile;
	unsigned spin_us, window_bytes, batch;
} profiles[] = {
	{ "balanced", STK_PROFILE_BALANCED, 50, 256 * 1024, 16 },
	{ "latency", STK_PROFILE_LATENCY, 1000, 256 * 1024, 4 },
	{ "throughput", STK_PROFILE_THROUGHPUT, 20, 1024 * 1024, 64 },
};
#define PROFILE_COUNT (sizeof(profiles) / sizeof(profiles[0]))

const char *stk_profile_name(enum stk_profile profile)
{
	for (size_t i = 0; i < PROFILE_COUNT; i++)
		if (profiles[i].profile == profile)
			return profiles[i].name;
	return "?";
}

static void apply_profile(struct stk_config *cfg, size_t index)
{
	cfg->profile = profiles[index].profile;
	cfg->spin_us = profiles[index].spin_us;
	cfg->window_bytes = profiles[index].window_bytes;
	cfg->batch = profiles[index].batch;
}

static void set_defaults(struct stk_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = true;
	cfg->tcp_accel = true;
	cfg->log_level = STK_LOG_WARN;
	snprintf(cfg->providers, sizeof(cfg->providers), "shm,dpdk,verbs,efa,tcp");
	apply_profile(cfg, 0);
	cfg->default_action = STK_ACTION_ACCEL;
	cfg->nego_wait_ms = 5; /* P3: the only delay an app sees, once per destination */
	cfg->sendfile_kernel = 64 * 1024;
	stk_rules_init(&cfg->rules);
}

/* One line naming the source (variable or file), the line and column of the
 * culprit, and what was expected. Environment values are one line long. */
__attribute__((format(printf, 4, 5)))
static int bad_value(struct stk_config *cfg, const char *source, size_t column,
		     const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	stk_log(STK_LOG_ERROR, "%s:1:%zu: %s" DISABLED_SUFFIX, source, column, msg);
	cfg->enabled = false;
	return -EINVAL;
}

static int parse_rules_text(struct stk_config *cfg, const char *text, const char *source)
{
	struct stk_parse_error err;
	int ret = stk_rules_parse(&cfg->rules, text, source, &err);
	if (ret == -EINVAL) {
		stk_log(STK_LOG_ERROR, "%s:%u:%u: %s" DISABLED_SUFFIX, err.source, err.line,
			err.column, err.message);
		cfg->enabled = false;
		return ret;
	}
	if (ret)
		return bad_value(cfg, source, 1, "out of memory parsing rules");
	return 0;
}

static int load_rules_file(struct stk_config *cfg, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return bad_value(cfg, "FABSOCK_CONFIG", 1, "cannot open '%s': %s", path,
				 strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > CONFIG_FILE_MAX) {
		stk_sys.close(fd);
		return bad_value(cfg, "FABSOCK_CONFIG", 1, "'%s' is not a regular file under %u bytes",
				 path, CONFIG_FILE_MAX);
	}
	char *text = malloc((size_t)st.st_size + 1);
	if (!text) {
		stk_sys.close(fd);
		return bad_value(cfg, "FABSOCK_CONFIG", 1, "out of memory reading '%s'", path);
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = stk_sys.read(fd, text + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	stk_sys.close(fd);
	text[got] = '\0';
	if (strlen(text) != got) {
		free(text);
		return bad_value(cfg, "FABSOCK_CONFIG", 1, "'%s' contains a NUL byte", path);
	}
	int ret = parse_rules_text(cfg, text, path);
	free(text);
	return ret;
}

static int parse_unsigned(struct stk_config *cfg, const char *name, const char *value,
			  unsigned max, unsigned *out)
{
	size_t digits = strspn(value, "0123456789");
	if (digits == 0 || value[digits] != '\0')
		return bad_value(cfg, name, digits + 1, "expected an unsigned integer, got '%s'",
				 value);
	errno = 0;
	unsigned long long v = strtoull(value, NULL, 10);
	if (errno == ERANGE || v > max) {
		stk_log(STK_LOG_WARN, "%s: %s is above the maximum, clamped to %u", name, value,
			max);
		v = max;
	}
	*out = (unsigned)v;
	return 0;
}

/* Comma-separated libfabric provider names: [a-z0-9_;-]+ each, none empty. */
static int parse_providers(struct stk_config *cfg, const char *name, const char *value)
{
	size_t len = strlen(value);
	if (len == 0 || len >= sizeof(cfg->providers))
		return bad_value(cfg, name, 1,
				 "expected a comma-separated list of providers, got '%s'", value);
	bool item_empty = true;
	for (size_t i = 0; i <= len; i++) {
		char ch = value[i];
		if (ch == ',' || ch == '\0') {
			if (item_empty)
				return bad_value(cfg, name, i + 1, "empty provider name in '%s'",
						 value);
			item_empty = true;
		} else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
			   ch == ';' || ch == '-') {
			item_empty = false;
		} else {
			return bad_value(cfg, name, i + 1,
					 "unexpected '%c' in '%s' (expected provider names like "
					 "shm,dpdk,tcp)", ch, value);
		}
	}
	memcpy(cfg->providers, value, len + 1);
	cfg->providers_chosen = true;
	return 0;
}

static int load_env(struct stk_config *cfg, stk_getenv_fn env)
{
	const char *v;
	int ret;

	if ((v = env("FABSOCK_LOG"))) {
		int level = stk_log_level_parse(v);
		if (level < 0)
			return bad_value(cfg, "FABSOCK_LOG", 1,
					 "expected error|warn|info|debug, got '%s'", v);
		cfg->log_level = level;
		stk_log_level = level;
	}
	if ((v = env("FABSOCK_LOG_FILE")) && v[0]) {
		if (strlen(v) >= sizeof(cfg->log_file))
			return bad_value(cfg, "FABSOCK_LOG_FILE", sizeof(cfg->log_file),
					 "path longer than %zu bytes", sizeof(cfg->log_file) - 1);
		int err = stk_log_open_file(v);
		if (err < 0)
			return bad_value(cfg, "FABSOCK_LOG_FILE", 1, "cannot open '%s': %s", v,
					 strerror(-err));
		snprintf(cfg->log_file, sizeof(cfg->log_file), "%s", v);
	}
	if ((v = env("FABSOCK_PROFILE"))) {
		size_t i;
		for (i = 0; i < PROFILE_COUNT; i++)
			if (strcmp(v, profiles[i].name) == 0)
				break;
		if (i == PROFILE_COUNT)
			return bad_value(cfg, "FABSOCK_PROFILE", 1,
					 "expected latency|throughput|balanced, got '%s'", v);
		apply_profile(cfg, i);
	}
	if ((v = env("FABSOCK_SPIN_US")) &&
	    (ret = parse_unsigned(cfg, "FABSOCK_SPIN_US", v, STK_SPIN_US_MAX, &cfg->spin_us)))
		return ret;
	if ((v = env("FABSOCK_PROVIDERS")) && (ret = parse_providers(cfg, "FABSOCK_PROVIDERS", v)))
		return ret;
	if (!env("FABSOCK_PROVIDERS") && (v = env("FABSOCK_PROVIDER")) &&
	    (ret = parse_providers(cfg, "FABSOCK_PROVIDER", v)))
		return ret;
	if ((v = env("FABSOCK_APPLICATION_ID"))) {
		if (strlen(v) >= sizeof(cfg->application_id))
			return bad_value(cfg, "FABSOCK_APPLICATION_ID", sizeof(cfg->application_id),
					 "longer than %zu characters", sizeof(cfg->application_id) - 1);
		snprintf(cfg->application_id, sizeof(cfg->application_id), "%s", v);
	}
	if ((v = env("FABSOCK_RULES")) && (ret = parse_rules_text(cfg, v, "FABSOCK_RULES")))
		return ret;
	if ((v = env("FABSOCK_CONFIG")) && v[0] && (ret = load_rules_file(cfg, v)))
		return ret;
	/* A default statement in the rules applies unless the variable overrides it. */
	if (cfg->rules.default_action >= 0)
		cfg->default_action = cfg->rules.default_action;
	if ((v = env("FABSOCK_DEFAULT"))) {
		int action = stk_action_parse(v, strlen(v));
		if (action < 0)
			return bad_value(cfg, "FABSOCK_DEFAULT", 1, "expected accel|kernel, got '%s'",
					 v);
		cfg->default_action = action;
	}
	if ((v = env("FABSOCK_SENDFILE_KERNEL")) &&
	    (ret = parse_unsigned(cfg, "FABSOCK_SENDFILE_KERNEL", v, UINT32_MAX,
				  &cfg->sendfile_kernel)))
		return ret;
	if ((v = env("FABSOCK_NEGO_WAIT_MS")) &&
	    (ret = parse_unsigned(cfg, "FABSOCK_NEGO_WAIT_MS", v, 10000, &cfg->nego_wait_ms)))
		return ret;
	if ((v = env("FABSOCK_TCP_ACCEL"))) {
		if (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)
			cfg->tcp_accel = v[0] == '1';
		else
			return bad_value(cfg, "FABSOCK_TCP_ACCEL", 1, "expected 0 or 1, got '%s'", v);
	}
	cfg->dpdk_pool = (v = env("FI_DPDK_POOL")) && v[0];
	if ((v = env("FABSOCK_DISABLE"))) {
		if (strcmp(v, "1") == 0)
			cfg->enabled = false;
		else if (strcmp(v, "0") != 0)
			return bad_value(cfg, "FABSOCK_DISABLE", 1, "expected 0 or 1, got '%s'", v);
	}
	return 0;
}

int stk_config_load(struct stk_config *cfg, stk_getenv_fn getenv_fn, const char *program)
{
	set_defaults(cfg);
	int ret = load_env(cfg, getenv_fn);
	stk_rules_select_app(&cfg->rules, program ? program : "",
			     cfg->application_id[0] ? cfg->application_id : NULL);
	return ret;
}

void stk_config_free(struct stk_config *cfg)
{
	stk_rules_free(&cfg->rules);
}
