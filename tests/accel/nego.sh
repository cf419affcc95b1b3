#!/bin/sh
# The lazy negotiation (stk_lazy.h) with FABSOCK_TCP_ACCEL=1, both ends launched:
#  - non-blocking connect, readiness through epoll (level and edge triggered) and
#    poll: SO_ERROR 0 as on the kernel, byte-exact echo, and the connection is
#    accelerated on both ends;
#  - one thread that connects, sleeps longer than FABSOCK_NEGO_WAIT_MS, then
#    accepts: client speaks first → accelerated; server speaks first → cleanly on
#    the kernel (the server cancels, the client removes HELLO and CANCEL); bytes
#    right and no stall (< 1 s) either way;
#  - a server that accepts late (1.5 s, far beyond the client's start-up):
#    client speaks first → kernel (its first write waited FABSOCK_NEGO_WAIT_MS),
#    the late HELLO removed; server speaks first → accelerated (the client's
#    blocking read answers the HELLO);
#  - a server stopped (SIGSTOP, 3 s) between its HELLO and its decision, longer
#    than every timeout of the negotiation: the client waits for the decision
#    instead of settling alone (which split the connection between kernel and
#    fabric): byte-exact, accelerated on both ends.
. "$top_srcdir/tests/accel/lib.sh"
nego_py="$top_srcdir/tests/accel/nego.py"
size=$((1 << 20))
wait_ms=50
status=0
export FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=$wait_ms FABSOCK_LOG=info

# expect LOG COUNTER VALUE LABEL
expect() {
	v=$(counter "$1" "$2")
	[ "$v" -eq "$3" ] || { echo "FAIL: $4: $2 = $v, expected $3"; tail -n 5 "$1"; return 1; }
}

for mode in lt et poll; do
	port=$(free_port)
	rm -f "$tmp/srv.out"
	timeout 30 "$launcher" -- "$python" "$echo_py" server "$port" "$size" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { status=1; continue; }
	timeout 30 "$launcher" -- "$python" "$nego_py" nbclient "$port" "$size" "$mode" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: nbclient $mode: client $crc server $src"
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"
		status=1
		continue
	fi
	expect "$tmp/cli.log" accelerated 1 "nbclient $mode (client)" || status=1
	expect "$tmp/srv.log" accelerated 1 "nbclient $mode (server)" || status=1
done

for order in client-first server-first; do
	timeout 30 "$launcher" -- "$python" "$nego_py" samethread "$order" $((wait_ms * 4)) \
		>"$tmp/st.out" 2>"$tmp/st.log"
	rc=$?
	cat "$tmp/st.out"
	[ $rc -eq 0 ] || { echo "FAIL: samethread $order"; tail -n 5 "$tmp/st.log"; status=1; continue; }
	if [ "$order" = client-first ]; then
		expect "$tmp/st.log" accelerated 2 "samethread $order" || status=1
	else
		expect "$tmp/st.log" accelerated 0 "samethread $order" || status=1
		expect "$tmp/st.log" nego_records_stripped 2 "samethread $order" || status=1
	fi
done

# late ARGS...: echo.py server accepting 1.5 s late, echo.py client; ARGS to both.
late() {
	port=$(free_port)
	rm -f "$tmp/srv.out"
	timeout 30 "$launcher" -- "$python" "$echo_py" server "$port" "$size" --accept-delay=1500 \
		"$@" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || return 1
	timeout 30 "$launcher" -- "$python" "$echo_py" client "$port" "$size" "$@" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: late accept $*: client $crc server $src";
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"; return 1; }
}

if late; then
	echo "late accept, client speaks first: byte-exact"
	expect "$tmp/cli.log" accelerated 0 "late accept, client first (client)" || status=1
	expect "$tmp/srv.log" accelerated 0 "late accept, client first (server)" || status=1
	expect "$tmp/cli.log" fallback_timeout 1 "late accept, client first (client)" || status=1
	expect "$tmp/cli.log" nego_records_stripped 1 "late accept, client first (client)" || status=1
else
	status=1
fi
if late --banner; then
	echo "late accept, server speaks first: byte-exact"
	expect "$tmp/cli.log" accelerated 1 "late accept, server first (client)" || status=1
	expect "$tmp/srv.log" accelerated 1 "late accept, server first (server)" || status=1
else
	status=1
fi
# The stopped server: $! is timeout's pid; its child is the server (the launcher
# execs it).
port=$(free_port)
rm -f "$tmp/srv.out"
FABSOCK_NEGO_WAIT_MS=1000 timeout 30 "$launcher" -- "$python" "$echo_py" server "$port" "$size" \
	>"$tmp/srv.out" 2>"$tmp/srv.log" &
spid=$!
pids="$pids $spid"
if wait_ready "$tmp/srv.out"; then
	srv=$(pgrep -P "$spid" | head -n 1)
	[ -n "$srv" ] || { echo "FAIL: stopped server: no server process"; exit 1; }
	timeout 30 "$launcher" -- "$python" "$nego_py" stopserver "$port" "$size" "$srv" 3000 \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	kill -CONT "$srv" 2>/dev/null
	wait $spid
	src=$?
	cat "$tmp/cli.out"
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: stopped server: client $crc server $src"
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"
		status=1
	else
		expect "$tmp/cli.log" accelerated 1 "stopped server (client)" || status=1
		expect "$tmp/srv.log" accelerated 1 "stopped server (server)" || status=1
	fi
else
	status=1
fi
exit $status
