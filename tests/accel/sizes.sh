#!/bin/sh
# Both ends launched (acceleration on by default), over shm and over tcp: 24
# echo streams of random sizes 1 B .. 1 MiB (the first exactly 1 B and 1 MiB),
# 4 at a time, each half-closed after its last byte, byte-exact with EOF; the
# counters show every connection accelerated and every byte over the provider.
. "$top_srcdir/tests/accel/lib.sh"
streams_py="$top_srcdir/tests/accel/streams.py"
conns=24
status=0

for prov in shm tcp; do
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=$prov FABSOCK_LOG=info timeout 90 \
		"$launcher" -- "$python" "$streams_py" server "$port" "$conns" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; status=1; continue; }
	env FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=$prov FABSOCK_LOG=info timeout 90 \
		"$launcher" -- "$python" "$streams_py" client "$port" "$conns" 4 "$$" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	sed "s/^/$prov: /" "$tmp/cli.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $prov: client $crc server $src";
		grep -v 'active:' "$tmp/cli.log" | tail -n 5; status=1; continue; }
	total=$(sed -n 's/^client: [0-9]* streams, \([0-9]*\) bytes each way.*/\1/p' "$tmp/cli.out")
	for side in cli srv; do
		tx=$(counter "$tmp/$side.log" "bytes_tx_$prov")
		rx=$(counter "$tmp/$side.log" "bytes_rx_$prov")
		n=$(counter "$tmp/$side.log" "conn_accel_$prov")
		echo "$prov: $side: $n connections accelerated, sent $tx, received $rx (payload ${total:-?} each way)"
		[ "$n" -eq $conns ] && [ "$tx" -eq "${total:-0}" ] && [ "$rx" -eq "${total:-0}" ] ||
			{ echo "FAIL: $prov: $side: counters do not show every byte accelerated"; status=1; }
	done
done
exit $status
