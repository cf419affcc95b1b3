#!/bin/sh
# An idle accelerated pair sleeps in the kernel: an echo server and client
# (FABSOCK_TCP_ACCEL=1, over shm and tcp) sit connected and idle, blocked in
# epoll_wait, in poll or in a blocking recv; over IDLE_S seconds each process's
# context switches (voluntary + involuntary, all threads) may grow by at most
# MAX_SWITCHES (a timer-sliced wait makes thousands). Then traffic flows again at
# once: a bounded byte-checked echo (also when a reader thread slept through the
# idle period and another thread writes), each sleep woken by what it waited
# for, never by the safety cap (counter sleep_late_wakes); on shm through the
# peer's bell (counter bells), never a doorbell on the kernel connection; on dpdk (a memif
# pair on one host) through the bell too, not the provider's polling thread. Also a server whose
# connection migrated to the kernel (it forked) idles in epoll_wait without
# slices.
# On dpdk (a memif pair) the provider's thread polls the port while a reader
# sleeps on its wait fd: after a long silence at most ~30 times a second
# (MAX_SWITCHES_DPDK over IDLE_S; ~1000 a second without the back-off).
. "$top_srcdir/tests/accel/lib.sh"
idle_py="$top_srcdir/tests/accel/idle.py"
IDLE_S=2
MAX_SWITCHES=20
MAX_SWITCHES_DPDK=250
status=0

# switches PID: voluntary + involuntary context switches of every thread.
switches() {
	cat /proc/"$1"/task/*/status 2>/dev/null |
		awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}

# ready_pid FILE: the PID of the "ready PID" line, waited for (bounded, 10 s).
ready_pid() {
	wait_line "$1" '^ready ' || return 1
	sed -n 's/^ready //p' "$1" | head -n1
}

run_case() { # provider, mode, extra server option
	prov=$1
	mode=$2
	opt=${3:-}
	name="$prov $mode${opt:+ $opt}"
	port=$(free_port)
	rm -f "$tmp/srv.out" "$tmp/cli.out"
	sdpdk="" cdpdk="" max=$MAX_SWITCHES
	if [ "$prov" = dpdk ]; then
		sdpdk="--dpdk net_memif0,role=server,socket=$tmp/memif.sock --ip 198.18.0.1/24"
		cdpdk="--dpdk net_memif0,role=client,socket=$tmp/memif.sock --ip 198.18.0.2/24"
		max=$MAX_SWITCHES_DPDK
	fi
	# shellcheck disable=SC2086 # launcher options
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" $sdpdk -- "$python" "$idle_py" server "$port" "$mode" $opt \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" $cdpdk -- "$python" "$idle_py" client "$port" "$mode" \
		>"$tmp/cli.out" 2>"$tmp/cli.log" &
	cpid=$!
	pids="$pids $cpid"
	sp=$(ready_pid "$tmp/srv.out") && cp=$(ready_pid "$tmp/cli.out") ||
		{ echo "FAIL: $name: the pair did not get ready"; cat "$tmp/srv.log" "$tmp/cli.log"
		  return 1; }
	sleep 0.5 # past the spin and the first short sleeps
	s0=$(switches "$sp")
	c0=$(switches "$cp")
	sleep $IDLE_S
	s1=$(switches "$sp")
	c1=$(switches "$cp")
	ds=$((s1 - s0))
	dc=$((c1 - c0))
	[ "$mode" = threads ] || kill -USR1 "$cp" # threads: the client ends its idle period itself
	wait "$cpid"
	crc=$?
	wait "$spid"
	src=$?
	out=$(cat "$tmp/cli.out" | grep -v '^ready')
	echo "$name: idle ${IDLE_S} s: server $ds, client $dc context switches; $out"
	acc=$(counter "$tmp/cli.log" accelerated)
	[ "$acc" -ge 1 ] || { echo "FAIL: $name: not accelerated"; tail -n 5 "$tmp/cli.log"; return 1; }
	[ $crc -eq 0 ] && [ $src -eq 0 ] ||
		{ echo "FAIL: $name: client $crc server $src"; tail -n 5 "$tmp/cli.log" "$tmp/srv.log"
		  return 1; }
	# every sleep was woken by what it waited for, never by the safety cap
	late=$(($(counter "$tmp/cli.log" sleep_late_wakes) + $(counter "$tmp/srv.log" sleep_late_wakes)))
	[ "$late" -eq 0 ] ||
		{ echo "FAIL: $name: $late sleeps missed their wake-up (sleep_late_wakes)"; return 1; }
	# shm and dpdk (peers on one host): wake-ups of a sleeping peer went
	# through its bell (a pipe write), none through a doorbell on the kernel
	# connection (but --fork: a MIGRATE is announced by a doorbell byte,
	# docs/wire.md)
	if [ "$prov" != tcp ] && [ -z "$opt" ]; then
		bells=$(($(counter "$tmp/cli.log" bells) + $(counter "$tmp/srv.log" bells)))
		dbs=$(($(counter "$tmp/cli.log" doorbells) + $(counter "$tmp/srv.log" doorbells)))
		[ "$bells" -ge 1 ] && [ "$dbs" -eq 0 ] ||
			{ echo "FAIL: $name: wake-ups: bells $bells, doorbells $dbs"; return 1; }
	fi
	[ $ds -le $max ] && [ $dc -le $max ] ||
		{ echo "FAIL: $name: an idle process woke up more than $max times"; return 1; }
	# promptly: a round trip on shm takes well under a millisecond; a lost
	# doorbell waits for a 200 ms safety cap (or forever). tcp (no doorbells:
	# its wait fd) has slow outliers of its own on a loaded machine.
	ms=$(echo "$out" | sed -n 's/.*, slowest \([0-9.]*\) ms$/\1/p')
	limit=100
	[ "$prov" = shm ] || limit=1000
	awk -v s="${ms:-99999}" -v l="$limit" 'BEGIN { exit !(s < l) }' ||
		{ echo "FAIL: $name: a round trip after the idle period was slow"; return 1; }
}

for prov in shm tcp; do
	for mode in epoll poll recv threads; do
		run_case "$prov" "$mode" || status=1
	done
done
for mode in epoll recv; do
	run_case dpdk "$mode" || status=1
done
run_case shm epoll --fork || status=1
exit $status
