#!/bin/sh
# Pass-through overhead of libfabsock: bench/overhead (per-call cost of
# send/recv, write/read, poll/select/epoll_wait on 16 fds, getsockopt, fcntl
# on kernel AF_UNIX sockets) without and with the preload, in the same run,
# alternating runs call by call so that machine noise hits both sides alike.
#
# usage: bench/overhead.sh [BUILDDIR]    (default: $top_builddir, else .)
# environment: ROUNDS (default 5), REPS (per round, default 5), SCALE (1)
# Prints: call, kernel ns, preload ns, added ns (medians over rounds of the
# per-round medians), and paired ns: the wrapper's own cost measured inside
# one preloaded process (bench/overhead -p), free of process-to-process
# noise. Target: <= 20 ns added per call.
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
bin="$b/bench/overhead"
launcher="$b/tools/fabsock"
rounds=${ROUNDS:-5}
reps=${REPS:-5}
scale=${SCALE:-1}
for f in "$bin" "$launcher"; do
	[ -x "$f" ] || {
		echo "overhead.sh: $f not built (run make in $b)" >&2
		exit 2
	}
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-overhead.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# The calls, in the program's order.
calls=$(timeout 600 "$bin" -r 1 -s 1 | awk '{ print $1 }') ||
	{ echo "overhead.sh: $bin failed" >&2; exit 1; }
# Both sides on the same CPU when taskset exists: no migrations, and each
# side meets the same neighbours.
pin=
if command -v taskset >/dev/null 2>&1; then
	cpu=$(($(nproc) - 1))
	pin="taskset -c $cpu"
fi
# For each call, alternate kernel and preload runs ROUNDS times, so slow
# drifts of the machine's load hit both sides alike.
for c in $calls; do
	r=1
	while [ "$r" -le "$rounds" ]; do
		$pin timeout 600 "$bin" -r "$reps" -s "$scale" -o "$c" >>"$tmp/kernel" ||
			{ echo "overhead.sh: kernel run failed" >&2; exit 1; }
		$pin timeout 600 "$launcher" --log info --log-file "$tmp/log" -- \
			"$bin" -r "$reps" -s "$scale" -o "$c" >>"$tmp/preload" ||
			{ echo "overhead.sh: preloaded run failed" >&2; exit 1; }
		r=$((r + 1))
	done
done
# Paired, in one process each: the preloaded process alternates blocks of
# wrapped and direct-libc calls (the wrapper's own cost); a plain process
# does the same with libc on both sides (the method's noise floor).
$pin timeout 600 "$launcher" --log info --log-file "$tmp/log" -- \
	"$bin" -p -r "$reps" -s "$scale" >"$tmp/paired" ||
	{ echo "overhead.sh: paired preloaded run failed" >&2; exit 1; }
$pin timeout 600 "$bin" -p -r "$reps" -s "$scale" >"$tmp/paired.plain" ||
	{ echo "overhead.sh: paired plain run failed" >&2; exit 1; }
grep -Eq '^fabsock\[[0-9]+\]: info: libfabsock [^ ]+ active' "$tmp/log" || {
	echo "overhead.sh: the preloaded run did not load libfabsock:" >&2
	cat "$tmp/log" >&2
	exit 1
}

# Median over rounds of each call's per-round median, then the table.
sed 's/^/kernel /' "$tmp/kernel" >"$tmp/all"
sed 's/^/preload /' "$tmp/preload" >>"$tmp/all"
awk '{ print "paired", $1, $2, $5 }' "$tmp/paired" >>"$tmp/all"
awk '{ print "floor", $1, $2, $5 }' "$tmp/paired.plain" >>"$tmp/all"
awk -v rounds="$rounds" '
function median(list, n,   a, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++)
		for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
	v[$1, $2] = v[$1, $2] " " $4
}
END {
	printf "libfabsock pass-through overhead, ns per call (medians; kernel and preload: %d alternating\n", rounds
	printf "runs each; paired: wrapped vs direct-libc calls alternating in one preloaded process)\n"
	printf "%-18s %10s %11s %9s %11s\n", "call", "kernel ns", "preload ns", "added ns", "paired ns"
	worst = -1e9; floor = 0
	for (i = 1; i <= n; i++) {
		c = order[i]
		k = median(v["kernel", c]); p = median(v["preload", c]); w = median(v["paired", c])
		f = median(v["floor", c]); if (f < 0) f = -f; if (f > floor) floor = f
		printf "%-18s %10.1f %11.1f %9.1f %11.1f\n", c, k, p, p - k, w
		if (w > worst) { worst = w; wname = c }
	}
	printf "added = preload - kernel (separate processes: includes run-to-run noise)\n"
	printf "paired = the wrappers\x27 own cost; the same method without the preload reads <= %.1f ns\n", floor
	printf "largest paired cost: %.1f ns (%s); target <= 20 ns per call: %s\n", worst, wname,
	       worst <= 20 ? "met" : "NOT met"
}' "$tmp/all"
