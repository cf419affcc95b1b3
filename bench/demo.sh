#!/bin/sh
# The demo: sockperf TCP ping-pong, 64 B messages over 127.0.0.1, first on
# the plain kernel, then with server and client under the fabsock launcher
# (pass-through until acceleration lands), in the same run. Prints one
# table: median and p99 one-way latency (sockperf reports half the round
# trip) and the ratio to the kernel.
#
# usage: bench/demo.sh [BUILDDIR]     (default: $top_builddir, else .)
# environment: DEMO_SECONDS (per side, default 3), DEMO_MSG (default 64)
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
launcher="$b/tools/fabsock"
secs=${DEMO_SECONDS:-3}
msg=${DEMO_MSG:-64}
[ -x "$launcher" ] || { echo "demo.sh: $launcher not built (run make in $b)" >&2; exit 2; }
for c in sockperf ss; do
	command -v "$c" >/dev/null 2>&1 ||
		{ echo "demo.sh: $c not installed (apt-get install sockperf iproute2)" >&2; exit 2; }
done
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-demo.XXXXXX") || exit 1
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

free_port() {
	"$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# run NAME [launcher args...]: one server + one client, same wrapping.
run() {
	name=$1
	shift
	port=$(free_port) || exit 1
	timeout -k 5 $((secs + 60)) "$@" sockperf server --tcp -i 127.0.0.1 -p "$port" \
		>"$tmp/$name.server" 2>&1 &
	spid=$!
	i=0
	until ss -Hltn "sport = :$port" | grep -q .; do
		i=$((i + 1))
		[ $i -le 100 ] || { echo "demo.sh: sockperf server did not start" >&2; exit 1; }
		sleep 0.1
	done
	timeout -k 5 $((secs + 60)) "$@" sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" \
		-t "$secs" -m "$msg" >"$tmp/$name.client" 2>&1 ||
		{ cat "$tmp/$name.client" >&2; echo "demo.sh: $name ping-pong failed" >&2; exit 1; }
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
	grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' \
		"$tmp/$name.client" || { cat "$tmp/$name.client" >&2; echo "demo.sh: $name lost messages" >&2; exit 1; }
}

# pct FILE P: sockperf's "percentile P = value" (usec), colour codes stripped.
pct() {
	sed 's/\x1b\[[0-9;]*m//g' "$1" | awk -v p="$2" '
		$0 ~ "percentile " p " =" { print $NF; exit }'
}

echo "demo: sockperf ping-pong TCP ${msg} B over 127.0.0.1, ${secs} s per side"
run kernel
run libfabsock "$launcher" --log info --log-file "$tmp/fsk.log" --
grep -Eq '^fabsock\[[0-9]+\]: info: libfabsock [^ ]+ active' "$tmp/fsk.log" ||
	{ cat "$tmp/fsk.log" >&2; echo "demo.sh: libfabsock was not loaded" >&2; exit 1; }

k50=$(pct "$tmp/kernel.client" 50.000)
k99=$(pct "$tmp/kernel.client" 99.000)
f50=$(pct "$tmp/libfabsock.client" 50.000)
f99=$(pct "$tmp/libfabsock.client" 99.000)
for v in "$k50" "$k99" "$f50" "$f99"; do
	[ -n "$v" ] || { echo "demo.sh: cannot read sockperf's percentiles" >&2; exit 1; }
done
awk -v k50="$k50" -v k99="$k99" -v f50="$f50" -v f99="$f99" 'BEGIN {
	printf "%-28s %12s %12s %8s\n", "one-way latency (usec)", "median", "p99", "ratio"
	printf "%-28s %12.3f %12.3f %8.2f\n", "kernel TCP", k50, k99, 1
	printf "%-28s %12.3f %12.3f %8.2f\n", "libfabsock (fabsock launcher)", f50, f99, f50 / k50
}'
echo "(ratio = median / kernel median; sockperf reports one-way latency as half the round trip)"
# What the library did with the connection, from its own counters (logged
# at exit with --log info), e.g. whether it stayed on the kernel.
counters=$(sed -n 's/^fabsock\[[0-9]*\]: info: counter \([a-z_]*\) = \([0-9]*\).*/\1=\2/p' "$tmp/fsk.log" |
	awk -F= '$2 != 0 { s[$1] += $2 } END { for (k in s) printf "%s=%d ", k, s[k] }')
[ -n "$counters" ] && echo "libfabsock counters logged at exit: $counters"
grep -m 1 -E 'stays on the kernel|accelerated' "$tmp/fsk.log" | sed 's/^fabsock\[[0-9]*\]: [a-z]*: /libfabsock: /'
exit 0
