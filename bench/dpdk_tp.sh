#!/bin/sh
# sockperf TCP throughput, kernel vs libfabsock on our dpdk provider over a
# net_memif pair (one host, two processes), in the same run: each round runs
# every size on both paths in turn, so the machine's load hits both alike.
# Prints the median msg/s and MB/s over rounds and the ratio dpdk / kernel.
#
# usage: bench/dpdk_tp.sh [BUILDDIR]      (default: $top_builddir, else .)
# environment: TP_SIZES (default "64 16384 65000"), TP_SECONDS (3),
#   TP_ROUNDS (3), TP_PIN (1: server CPU 0, client CPU 1), TP_ENV (extra
#   VAR=value words for both dpdk ends, e.g. FI_DPDK_MTU=9000),
#   TP_PERF (a directory: the dpdk ends of the last round run under
#   `perf record -g`, data in DIR/srv-SIZE.data and DIR/cli-SIZE.data),
#   TP_LOGS (a directory: keep the dpdk ends' libfabsock logs there),
#   TP_ALT_ENV (VAR=value words: a third path "alt", dpdk with these added,
#   e.g. TP_ALT_ENV=FI_DPDK_MTU=9000 compares two settings in one run),
#   TP_ALT_DEVARGS (appended to alt's memif devargs, e.g. ",bsize=9216"),
#   TP_ALT_BUILD (another build directory: alt runs its launcher, e.g. a
#   build of the commit before a change, for before/after in one run)
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
launcher="$b/tools/fabsock"
sizes=${TP_SIZES:-64 16384 65000}
secs=${TP_SECONDS:-3}
rounds=${TP_ROUNDS:-3}
[ -x "$launcher" ] || { echo "dpdk_tp.sh: $launcher not built" >&2; exit 2; }
command -v sockperf >/dev/null || { echo "dpdk_tp.sh: sockperf not installed" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-tp.XXXXXX") || exit 1
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
export FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000
unset FABSOCK_PROVIDERS FABSOCK_PROVIDER FABSOCK_DISABLE FABSOCK_LOG_FILE 2>/dev/null
cpu0= cpu1=
if [ "${TP_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then cpu0="taskset -c 0"; cpu1="taskset -c 1"; fi

free_port() {
	python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run PATH SIZE ROUND: one server + one client; appends "PATH SIZE msg/s MB/s"
run() {
	path=$1 size=$2 r=$3
	port=$(free_port)
	sock="$tmp/memif.sock"
	rm -f "$sock"
	pre_s= pre_c= perf_s= perf_c=
	if [ "$path" != kernel ]; then
		xenv="${TP_ENV:-}"
		xdev= xl=$launcher
		[ "$path" = alt ] && xenv="$xenv ${TP_ALT_ENV:-}" xdev=${TP_ALT_DEVARGS:-} \
			xl=${TP_ALT_BUILD:+$TP_ALT_BUILD/tools/fabsock}
		[ -n "$xl" ] || xl=$launcher
		pre_s="env $xenv $xl --dpdk net_memif0,role=server,socket=$sock$xdev --ip 198.18.0.1/24 --log info --log-file $tmp/srv.log --"
		pre_c="env $xenv $xl --dpdk net_memif0,role=client,socket=$sock$xdev --ip 198.18.0.2/24 --log info --log-file $tmp/cli.log --"
		if [ -n "${TP_PERF:-}" ] && [ "$r" = "$rounds" ]; then
			mkdir -p "$TP_PERF"
			perf_s="perf record -q -g -o $TP_PERF/srv-$size.data --"
			perf_c="perf record -q -g -o $TP_PERF/cli-$size.data --"
		fi
	fi
	$cpu0 timeout -k 2 $((secs + 40)) $pre_s $perf_s sockperf server --tcp -i 127.0.0.1 -p "$port" \
		>"$tmp/srv.out" 2>&1 &
	spid=$!
	i=0
	until ss -Hltn "sport = :$port" | grep -q .; do
		i=$((i + 1)); [ $i -le 200 ] || { echo "$path $size fail fail" >>"$tmp/runs"; kill $spid; wait $spid; spid=; return; }
		sleep 0.05
	done
	$cpu1 timeout -k 2 $((secs + 30)) $pre_c $perf_c sockperf throughput -m "$size" --tcp \
		-i 127.0.0.1 -p "$port" -t "$secs" --dontwarmup >"$tmp/cli.out" 2>&1
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; spid=
	sed -i 's/\x1b\[[0-9;]*m//g' "$tmp/cli.out"
	v1=$(sed -n 's/.*Message Rate is \([0-9]*\).*/\1/p' "$tmp/cli.out")
	v2=$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$tmp/cli.out")
	if [ "$path" != kernel ] && ! grep -aq 'counter conn_accel_dpdk = [1-9]' "$tmp/cli.log" 2>/dev/null; then
		v1=fallback v2=fallback
	fi
	[ -n "${TP_LOGS:-}" ] && [ "$path" != kernel ] && mkdir -p "$TP_LOGS" && cp "$tmp/srv.log" "$TP_LOGS/srv-$size-$r.log" && cp "$tmp/cli.log" "$TP_LOGS/cli-$size-$r.log" && cp "$tmp/cli.out" "$TP_LOGS/cli-$size-$r.out" && cp "$tmp/srv.out" "$TP_LOGS/srv-$size-$r.out"
	echo "$path $size ${v1:-fail} ${v2:-fail}" | tee -a "$tmp/runs" >&2
}

: >"$tmp/runs"
for r in $(seq "$rounds"); do
	for s in $sizes; do
		run kernel "$s" "$r"
		run dpdk "$s" "$r"
		[ -n "${TP_ALT_ENV:-}${TP_ALT_DEVARGS:-}${TP_ALT_BUILD:-}" ] && run alt "$s" "$r"
	done
done
awk -v sizes="$sizes" -v rounds="$rounds" -v secs="$secs" -v alt="${TP_ALT_ENV:-}${TP_ALT_DEVARGS:-}${TP_ALT_BUILD:+ build $TP_ALT_BUILD}" '
function median(l,   a, n, i, j, t) {
	n = split(l, a, " ")
	if (n == 0) return 0
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$3 ~ /^[0-9]/ { m[$1, $2] = m[$1, $2] " " $3; B[$1, $2] = B[$1, $2] " " $4 }
END {
	printf "sockperf TCP throughput, median of %d x %d s; dpdk = libfabsock on net_memif\n", rounds, secs
	printf "%8s %12s %10s %12s %10s %8s\n", "size", "kernel msg/s", "MB/s", "dpdk msg/s", "MB/s", "x kernel"
	n = split(sizes, s, " ")
	for (i = 1; i <= n; i++) {
		k = median(B["kernel", s[i]]); d = median(B["dpdk", s[i]])
		printf "%8s %12d %10.1f %12d %10.1f %8.2f\n", s[i], median(m["kernel", s[i]]), k,
			median(m["dpdk", s[i]]), d, (k > 0 ? d / k : 0)
		if (alt != "") {
			d = median(B["alt", s[i]])
			printf "%8s %12s %10s %12d %10.1f %8.2f  (alt: %s)\n", "", "", "",
				median(m["alt", s[i]]), d, (k > 0 ? d / k : 0), alt
		}
	}
}' "$tmp/runs"
