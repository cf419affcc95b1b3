/* stk_rules: which sockets to accelerate, in a grammar compatible with libvma.conf.
 *
 *   statement := use <action> <role> <endpoint> [<endpoint>]
 *              | application-id <program-glob> [<user-id>|*]
 *              | default <action>
 *   action    := accel | kernel | vma (= accel) | os (= kernel)
 *   role      := tcp_server | tcp_client | udp_receiver | udp_sender | udp_connect
 *   endpoint  := <addr>[/<prefix>]:<port>[-<port>] | *:... | addr:port:addr:port
 *   addr      := * | dotted IPv4 | [IPv6]
 *
 * Statements end at a newline or ';'; '#' starts a comment. Rules after an
 * application-id line apply only to programs matching its glob (and, when given,
 * FABSOCK_APPLICATION_ID); rules before any such line apply to every program.
 * For tcp_server / udp_receiver the endpoint is the local address; for the client
 * roles a single endpoint is the remote one, and the four-part libvma form (or two
 * endpoints) is local then remote. First match wins.
 *
 * Parsing allocates; matching does not. Not thread-safe while parsing; matching a
 * parsed set is read-only and safe from any thread. */
#ifndef STK_RULES_H
#define STK_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum stk_action {
	STK_ACTION_KERNEL = 0,
	STK_ACTION_ACCEL = 1,
};

enum stk_role {
	STK_ROLE_TCP_SERVER,
	STK_ROLE_TCP_CLIENT,
	STK_ROLE_UDP_RECEIVER,
	STK_ROLE_UDP_SENDER,
	STK_ROLE_UDP_CONNECT,
	STK_ROLE_COUNT
};

struct stk_endpoint_match {
	int family;        /* AF_INET, AF_INET6, or 0 for '*' */
	uint8_t addr[16];  /* network order; first 4 bytes for AF_INET */
	uint8_t prefix;    /* significant bits of addr */
	uint16_t port_lo;  /* inclusive range, host order; '*' is 0..65535 */
	uint16_t port_hi;
};

struct stk_rule {
	enum stk_action action;
	enum stk_role role;
	struct stk_endpoint_match local;  /* matches anything when not given */
	struct stk_endpoint_match remote; /* idem */
	int app_block;                    /* index in stk_rules.apps, -1 = all */
	unsigned line;                    /* where it was written, for logs */
	bool active;                      /* set by stk_rules_select_app() */
};

struct stk_app_block {
	char program_glob[128];
	char user_id[64]; /* "*" = any */
};

struct stk_rules {
	struct stk_rule *rules;
	size_t count, capacity;
	struct stk_app_block *apps;
	size_t app_count, app_capacity;
	int default_action; /* -1 when the text set none */
};

/* Where a parse failed: source name, 1-based line and column, and what was expected. */
struct stk_parse_error {
	char source[64];
	unsigned line, column;
	char message[192];
};

void stk_rules_init(struct stk_rules *rules);
void stk_rules_free(struct stk_rules *rules);

/* Parse text and append its statements. Returns 0, -EINVAL (err filled) or -ENOMEM. */
int stk_rules_parse(struct stk_rules *rules, const char *text, const char *source,
		    struct stk_parse_error *err);

/* Activate the rules whose application-id block matches this program. */
void stk_rules_select_app(struct stk_rules *rules, const char *program, const char *user_id);

/* First active rule matching role and addresses (either may be NULL = unknown).
 * Returns its action and stores the rule in *matched, or returns -1 if none. */
int stk_rules_match(const struct stk_rules *rules, enum stk_role role,
		    const struct sockaddr *local, const struct sockaddr *remote,
		    const struct stk_rule **matched);

const char *stk_role_name(enum stk_role role);
const char *stk_action_name(enum stk_action action);
/* "accel"/"vma" -> ACCEL, "kernel"/"os" -> KERNEL, else -1. */
int stk_action_parse(const char *word, size_t len);

/* "1.2.3.4:80" / "[::1]:80" into buf, for logs. */
const char *stk_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
