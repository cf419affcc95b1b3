#!/bin/sh
# Real programs, accelerated: iperf3 over 127.0.0.1 with both ends launched
# with FABSOCK_TCP_ACCEL=1 over shm: two parallel streams client → server
# (-P 2), then one stream server → client (-R). iperf3 opens a control
# connection plus one per stream: all must be accelerated. Bytes: iperf3's
# own accounting (JSON: 0 < received <= sent) and libfabsock's counters (the
# sender's bytes_tx_shm = the receiver's bytes_rx_shm, covering the data
# iperf3 counted plus its control messages). No timings are checked.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-iperf3-accel
fsk_need_preload
fsk_need_cmd iperf3 ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
export FABSOCK_TCP_ACCEL=1 FABSOCK_PROVIDERS=shm FABSOCK_NEGO_WAIT_MS=2000

# run NAME STREAMS [iperf3 client options]: iperf3's "sent received" bytes
# go to $T/NAME.totals.
run() {
	name=$1
	streams=$2
	shift 2
	port=$(fsk_free_port) || fsk_fail "no free port"
	# -1: the server serves one test and exits (and dumps its counters).
	fsk_bg timeout -k 5 60 "$L" --log info --log-file "$T/$name-server.log" -- \
		iperf3 -s -1 -B 127.0.0.1 -p "$port" >"$T/$name-server.out" 2>&1
	spid=$fsk_last_pid
	fsk_wait_listen "$port" 150 || fsk_fail "$name: iperf3 server did not listen on $port"
	timeout -k 5 40 "$L" --log info --log-file "$T/$name-client.log" -- \
		iperf3 -c 127.0.0.1 -p "$port" -t 2 -J "$@" >"$T/$name.json" 2>"$T/$name-client.err" ||
		{
			cat "$T/$name.json" "$T/$name-client.err"
			fsk_fail "$name: iperf3 client failed"
		}
	wait "$spid" || fsk_fail "$name: iperf3 server failed ($(tail -n 3 "$T/$name-server.out"))"
	fsk_assert_accel "$T/$name-client.log" "$name: iperf3 client" $((streams + 1)) shm
	fsk_assert_accel "$T/$name-server.log" "$name: iperf3 server" $((streams + 1)) shm
	"$FSK_PYTHON" -c 'import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"])' "$T/$name.json" >"$T/$name.totals" ||
		fsk_fail "$name: no totals in iperf3's JSON"
}

# check NAME SENDER_LOG RECEIVER_LOG
check() {
	read -r sent received <"$T/$1.totals"
	set -- "$1" "$sent" "$received" "$2" "$3"
	# iperf3's sender counts what it wrote, its receiver what it read before
	# the end of the test: received <= sent (as on the kernel)
	[ "$3" -gt 0 ] && [ "$3" -le "$2" ] || fsk_fail "$1: iperf3 sent $2 bytes, received $3"
	tx=$(fsk_counter "$4" bytes_tx_shm)
	rx=$(fsk_counter "$5" bytes_rx_shm)
	[ "$tx" = "$rx" ] || fsk_fail "$1: sender put $tx bytes on shm, receiver took $rx"
	# the control connection's messages are small: at most 1 MiB on top
	[ "$tx" -ge "$2" ] && [ "$tx" -le $(($2 + 1048576)) ] ||
		fsk_fail "$1: iperf3 moved $2 bytes but bytes_tx_shm is $tx"
	fsk_note "$1: iperf3 sent $2, received $3 bytes; shm carried $tx = $rx (with control)"
}

run forward 2 -P 2
check forward "$T/forward-client.log" "$T/forward-server.log"
run reverse 1 -R
check reverse "$T/reverse-server.log" "$T/reverse-client.log"
echo "PASS: iperf3 -P 2 and -R accelerated over shm, every byte accounted for"
