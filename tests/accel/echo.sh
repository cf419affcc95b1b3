#!/bin/sh
# Both ends launched with FABSOCK_TCP_ACCEL=1: a 32 MiB byte-exact echo each way
# over shm and over tcp; every payload byte is accounted for by libfabsock's
# counters, and on shm the kernel's TCP segment counters (in a private network
# namespace) do not grow with the payload.
. "$top_srcdir/tests/accel/lib.sh"
size=$((32 << 20))
status=0

run_pair() { # provider, netns prefix ("" or "ip netns exec NS")
	prov=$1
	nsexec=$2
	port=$(free_port)
	rm -f "$tmp/srv.out" # before the server starts: its own redirection is asynchronous
	$nsexec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$echo_py" server "$port" "$size" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	$nsexec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$echo_py" client "$port" "$size" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $prov: client $crc server $src";
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"; return 1; }
	tx=$(counter "$tmp/cli.log" "bytes_tx_$prov")
	rx=$(counter "$tmp/cli.log" "bytes_rx_$prov")
	stx=$(counter "$tmp/srv.log" "bytes_tx_$prov")
	echo "$prov: client sent $tx, received $rx; server sent $stx (payload $size + 32)"
	[ "$tx" -eq "$size" ] && [ "$rx" -eq $((size + 32)) ] && [ "$stx" -eq $((size + 32)) ] ||
		{ echo "FAIL: $prov: counters do not account for every byte"; return 1; }
}

run_pair tcp "" || status=1

shm_in_netns "2 x $size" || status=1
exit $status
