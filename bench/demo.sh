#!/bin/sh
# The demo: sockperf TCP over 127.0.0.1 on three paths, in the same run:
#   kernel  plain kernel TCP (no preload)
#   shm     both ends under the fabsock launcher, TCP accelerated over
#           libfabric shm
#   dpdk    both ends under `fabsock --dpdk`, TCP accelerated over our dpdk
#           provider, the two processes joined by a net_memif pair
# For each path: ping-pong 64 B (one-way latency = half the round trip, every
# message logged with --full-log), throughput 64 B (msg/s) and 16 KiB (MB/s).
# Each round runs every path in turn, so the machine's load hits all alike.
# The table gives latency percentiles over every message of every round (the
# data of the plot) and the median throughput over rounds. An accelerated run
# counts only when libfabsock's own counters (the client's, dumped at exit)
# say the connection went over that provider; otherwise the cell reads
# "fallback" and a note says why. A run that moves (almost) nothing (no
# ping-pong reply, fewer than 10 messages sent) reads "stall": a hang, not a
# rate; its output is kept in DEMO_OUT/failed-PATH-MODE-ROUND.out.
# Then a gnuplot PNG of the latency distributions (CDF and tail, log x).
#
# usage: bench/demo.sh [BUILDDIR]     (default: $top_builddir, else .)
# environment: DEMO_SECONDS (per sockperf run, default 2), DEMO_ROUNDS
#   (default 2), DEMO_OUT (output directory, default BUILDDIR/demo),
#   DEMO_PATHS (default "kernel shm dpdk"), DEMO_PIN (1: server on CPU 0,
#   client on CPU 1, the default when there are 2 CPUs; 0: no pinning)
# Writes into DEMO_OUT: latency.png, latency.gp (the gnuplot script),
# latency-PATH.txt (every ping-pong message's one-way latency, usec, all
# rounds), cdf-PATH.dat (the plotted points), runs.txt (each run's numbers),
# table.txt (the table). Exit status 0 when every run of every path was
# accelerated as asked and produced numbers, 1 otherwise (notes say why).
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
launcher="$b/tools/fabsock"
secs=${DEMO_SECONDS:-2}
rounds=${DEMO_ROUNDS:-2}
paths=${DEMO_PATHS:-kernel shm dpdk}
out=${DEMO_OUT:-$b/demo}
[ -x "$launcher" ] || { echo "demo.sh: $launcher not built (run make in $b)" >&2; exit 2; }
for c in sockperf ss gnuplot timeout; do
	command -v "$c" >/dev/null 2>&1 ||
		{ echo "demo.sh: $c not installed (apt-get install sockperf iproute2 gnuplot-nox coreutils)" >&2; exit 2; }
done
py=python3
pin=
[ "${DEMO_PIN:-1}" = 1 ] && [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null &&
	pin=1
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-demo.XXXXXX") || exit 1
memif="$tmp/memif.sock"
# Every process this script starts runs under timeout (bounded) and its pid
# is recorded here, so an interrupted demo leaves nothing behind.
spid=
cpid=
cleanup() {
	for p in $cpid $spid; do kill "$p" 2>/dev/null; done
	for p in $cpid $spid; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# TCP acceleration on (the default, stated so that an inherited
# FABSOCK_TCP_ACCEL=0 cannot turn it off), and a 2 s wait for the server's
# greeting. The kernel path runs without the preload, so these do not touch it.
export FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000
unset FABSOCK_PROVIDERS FABSOCK_PROVIDER FABSOCK_DISABLE FABSOCK_LOG_FILE 2>/dev/null

free_port() {
	"$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# launch PATH ROLE LOG CMD...: exec CMD (bounded by timeout) on PATH; ROLE is
# server | client (the memif role; server and client get distinct IPs).
launch() {
	lpath=$1 role=$2 log=$3
	shift 3
	# a client runs secs + ~3 s; the server outlives the path's 3 clients
	lim=$((secs + 30))
	[ "$role" = server ] && lim=$((3 * lim))
	set -- timeout -k 2 "$lim" "$@"
	# server and client on distinct CPUs, as sockperf's guide advises: left
	# to the scheduler on 2 busy cores, the two can share one, and then each
	# message waits out the peer's spin budget
	if [ -n "$pin" ]; then
		if [ "$role" = server ]; then set -- taskset -c 0 "$@"; else set -- taskset -c 1 "$@"; fi
	fi
	case $lpath in
	kernel) exec "$@" ;;
	shm) exec "$launcher" --log info --log-file "$log" -- "$@" ;;
	dpdk)
		if [ "$role" = server ]; then ip=198.18.0.1; else ip=198.18.0.2; fi
		exec "$launcher" --dpdk "net_memif0,role=$role,socket=$memif" --ip "$ip/24" \
			--log info --log-file "$log" -- "$@" ;;
	esac
	echo "demo.sh: unknown path $lpath" >&2
	exit 2
}

# counter LOG NAME: the value libfabsock dumped at exit, or 0.
counter() {
	v=$(grep -a "info: counter $2 = " "$1" 2>/dev/null | tail -n 1 | sed 's/.* = //')
	echo "${v:-0}"
}

# why_fallback LOGS...: one short reason a run was not accelerated on $path:
# where it went (another provider, or the kernel and why), and the first
# warning libfabsock logged (e.g. a device that did not open).
why_fallback() {
	r=
	for l in "$@"; do
		for p in shm dpdk tcp; do
			[ -z "$r" ] && [ "$p" != "$path" ] && [ "$(counter "$l" "conn_accel_$p")" -gt 0 ] &&
				r="went over $p"
		done
	done
	[ -n "$r" ] || r=$(cat "$@" 2>/dev/null | grep -a -m 1 -o 'stays on the kernel: [^(]*' |
		sed 's/ *$//')
	[ -n "$r" ] || { grep -aq 'libfabsock [^ ]* active' "$@" 2>/dev/null || r="libfabsock not loaded"; }
	w=$(cat "$@" 2>/dev/null | grep -a -m 1 ': \(warn\|error\): ' | sed 's/^fabsock\[[0-9]*\]: //')
	echo "${r:-no connection accelerated}${w:+; $w}"
}

# server_start PATH ROUND: a sockperf server on PATH (one per path and round:
# its clients follow each other), bounded wait until it listens.
server_start() {
	port=$(free_port) || exit 1
	slog="$tmp/$1-$2.srv.log"
	rm -f "$memif"
	launch "$1" server "$slog" sockperf server --tcp -i 127.0.0.1 -p "$port" \
		>"$tmp/$1-$2.srv.out" 2>&1 &
	spid=$!
	i=0
	until ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; do
		i=$((i + 1))
		kill -0 "$spid" 2>/dev/null && [ $i -le 200 ] ||
			{ cat "$tmp/$1-$2.srv.out" >&2; echo "demo.sh: $1: sockperf server did not start" >&2; exit 1; }
		sleep 0.05
	done
}

# server_stop: SIGTERM (sockperf handles it, libfabsock dumps its counters)
server_stop() {
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
	[ -e "$memif" ] && printf 'dpdk\t-\tmemif socket %s left behind\n' "$memif" >>"$tmp/notes"
}

# client PATH MODE ROUND: one sockperf client against the running server;
# appends "PATH MODE v1 v2" to $tmp/runs (v1 v2: p50 p99 usec | msg/s MB/s,
# or "fallback"/"fail"/"stall") and, for ping-pong, the latencies to latency-PATH.txt.
# A run counts as accelerated when the client's counters say its connection
# went over PATH (the server serves every client, so its counters are
# cumulative; it is read only for the reason of a fallback).
client() {
	path=$1 mode=$2 r=$3
	clog="$tmp/$path-$mode-$r.cli.log"
	cout="$tmp/$path-$mode-$r.cli.out"
	full="$tmp/$path-$r.csv"
	# sockperf sleeps 2 s after connecting whatever the options; its first
	# 400 ms are left out of the statistics (--dontwarmup: no dummy messages)
	case $mode in
	# --mps: sockperf sizes its table of latencies for ~600k round trips a
	# second unless told more; faster, it aborts (_seqN > m_maxSequenceNo)
	pp) set -- ping-pong -m 64 --mps 10000000 --full-log "$full" ;;
	tp64) set -- throughput -m 64 ;;
	tp16k) set -- throughput -m 16384 ;;
	esac
	launch "$path" client "$clog" sockperf "$@" --tcp -i 127.0.0.1 -p "$port" -t "$secs" \
		--dontwarmup >"$cout" 2>&1 &
	cpid=$!
	wait "$cpid"
	crc=$?
	cpid=
	sed -i 's/\x1b\[[0-9;]*m//g' "$cout"
	case $mode in
	pp) v1=$(sed -n 's/.*percentile 50.000 = *\([0-9.]*\).*/\1/p' "$cout")
	    v2=$(sed -n 's/.*percentile 99.000 = *\([0-9.]*\).*/\1/p' "$cout")
	    grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$cout" ||
		v1= ;;
	*) v1=$(sed -n 's/.*Message Rate is \([0-9]*\).*/\1/p' "$cout")
	   v2=$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$cout") ;;
	esac
	# a run that moved (almost) nothing is a hang, not a rate: "stall"
	case $mode in
	pp) grep -q 'No messages were received' "$cout" && v1=stall ;;
	*) sent=$(sed -n 's/.*Total of \([0-9]*\) messages sent.*/\1/p' "$cout")
	   [ -n "$sent" ] && [ "$sent" -lt 10 ] && v1=stall ;;
	esac
	if [ "$v1" = stall ]; then
		echo "$path $mode stall stall" >>"$tmp/runs"
		cp "$cout" "$out/failed-$path-$mode-$r.out"
		cat "$clog" "$slog" >>"$out/failed-$path-$mode-$r.out" 2>/dev/null
		printf '%s\t%s\tstall: %s; libfabsock: %s (%s)\n' "$path" "$mode" \
			"$(grep -a -m 1 -o 'No messages were received.*\|Total of [0-9]* messages sent in [0-9.]* sec' "$cout")" \
			"$(grep -a 'counter \(bytes_tx\|bytes_rx\)_' "$clog" 2>/dev/null | sed 's/.*counter //' | tr '\n' ' ' | sed 's/ $//')" \
			"$out/failed-$path-$mode-$r.out" >>"$tmp/notes"
		return
	fi
	if [ $crc -ne 0 ] || [ -z "$v1" ] || [ -z "$v2" ]; then
		echo "$path $mode fail fail" >>"$tmp/runs"
		# keep what sockperf and libfabsock said, and name it
		cp "$cout" "$out/failed-$path-$mode-$r.out"
		cat "$clog" "$slog" >>"$out/failed-$path-$mode-$r.out" 2>/dev/null
		why=$(grep -a -m 1 -i 'error' "$cout")
		[ -n "$why" ] || why=$(grep -a -m 1 '# dropped messages' "$cout" | sed 's/^sockperf: //')
		printf '%s\t%s\tsockperf failed (exit %s): %s (%s)\n' "$path" "$mode" "$crc" \
			"${why:-no result printed}" "$out/failed-$path-$mode-$r.out" >>"$tmp/notes"
		return
	fi
	if [ "$path" != kernel ] && [ "$(counter "$clog" "conn_accel_$path")" -lt 1 ]; then
		echo "$path $mode fallback fallback" >>"$tmp/runs"
		printf '%s\t%s\tfallback (%s)\n' "$path" "$mode" "$(why_fallback "$clog" "$slog")" >>"$tmp/notes"
		return
	fi
	echo "$path $mode $v1 $v2" >>"$tmp/runs"
	[ "$mode" = pp ] && awk -F', *' 'NF == 4 && $1 ~ /^[0-9]+$/ { print $4 }' "$full" \
		>>"$out/latency-$path.txt"
	return 0
}

for p in $paths; do
	case $p in kernel | shm | dpdk) rm -f "$out/latency-$p.txt" "$out/cdf-$p.dat" ;;
	*) echo "demo.sh: DEMO_PATHS: unknown path $p (kernel, shm, dpdk)" >&2; exit 2 ;; esac
done
rm -f "$out/latency.png" "$out/table.txt" "$out/runs.txt" "$out"/failed-*.out
: >"$tmp/runs"
: >"$tmp/notes"
echo "demo: sockperf TCP over 127.0.0.1: kernel, libfabsock on shm, libfabsock on dpdk (net_memif)"
echo "      $rounds round(s): ping-pong 64 B, throughput 64 B and 16 KiB, $secs s each, per path"
r=1
while [ $r -le "$rounds" ]; do
	for path in $paths; do
		server_start "$path" "$r"
		for mode in pp tp64 tp16k; do
			client "$path" "$mode" "$r"
		done
		server_stop
	done
	r=$((r + 1))
done
cp "$tmp/runs" "$out/runs.txt"

# Latency percentiles over all messages of all rounds (nearest rank), and
# the plotted points: ~2000 evenly spaced plus every one of the slowest 2000.
: >"$tmp/pooled"
for p in $paths; do
	f="$out/latency-$p.txt"
	[ -s "$f" ] || continue
	sort -n "$f" >"$tmp/sorted"
	n=$(wc -l <"$tmp/sorted")
	awk -v n="$n" -v p="$p" -v cdf="$out/cdf-$p.dat" '
		BEGIN { r50 = int(n * 0.50 + 0.999999); r99 = int(n * 0.99 + 0.999999) }
		NR == r50 { p50 = $1 }
		NR == r99 { p99 = $1 }
		NR % int(n / 2000 + 1) == 0 || NR > n - 2000 || NR == 1 {
			printf "%s %.7f %.7g\n", $1, NR / n, (n - NR + 1) / n >cdf }
		END { print p, "pooled", p50, p99 }' "$tmp/sorted" >>"$tmp/pooled"
done

# The table: medians over rounds; a cell with no accelerated run says why.
awk -v rounds="$rounds" -v secs="$secs" -v paths="$paths" '
function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function cell(p, m, k, fmt) {
	if ((p, m) in v1) return sprintf(fmt, median(k == 1 ? v1[p, m] : v2[p, m]))
	return bad[p, m]
}
function ratio(p, m, k,   x, base) {
	if (!((p, m) in v1) || !(("kernel", m) in v1)) return "-"
	base = median(k == 1 ? v1["kernel", m] : v2["kernel", m])
	x = median(k == 1 ? v1[p, m] : v2[p, m])
	return base > 0 ? sprintf("%.2f", x / base) : "-"
}
$2 == "pooled" { pool[$1] = 1; v1[$1, "pp"] = $3; v2[$1, "pp"] = $4; next }
$2 == "pp" && ($1 in pool) { next }
$3 == "fallback" || $3 == "fail" || $3 == "stall" { if (!(($1, $2) in bad)) bad[$1, $2] = $3; next }
{ v1[$1, $2] = v1[$1, $2] " " $3; v2[$1, $2] = v2[$1, $2] " " $4 }
END {
	name["kernel"] = "kernel TCP"; name["shm"] = "libfabsock shm"
	name["dpdk"] = "libfabsock dpdk/memif"
	printf "sockperf TCP over 127.0.0.1, %d round(s) x %d s per test; latency: all messages, throughput: median of rounds\n", rounds, secs
	printf "%-22s %9s %9s %11s %8s %11s %8s\n", "path", "p50 us", "p99 us",
	       "64B msg/s", "x kernel", "16KiB MB/s", "x kernel"
	n = split(paths, ps, " ")
	for (i = 1; i <= n; i++) {
		p = ps[i]
		printf "%-22s %9s %9s %11s %8s %11s %8s\n", name[p], cell(p, "pp", 1, "%.3f"),
		       cell(p, "pp", 2, "%.3f"), cell(p, "tp64", 1, "%d"), ratio(p, "tp64", 1),
		       cell(p, "tp16k", 2, "%.1f"), ratio(p, "tp16k", 2)
	}
}' "$tmp/pooled" "$tmp/runs" >"$out/table.txt"
echo
cat "$out/table.txt"
echo "(latency is one-way: half the round trip of a 64 B ping-pong; x kernel = this path / kernel)"
if [ -n "$pin" ]; then
	echo "(every path: server pinned to CPU 0, client to CPU 1; DEMO_PIN=0 leaves it to the scheduler)"
fi
# why a cell is not a number, and any run that did not count (once each)
# ("PATH<tab>MODE<tab>text" lines; the same text for several modes once)
[ -s "$tmp/notes" ] && awk -F '\t' '
	!(($1, $3) in modes) { order[++n] = $1 "\t" $3; modes[$1, $3] = $2; next }
	index(" " modes[$1, $3] " ", " " $2 " ") == 0 { modes[$1, $3] = modes[$1, $3] " " $2 }
	END { for (i = 1; i <= n; i++) { split(order[i], k, "\t")
		printf "note: %s %s: %s\n", k[1], modes[k[1], k[2]], k[2] } }' "$tmp/notes"

# The plot: CDF of every ping-pong message's latency (log x), and the tail
# (fraction of messages slower than x, log-log) where p99 and beyond show.
plot=
for p in $paths; do
	[ -s "$out/cdf-$p.dat" ] || continue
	case $p in
	kernel) t="kernel TCP" ;; shm) t="libfabsock shm" ;; dpdk) t="libfabsock dpdk/memif" ;;
	esac
	t="$t: $(awk -v p="$p" '$1 == p { printf "p50 %.2f, p99 %.2f usec", $3, $4 }' "$tmp/pooled")"
	plot="$plot${plot:+, }'cdf-$p.dat' using 1:COL with lines lw 2 title '$t'"
done
if [ -n "$plot" ]; then
	{
		echo "# gnuplot script written by bench/demo.sh; run it in this directory"
		echo "set terminal pngcairo size 1000,800 font ',10'"
		echo "set output 'latency.png'"
		echo "set multiplot layout 2,1 title 'sockperf TCP ping-pong 64 B over 127.0.0.1: one-way latency (half the round trip)'"
		echo "set logscale x"
		echo "set grid"
		echo "set xlabel 'latency (usec, log scale)'"
		echo "set ylabel 'fraction of messages <= x'"
		echo "set yrange [0:1]"
		echo "set key bottom right"
		echo "plot $plot" | sed 's/COL/2/g'
		echo "set logscale y"
		echo "set yrange [*:1]"
		echo "set format y '10^{%L}'"
		echo "set ylabel 'fraction of messages > x (tail)'"
		echo "set key top right"
		echo "plot $plot" | sed 's/COL/3/g'
		echo "unset multiplot"
	} >"$out/latency.gp"
	(cd "$out" && timeout 60 gnuplot latency.gp) ||
		echo "demo.sh: gnuplot failed (script $out/latency.gp)" >&2
fi
if [ -s "$out/latency.png" ]; then
	echo "latency distribution plot: $out/latency.png (data: $out/latency-*.txt, cdf-*.dat; script latency.gp)"
else
	echo "demo.sh: no latency plot written" >&2
	exit 1
fi
# any run that fell back, failed or stalled (even if another round gave a number)
[ -s "$tmp/notes" ] && exit 1
exit 0
