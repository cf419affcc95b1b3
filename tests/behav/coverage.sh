#!/bin/sh
# Coverage of the behaviour suite: every libc name libfabsock must interpose
# (tests/preload/exports.sh lists them) is (a) defined and exported by libfabsock.so and (b)
# called by at least one behaviour program (an undefined reference in its
# binary, so the call really goes through the dynamic symbol the preload
# replaces). A new wrapper without a behaviour test, or a test that stops
# calling one, fails here.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup behav-coverage
fsk_need_preload
fsk_need_cmd nm
T=$fsk_tmp
nm -D --defined-only "$FSK_LIBRARY" | awk '$2 == "T" || $2 == "W" { sub(/@.*/, "", $3); print $3 }' |
	sort -u >"$T/exported"
for b in "$top_builddir"/tests/behav/bh_*; do
	[ -x "$b" ] || continue
	nm -u "$b" | awk '{ sub(/@.*/, "", $2); print $2 }' | sed "s|\$| $(basename "$b")|"
done | sort -u >"$T/used"
[ -s "$T/used" ] || fsk_fail "no behaviour programs built"
missing=0
for s in socket socketpair bind listen accept accept4 connect shutdown close \
	read readv write writev recv recvfrom recvmsg recvmmsg send sendto sendmsg \
	sendmmsg getsockopt setsockopt getsockname getpeername fcntl fcntl64 ioctl \
	dup dup2 dup3 poll ppoll select pselect epoll_create epoll_create1 epoll_ctl \
	epoll_wait epoll_pwait epoll_pwait2 fork daemon sendfile sendfile64 fdopen \
	__read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk \
	splice preadv2 pwritev2 dprintf vdprintf __dprintf_chk __vdprintf_chk \
	aio_read aio_write syscall; do
	grep -qx "$s" "$T/exported" || { echo "not exported by libfabsock.so: $s"; missing=$((missing + 1)); }
	users=$(awk -v s="$s" '$1 == s { printf "%s ", $2 }' "$T/used")
	if [ -z "$users" ]; then
		echo "called by no behaviour program: $s"
		missing=$((missing + 1))
	else
		echo "ok: $s: $users"
	fi
done
[ $missing = 0 ] || fsk_fail "$missing interposed calls not covered"
echo "PASS: all 61 interposed calls exported and exercised"
