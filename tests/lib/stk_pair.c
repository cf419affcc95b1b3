#include "config.h"

#include "stk_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_log.h"
#include "stack/stk_nego.h"

void stk_pair_config(const char *prov)
{
	snprintf(stk_cfg.providers, sizeof(stk_cfg.providers), "%s", prov);
	stk_cfg.enabled = true;
	stk_cfg.spin_us = 20;
	stk_cfg.window_bytes = 256 * 1024;
	stk_cfg.batch = 16;
	const char *log = getenv("FABSOCK_LOG");
	stk_log_level = log ? stk_log_level_parse(log) : STK_LOG_WARN;
	if (stk_log_level < 0)
		stk_log_level = STK_LOG_WARN;
}

int stk_pair_connect(const struct sockaddr_in *addr, int flags)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* a destination seen before: the first write waits up to 1 s for the
	 * HELLO, so a loaded machine cannot turn a test into a fallback (the
	 * 5 ms path for unknown destinations is the fallback tests') */
	if (flags & STK_PAIR_KNOWN)
		stk_nego_cache_put((const struct sockaddr *)addr, STK_PEER_CAPABLE);
	int step = 0;
	if ((flags & STK_PAIR_MARK) && stk_nego_mark_syn(fd, AF_INET) != 0)
		step = -2;
	else if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0)
		step = -3;
	else if ((flags & STK_PAIR_MARK) && stk_nego_unmark(fd, AF_INET) != 0)
		step = -4;
	if (step == 0)
		return fd;
	close(fd);
	return step;
}

struct stk_conn *stk_pair_attach(int fd, bool client, const char *prov)
{
	struct stk_conn *conn = NULL;
	struct stk_attach_info info;
	int ret = stk_accel_attach(fd, client, &conn, &info);
	if (ret != 0) {
		fprintf(stderr, "%s attach over %s: %d (%s)\n", client ? "client" : "server", prov,
			ret, info.reason);
		return NULL;
	}
	if (strcmp(info.provider, prov) != 0) {
		fprintf(stderr, "%s attached over %s, wanted %s\n", client ? "client" : "server",
			info.provider, prov);
		return NULL;
	}
	return conn;
}
