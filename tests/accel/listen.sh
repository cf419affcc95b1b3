#!/bin/sh
# What a launched process listens on (fabsock(7), FILES AND PORTS): an app
# that uses only 127.0.0.1 gets no listener of ours on another address. With
# the default provider list a loopback pair uses shm and opens no tcp
# endpoint; with FABSOCK_PROVIDERS=tcp the tcp provider listens on 127.0.0.1
# only (the kernel connection's local address). While the connection is
# open: `ss -ltnp` shows no listener of either process off loopback, the shm
# regions of both are 0600 and their own user's, the connection was
# accelerated, and at the default log level neither process printed anything.
. "$top_srcdir/tests/accel/lib.sh"
hold="$top_srcdir/tests/accel/hold.py"
command -v ss >/dev/null || { echo "SKIP: ss missing (iproute2)"; exit 77; }
status=0

# run PROV_LIST PROV LEVEL: one held connection; checks; logs in $tmp
run() {
	list=$1 prov=$2
	port=$(free_port)
	rm -f "$tmp/srv.out" "$tmp/done"
	level=$3
	set -- env -u FABSOCK_LOG -u FABSOCK_PROVIDERS ${level:+FABSOCK_LOG=$level} \
		${list:+FABSOCK_PROVIDERS=$list} FABSOCK_NEGO_WAIT_MS=1000 timeout 40 \
		"$launcher" -- "$python" "$hold"
	"$@" server "$port" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	"$@" client "$port" 100000 "$tmp/done" >"$tmp/cli.out" 2>"$tmp/cli.log" &
	cpid=$!
	pids="$pids $cpid"
	wait_line "$tmp/cli.out" echoed || { echo "FAIL: ${list:-default}: no echo"; cat "$tmp/cli.out" "$tmp/cli.log"; return 1; }
	rc=0
	# the python processes are the launched ones (timeout's children exec'd)
	procs="$(pgrep -P $spid) $(pgrep -P $cpid)"
	ss -Hltnp >"$tmp/ss.txt"
	for p in $procs; do
		grep "pid=$p," "$tmp/ss.txt" | awk '{ print $4 }' >"$tmp/ports.txt"
		if grep -v '^127\.\|^\[::1\]\|^\[::ffff:127\.' "$tmp/ports.txt"; then
			echo "FAIL: ${list:-default}: process $p listens off loopback (above)"
			rc=1
		fi
		for f in /dev/shm/"$p":*; do
			[ -e "$f" ] || continue
			m=$(stat -c '%a %u' "$f")
			[ "$m" = "600 $(stat -c %u /proc/"$p")" ] ||
				{ echo "FAIL: $f: mode and owner $m"; rc=1; }
		done
	done
	echo "${list:-default}: listeners of the pair: $(for p in $procs; do grep "pid=$p," "$tmp/ss.txt" | awk '{ printf "%s ", $4 }'; done)"
	touch "$tmp/done"
	wait $cpid || { echo "FAIL: client exit $?"; rc=1; }
	wait $spid || { echo "FAIL: server exit $?"; rc=1; }
	if [ -n "$level" ]; then
		fsk_assert_accel "$tmp/cli.log" "${list:-default} client" 1 "$prov"
		fsk_assert_accel "$tmp/srv.log" "${list:-default} server" 1 "$prov"
	else
		for f in "$tmp/srv.log" "$tmp/cli.log"; do
			[ -s "$f" ] || continue
			echo "FAIL: ${list:-default}: printed at the default log level:"; head -n 5 "$f"; rc=1
		done
	fi
	return $rc
}

run "" shm info || status=1
run "" shm "" || status=1
run tcp tcp info || status=1
exit $status
