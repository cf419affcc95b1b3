/* stk_config: every knob of the library, parsed once at start-up.
 *
 * Sources, later overriding earlier: built-in defaults, the profile's defaults
 * (FABSOCK_PROFILE), the rules file (FABSOCK_CONFIG), inline rules (FABSOCK_RULES,
 * evaluated before the file's so the command line wins), then the individual
 * environment variables. Any bad value makes stk_config_load() fail with one log
 * line naming the culprit; the caller then disables the library.
 * The struct is written only by stk_config_load(); afterwards it is read-only. */
#ifndef STK_CONFIG_H
#define STK_CONFIG_H

#include <stdbool.h>

#include "stack/stk_rules.h"

enum stk_profile {
	STK_PROFILE_BALANCED,
	STK_PROFILE_LATENCY,
	STK_PROFILE_THROUGHPUT,
};

#define STK_SPIN_US_MAX 10000000u /* 10 s: beyond this a spin is a bug */

struct stk_config {
	bool enabled;           /* false: every socket goes to the kernel untouched */
	int log_level;          /* enum stk_log_level */
	char log_file[256];     /* empty = stderr */
	char providers[256];    /* comma list, order of preference */
	bool providers_chosen;  /* the list is the user's (FABSOCK_PROVIDERS), not the
				 * default: a provider of it that is absent is worth a warning */
	enum stk_profile profile;
	unsigned spin_us;       /* busy-poll budget before sleeping in the kernel */
	unsigned window_bytes;  /* per-connection receive window granted to peers */
	unsigned batch;         /* max messages handled per progress call */
	int default_action;     /* enum stk_action when no rule matches */
	unsigned nego_wait_ms;  /* a first write's wait for the peer's negotiation (stk_lazy) */
	unsigned sendfile_kernel; /* a sendfile of this many bytes or more moves its
				   * connection to the kernel (0: never) */
	bool tcp_accel;         /* TCP on fabric providers (default; FABSOCK_TCP_ACCEL=0
				 * keeps every TCP socket on the kernel) */
	char application_id[64];
	bool dpdk_pool;         /* FI_DPDK_POOL set: each process, a forked worker
				 * too, claims a dpdk port of its own (stk_fab.h) */
	struct stk_rules rules;
};

/* Looks a variable up (getenv in production, a table in tests). */
typedef const char *(*stk_getenv_fn)(const char *name);

/* Fill cfg from the environment. program = basename of the running program (for
 * application-id). Returns 0, or -EINVAL after logging the one-line reason (cfg is
 * then valid but enabled=false). */
int stk_config_load(struct stk_config *cfg, stk_getenv_fn getenv_fn, const char *program);
void stk_config_free(struct stk_config *cfg);

const char *stk_profile_name(enum stk_profile profile);

/* The process-wide configuration (loaded by the preload at start-up). */
extern struct stk_config stk_cfg;

#endif
