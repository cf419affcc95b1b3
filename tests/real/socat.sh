#!/bin/sh
# Real programs, pass-through: 64 MiB through socat over TCP loopback, both
# ends under the launcher, in both directions (listener receives, then
# listener sends), sha256 checked. Proves all four processes loaded
# libfabsock.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-socat
fsk_need_preload
fsk_need_cmd socat sha256sum ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
size=$((64 * 1024 * 1024))
head -c "$size" /dev/urandom >"$T/src"
want=$(fsk_sha "$T/src")

# transfer NAME LISTENER-ADDRESSES CONNECTOR-ADDRESSES OUTFILE
transfer() {
	name=$1
	port=$(fsk_free_port) || fsk_fail "no free port"
	lspec=$(echo "$2" | sed "s/PORT/$port/")
	cspec=$(echo "$3" | sed "s/PORT/$port/")
	rm -f "$4"
	# shellcheck disable=SC2086 # $lspec and $cspec are two socat addresses each
	fsk_bg timeout -k 5 120 "$L" --log info --log-file "$T/$name-listen.log" -- \
		socat -u $lspec 2>"$T/$name-listen.err"
	lpid=$fsk_last_pid
	fsk_wait_listen "$port" 150 || fsk_fail "$name: socat did not listen on $port"
	# shellcheck disable=SC2086
	timeout -k 5 120 "$L" --log info --log-file "$T/$name-connect.log" -- \
		socat -u $cspec 2>"$T/$name-connect.err" ||
		fsk_fail "$name: connecting socat failed: $(cat "$T/$name-connect.err")"
	wait "$lpid" || fsk_fail "$name: listening socat failed: $(cat "$T/$name-listen.err")"
	fsk_assert_loaded "$T/$name-listen.log" "$name: listening socat"
	fsk_assert_loaded "$T/$name-connect.log" "$name: connecting socat"
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
echo "PASS: socat moved 64 MiB each way, sha256 $want"
