#!/bin/sh
# A client's providers open in the background as soon as a libfabsock server
# greets its connection (the warm-up), not in its first write; a signal
# handler the app installs while that open runs stays the app's (the open puts
# back only the handlers libfabric installed). The client connects, installs
# a SIGUSR1 handler 30 ms later (libfabric takes ~0.2 s to load), writes after
# 1.5 s, and then raises SIGUSR1: the handler must run. The client's log must
# show the warm-up and the handler kept.
. "$top_srcdir/tests/accel/lib.sh"
py="$top_srcdir/tests/accel/warmup.py"
port=$(free_port)
env FABSOCK_PROVIDERS=shm FABSOCK_NEGO_WAIT_MS=2000 timeout 30 "$launcher" --log info -- \
	"$python" "$py" server "$port" >"$tmp/srv.out" 2>"$tmp/srv.log" &
spid=$!
pids="$spid"
wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; exit 1; }
env FABSOCK_PROVIDERS=shm FABSOCK_NEGO_WAIT_MS=2000 timeout 30 "$launcher" --log debug \
	--log-file "$tmp/cli.log" -- "$python" "$py" client "$port" >"$tmp/cli.out" 2>&1
crc=$?
wait $spid
src=$?
cat "$tmp/cli.out"
status=0
[ $crc -eq 0 ] || { echo "FAIL: client exited $crc"; status=1; }
[ $src -eq 0 ] || { echo "FAIL: server exited $src"; tail -n 5 "$tmp/srv.log"; status=1; }
grep -q "opening the providers in the background" "$tmp/cli.log" ||
	{ echo "FAIL: no warm-up in the client's log"; status=1; }
grep -q "signal 10: the app changed its handler during the open: kept" "$tmp/cli.log" ||
	{ echo "FAIL: the client's log does not show its SIGUSR1 handler kept"; status=1; }
[ "$(counter "$tmp/cli.log" conn_accel_shm)" -ge 1 ] ||
	{ echo "FAIL: the connection was not accelerated over shm"; status=1; }
[ $status -eq 0 ] || { echo "--- client log"; grep -a "signal\|background\|accelerated\|warn" "$tmp/cli.log" | head -20; }
exit $status
