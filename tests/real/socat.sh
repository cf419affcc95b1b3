#!/bin/sh
# Real programs, pass-through: 64 MiB through socat over TCP loopback, in
# both directions (listener receives, then listener sends), sha256 checked:
# first with both ends under the launcher, then with one end plain (the
# plain end must get exactly its peer's bytes: property P1). Proves every
# launched process loaded libfabsock.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-socat
fsk_need_preload
fsk_need_cmd socat sha256sum ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
size=$((64 * 1024 * 1024))
head -c "$size" /dev/urandom >"$T/src"
want=$(fsk_sha "$T/src")

# transfer NAME LISTENER-ADDRESSES CONNECTOR-ADDRESSES OUTFILE [WHICH]
# WHICH: both (default), listener or connector: the end(s) run under the
# launcher; the other end is a plain socat on the kernel, which must see
# exactly the bytes its peer program sent (no libfabsock traffic).
transfer() {
	name=$1
	which=${5:-both}
	port=$(fsk_free_port) || fsk_fail "no free port"
	lspec=$(echo "$2" | sed "s/PORT/$port/")
	cspec=$(echo "$3" | sed "s/PORT/$port/")
	rm -f "$4"
	lwrap="" cwrap=""
	[ "$which" = connector ] || lwrap="$L --log info --log-file $T/$name-listen.log --"
	[ "$which" = listener ] || cwrap="$L --log info --log-file $T/$name-connect.log --"
	# shellcheck disable=SC2086 # wrappers and socat addresses are word lists
	fsk_bg timeout -k 5 120 $lwrap socat -u $lspec 2>"$T/$name-listen.err"
	lpid=$fsk_last_pid
	fsk_wait_listen "$port" 150 || fsk_fail "$name: socat did not listen on $port"
	# shellcheck disable=SC2086
	timeout -k 5 120 $cwrap socat -u $cspec 2>"$T/$name-connect.err" ||
		fsk_fail "$name: connecting socat failed: $(cat "$T/$name-connect.err")"
	wait "$lpid" || fsk_fail "$name: listening socat failed: $(cat "$T/$name-listen.err")"
	[ -n "$lwrap" ] && fsk_assert_loaded "$T/$name-listen.log" "$name: listening socat"
	[ -n "$cwrap" ] && fsk_assert_loaded "$T/$name-connect.log" "$name: connecting socat"
	got=$(fsk_sha "$4")
	[ "$got" = "$want" ] ||
		fsk_fail "$name: sha256 $got, want $want ($(wc -c <"$4") of $size bytes)"
	echo "# $name: $size bytes, sha256 ok"
}

# 1. the listener receives.
transfer upload "TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr OPEN:$T/dst1,creat,trunc" \
	"OPEN:$T/src TCP:127.0.0.1:PORT" "$T/dst1"
# 2. the listener sends.
transfer download "OPEN:$T/src TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr" \
	"TCP:127.0.0.1:PORT OPEN:$T/dst2,creat,trunc" "$T/dst2"
# 3-6. one end plain: libfabsock must fall back without a stray byte
#      (the build directory's path holds no spaces: the word lists above
#      rely on it).
transfer plain-listener-upload "TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr OPEN:$T/dst3,creat,trunc" \
	"OPEN:$T/src TCP:127.0.0.1:PORT" "$T/dst3" connector
transfer plain-listener-download "OPEN:$T/src TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr" \
	"TCP:127.0.0.1:PORT OPEN:$T/dst4,creat,trunc" "$T/dst4" connector
transfer plain-connector-upload "TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr OPEN:$T/dst5,creat,trunc" \
	"OPEN:$T/src TCP:127.0.0.1:PORT" "$T/dst5" listener
transfer plain-connector-download "OPEN:$T/src TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr" \
	"TCP:127.0.0.1:PORT OPEN:$T/dst6,creat,trunc" "$T/dst6" listener
echo "PASS: socat moved 64 MiB each way, both ends or one end under libfabsock, sha256 $want"
