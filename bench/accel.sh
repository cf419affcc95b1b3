#!/bin/sh
# Kernel TCP vs libfabsock-accelerated TCP with sockperf, in the same run:
# ping-pong 64 B one-way latency (median, p99) and throughput
# (64 B message rate, 16 KiB bandwidth), each with the CPU time both ends
# used per round trip, message or MB (busy polling shows there); then, when redis is installed,
# redis-benchmark GET with 50 connections (requests/s, and how many of the
# benchmark's connections were accelerated: the rest fell back, reason shown).
# Rounds alternate the paths so the machine's load hits all alike; the tables
# report medians over rounds.
#
# Paths: kernel, and per provider both ends launched on it: shm, tcp, or dpdk
# (our provider; the two processes joined by a net_memif pair, launched with
# fabsock --dpdk). With 2 CPUs or more, server and client are pinned to CPUs 0
# and 1 (as sockperf's guide advises; PIN=0: not pinned).
#
# usage: bench/accel.sh [BUILDDIR]   environment: ROUNDS (default 3), SECS (3),
#        PROVIDERS (space list, default "shm dpdk tcp"), REDIS_N (GET requests
#        per run, default 100000; 0 skips redis), PIN (1), BASE (another build
#        directory: a provider written PROV@base in PROVIDERS runs with that
#        build's launcher, so two versions are compared in one run),
#        CONTENTION (1: also the ping-pong with a third process keeping one CPU
#        busy and nobody pinned: p50, p99, p99.9 against the kernel's; 0: not),
#        MODES (the sockperf runs, default "pp tp64 tp16k": ping-pong, 64 B and
#        16 KiB throughput)
set -u
b=$(cd "${1:-${top_builddir:-build}}" && pwd) || exit 2
own_launcher="$b/tools/fabsock"
launcher=$own_launcher
rounds=${ROUNDS:-3}
secs=${SECS:-3}
providers=${PROVIDERS:-shm dpdk tcp}
. "$(dirname "$0")/lib.sh"
fsk_env=
pin_default
command -v sockperf >/dev/null || { echo "bench/accel.sh: sockperf missing" >&2; exit 2; }
[ -x "$launcher" ] || { echo "bench/accel.sh: $launcher not built" >&2; exit 2; }
base_launcher=
[ -z "${BASE:-}" ] || base_launcher="$(cd "$BASE" && pwd)/tools/fabsock"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-accel-bench.XXXXXX")
trap 'kill $spid ${hog:-} 2>/dev/null; rm -rf "$tmp"' EXIT
spid= hog=

hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# cpu_window PORT: while the client runs, the CPU ticks both sockperf
# processes use from 1.5 s after its start (past the library's start-up, up to
# 0.6 s, and sockperf's warm-up, 0.4 s) to secs + 0.3 s (inside its test of
# secs seconds): cpu_t ticks over cpu_w s.
cpu_window() {
	cpu_t=0 cpu_w=0
	sleep 1.5
	sp_=$(pid_of sockperf "$1")
	cp_=""
	for q in $(pgrep -f -- "-p $1" 2>/dev/null); do
		[ "$q" != "$sp_" ] && [ "$(cat /proc/"$q"/comm 2>/dev/null)" = sockperf ] && cp_=$q
	done
	[ -n "$sp_" ] && [ -n "$cp_" ] || return 0
	t0=$(cpu_ticks "$sp_" "$cp_") w0=$(now_s)
	sleep "$(awk -v s="$secs" 'BEGIN { print (s > 1.5 ? s - 1.2 : 0.3) }')"
	t1=$(cpu_ticks "$sp_" "$cp_") w1=$(now_s)
	cpu_t=$((t1 - t0))
	cpu_w=$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')
}

# run PATH MODE: one sockperf client run against a fresh server, both on PATH
# (kernel | shm | tcp); prints "PATH MODE value..." lines into $tmp/results.
run() {
	path=$1
	mode=$2
	p=$(port)
	pin_was=$pin hog=
	if [ "$mode" = ppc ]; then
		# contention: a third process keeps one CPU busy, nobody pinned
		pin=
		timeout $((secs + 25)) sh -c 'while :; do :; done' &
		hog=$!
	fi
	sw=$(wrap "$path" server)
	cw=$(wrap "$path" client)
	pin=$pin_was
	$sw timeout $((secs + 20)) sockperf server --tcp -i 127.0.0.1 -p "$p" >"$tmp/srv" 2>&1 &
	spid=$!
	listening "$p"
	case $mode in
	# --mps: room in sockperf's latency table past ~600k round trips a second
	pp | ppc) $cw timeout $((secs + 20)) sockperf ping-pong --mps 10000000 --tcp -i 127.0.0.1 -p "$p" -t "$secs" \
		-m 64 >"$tmp/cli" 2>&1 & ;;
	tp64) $cw timeout $((secs + 20)) sockperf throughput --tcp -i 127.0.0.1 -p "$p" \
		-t "$secs" -m 64 >"$tmp/cli" 2>&1 & ;;
	tp16k) $cw timeout $((secs + 20)) sockperf throughput --tcp -i 127.0.0.1 -p "$p" \
		-t "$secs" -m 16384 >"$tmp/cli" 2>&1 & ;;
	esac
	cpid=$!
	cpu_window "$p"
	wait "$cpid"
	[ -z "$hog" ] || { kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null; }
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	# counted only when the client's counters say it went over that provider
	accel=$(grep -a "info: counter conn_accel_${path%@base} = " "$tmp/cli" | sed 's/.* = //')
	case $mode in
	pp) v1=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$tmp/cli")
	    v2=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' "$tmp/cli") ;;
	ppc) v1=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$tmp/cli")
	    v2=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' "$tmp/cli")
	    v3=$(sed -n 's/.*percentile 99.900 = *\([0-9.]*\).*/\1/p' "$tmp/cli") ;;
	tp64|tp16k) v1=$(sed -n 's/.*Message Rate is \([0-9]*\).*/\1/p' "$tmp/cli")
	    v2=$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$tmp/cli") ;;
	esac
	# the CPU both ends used per unit over the window: per round trip (pp),
	# per message (tp64), per MB (tp16k)
	case $mode in
	pp | ppc) units=$(sed -n 's/.*RunTime=\([0-9.]*\) sec; SentMessages=[0-9]*; ReceivedMessages=\([0-9]*\).*/\2 \1/p' "$tmp/cli" |
		tail -n 1 | awk '{ if ($2 > 0) print $1 / $2 }') ;;
	tp64) units=$v1 ;;
	tp16k) units=$v2 ;;
	esac
	cpu=$(awk -v t="$cpu_t" -v w="$cpu_w" -v u="${units:-0}" -v hz="$hz" -v m="$mode" \
		'BEGIN { if (w <= 0 || u <= 0) { print "-"; exit }
			 s = t / hz / w / u; printf "%.3f", m == "tp16k" ? s * 1000 : s * 1e6 }')
	[ "$path" = kernel ] || [ "${accel:-0}" -gt 0 ] || v1="fallback"
	case ${v1:-fail} in fallback | fail)
		# not counted: say why (the client's last words, libfabsock's included)
		echo "accel.sh: $path $mode: ${v1:-fail}; the client's output ends:" >&2
		grep -av '^sockperf: \[' "$tmp/cli" | tail -n 6 | sed 's/^/    /' >&2 ;;
	esac
	if [ "$mode" = ppc ]; then
		echo "$path ${v1:-fail} ${v2:-fail} ${v3:-fail} $cpu" >>"$tmp/contention"
	else
		echo "$path $mode ${v1:-fail} ${v2:-fail} $cpu" >>"$tmp/results"
	fi
}

# redis PATH: redis-server and redis-benchmark GET -c 50 on PATH; appends
# "PATH rps accelerated connections fallback-reason" to $tmp/redis.
redis() {
	path=$1
	p=$(port)
	$(wrap "$path" server) timeout 120 redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --logfile /dev/null >/dev/null 2>&1 &
	spid=$!
	listening "$p"
	$(wrap "$path" client) timeout 100 redis-benchmark -p "$p" -c 50 -n "$redis_n" -t get -q \
		>"$tmp/rb.out" 2>"$tmp/rb.log"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	rps=$(tr '\r' '\n' <"$tmp/rb.out" | sed -n 's/^GET: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)
	acc=$(grep -a "info: counter conn_accel_${path%@base} = " "$tmp/rb.log" | sed 's/.* = //')
	conns=$(grep -a "info: counter accel_requested = " "$tmp/rb.log" | sed 's/.* = //')
	why=$(grep -a -o 'stays on the kernel: [^(]*' "$tmp/rb.log" | head -n 1 | sed 's/stays on the kernel: //; s/ *$//; s/ /_/g')
	echo "$path ${rps:-fail} ${acc:-0} ${conns:-0} ${why:--}" >>"$tmp/redis"
}

contend=ppc
[ "${CONTENTION:-1}" = 1 ] || contend=
redis_n=${REDIS_N:-100000}
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || redis_n=0
r=1
while [ $r -le "$rounds" ]; do
	for mode in ${MODES:-pp tp64 tp16k} $contend; do
		for path in kernel $providers; do
			run "$path" "$mode"
		done
	done
	if [ "$redis_n" -gt 0 ]; then
		for path in kernel $providers; do
			redis "$path"
		done
	fi
	r=$((r + 1))
done

awk -v rounds="$rounds" -v secs="$secs" "$awk_median"'
$3 == "fallback" || $3 == "fail" { bad[$1] = bad[$1] + 1; next }
{ v1[$1, $2] = v1[$1, $2] " " $3; v2[$1, $2] = v2[$1, $2] " " $4
  if ($5 != "-" && $5 != "") cpu[$1, $2] = cpu[$1, $2] " " $5
  if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
function c(p, m) { return cpu[p, m] == "" ? "-" : sprintf("%.2f", median(cpu[p, m])) }
END {
	printf "sockperf TCP over 127.0.0.1, %d rounds x %d s, medians over rounds\n", rounds, secs
	printf "%-8s %9s %9s %9s %12s %8s %9s %11s %8s %9s\n", "path", "p50 us", "p99 us",
	       "cpu/rt us", "64B msg/s", "x kernel", "cpu/msg us", "16KiB MB/s", "x kernel",
	       "cpu/MB ms"
	kp = median(v1["kernel", "pp"]); kr = median(v1["kernel", "tp64"]);
	kb = median(v2["kernel", "tp16k"])
	for (i = 1; i <= n; i++) {
		p = order[i]
		printf "%-8s %9.3f %9.3f %9s %12d %8.2f %9s %11.1f %8.2f %9s\n", p,
		       median(v1[p, "pp"]), median(v2[p, "pp"]), c(p, "pp"), median(v1[p, "tp64"]),
		       median(v1[p, "tp64"]) / (kr ? kr : 1), c(p, "tp64"), median(v2[p, "tp16k"]),
		       median(v2[p, "tp16k"]) / (kb ? kb : 1), c(p, "tp16k")
	}
	printf "cpu: user + system time of both sockperf processes inside the run, per round trip,\n"
	printf "per message, per MB (2 CPUs busy-polling: 2 us of CPU per us of wall time)\n"
	for (p in bad) printf "%s: %d run(s) fell back to the kernel or failed (not counted)\n", p, bad[p]
}' "$tmp/results"

if [ -s "$tmp/contention" ]; then
	echo
	awk -v rounds="$rounds" "$awk_median"'
$2 == "fallback" || $2 == "fail" { bad[$1]++; next }
{ p50[$1] = p50[$1] " " $2; p99[$1] = p99[$1] " " $3; p999[$1] = p999[$1] " " $4
  if ($5 != "-") cpu[$1] = cpu[$1] " " $5
  if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
END {
	printf "contention: the same ping-pong, nobody pinned, a third process busy on one CPU\n"
	printf "%-8s %9s %9s %10s %12s %9s\n", "path", "p50 us", "p99 us", "p99.9 us", "p99 x kernel", "cpu/rt us"
	k = median(p99["kernel"])
	for (i = 1; i <= n; i++) {
		p = order[i]
		printf "%-8s %9.3f %9.3f %10.3f %12.2f %9s\n", p, median(p50[p]), median(p99[p]),
		       median(p999[p]), median(p99[p]) / (k ? k : 1),
		       cpu[p] == "" ? "-" : sprintf("%.2f", median(cpu[p]))
	}
	printf "p99 x kernel: accelerated p99 / kernel p99 (<= 1 is as good or better)\n"
	for (p in bad) printf "%s: %d run(s) fell back to the kernel or failed (not counted)\n", p, bad[p]
}' "$tmp/contention"
fi

[ -s "$tmp/redis" ] || exit 0
echo
awk -v rounds="$rounds" "$awk_median"'
$2 == "fail" { bad[$1]++; next }
{ v[$1] = v[$1] " " $2; acc[$1] = $3; conns[$1] = $4; why[$1] = $5
  if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
END {
	printf "redis-benchmark GET, 50 connections, %d rounds, medians over rounds\n", rounds
	printf "%-8s %14s %10s   %s\n", "path", "requests/s", "x kernel", "benchmark connections accelerated"
	k = median(v["kernel"])
	for (i = 1; i <= n; i++) {
		p = order[i]
		note = p == "kernel" ? "-" : acc[p] "/" conns[p]
		if (p != "kernel" && acc[p] < conns[p]) note = note " (others: " why[p] ")"
		printf "%-8s %14.0f %10.2f   %s\n", p, median(v[p]), median(v[p]) / (k ? k : 1), note
	}
	for (p in bad) printf "%s: %d redis run(s) failed (not counted)\n", p, bad[p]
}' "$tmp/redis"
