#!/bin/sh
# Real programs, pass-through: sockperf ping-pong (TCP, then UDP), server and
# client under the launcher, each bounded (-t 2 and timeout). sockperf
# checks every reply's sequence number: the test requires messages received
# and zero dropped, duplicated and out-of-order ones. Latency is not checked
# here (that is bench/demo.sh's job).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-sockperf
fsk_need_preload
fsk_need_cmd sockperf ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER

pingpong() {
	proto=$1 # tcp | udp
	port=$(fsk_free_port) || fsk_fail "no free port"
	flag=
	[ "$proto" = tcp ] && flag=--tcp
	fsk_bg timeout -k 5 60 "$L" --log info --log-file "$T/$proto-server.log" -- \
		sockperf server $flag -i 127.0.0.1 -p "$port" >"$T/$proto-server.out" 2>&1
	spid=$fsk_last_pid
	if [ "$proto" = tcp ]; then
		fsk_wait_listen "$port" 150
	else
		fsk_wait_udp "$port" 150
	fi || fsk_fail "$proto: sockperf server did not bind $port"
	timeout -k 5 30 "$L" --log info --log-file "$T/$proto-client.log" -- \
		sockperf ping-pong $flag -i 127.0.0.1 -p "$port" -t 2 -m 64 --mps 10000000 \
		>"$T/$proto-client.out" 2>&1 ||
		{
			cat "$T/$proto-client.out"
			fsk_fail "$proto: sockperf ping-pong failed"
		}
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	fsk_assert_loaded "$T/$proto-server.log" "$proto: sockperf server"
	fsk_assert_loaded "$T/$proto-client.log" "$proto: sockperf client"
	o="$T/$proto-client.out"
	recv=$(sed -n 's/.*\[Valid Duration\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$o" | head -n 1)
	[ -n "$recv" ] && [ "$recv" -gt 0 ] || { cat "$o"; fsk_fail "$proto: no messages received"; }
	grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$o" ||
		{ cat "$o"; fsk_fail "$proto: messages dropped, duplicated or out of order"; }
	echo "# $proto: $recv round trips, none dropped, duplicated or out of order"
}

pingpong tcp
pingpong udp
echo "PASS: sockperf ping-pong TCP and UDP under libfabsock"
