#!/bin/sh
# What a launched process costs besides speed, kernel vs the default
# provider list vs shm alone vs dpdk (memif):
#  - RSS: VmRSS of bench/footprint's server and client, each with one
#    established connection, and what the launch adds to the kernel run
#    (targets: <= 32 MiB added with the default list, where only shm and tcp
#    work: the pair is local, uses shm and opens no tcp endpoint; <= 64 MiB
#    with DPDK);
#  - start-up: the client's first socket() to its first echoed byte (the
#    negotiation and the provider's start-up, DPDK's EAL included; target
#    <= 300 ms), and from the launch (exec, preload constructor) to it;
#  - idle CPU: CPU time of each process (all threads, schedstat) over IDLE_S
#    seconds, from 0.5 s after the exchange, with the connection open and
#    idle (target ~0 %).
# Medians over ROUNDS rounds.
#
# usage: bench/footprint.sh [BUILDDIR]   (default: $top_builddir, else .)
# environment: ROUNDS (default 3), IDLE_S (default 3), MODES (default
# "kernel default shm dpdk"; added RSS is relative to kernel, "-" without it)
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
bin="$b/bench/footprint"
launcher="$b/tools/fabsock"
rounds=${ROUNDS:-3}
idle_s=${IDLE_S:-3}
for f in "$bin" "$launcher"; do
	[ -x "$f" ] || { echo "footprint.sh: $f not built (run make in $b)" >&2; exit 2; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-footprint.XXXXXX") || exit 1
spid="" cpid=""
trap 'kill $spid $cpid 2>/dev/null; rm -rf "$tmp"' EXIT
sock="$tmp/memif.sock"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# cpu_ns PID: CPU time of all of PID's threads (schedstat: ns, not ticks)
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "-") }'; }
# wait_for FILE WORD: bounded (20 s)
wait_for() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.02
		i=$((i + 1))
		[ $i -lt 1000 ] || return 1
	done
}

# one MODE ROUND: start the pair, measure, stop it; appends to $tmp/MODE.data
# "srv_rss cli_rss first_byte_us launch_us srv_idle_ns cli_idle_ns"
one() {
	mode=$1
	p=$(port)
	case $mode in
	kernel) sw="env" cw="env" ;;
	shm) sw="env FABSOCK_PROVIDERS=shm $launcher --" cw=$sw ;;
	default) sw="env -u FABSOCK_PROVIDERS -u FABSOCK_PROVIDER $launcher --" cw=$sw ;;
	dpdk) sw="$launcher --dpdk net_memif0,role=server,socket=$sock --ip 198.18.0.1/24 --provider dpdk --"
	      cw="$launcher --dpdk net_memif0,role=client,socket=$sock --ip 198.18.0.2/24 --provider dpdk --" ;;
	esac
	FABSOCK_LOG=info $sw "$bin" server "$p" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	wait_for "$tmp/srv.out" listening || { echo "$mode: server did not start"; cat "$tmp/srv.log"; return 1; }
	FABSOCK_LOG=info FOOTPRINT_T0_NS=$(date +%s%N) $cw "$bin" client "$p" >"$tmp/cli.out" 2>"$tmp/cli.log" &
	cpid=$!
	wait_for "$tmp/cli.out" ready && wait_for "$tmp/srv.out" ready ||
		{ echo "$mode: the pair did not connect"; cat "$tmp/srv.log" "$tmp/cli.log"; return 1; }
	sleep 0.5 # past the spin and the first short sleeps
	s0=$(cpu_ns $spid) c0=$(cpu_ns $cpid)
	sleep "$idle_s"
	s1=$(cpu_ns $spid) c1=$(cpu_ns $cpid)
	fb=$(sed -n 's/.*first_byte_us=\([0-9]*\).*/\1/p' "$tmp/cli.out")
	ln=$(sed -n 's/.*launch_us=\([0-9]*\).*/\1/p' "$tmp/cli.out")
	echo "$(rss_kib $spid) $(rss_kib $cpid) $fb $ln $((s1 - s0)) $((c1 - c0))" >>"$tmp/$mode.data"
	kill $cpid
	wait $cpid 2>/dev/null
	wait $spid 2>/dev/null # the server ends at the client's close
	spid="" cpid=""
	grep -h 'warn\|error' "$tmp/srv.log" "$tmp/cli.log"
	# a launched pair must have used its provider (else its numbers are the kernel's)
	prov=$mode
	[ $mode = default ] && prov=shm
	if [ $mode != kernel ] && ! grep -q "counter conn_accel_$prov = 1" "$tmp/cli.log"; then
		echo "$mode: round not accelerated (connection on the kernel); not counted"
		sed -i '$d' "$tmp/$mode.data"
	fi
	return 0
}

col() { [ -f "$tmp/$1.data" ] || { echo 0; return; }; awk -v c="$2" '{ print $c }' "$tmp/$1.data" | median; }

modes=${MODES:-kernel default shm dpdk}
r=0
while [ $r -lt "$rounds" ]; do
	for m in $modes; do one "$m" || exit 1; done
	r=$((r + 1))
done

k_srv=$(col kernel 1) k_cli=$(col kernel 2)
echo "footprint: $rounds rounds, medians; idle over ${idle_s} s; $(nproc) CPUs"
printf '%-7s %12s %12s %12s %12s %14s %12s %10s %10s\n' mode "srv RSS MiB" "cli RSS MiB" \
	"srv added" "cli added" "1st byte ms" "launch ms" "srv idle" "cli idle"
for m in $modes; do
	awk -v m="$m" -v s="$(col "$m" 1)" -v c="$(col "$m" 2)" -v ks="$k_srv" -v kc="$k_cli" \
		-v fb="$(col "$m" 3)" -v ln="$(col "$m" 4)" -v si="$(col "$m" 5)" -v ci="$(col "$m" 6)" \
		-v t="$idle_s" 'BEGIN {
		printf "%-7s %12.1f %12.1f %12.1f %12.1f %14.1f %12.1f %9.3f%% %9.3f%%\n", m,
			s / 1024, c / 1024, (s - ks) / 1024, (c - kc) / 1024, fb / 1000, ln / 1000,
			100 * si / 1e9 / t, 100 * ci / 1e9 / t }'
done
echo "targets: added RSS <= 32 MiB (default list), <= 64 MiB (dpdk), 1st byte (first socket to first byte, EAL included) <= 300 ms, idle ~0 %"
