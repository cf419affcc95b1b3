#!/bin/sh
# 1,000 concurrent accelerated connections through one epoll echo server (half
# level-, half edge-triggered), two processes, on shm and on tcp: every
# connection echoes random sizes for several rounds, checked byte for byte;
# every connection must be accelerated, none reset, and the client's memory per
# connection must stay within the receive window plus overhead (README).
. "$top_srcdir/tests/accel/lib.sh"
many="$top_builddir/tests/accel/many"
conns=1000
rounds=5
max=8192
status=0
# 256 KiB window (balanced profile) + 16 KiB of per-connection state at most
limit=$((256 + 16))
ulimit -n 8192 2>/dev/null || { echo "cannot raise RLIMIT_NOFILE to 8192"; exit 77; }

run() { # provider
	prov=$1
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		MANY_TIMEOUT_S=100 timeout 120 "$launcher" -- "$many" server "$port" $conns \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		MANY_TIMEOUT_S=100 MANY_MAX_KIB_PER_CONN=$limit timeout 120 "$launcher" -- \
		"$many" client "$port" $conns $rounds $max >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out" "$tmp/srv.out" | grep -v listening | sed "s/^/$prov: /"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $prov: client $crc server $src";
		grep -v "info: counter" "$tmp/cli.log" | tail -n 5; grep -v "info: counter" "$tmp/srv.log" | tail -n 5; return 1; }
	for side in cli srv; do
		acc=$(counter "$tmp/$side.log" "conn_accel_$prov")
		rst=$(counter "$tmp/$side.log" conn_resets)
		echo "$prov: $side: $acc connections accelerated, $rst resets"
		[ "$acc" -eq $conns ] && [ "$rst" -eq 0 ] ||
			{ echo "FAIL: $prov: $side: expected $conns accelerated and no reset"; return 1; }
	done
}

run shm || status=1
run tcp || status=1
exit $status
