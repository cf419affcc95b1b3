#!/bin/sh
# shm peers wake each other through their bells (/dev/shm/fsk-bell.<region>,
# a page, and fsk-ring.<region>, a FIFO). A peer whose bell is not usable is
# refused, never slept on unwoken: with the server's bell page replaced by
# one of another magic, and with its FIFO removed, the client's connection
# goes to the kernel (counter fallback_prov_init) and the echo is still
# byte-exact; with the bell intact the same pair is accelerated on shm and
# its wake-ups went through the bells.
# dpdk endpoints (a memif pair) have bells too, keyed by their address
# (fsk-bell.dpdk-<ip>:<port>): present and 0600 while the process runs, rung
# by a peer on this host, removed at exit, and those of a process killed by
# SIGKILL removed by the next process that opens such an endpoint.
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

# dpdk_bells: a memif echo pair; the files of the server while it runs and
# after a SIGKILL, and their reclaim by the next process.
dpdk_bells() {
	port=$(free_port)
	sock="$tmp/memif.sock"
	rm -f "$tmp/srv.out"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 60 "$launcher" \
		--dpdk "net_memif0,role=server,socket=$sock" --ip 198.19.77.1/24 -- \
		"$python" "$echo_py" server "$port" "$size" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	page=$(ls /dev/shm/fsk-bell.dpdk-198.19.77.1:* 2>/dev/null | head -n1)
	ring=/dev/shm/fsk-ring.${page#/dev/shm/fsk-bell.}
	[ -f "$page" ] && [ -p "$ring" ] ||
		{ echo "FAIL: dpdk: the server has no bell files ('$page')"; cat "$tmp/srv.log"; return 1; }
	[ "$(stat -c %a "$page")" = 600 ] && [ "$(stat -c %a "$ring")" = 600 ] ||
		{ echo "FAIL: dpdk: bell files not 0600"; return 1; }
	env FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 60 "$launcher" \
		--dpdk "net_memif0,role=client,socket=$sock" --ip 198.19.77.2/24 -- \
		"$python" "$echo_py" client "$port" "$size" >"$tmp/cli.out" 2>"$tmp/cli.log" ||
		{ echo "FAIL: dpdk: client failed"; tail -n 5 "$tmp/cli.log"; return 1; }
	grep -q "byte-exact" "$tmp/cli.out" || { echo "FAIL: dpdk: $(cat "$tmp/cli.out")"; return 1; }
	acc=$(counter "$tmp/cli.log" conn_accel_dpdk)
	bells=$(counter "$tmp/cli.log" bells)
	left=$(ls /dev/shm/fsk-*dpdk-198.19.77.2:* 2>/dev/null | wc -l)
	echo "dpdk: accelerated $acc, client rang $bells bells, client files left after exit: $left"
	[ "$acc" -eq 1 ] && [ "$left" -eq 0 ] || { echo "FAIL: dpdk: expected accelerated, no files left"; return 1; }
	# a listener that dies without its exit handlers leaves its files ...
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 60 "$launcher" \
		--dpdk "net_memif0,role=server,socket=$tmp/memif2.sock" --ip 198.19.77.3/24 -- \
		"$python" "$echo_py" server "$port" 1 >"$tmp/srv.out" 2>"$tmp/srv2.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv2.log"; return 1; }
	page=$(ls /dev/shm/fsk-bell.dpdk-198.19.77.3:* 2>/dev/null | head -n1)
	ring=/dev/shm/fsk-ring.${page#/dev/shm/fsk-bell.}
	[ -f "$page" ] && [ -p "$ring" ] || { echo "FAIL: dpdk: the listener has no bell files"; return 1; }
	pkill -KILL -f "^$python $echo_py server $port"
	wait "$spid" 2>/dev/null
	[ -f "$page" ] && [ -p "$ring" ] || { echo "FAIL: dpdk: files gone before any reclaim"; return 1; }
	# ... until the next process that opens a dpdk endpoint (a listener that
	# exits at once, removing its own files)
	env FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 60 "$launcher" \
		--dpdk "net_memif0,role=server,socket=$tmp/memif3.sock" --ip 198.19.77.4/24 -- \
		"$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()' \
		2>"$tmp/srv3.log" || { echo "FAIL: dpdk: the third process failed"; cat "$tmp/srv3.log"; return 1; }
	[ ! -e "$page" ] && [ ! -e "$ring" ] ||
		{ echo "FAIL: dpdk: the bell files of a killed process were not reclaimed"; return 1; }
	left=$(ls /dev/shm/fsk-*dpdk-198.19.77.* 2>/dev/null | wc -l)
	[ "$left" -eq 0 ] || { echo "FAIL: dpdk: $left bell files left"; ls /dev/shm; return 1; }
	echo "dpdk: the bell files of a killed listener were reclaimed by the next process"
}

run_case intact "" || status=1
run_case "bad magic" 'printf "notabell" | dd of="$page" conv=notrunc status=none' || status=1
run_case "no FIFO" 'rm -f "$ring"' || status=1
run_case "not a FIFO" 'rm -f "$ring" && : >"$ring" && chmod 600 "$ring"' || status=1
dpdk_bells || status=1
exit $status
