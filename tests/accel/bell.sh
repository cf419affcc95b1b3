#!/bin/sh
# shm peers wake each other through their bells (/dev/shm/fsk-bell.<region>,
# a page, and fsk-ring.<region>, a FIFO). A peer whose bell is not usable is
# refused, never slept on unwoken: with the server's bell page replaced by
# one of another magic, and with its FIFO removed, the client's connection
# goes to the kernel (counter fallback_prov_init) and the echo is still
# byte-exact; with the bell intact the same pair is accelerated on shm and
# its wake-ups went through the bells.
. "$top_srcdir/tests/accel/lib.sh"
size=$((1 << 20))
status=0

# run_case NAME DAMAGE: DAMAGE is a shell command run on the server's bell
# files ($page, $ring) before the client connects; "" leaves them intact.
run_case() {
	name=$1
	damage=$2
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$echo_py" server "$port" "$size" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	# the server's files: named after the region of its python process
	page= ring= spy=
	for p in $(pgrep -f "echo.py server $port"); do
		for f in /dev/shm/fsk-bell."$p":*; do
			[ -e "$f" ] && spy=$p page=$f ring=/dev/shm/fsk-ring.${f#/dev/shm/fsk-bell.}
		done
	done
	[ -f "$page" ] && [ -p "$ring" ] ||
		{ echo "FAIL: $name: the server has no bell files (pid $spy: '$page' '$ring')"; return 1; }
	[ "$(stat -c %a "$page")" = 600 ] && [ "$(stat -c %a "$ring")" = 600 ] ||
		{ echo "FAIL: $name: bell files not 0600"; return 1; }
	[ -z "$damage" ] || eval "$damage"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$echo_py" client "$port" "$size" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $name: client $crc server $src";
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"; return 1; }
	grep -q "byte-exact" "$tmp/cli.out" || { echo "FAIL: $name: $(cat "$tmp/cli.out")"; return 1; }
	acc=$(counter "$tmp/cli.log" conn_accel_shm)
	if [ -z "$damage" ]; then
		bells=$(($(counter "$tmp/cli.log" bells) + $(counter "$tmp/srv.log" bells)))
		dbs=$(($(counter "$tmp/cli.log" doorbells) + $(counter "$tmp/srv.log" doorbells)))
		echo "$name: accelerated $acc, bells $bells, doorbells $dbs"
		[ "$acc" -eq 1 ] && [ "$dbs" -eq 0 ] ||
			{ echo "FAIL: $name: expected shm woken by bells"; return 1; }
	else
		fb=$(counter "$tmp/cli.log" fallback_prov_init)
		echo "$name: accelerated $acc, fallback_prov_init $fb"
		grep -a "is unusable" "$tmp/cli.log" | head -n1
		[ "$acc" -eq 0 ] && [ "$fb" -eq 1 ] ||
			{ echo "FAIL: $name: a peer with an unusable bell was not refused"; return 1; }
		grep -aq "is unusable" "$tmp/cli.log" ||
			{ echo "FAIL: $name: no log line names the refused bell"; return 1; }
	fi
}

run_case intact "" || status=1
run_case "bad magic" 'printf "notabell" | dd of="$page" conv=notrunc status=none' || status=1
run_case "no FIFO" 'rm -f "$ring"' || status=1
run_case "not a FIFO" 'rm -f "$ring" && : >"$ring" && chmod 600 "$ring"' || status=1
exit $status
