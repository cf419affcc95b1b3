#include "config.h"
#include "stack/stk_rules.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const role_names[STK_ROLE_COUNT] = {
	"tcp_server", "tcp_client", "udp_receiver", "udp_sender", "udp_connect",
};

const char *stk_role_name(enum stk_role role)
{
	return (unsigned)role < STK_ROLE_COUNT ? role_names[role] : "?";
}

const char *stk_action_name(enum stk_action action)
{
	return action == STK_ACTION_ACCEL ? "accel" : "kernel";
}

static bool word_is(const char *word, size_t len, const char *what)
{
	return strlen(what) == len && memcmp(word, what, len) == 0;
}

int stk_action_parse(const char *word, size_t len)
{
	if (word_is(word, len, "accel") || word_is(word, len, "vma"))
		return STK_ACTION_ACCEL;
	if (word_is(word, len, "kernel") || word_is(word, len, "os"))
		return STK_ACTION_KERNEL;
	return -1;
}

void stk_rules_init(struct stk_rules *rules)
{
	memset(rules, 0, sizeof(*rules));
	rules->default_action = -1;
}

void stk_rules_free(struct stk_rules *rules)
{
	free(rules->rules);
	free(rules->apps);
	stk_rules_init(rules);
}

/* ---- tokenizer: statements end at '\n' or ';', '#' comments to end of line ---- */

struct cursor {
	const char *p;
	unsigned line, column;
	const char *source;
	struct stk_parse_error *err;
};

static void advance(struct cursor *c, size_t n)
{
	while (n-- && *c->p) {
		if (*c->p == '\n') {
			c->line++;
			c->column = 1;
		} else {
			c->column++;
		}
		c->p++;
	}
}

static void skip_blanks(struct cursor *c)
{
	for (;;) {
		if (*c->p == ' ' || *c->p == '\t' || *c->p == '\r') {
			advance(c, 1);
		} else if (*c->p == '#') {
			while (*c->p && *c->p != '\n')
				advance(c, 1);
		} else {
			return;
		}
	}
}

static bool at_statement_end(const struct cursor *c)
{
	return *c->p == '\0' || *c->p == '\n' || *c->p == ';';
}

static size_t word_len(const char *p)
{
	size_t n = 0;
	while (p[n] && !strchr(" \t\r\n;#", p[n]))
		n++;
	return n;
}

/* Record an error at column offset `at` past the cursor. Always returns -EINVAL. */
__attribute__((format(printf, 3, 4)))
static int fail(const struct cursor *c, size_t at, const char *fmt, ...)
{
	struct stk_parse_error *e = c->err;
	if (e) {
		snprintf(e->source, sizeof(e->source), "%s", c->source);
		e->line = c->line;
		e->column = c->column + (unsigned)at;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->message, sizeof(e->message), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Describe the token at the cursor for error messages. */
static const char *token_desc(const struct cursor *c, char *buf, size_t len)
{
	size_t n = word_len(c->p);
	if (n == 0)
		return "end of statement";
	snprintf(buf, len, "'%.*s'", (int)(n > 40 ? 40 : n), c->p);
	return buf;
}

/* ---- endpoints: <addr>[/prefix]:<port>[-port] ---- */

static int parse_uint(const char *s, size_t len, unsigned long max, unsigned long *out)
{
	if (len == 0 || len > 10)
		return -1;
	unsigned long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/* Parses one endpoint starting at s (within a word of length len); *used gets
 * the characters consumed. Error positions are relative to s. */
static int parse_endpoint(const struct cursor *c, size_t base, const char *s, size_t len,
			  struct stk_endpoint_match *m, size_t *used)
{
	size_t i = 0;
	memset(m, 0, sizeof(*m));
	if (len > 0 && s[0] == '*') {
		i = 1;
	} else {
		char text[INET6_ADDRSTRLEN + 1];
		size_t start, end;
		if (len > 0 && s[0] == '[') {
			start = 1;
			end = start;
			while (end < len && s[end] != ']')
				end++;
			if (end == len)
				return fail(c, base, "expected ']' closing the IPv6 address");
			m->family = AF_INET6;
			i = end + 1;
		} else {
			start = 0;
			end = 0;
			while (end < len && s[end] != '/' && s[end] != ':')
				end++;
			m->family = AF_INET;
			i = end;
		}
		if (end - start == 0 || end - start >= sizeof(text))
			return fail(c, base, "expected an address ('*', IPv4 or [IPv6])");
		memcpy(text, s + start, end - start);
		text[end - start] = '\0';
		if (inet_pton(m->family, text, m->addr) != 1)
			return fail(c, base + start, "expected an %s address, got '%s'",
				    m->family == AF_INET ? "IPv4" : "IPv6", text);
		m->prefix = m->family == AF_INET ? 32 : 128;
		if (i < len && s[i] == '/') {
			size_t pstart = ++i;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			unsigned long prefix;
			if (parse_uint(s + pstart, i - pstart, m->prefix, &prefix) != 0)
				return fail(c, base + pstart, "expected a prefix length 0..%u",
					    (unsigned)m->prefix);
			m->prefix = (uint8_t)prefix;
		}
	}
	if (i >= len || s[i] != ':')
		return fail(c, base + i, "expected ':' and a port (N, N-M or *)");
	i++;
	if (i < len && s[i] == '*') {
		m->port_lo = 0;
		m->port_hi = 65535;
		i++;
	} else {
		size_t pstart = i;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		unsigned long lo, hi;
		if (parse_uint(s + pstart, i - pstart, 65535, &lo) != 0)
			return fail(c, base + pstart, "expected a port 0..65535 or '*'");
		hi = lo;
		if (i < len && s[i] == '-') {
			size_t hstart = ++i;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			if (parse_uint(s + hstart, i - hstart, 65535, &hi) != 0 || hi < lo)
				return fail(c, base + hstart,
					    "expected the end of a port range (%lu..65535)", lo);
		}
		m->port_lo = (uint16_t)lo;
		m->port_hi = (uint16_t)hi;
	}
	*used = i;
	return 0;
}

static bool role_is_client(enum stk_role role)
{
	return role == STK_ROLE_TCP_CLIENT || role == STK_ROLE_UDP_SENDER ||
	       role == STK_ROLE_UDP_CONNECT;
}

static void endpoint_any(struct stk_endpoint_match *m)
{
	memset(m, 0, sizeof(*m));
	m->port_hi = 65535;
}

/* ---- statements ---- */

static int append_rule(struct stk_rules *rules, const struct stk_rule *rule)
{
	if (rules->count == rules->capacity) {
		size_t cap = rules->capacity ? rules->capacity * 2 : 16;
		struct stk_rule *grown = realloc(rules->rules, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		rules->rules = grown;
		rules->capacity = cap;
	}
	rules->rules[rules->count++] = *rule;
	return 0;
}

static int append_app(struct stk_rules *rules, const struct stk_app_block *app)
{
	if (rules->app_count == rules->app_capacity) {
		size_t cap = rules->app_capacity ? rules->app_capacity * 2 : 4;
		struct stk_app_block *grown = realloc(rules->apps, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		rules->apps = grown;
		rules->app_capacity = cap;
	}
	rules->apps[rules->app_count++] = *app;
	return 0;
}

static int parse_use(struct cursor *c, struct stk_rules *rules)
{
	char desc[64];
	struct stk_rule rule = { .app_block = (int)rules->app_count - 1, .line = c->line };
	size_t n;

	skip_blanks(c);
	n = word_len(c->p);
	int action = stk_action_parse(c->p, n);
	if (action < 0)
		return fail(c, 0, "expected accel|kernel|vma|os, got %s",
			    token_desc(c, desc, sizeof(desc)));
	rule.action = (enum stk_action)action;
	advance(c, n);

	skip_blanks(c);
	n = word_len(c->p);
	int role = -1;
	for (int r = 0; r < STK_ROLE_COUNT; r++)
		if (word_is(c->p, n, role_names[r]))
			role = r;
	if (role < 0)
		return fail(c, 0,
			    "expected tcp_server|tcp_client|udp_receiver|udp_sender|udp_connect, got %s",
			    token_desc(c, desc, sizeof(desc)));
	rule.role = (enum stk_role)role;
	advance(c, n);

	/* One or two endpoints, the first possibly in libvma's 4-part form. */
	struct stk_endpoint_match ep[2];
	int count = 0;
	for (;;) {
		skip_blanks(c);
		if (at_statement_end(c))
			break;
		n = word_len(c->p);
		size_t off = 0;
		while (off < n) {
			if (count == 2)
				return fail(c, off, "expected end of statement after two endpoints");
			if (count == 1 && !role_is_client(rule.role))
				return fail(c, off, "%s takes one endpoint (the local address)",
					    role_names[rule.role]);
			size_t used = 0;
			int ret = parse_endpoint(c, off, c->p + off, n - off, &ep[count], &used);
			if (ret)
				return ret;
			count++;
			off += used;
			if (off < n) {
				if (c->p[off] != ':')
					return fail(c, off, "expected ':' or end of endpoint");
				off++;
			}
		}
		advance(c, n);
	}
	if (count == 0)
		return fail(c, 0, "expected an endpoint <addr|*>:<port|*>");
	endpoint_any(&rule.local);
	endpoint_any(&rule.remote);
	if (count == 2) {
		rule.local = ep[0];
		rule.remote = ep[1];
	} else if (role_is_client(rule.role)) {
		rule.remote = ep[0];
	} else {
		rule.local = ep[0];
	}
	return append_rule(rules, &rule);
}

static int parse_application_id(struct cursor *c, struct stk_rules *rules)
{
	struct stk_app_block app;
	size_t n;

	skip_blanks(c);
	n = word_len(c->p);
	if (n == 0)
		return fail(c, 0, "expected a program name or glob after application-id");
	if (n >= sizeof(app.program_glob))
		return fail(c, 0, "program glob longer than %zu characters",
			    sizeof(app.program_glob) - 1);
	memcpy(app.program_glob, c->p, n);
	app.program_glob[n] = '\0';
	advance(c, n);

	skip_blanks(c);
	n = word_len(c->p);
	if (n >= sizeof(app.user_id))
		return fail(c, 0, "application id longer than %zu characters",
			    sizeof(app.user_id) - 1);
	if (n == 0) {
		strcpy(app.user_id, "*");
	} else {
		memcpy(app.user_id, c->p, n);
		app.user_id[n] = '\0';
		advance(c, n);
	}
	return append_app(rules, &app);
}

static int parse_default(struct cursor *c, struct stk_rules *rules)
{
	char desc[64];
	skip_blanks(c);
	size_t n = word_len(c->p);
	int action = stk_action_parse(c->p, n);
	if (action < 0)
		return fail(c, 0, "expected accel|kernel after 'default', got %s",
			    token_desc(c, desc, sizeof(desc)));
	rules->default_action = action;
	advance(c, n);
	return 0;
}

int stk_rules_parse(struct stk_rules *rules, const char *text, const char *source,
		    struct stk_parse_error *err)
{
	struct cursor c = { .p = text, .line = 1, .column = 1, .source = source, .err = err };
	char desc[64];

	for (;;) {
		skip_blanks(&c);
		if (*c.p == '\0')
			return 0;
		if (*c.p == '\n' || *c.p == ';') {
			advance(&c, 1);
			continue;
		}
		size_t n = word_len(c.p);
		int ret;
		if (word_is(c.p, n, "use")) {
			advance(&c, n);
			ret = parse_use(&c, rules);
		} else if (word_is(c.p, n, "application-id")) {
			advance(&c, n);
			ret = parse_application_id(&c, rules);
		} else if (word_is(c.p, n, "default")) {
			advance(&c, n);
			ret = parse_default(&c, rules);
		} else {
			return fail(&c, 0, "expected use|application-id|default, got %s",
				    token_desc(&c, desc, sizeof(desc)));
		}
		if (ret)
			return ret;
		skip_blanks(&c);
		if (!at_statement_end(&c))
			return fail(&c, 0, "expected end of statement, got %s",
				    token_desc(&c, desc, sizeof(desc)));
	}
}

void stk_rules_select_app(struct stk_rules *rules, const char *program, const char *user_id)
{
	for (size_t i = 0; i < rules->count; i++) {
		struct stk_rule *r = &rules->rules[i];
		if (r->app_block < 0) {
			r->active = true;
			continue;
		}
		const struct stk_app_block *app = &rules->apps[r->app_block];
		bool prog_ok = fnmatch(app->program_glob, program, 0) == 0;
		bool id_ok = strcmp(app->user_id, "*") == 0 ||
			     (user_id && strcmp(app->user_id, user_id) == 0);
		r->active = prog_ok && id_ok;
	}
}

/* ---- matching (no allocation, read-only) ---- */

/* Normalises an IPv4-mapped IPv6 address to IPv4 so one rule covers both. */
static int sockaddr_parts(const struct sockaddr *sa, const uint8_t **addr, uint16_t *port)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		*addr = (const uint8_t *)&in->sin_addr;
		*port = ntohs(in->sin_port);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		*port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			*addr = in6->sin6_addr.s6_addr + 12;
			return AF_INET;
		}
		*addr = in6->sin6_addr.s6_addr;
		return AF_INET6;
	}
	return -1;
}

static bool endpoint_matches(const struct stk_endpoint_match *m, const struct sockaddr *sa)
{
	if (m->family == 0 && m->port_lo == 0 && m->port_hi == 65535)
		return true;
	if (!sa)
		return false;
	const uint8_t *addr;
	uint16_t port;
	int family = sockaddr_parts(sa, &addr, &port);
	if (family < 0)
		return false;
	if (port < m->port_lo || port > m->port_hi)
		return false;
	if (m->family == 0)
		return true;
	if (m->family != family)
		return false;
	unsigned full = m->prefix / 8, rest = m->prefix % 8;
	if (memcmp(addr, m->addr, full) != 0)
		return false;
	if (rest) {
		uint8_t mask = (uint8_t)(0xff << (8 - rest));
		if ((addr[full] & mask) != (m->addr[full] & mask))
			return false;
	}
	return true;
}

int stk_rules_match(const struct stk_rules *rules, enum stk_role role,
		    const struct sockaddr *local, const struct sockaddr *remote,
		    const struct stk_rule **matched)
{
	for (size_t i = 0; i < rules->count; i++) {
		const struct stk_rule *r = &rules->rules[i];
		if (!r->active || r->role != role)
			continue;
		if (!endpoint_matches(&r->local, local) || !endpoint_matches(&r->remote, remote))
			continue;
		if (matched)
			*matched = r;
		return (int)r->action;
	}
	return -1;
}

const char *stk_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];
	if (!sa) {
		snprintf(buf, len, "?");
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "family %d", sa->sa_family);
	}
	return buf;
}
