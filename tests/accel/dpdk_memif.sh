#!/bin/sh
# Both ends launched on the dpdk provider (fabsock --dpdk), one host, two
# processes joined by a net_memif pair: 24 echo streams (1 B .. 1 MiB, 4 at a
# time, half-close) byte-exact, and the counters show every byte went over
# dpdk. Then a bad --dpdk device: one clear line, and the app runs on the
# kernel.
. "$top_srcdir/tests/accel/lib.sh"
streams_py="$top_srcdir/tests/accel/streams.py"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || { echo "FAIL: libdpdk-fi.so not built"; exit 1; }
sock="$tmp/memif.sock"
conns=24
status=0

# run SRV_DEV CLI_DEV: server and client of streams.py, both launched
run() {
	port=$(free_port)
	rm -f "$tmp/srv.out"
	on_dpdk "$1" 198.18.0.1/24 --provider dpdk -- \
		"$python" "$streams_py" server "$port" "$conns" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	on_dpdk "$2" 198.18.0.2/24 --provider dpdk -- \
		"$python" "$streams_py" client "$port" "$conns" 4 "$$" >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: client $crc server $src";
		grep -v 'active:' "$tmp/cli.log" | tail -n 5; grep -v 'active:' "$tmp/srv.log" | tail -n 5; return 1; }
}

# 1. dpdk over memif: every byte over the provider
run "net_memif0,role=server,socket=$sock" "net_memif0,role=client,socket=$sock" || status=1
total=$(sed -n 's/^client: [0-9]* streams, \([0-9]*\) bytes each way.*/\1/p' "$tmp/cli.out")
for side in cli srv; do
	tx=$(counter "$tmp/$side.log" bytes_tx_dpdk)
	rx=$(counter "$tmp/$side.log" bytes_rx_dpdk)
	n=$(counter "$tmp/$side.log" conn_accel_dpdk)
	echo "$side: $n connections over dpdk, sent $tx, received $rx (payload ${total:-?} each way)"
	[ "$n" -eq $conns ] && [ "$tx" -eq "${total:-0}" ] && [ "$rx" -eq "${total:-0}" ] ||
		{ echo "FAIL: $side: counters do not show every byte over dpdk"; status=1; }
done
grep -q 'warn\|error' "$tmp/cli.log" "$tmp/srv.log" &&
	{ echo "FAIL: warnings:"; grep -h 'warn\|error' "$tmp/cli.log" "$tmp/srv.log"; status=1; }
[ -e "$sock" ] && { echo "FAIL: memif socket $sock left behind"; status=1; }

# 2. a client that forks: the child never touches the parent's port (its
# connection uses the kernel), exits through exit(), and the parent goes on on
# dpdk (dpdk_fork.py)
port=$(free_port)
rm -f "$tmp/srv.out"
on_dpdk "net_memif0,role=server,socket=$sock" 198.18.0.1/24 --provider dpdk -- \
	"$python" "$streams_py" server "$port" 3 >"$tmp/srv.out" 2>"$tmp/srv.log" &
spid=$!
pids="$pids $spid"
if wait_ready "$tmp/srv.out"; then
	on_dpdk "net_memif0,role=client,socket=$sock" 198.18.0.2/24 --provider dpdk -- \
		"$python" "$top_srcdir/tests/accel/dpdk_fork.py" "$port" >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	n=$(counter "$tmp/srv.log" conn_accel_dpdk)
	echo "fork: client $crc, server $src, server connections over dpdk: $n (A and C; B from the child on the kernel)"
	[ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$n" -eq 2 ] ||
		{ echo "FAIL: fork on dpdk"; grep -v 'info: ' "$tmp/cli.log" | tail -n 60;
			echo "server:"; cat "$tmp/srv.out"; grep -v 'info: ' "$tmp/srv.log" | tail -n 60; status=1; }
else
	echo "FAIL: fork: server did not start"; status=1
fi

# 3. a device that does not exist: one line, the streams use the kernel
conns=4
run net_bogus0 net_bogus0 || status=1
for side in cli srv; do
	lines=$(grep -c 'warn\|error' "$tmp/$side.log")
	grep -q "warn: dpdk: .*net_bogus0.*kernel" "$tmp/$side.log" && [ "$lines" -eq 1 ] ||
		{ echo "FAIL: $side: expected one line naming net_bogus0, got:"; grep -v 'info:' "$tmp/$side.log"; status=1; }
	[ "$(counter "$tmp/$side.log" bytes_tx_dpdk)" -eq 0 ] || { echo "FAIL: bytes over dpdk"; status=1; }
done
grep -h "warn: dpdk" "$tmp/cli.log"
[ $status -eq 0 ] && echo PASS
exit $status
