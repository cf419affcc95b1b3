#!/bin/sh
# 10,000 concurrent accelerated connections in one process (client and epoll
# server in two threads, 20,000 accelerated sockets): all open at once, each
# echoes random sizes, checked byte for byte; every connection accelerated, none
# reset, and resident memory per connection (both ends) within twice the receive
# window plus overhead (README). RLIMIT_NOFILE is raised for the run (each
# accelerated socket also keeps a private duplicate of its kernel socket).
. "$top_srcdir/tests/accel/lib.sh"
many="$top_builddir/tests/accel/many"
conns=10000
# 2 x (256 KiB window + 16 KiB of per-connection state) at most
limit=$((2 * (256 + 16)))
if ! ulimit -n 65536 2>/dev/null; then
	echo "SKIP: cannot raise RLIMIT_NOFILE to 65536 (needs root or a higher hard limit)"
	exit 77
fi
env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
	MANY_TIMEOUT_S=200 MANY_MAX_KIB_PER_CONN=$limit timeout 240 "$launcher" -- \
	"$many" both $conns 3 4096 >"$tmp/out" 2>"$tmp/log"
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; grep -v "info: counter" "$tmp/log" | tail -n 10; exit 1; }
acc=$(counter "$tmp/log" conn_accel_shm)
rst=$(counter "$tmp/log" conn_resets)
echo "$acc sockets accelerated (both ends), $rst resets"
[ "$acc" -eq $((2 * conns)) ] && [ "$rst" -eq 0 ] ||
	{ echo "FAIL: expected $((2 * conns)) accelerated sockets and no reset"; exit 1; }
exit 0
