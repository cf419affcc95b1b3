#!/bin/sh
# The fallback matrix with FABSOCK_TCP_ACCEL=1: a launched end talking to a plain
# (not launched) end, both directions, with a client-speaks-first and a
# server-speaks-first protocol: byte-exact, the plain end never sees a byte its
# peer app did not send, and the launched end counts the fallback.
. "$top_srcdir/tests/accel/lib.sh"
size=$((1 << 20))
status=0

one() { # server-launched? client-launched? extra-args
	port=$(free_port)
	srv="env"; cli="env"
	[ "$1" = yes ] && srv="$launcher --"
	[ "$2" = yes ] && cli="$launcher --"
	rm -f "$tmp/srv.out" # before the server starts: its own redirection is asynchronous
	FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 30 $srv "$python" "$echo_py" server "$port" \
		"$size" $3 >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || return 1
	FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 30 $cli "$python" "$echo_py" client "$port" \
		"$size" $3 >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	label="server launched=$1 client launched=$2 ${3:-client speaks first}"
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: $label: client $crc server $src"
		tail -n 3 "$tmp/cli.out" "$tmp/srv.out" "$tmp/cli.log" "$tmp/srv.log"
		return 1
	fi
	launched_log="$tmp/cli.log"
	[ "$1" = yes ] && launched_log="$tmp/srv.log"
	acc=$(counter "$launched_log" accelerated)
	echo "ok: $label: byte-exact, accelerated=$acc"
	[ "$acc" -eq 0 ] || { echo "FAIL: $label: a plain peer cannot be accelerated"; return 1; }
}

for proto in "" --banner; do
	one yes no "$proto" || status=1
	one no yes "$proto" || status=1
done
exit $status
