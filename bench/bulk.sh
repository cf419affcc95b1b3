#!/bin/sh
# Steady-state bulk throughput of one connection, one way (bench/bulk.c: the
# receiver times from its first byte to EOF, so process start-up and the
# connection's set-up are not counted), kernel vs launched in one run, medians
# over rounds; rounds alternate the paths.
# Modes: write8k (write() of 8 KiB, socat's size), write64k, sendfile (a 10 MiB
# file, sendfile with a NULL offset, rewound at its end); the receiver reads
# 8 KiB at a time (socat, curl) or 64 KiB (RBUF).
#
# usage: bench/bulk.sh [BUILDDIR]   environment: ROUNDS (3), PATHS ("kernel shm
#   dpdk"; PROV@base with BASE=builddir), MODES ("write8k write64k sendfile"),
#   MB (256 per run), RBUF (8192), PIN (1), FSK_ENV (extra VAR=value words for
#   launched processes, e.g. FABSOCK_SPIN_US=1000000), VERBOSE (1: the
#   launched runs' counters: doorbells, messages)
set -u
b=$(cd "${1:-${top_builddir:-build}}" && pwd) || exit 2
own_launcher="$b/tools/fabsock"
base_launcher=
[ -z "${BASE:-}" ] || base_launcher="$(cd "$BASE" && pwd)/tools/fabsock"
rounds=${ROUNDS:-3}
paths=${PATHS:-kernel shm dpdk}
modes=${MODES:-write8k write64k sendfile}
mb=${MB:-256}
rbuf=${RBUF:-8192}
. "$(dirname "$0")/lib.sh"
fsk_env=${FSK_ENV:+$FSK_ENV }
pin_default
bulk=$b/bench/bulk
[ -x "$bulk" ] || { echo "bench/bulk.sh: $bulk not built" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-bulk-bench.XXXXXX") || exit 1
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
head -c 10485760 /dev/urandom >"$tmp/file"
: >"$tmp/results"

r=1
while [ $r -le "$rounds" ]; do
	for mode in $modes; do
		set -- $paths
		k=$(( (r - 1) % $# ))
		while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
		for path in "$@"; do
			case $mode in
			write8k) args="write 8192" ;;
			write64k) args="write 65536" ;;
			sendfile) args="sendfile $tmp/file" ;;
			esac
			p=$(port)
			rm -f "$tmp/memif.sock" "$tmp/srv.out"
			$(wrap "$path" server) env FABSOCK_LOG_FILE="$tmp/srv.log" timeout 100 "$bulk" server "$p" "$rbuf" >"$tmp/srv.out" 2>&1 &
			spid=$!
			listening "$p"
			$(wrap "$path" client) env FABSOCK_LOG_FILE="$tmp/cli.log" timeout 100 "$bulk" client "$p" "$mb" $args 2>>"$tmp/cli.err"
			wait "$spid"
			spid=
			v=$(sed -n 's/.*: \([0-9.]*\) MB\/s$/\1/p' "$tmp/srv.out")
			if [ "$path" != kernel ] && ! grep -aq "counter conn_accel_${path%@base} = [1-9]" "$tmp/cli.log"; then
				v=fallback
			fi
			if [ "$path" != kernel ]; then
				echo "$mode $path ${v:-fail}: client $(grep -a 'counter \(doorbells\|bells\|msgs_tx\|msgs_rx\)' "$tmp/cli.log" |
					sed 's/.*counter //; s/ = /=/' | tr '\n' ' ')server $(grep -a 'counter \(doorbells\|bells\|msgs_tx\|msgs_rx\)' "$tmp/srv.log" |
					sed 's/.*counter //; s/ = /=/' | tr '\n' ' ')" >>"$tmp/counters"
			fi
			rm -f "$tmp/cli.log" "$tmp/srv.log"
			echo "$mode $path ${v:-fail}" >>"$tmp/results"
		done
	done
	r=$((r + 1))
done

[ -z "${VERBOSE:-}" ] || sed 's/^/  /' "$tmp/counters"
awk -v paths="$paths" -v modes="$modes" -v rounds="$rounds" -v mb="$mb" -v rbuf="$rbuf" "$awk_median"'
$3 ~ /^[0-9.]+$/ { v[$1, $2] = v[$1, $2] " " $3; next }
{ bad[$1, $2] = bad[$1, $2] " " $3 }
END {
	np = split(paths, P, " "); nm = split(modes, M, " ")
	printf "bulk, one connection, %d MiB per run, reader %d B, %d rounds, medians (MB/s)\n", mb, rbuf, rounds
	printf "%-10s", "mode"
	for (i = 1; i <= np; i++) { printf " %10s", P[i]; if (P[i] != "kernel") printf " %8s", "x kernel" }
	printf "\n"
	for (j = 1; j <= nm; j++) {
		m = M[j]; k = v[m, "kernel"] != "" ? median(v[m, "kernel"]) : 0
		printf "%-10s", m
		for (i = 1; i <= np; i++) {
			p = P[i]
			if (v[m, p] == "") { printf " %10s", "fail"; if (p != "kernel") printf " %8s", "-"; continue }
			x = median(v[m, p]); printf " %10.0f", x
			if (p != "kernel") printf " %8s", (k > 0 ? sprintf("%.2f", x / k) : "-")
		}
		printf "\n"
	}
	for (x in bad) { split(x, y, SUBSEP); printf "%s %s: not counted:%s\n", y[1], y[2], bad[x] }
}' "$tmp/results"
