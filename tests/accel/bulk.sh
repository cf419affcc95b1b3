#!/bin/sh
# Both ends launched with FABSOCK_TCP_ACCEL=1: a 1 GiB stream, checked by
# sha256 and byte count, over shm and over tcp; libfabsock's counters account
# for every byte, and on shm the kernel's TCP segment counters (in a private
# network namespace) do not grow with the payload.
. "$top_srcdir/tests/accel/lib.sh"
size=$((1 << 30))
status=0
bulk_py="$top_srcdir/tests/accel/bulk.py"

run_pair() { # provider, netns prefix ("" or "ip netns exec NS")
	prov=$1
	nsexec=$2
	port=$(free_port)
	rm -f "$tmp/srv.out"
	$nsexec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 200 "$launcher" -- "$python" "$bulk_py" server "$port" "$size" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	$nsexec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 200 "$launcher" -- "$python" "$bulk_py" client "$port" "$size" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $prov: client $crc server $src";
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"; return 1; }
	tx=$(counter "$tmp/cli.log" "bytes_tx_$prov")
	rx=$(counter "$tmp/srv.log" "bytes_rx_$prov")
	echo "$prov: client sent $tx, server received $rx over the fabric (payload $size)"
	[ "$tx" -eq "$size" ] && [ "$rx" -eq "$size" ] ||
		{ echo "FAIL: $prov: counters do not account for every byte"; return 1; }
}

run_pair tcp "" || status=1

shm_in_netns "$size" || status=1
exit $status
