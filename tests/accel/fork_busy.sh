#!/bin/sh
# fork while the peer's app is busy: both ends launched with
# FABSOCK_TCP_ACCEL=1, over shm and over tcp. fork.py's "busy" scenario, 6
# rounds of 1 or 4 accelerated connections: the peer's app sleeps or computes
# for 2.5 s (no libfabsock call) while the server forks and writes on every
# connection; then the peer sends 300000 bytes on each before reading. The
# peer's negotiation thread must answer every migration (no give-up, no lost
# byte): the fork returns before the peer's busy time ends (a flag file the
# peer creates then: an order, not a timing), exact bytes both ways, every
# connection migrated on both ends, migrate_peer_gone 0, and no sleep ended
# by the safety net.
. "$top_srcdir/tests/accel/lib.sh"
fork_py="$top_srcdir/tests/accel/fork.py"
want=15 # connections over fork.py's rounds
status=0

run() { # provider
	prov=$1
	port=$(free_port)
	rm -f "$tmp/srv.out" "$tmp"/busy.*
	export FSK_BUSY_FLAG="$tmp/busy"
	# both ends log at debug level: slower between a MIGRATE's doorbell and
	# its post, so the peer's thread often wakes before the message is there
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=debug \
		timeout 60 "$launcher" -- "$python" "$fork_py" server busy "$port" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=debug \
		timeout 60 "$launcher" -- "$python" "$fork_py" client busy "$port" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: $prov: client $crc server $src"
		grep -a -E "FAIL|warn|error" "$tmp/cli.log" "$tmp/srv.log" | grep -v "fi_getinfo" | head -20
		return 1
	fi
	acc=$(counter "$tmp/srv.log" "conn_accel_$prov")
	fork=$(counter "$tmp/srv.log" migrate_fork)
	peer=$(counter "$tmp/cli.log" migrate_peer)
	gone=$(($(counter "$tmp/srv.log" migrate_peer_gone) + $(counter "$tmp/cli.log" migrate_peer_gone)))
	late=$(($(counter "$tmp/srv.log" sleep_late_wakes) + $(counter "$tmp/cli.log" sleep_late_wakes)))
	echo "$prov: $acc accelerated, $fork migrated at fork, $peer answered by the busy peer," \
		"$gone peer(s) gone, $late late wake(s)"
	[ "$acc" -ge $want ] || { echo "FAIL: $prov: $acc connection(s) accelerated, want $want"; return 1; }
	[ "$fork" -ge $want ] && [ "$peer" -ge $want ] ||
		{ echo "FAIL: $prov: not every connection migrated on both ends"; return 1; }
	[ "$gone" = 0 ] || { echo "FAIL: $prov: a migration ended without the peer's answer"; return 1; }
	[ "$late" = 0 ] || { echo "FAIL: $prov: a sleep ended by the safety net"; return 1; }
}

for prov in shm tcp; do
	run "$prov" || status=1
done
exit $status
