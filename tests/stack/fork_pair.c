/* The forked-client pair of the stack suites test_stream and test_nego
 * (fork_pair.h). */
#include "config.h"

#include <check.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_lazy.h"
#include "../lib/stk_pair.h"
#include "../lib/tcp_pair.h"
#include "fork_pair.h"

void config(const char *prov)
{
	stk_pair_config(prov);
	/* server and client threads share 2 busy cores: the first HELLO may take
	 * longer than the 5 ms default to be sent */
	stk_cfg.nego_wait_ms = 100;
}

void pair_listen(struct pair *p, bool save_syn)
{
	p->lfd = tcp_pair_listen(&p->addr, SOCK_CLOEXEC, 8);
	ck_assert_int_ge(p->lfd, 0);
	p->accel = save_syn;
	ck_assert_int_eq(pipe(p->ready), 0);
}

int client_connect(const struct pair *p, bool mark)
{
	static bool ready; /* per process: the server said go once */
	char go;
	if (!ready && read(p->ready[0], &go, 1) != 1)
		_exit(94);
	ready = true;
	int flags = mark ? STK_PAIR_MARK | (p->accel ? STK_PAIR_KNOWN : 0) : 0;
	int fd = stk_pair_connect(&p->addr, flags);
	if (fd < 0)
		_exit(89 - fd);
	return fd;
}

int server_accept(struct pair *p)
{
	int fd = tcp_pair_accept(p->lfd, 10000);
	ck_assert_int_ge(fd, 0);
	return fd;
}

void pair_fork(struct pair *p, int (*client)(struct pair *p, const char *prov),
	       const char *client_prov)
{
	p->child = fork();
	ck_assert_int_ge(p->child, 0);
	if (p->child == 0) {
		alarm(60);
		close(p->lfd);
		config(client_prov);
		_exit(client(p, client_prov));
	}
	/* libfabric is opened only now, after the fork, in each process */
	if (p->accel)
		ck_assert_int_eq(stk_accel_listen(p->lfd), 0);
	ck_assert_int_eq(write(p->ready[1], "g", 1), 1);
}

int pair_wait(struct pair *p)
{
	int rc = tcp_pair_wait_child(p->child, 60000);
	if (rc >= 0)
		close(p->lfd);
	return rc;
}

uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

bool wanted(const char *name)
{
	const char *only = getenv("STACK_TEST");
	return !only || strcmp(only, name) == 0;
}
