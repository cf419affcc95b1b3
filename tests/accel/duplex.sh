#!/bin/sh
# Every byte exactly once with a reader thread and a writer thread on one
# accelerated socket (full duplex), and a reader woken at once by a peer that
# wrote while it had unread data of its own; both ends launched on shm over
# 127.0.0.1 (tests/accel/duplex.c).
#  - full duplex, writes of 16..1500 B and of 1..16 B (the small ones are
#    coalesced: stk_cork.h), several connections at a time, 10 MB each way;
#  - one way, 8 connections at once, writes of 16..1500 B (a single sender
#    thread per connection, its staged small writes behind its own sleeps);
#  - wake: the server sleeps in read(), the client writes and then stays away
#    from the socket past the 1 s safety net of a sleep.
# Each pair of processes runs REPEAT times; every connection must be
# accelerated, none reset, and no sleep woken by the safety net
# (sleep_late_wakes) in any process.
. "$top_srcdir/tests/accel/lib.sh"
duplex="$top_builddir/tests/accel/duplex"
REPEAT=${DUPLEX_REPEAT:-3}
# Under ThreadSanitizer (make check-tsan) every access is checked, ~10 times
# slower: fewer bytes (the races show with fewer; 16 threads moving 160 MB
# under TSan on a loaded 2-CPU machine outlast the grace times of the liveness
# channel, as any program starved that long would).
mb=1000000
[ "${FSK_TSAN:-no}" = yes ] && mb=200000
status=0

# pair NAME CONNS SMODE SARGS CMODE CARGS: one server (duplex SMODE PORT
# SARGS) and one client (duplex CMODE PORT CARGS), checked; ONEWAY=1: one way.
pair() {
	name=$1 conns=$2
	port=$(free_port)
	rm -f "$tmp/srv.out" "$tmp/cli.out"
	# shellcheck disable=SC2086 # argument lists
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		DUPLEX_TIMEOUT_S=100 DUPLEX_ONEWAY="${ONEWAY:-0}" timeout 120 "$launcher" -- \
		"$duplex" "$3" "$port" $4 >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	# shellcheck disable=SC2086
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		DUPLEX_TIMEOUT_S=100 DUPLEX_ONEWAY="${ONEWAY:-0}" timeout 120 "$launcher" -- \
		"$duplex" "$5" "$port" $6 >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	grep -h '^ok' "$tmp/cli.out" "$tmp/srv.out" | sed "s/^/$name: /"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || {
		echo "FAIL: $name: client $crc server $src"
		for side in cli srv; do
			echo "--- $side:"
			grep -a 'duplex:\|warn\|error\|ThreadSanitizer\|SUMMARY' "$tmp/$side.log" | head -n 30
		done
		return 1
	}
	for side in cli srv; do
		acc=$(counter "$tmp/$side.log" conn_accel_shm)
		rst=$(counter "$tmp/$side.log" conn_resets)
		late=$(counter "$tmp/$side.log" sleep_late_wakes)
		[ "$acc" -eq "$conns" ] && [ "$rst" -eq 0 ] && [ "$late" -eq 0 ] || {
			echo "FAIL: $name: $side: $acc of $conns connections accelerated over shm," \
				"$rst resets, $late sleeps woken by the safety net (sleep_late_wakes)"
			return 1
		}
	done
}

rep=0
while [ $rep -lt "$REPEAT" ]; do
	rep=$((rep + 1))
	ONEWAY=0
	pair "duplex 16..1500 B #$rep" 4 server "4 $((10 * mb)) 16 1500" \
		client "4 $((10 * mb)) 16 1500 2" || status=1
	pair "duplex 1..16 B #$rep" 2 server "2 $((3 * mb)) 1 16" \
		client "2 $((3 * mb)) 1 16 2" || status=1
	ONEWAY=1
	pair "one way, 8 at once #$rep" 8 server "8 $((20 * mb)) 16 1500" \
		client "8 $((20 * mb)) 16 1500 8" || status=1
done
ONEWAY=0
pair "wake" 1 wake-server 3 wake-client "3 1100" || status=1
exit $status
