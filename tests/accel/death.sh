#!/bin/sh
# Peer death with both ends launched (FABSOCK_TCP_ACCEL=1), on shm and tcp:
# the victim is SIGKILLed while the survivor is blocked in recv, epoll_wait,
# poll, a send that the full window holds or a stream of one-byte sends that
# the provider's queue to the victim holds; the survivor must see EOF, a
# reset or EPIPE (like on the kernel) within 2 s of the kill (a liveness
# bound, not a timing: the liveness channel is the kernel connection), on
# the server side and on the client side, and the connection must have been
# accelerated.
. "$top_srcdir/tests/accel/lib.sh"
death_py="$top_srcdir/tests/accel/death.py"
status=0
ms() { date +%s%3N; }

one() { # provider, survivor side (server|client), wait kind
	prov=$1 sside=$2 kind=$3
	vside=client
	[ "$sside" = client ] && vside=server
	port=$(free_port)
	rm -f "$tmp/s.out" "$tmp/v.out"
	env="env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=$prov FABSOCK_LOG=info"
	if [ "$sside" = server ]; then
		$env "$launcher" -- "$python" "$death_py" survivor server "$port" "$kind" \
			>"$tmp/s.out" 2>"$tmp/s.log" &
		spid=$!
		wait_ready "$tmp/s.out" || return 1
		$env "$launcher" -- "$python" "$death_py" victim client "$port" "$kind" \
			>"$tmp/v.out" 2>"$tmp/v.log" &
		vpid=$!
	else
		$env "$launcher" -- "$python" "$death_py" victim server "$port" "$kind" \
			>"$tmp/v.out" 2>"$tmp/v.log" &
		vpid=$!
		wait_ready "$tmp/v.out" || return 1
		$env "$launcher" -- "$python" "$death_py" survivor client "$port" "$kind" \
			>"$tmp/s.out" 2>"$tmp/s.log" &
		spid=$!
	fi
	pids="$pids $spid $vpid"
	wait_line "$tmp/v.out" ready && wait_line "$tmp/s.out" ready ||
		{ echo "FAIL: $prov $sside $kind: not ready"; cat "$tmp/s.log" "$tmp/v.log"; return 1; }
	sleep 0.3 # the survivor is blocked by now
	t0=$(ms)
	kill -9 "$vpid"
	wait "$spid"
	rc=$?
	t1=$(ms)
	wait "$vpid" 2>/dev/null
	out=$(grep survivor: "$tmp/s.out")
	acc=$(counter "$tmp/s.log" accelerated)
	echo "$prov: survivor $sside in $kind: ${out#survivor: } after $((t1 - t0)) ms (accelerated: $acc)"
	[ "$rc" -eq 0 ] || { echo "FAIL: survivor exit $rc"; tail -n 5 "$tmp/s.log"; return 1; }
	[ $((t1 - t0)) -lt 2000 ] || { echo "FAIL: the survivor learnt of the death too late"; return 1; }
	[ "$acc" -ge 1 ] || { echo "FAIL: the connection was not accelerated"; return 1; }
}

for prov in shm tcp; do
	for side in server client; do
		for kind in recv epoll poll send smallsend; do
			one "$prov" "$side" "$kind" || status=1
		done
	done
done
exit $status
