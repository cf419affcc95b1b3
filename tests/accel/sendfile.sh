#!/bin/sh
# A large sendfile moves its connection to the kernel (the kernel sends
# page-cache pages without copying them): a python file server answers
# "small" (4 KiB + 7), "big" (8 MiB + 12345, one os.sendfile call) and
# "small" again on one shm connection. By default the big one migrates the
# connection (server migrate_sendfile 1, client migrate_peer 1), after the
# first answer went over shm, and every byte arrives; with
# FABSOCK_SENDFILE_KERNEL=0 the whole exchange stays on shm (no migration).
. "$top_srcdir/tests/accel/lib.sh"
status=0
head -c $((4096 + 7)) /dev/urandom >"$tmp/small"
head -c $((8 * 1024 * 1024 + 12345)) /dev/urandom >"$tmp/big"
sf_py="$top_srcdir/tests/accel/sendfile.py"

# run_case NAME MIGRATIONS [VAR=value]: one exchange, both ends launched on
# shm; MIGRATIONS is how many connections the big sendfile must move.
run_case() {
	name=$1 want=$2
	shift 2
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env "$@" FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$sf_py" server "$port" "$tmp/small" "$tmp/big" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env "$@" FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$sf_py" client "$port" "$tmp/small" "$tmp/big" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q byte-exact "$tmp/cli.out" ||
		{ echo "FAIL: $name: client $crc server $src"; tail -n 5 "$tmp/cli.out" "$tmp/cli.log" "$tmp/srv.log"; return 1; }
	acc=$(counter "$tmp/cli.log" conn_accel_shm)
	mig=$(counter "$tmp/srv.log" migrate_sendfile)
	peer=$(counter "$tmp/cli.log" migrate_peer)
	rx=$(counter "$tmp/cli.log" bytes_rx_shm)
	echo "$name: byte-exact; accelerated $acc, server migrate_sendfile $mig, client migrate_peer $peer, client bytes_rx_shm $rx"
	[ "$acc" -eq 1 ] && [ "$mig" -eq "$want" ] && [ "$peer" -eq "$want" ] ||
		{ echo "FAIL: $name: expected accelerated 1 and $want migration(s)"; return 1; }
	# the first answer went over shm; the big file over shm only without migration
	big=$((8 * 1024 * 1024 + 12345))
	if [ "$want" -eq 1 ]; then
		[ "$rx" -ge 4103 ] && [ "$rx" -lt "$big" ] ||
			{ echo "FAIL: $name: $rx bytes over shm, want the first answer only"; return 1; }
	else
		[ "$rx" -ge "$big" ] || { echo "FAIL: $name: $rx bytes over shm, want all"; return 1; }
	fi
}

run_case "default (64 KiB)" 1 || status=1
run_case "FABSOCK_SENDFILE_KERNEL=0" 0 FABSOCK_SENDFILE_KERNEL=0 || status=1
run_case "FABSOCK_SENDFILE_KERNEL above the file" 0 FABSOCK_SENDFILE_KERNEL=$((16 << 20)) || status=1
exit $status
