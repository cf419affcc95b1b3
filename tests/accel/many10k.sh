#!/bin/sh
# 10,000 concurrent accelerated connections: all open at once through one epoll
# echo server, each echoing random sizes, checked byte for byte; every
# connection accelerated, none reset, and resident memory per connection within
# the receive window plus overhead (README). Two runs:
#  - two processes (server, client): up to 10,000 connections;
#  - one process (client and server threads): up to 10,000 accelerated sockets.
# Each accelerated socket holds two fds (the app's and the stack's private
# duplicate, its liveness channel), so RLIMIT_NOFILE bounds the count: the soft
# limit is raised to the hard one, and the run says when the hard limit (20,000
# in this CI container, which may not raise it) made it smaller.
. "$top_srcdir/tests/accel/lib.sh"
many="$top_builddir/tests/accel/many"
want=10000
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
ulimit -n "$hard" || { echo "FAIL: cannot raise the soft fd limit to $hard"; exit 1; }
reserve=64 # listener, epoll sets, provider fds, stdio
status=0

check_counters() { # log, expected accelerated sockets
	acc=$(counter "$1" conn_accel_shm)
	rst=$(counter "$1" conn_resets)
	echo "  $acc sockets accelerated, $rst resets"
	[ "$acc" -eq "$2" ] && [ "$rst" -eq 0 ] ||
		{ echo "FAIL: expected $2 accelerated sockets and no reset"; return 1; }
}

# Two processes: each needs 2 fds per connection.
n=$(( (hard - reserve) / 2 )); [ $n -gt $want ] && n=$want
[ $n -lt $want ] && echo "RLIMIT_NOFILE hard limit $hard: $n connections instead of $want"
echo "two processes, $n connections:"
port=$(free_port)
rm -f "$tmp/srv.out"
env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
	MANY_TIMEOUT_S=200 timeout 240 "$launcher" -- "$many" server "$port" $n \
	>"$tmp/srv.out" 2>"$tmp/srv.log" &
spid=$!
pids="$pids $spid"
wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; exit 1; }
# 256 KiB window (balanced profile) + 16 KiB of per-connection state at most
env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
	MANY_TIMEOUT_S=200 MANY_MAX_KIB_PER_CONN=$((256 + 16)) timeout 240 "$launcher" -- \
	"$many" client "$port" $n 3 4096 >"$tmp/cli.out" 2>"$tmp/cli.log"
crc=$?
wait $spid
src=$?
cat "$tmp/cli.out" "$tmp/srv.out" | grep -v listening | sed 's/^/  /'
if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
	echo "FAIL: client $crc server $src"
	grep -v "info: counter" "$tmp/cli.log" | tail -n 5
	grep -v "info: counter" "$tmp/srv.log" | tail -n 5
	status=1
else
	check_counters "$tmp/cli.log" $n || status=1
	check_counters "$tmp/srv.log" $n || status=1
fi

# One process: 4 fds per connection (both ends).
n=$(( (hard - reserve) / 4 )); [ $n -gt $((want / 2)) ] && n=$((want / 2))
echo "one process, $n connections ($((2 * n)) accelerated sockets):"
# both ends: 2 x (256 KiB window + 16 KiB)
env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
	MANY_TIMEOUT_S=200 MANY_MAX_KIB_PER_CONN=$((2 * (256 + 16))) timeout 240 "$launcher" -- \
	"$many" both $n 3 4096 >"$tmp/out" 2>"$tmp/log"
rc=$?
sed 's/^/  /' "$tmp/out"
if [ $rc -ne 0 ]; then
	echo "FAIL: exit $rc"
	grep -v "info: counter" "$tmp/log" | tail -n 10
	status=1
else
	check_counters "$tmp/log" $((2 * n)) || status=1
fi
exit $status
