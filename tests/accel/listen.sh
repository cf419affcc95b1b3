#!/bin/sh
# What a launched process listens on (fabsock(7), FILES AND PORTS): an app
# that uses only 127.0.0.1 gets no listener of ours on another address. With
# the default provider list a loopback pair uses shm and opens no tcp
# endpoint; with FABSOCK_PROVIDERS=tcp the tcp provider listens on 127.0.0.1
# only (the kernel connection's local address). While the connection is
# open: `ss -ltnp` shows no listener of either process off loopback, the shm
# regions of both are 0600 and their own user's, the connection was
# accelerated, and at the default log level neither process printed anything.
# A FABSOCK_LOG_FILE the library creates is 0600.
# Then across two network namespaces (a client of "another host"): the server,
# with the default list, opens tcp on its connection's address in the
# background at the first connection (which stays on the kernel), and the
# next ones use it.
. "$top_srcdir/tests/accel/lib.sh"
. "$top_srcdir/tests/lib/netns.sh"
hold="$top_srcdir/tests/accel/hold.py"
command -v ss >/dev/null || { echo "SKIP: ss missing (iproute2)"; exit 77; }
status=0

# run PROV_LIST PROV LEVEL [NS_SRV NS_CLI ADDR N]: one held connection (the
# last of N, to ADDR, server and client in those namespaces); checks; logs in $tmp
run() {
	list=$1 prov=$2 nss=${4:+ip netns exec $4} nsc=${5:+ip netns exec $5} addr=${6:-127.0.0.1} n=${7:-1}
	port=$(free_port)
	rm -f "$tmp/srv.out" "$tmp/done"
	level=$3
	set -- env -u FABSOCK_LOG -u FABSOCK_PROVIDERS ${level:+FABSOCK_LOG=$level} \
		${list:+FABSOCK_PROVIDERS=$list} FABSOCK_NEGO_WAIT_MS=1000 timeout 40 \
		"$launcher" -- "$python" "$hold"
	$nss "$@" server "$port" "$addr" "$n" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	$nsc "$@" client "$port" 100000 "$tmp/done" "$addr" "$n" >"$tmp/cli.out" 2>"$tmp/cli.log" &
	cpid=$!
	pids="$pids $cpid"
	wait_line "$tmp/cli.out" echoed || { echo "FAIL: ${list:-default}: no echo"; cat "$tmp/cli.out" "$tmp/cli.log"; return 1; }
	rc=0
	# the python processes are the launched ones (timeout's children exec'd)
	procs="$(pgrep -P $spid) $(pgrep -P $cpid)"
	# a listener of ours may be where its kernel connection's local side is:
	# loopback, or the namespaces' veth addresses
	allow='^127\.|^\[::1\]|^\[::ffff:127\.|^10\.77\.0\.[12]:'
	{ $nss ss -Hltnp; [ "$nss" = "$nsc" ] || $nsc ss -Hltnp; } >"$tmp/ss.txt"
	for p in $procs; do
		grep "pid=$p," "$tmp/ss.txt" | awk '{ print $4 }' >"$tmp/ports.txt"
		if grep -Ev "$allow" "$tmp/ports.txt"; then
			echo "FAIL: ${list:-default}: process $p listens where it does not communicate (above)"
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
		fsk_assert_accel "$tmp/cli.log" "${list:-default} client" "$((n > 1 ? n - 1 : 1))" "$prov"
		fsk_assert_accel "$tmp/srv.log" "${list:-default} server" "$((n > 1 ? n - 1 : 1))" "$prov"
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

# a log file the library creates is its user's alone
env FABSOCK_LOG=info FABSOCK_LOG_FILE="$tmp/lib.log" timeout 20 "$launcher" -- true
m=$(stat -c %a "$tmp/lib.log" 2>/dev/null)
[ "$m" = 600 ] || { echo "FAIL: FABSOCK_LOG_FILE created with mode ${m:-none}, want 600"; status=1; }

if fsk_netns_create "fsk-lsn-s$$" "fsk-lsn-c$$"; then
	trap '_rc=$?; fsk_netns_destroy; (exit $_rc); cleanup' EXIT
	fsk_netns_veth "fsk-lsn-s$$" "fsk-lsn-c$$" lsn0 lsn1 10.77.0.1/24 10.77.0.2/24 || status=1
	run "" tcp info "fsk-lsn-s$$" "fsk-lsn-c$$" 10.77.0.1 3 || status=1
	echo "two namespaces: $(counter "$tmp/srv.log" fallback_no_common) connection(s) on the kernel while tcp opened"
else
	echo "no permission for network namespaces: the two-host part not run"
fi
exit $status
