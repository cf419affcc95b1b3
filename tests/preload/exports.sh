#!/bin/sh
# libfabsock.so exports every interposed libc name (the socket, data, readiness and fd calls), the
# exec/spawn family (fork-exec migration), the byte paths glibc takes around the
# socket calls (splice, dprintf, aio, syscall...), the public fsk_ API, and nothing else (visibility + version script).
set -u
. "$top_srcdir/tests/preload/lib.sh"
expected="socket socketpair bind listen accept accept4 connect shutdown close read readv
write writev recv recvfrom recvmsg recvmmsg send sendto sendmsg sendmmsg getsockopt
setsockopt getsockname getpeername fcntl fcntl64 ioctl dup dup2 dup3 poll ppoll select
pselect epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait epoll_pwait2 fork
daemon _exit execve execv execvp execvpe execl execlp execle fexecve execveat posix_spawn
posix_spawnp posix_spawn_file_actions_adddup2 sendfile sendfile64 fdopen __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk
splice preadv2 pwritev2 preadv64v2 pwritev64v2 dprintf vdprintf __dprintf_chk __vdprintf_chk
aio_read aio_write aio_read64 aio_write64 lio_listio lio_listio64 syscall
fsk_version fsk_active fsk_fd_accelerated fsk_counter"
want=$(printf '%s\n' $expected | sort)
got=$(nm -D --defined-only "$fsk_lib" | awk '$2 ~ /^[TWi]$/ { print $3 }' | sed 's/@.*//' | sort)
if [ "$want" != "$got" ]; then
	echo "exported symbols differ (< expected, > exported):"
	printf '%s\n' "$want" >"${TMPDIR:-/tmp}/fsk-exp-want.$$"
	printf '%s\n' "$got" >"${TMPDIR:-/tmp}/fsk-exp-got.$$"
	diff "${TMPDIR:-/tmp}/fsk-exp-want.$$" "${TMPDIR:-/tmp}/fsk-exp-got.$$"
	rm -f "${TMPDIR:-/tmp}/fsk-exp-want.$$" "${TMPDIR:-/tmp}/fsk-exp-got.$$"
	exit 1
fi
# Unversioned: an application's read@GLIBC_2.2.5 must bind to our definition.
if nm -D --defined-only "$fsk_lib" | grep -q '@'; then
	echo "exported symbols carry a version; applications' versioned references would skip them"
	exit 1
fi
echo "exports ok: $(echo "$got" | wc -l) symbols"
