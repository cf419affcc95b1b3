#!/bin/sh
# Real programs, accelerated: sockperf TCP with both ends launched with
# FABSOCK_TCP_ACCEL=1 over shm. Ping-pong (64 B, 2 s): replies received,
# none dropped, duplicated or out of order. Throughput (16 KiB, 2 s): every
# byte sockperf says it sent went over shm (client bytes_tx_shm = messages x
# 16384) and arrived (server bytes_rx_shm = client bytes_tx_shm). Both runs
# must be accelerated (libfabsock's counters, dumped at exit). No timings.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-sockperf-accel
fsk_need_preload
fsk_need_cmd sockperf ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
export FABSOCK_TCP_ACCEL=1 FABSOCK_PROVIDERS=shm FABSOCK_NEGO_WAIT_MS=2000

# run MODE SIZE: one server, one client (ping-pong | throughput); logs in $T/MODE-*.
run() {
	mode=$1
	size=$2
	port=$(fsk_free_port) || fsk_fail "no free port"
	fsk_bg timeout -k 5 60 "$L" --log info --log-file "$T/$mode-server.log" -- \
		sockperf server --tcp -i 127.0.0.1 -p "$port" >"$T/$mode-server.out" 2>&1
	spid=$fsk_last_pid
	fsk_wait_listen "$port" 150 || fsk_fail "$mode: sockperf server did not listen on $port"
	timeout -k 5 30 "$L" --log info --log-file "$T/$mode-client.log" -- \
		sockperf "$mode" --tcp -i 127.0.0.1 -p "$port" -t 2 -m "$size" \
		>"$T/$mode-client.out" 2>&1 ||
		{
			cat "$T/$mode-client.out"
			fsk_fail "$mode: sockperf client failed"
		}
	# SIGINT: sockperf's server handles it and exits, so libfabsock dumps its
	# counters (SIGTERM kills sockperf outright, as on the kernel).
	kill -INT "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	fsk_assert_accel "$T/$mode-client.log" "$mode: sockperf client" 1 shm
	fsk_assert_accel "$T/$mode-server.log" "$mode: sockperf server" 1 shm
}

run ping-pong 64
o="$T/ping-pong-client.out"
recv=$(sed -n 's/.*\[Valid Duration\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$o" | head -n 1)
[ -n "$recv" ] && [ "$recv" -gt 0 ] || { cat "$o"; fsk_fail "ping-pong: no messages received"; }
grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$o" ||
	{ cat "$o"; fsk_fail "ping-pong: messages dropped, duplicated or out of order"; }
ptx=$(fsk_counter "$T/ping-pong-client.log" bytes_tx_shm)
prx=$(fsk_counter "$T/ping-pong-server.log" bytes_rx_shm)
[ "$ptx" -ge $((recv * 64)) ] && [ "$ptx" = "$prx" ] ||
	fsk_fail "ping-pong: client sent $ptx bytes over shm, server got $prx, replies $recv x 64"
fsk_note "ping-pong: $recv round trips over shm ($ptx bytes each way), none dropped or out of order"

run throughput 16384
o="$T/throughput-client.out"
msgs=$(sed -n 's/.*Total of \([0-9]*\) messages sent.*/\1/p' "$o" | head -n 1)
[ -n "$msgs" ] && [ "$msgs" -gt 0 ] || { cat "$o"; fsk_fail "throughput: no messages sent"; }
ttx=$(fsk_counter "$T/throughput-client.log" bytes_tx_shm)
trx=$(fsk_counter "$T/throughput-server.log" bytes_rx_shm)
# sockperf counts the message its end-of-run timer interrupted (a send that
# returned EINTR, or a partial one): one message of slack, never more
[ "$ttx" -le $((msgs * 16384)) ] && [ "$ttx" -ge $(((msgs - 1) * 16384)) ] ||
	fsk_fail "throughput: sockperf sent $msgs x 16384 bytes, bytes_tx_shm is $ttx"
[ "$trx" = "$ttx" ] || fsk_fail "throughput: client sent $ttx bytes over shm, server received $trx"
fsk_note "throughput: $msgs x 16 KiB = $ttx bytes over shm, all received"
echo "PASS: sockperf TCP ping-pong and throughput accelerated over shm"
