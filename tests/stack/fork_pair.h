/* The plumbing of the stack suites over a real loopback TCP connection
 * (test_stream, test_nego): a listener in the test process (the server), a
 * forked client, bounded waits. libfabric is opened after the fork, in each
 * process. Helpers fail the running Check test on error; helpers that run in
 * the child exit instead. */
#ifndef FSK_TESTS_FORK_PAIR_H
#define FSK_TESTS_FORK_PAIR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* stk_pair_config(prov) with a negotiation wait long enough for two busy
 * cores shared by server and client */
void config(const char *prov);

struct pair {
	int lfd;
	bool accel;       /* the server side runs stk_accel_listen (after the fork) */
	int ready[2];     /* server → client: listening and providers open */
	struct sockaddr_in addr;
	pid_t child;
};

/* listener on loopback; save_syn: the server side accelerates (p->accel) */
void pair_listen(struct pair *p, bool save_syn);
/* In the child: a connected socket, marked or not; exits 90..94 on failure. */
int client_connect(const struct pair *p, bool mark);
int server_accept(struct pair *p);
/* fork the client: in the child config(client_prov), then exit with
 * client(p, client_prov); in the parent accelerate the listener when
 * p->accel, then tell the child to connect */
void pair_fork(struct pair *p, int (*client)(struct pair *p, const char *prov),
	       const char *client_prov);
/* the child's exit status within 60 s (tcp_pair_wait_child), then the
 * listener closed; -1 if the child did not end */
int pair_wait(struct pair *p);

/* xorshift64 over *s */
uint64_t rng_next(uint64_t *s);

/* STACK_TEST=name runs one test only (debugging aid). */
bool wanted(const char *name);
#define ADD_LOOP(tc, fn, n) do { if (wanted(#fn)) tcase_add_loop_test(tc, fn, 0, n); } while (0)
#define ADD(tc, fn) do { if (wanted(#fn)) tcase_add_test(tc, fn); } while (0)

#endif
