/* Behaviour-test helpers: a deterministic transcript and self-checks.
 *
 * Every behaviour program runs twice, on the kernel alone and under the
 * launcher with libfabsock preloaded; the runner diffs the two transcripts.
 * So a transcript line must never contain anything that can differ between
 * runs: no fd numbers (the library may hold fds of its own), no ports, no
 * addresses that are not fixed, no timings. Lines carry return values,
 * errno names, byte counts and checksums.
 *
 * Each program also checks its own results (BH_CHECK): a wrong answer fails
 * the test even when both runs agree on it.
 */
#ifndef BH_H
#define BH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Start a program: stdout line-buffered (so fork never duplicates pending
 * output), a watchdog alarm so a hang becomes a failure. */
void bh_start(const char *name);

/* Print the end line and return the exit status (0 pass, 1 on any failed
 * check). */
int bh_finish(void);

/* Print a free-form transcript line (printf format). */
void bh_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Record a failed check with its location; the program goes on. */
void bh_fail(const char *file, int line, const char *what);

#define BH_CHECK(cond) \
	do { if (!(cond)) bh_fail(__FILE__, __LINE__, #cond); } while (0)

/* Print "<what> = <ret>" or "<what> = -1 <ERRNO>" and check that the call
 * succeeded. Returns ret. */
long bh_ok(const char *what, long ret);

/* Same for calls returning an fd: prints "= fd" (never the number). */
int bh_okfd(const char *what, int ret);

/* Print the result and check the call failed with errno == err. */
long bh_err(const char *what, long ret, int err);

/* Print the result of a call whose outcome is part of the transcript but
 * not checked here (the caller checks). errno name printed on -1. */
long bh_show(const char *what, long ret);

/* Name of an errno value ("EBADF"), never NULL. */
const char *bh_errname(int err);

/* Deterministic payload: byte i of stream `seed` is a function of both. */
void bh_fill(void *buf, size_t len, uint32_t seed, size_t stream_off);

/* FNV-1a 64-bit running checksum; start with BH_SUM_INIT. */
#define BH_SUM_INIT 0xcbf29ce484222325ULL
uint64_t bh_sum(uint64_t sum, const void *buf, size_t len);

/* Blocking helpers that tolerate short transfers; they use poll so they
 * also work on non-blocking fds. Return bytes moved, or -1 (errno set). */
ssize_t bh_write_all(int fd, const void *buf, size_t len);
ssize_t bh_read_all(int fd, void *buf, size_t len);

/* Wait up to timeout_ms for `events` on fd; returns revents (0 on timeout). */
int bh_wait(int fd, short events, int timeout_ms);

/* A TCP listener on 127.0.0.1, ephemeral port; returns the fd. */
int bh_listener(int type_flags);

/* A connected TCP pair over loopback through a temporary listener.
 * type_flags (SOCK_NONBLOCK, SOCK_CLOEXEC) apply to the client socket; the
 * accepted socket is blocking. With BH_ACCEPT_THREAD set in the
 * environment the accept runs in a thread concurrently with the connect.
 * Aborts the program on failure. */
void bh_tcp_pair(int *client, int *server, int type_flags);

/* bh_tcp_pair, then with warm one round trip each way ("ping", "pong"), so
 * that both ends are settled (accelerated under libfabsock) before the
 * caller's first call. */
void bh_tcp_pair_warm(int *client, int *server, int warm);

/* A UDP socket bound to 127.0.0.1, ephemeral port. */
int bh_udp_bound(int type_flags);

/* Compare two IPv4 socket addresses (family, address, port). */
int bh_same_addr(const void *a, const void *b);

/* The O_NONBLOCK bit of fd as 0/1, FD_CLOEXEC as 0/1. */
int bh_nonblock(int fd);
int bh_cloexec(int fd);

/* An fd number that is not open in this process and that later fd
 * allocations will not take (the highest free one below FD_SETSIZE). */
int bh_closed_fd(void);

#endif
