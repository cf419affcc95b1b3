/* libfabsock public extension API.
 *
 * libfabsock accelerates an unmodified program's TCP/UDP sockets over libfabric
 * when preloaded (LD_PRELOAD=libfabsock.so, or the `fabsock` launcher). Programs do
 * not need this header; it lets those that want to ask what the library is doing.
 * Every function is safe from any thread and never blocks. Programs that call these
 * functions link with -lfabsock (pkg-config fabsock). */
#ifndef FABSOCK_FABSOCK_H
#define FABSOCK_FABSOCK_H

#ifdef __cplusplus
extern "C" {
#endif

/* "MAJOR.MINOR.PATCH" of the loaded library. */
const char *fsk_version(void);

/* 1 when libfabsock is loaded and enabled (configuration valid, not disabled by
 * FABSOCK_DISABLE=1); 0 when every socket goes to the kernel untouched. */
int fsk_active(void);

/* 1 when fd is a socket currently carried by a fabric provider, else 0. */
int fsk_fd_accelerated(int fd);

/* Reads the per-process counter `name` (see fabsock(7), e.g. "sockets_tracked",
 * "accel_requested", "fallback_no_transport") into *value. 0, or -1 if unknown. */
int fsk_counter(const char *name, unsigned long long *value);

#ifdef __cplusplus
}
#endif

#endif
