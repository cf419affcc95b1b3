#!/bin/sh
# The README's performance table: runs bench/accel.sh (sockperf TCP over
# 127.0.0.1, kernel and libfabsock on shm and on dpdk/net_memif, the paths
# alternating each round, medians over rounds, ratios to the kernel) and
# bench/apps.sh (real programs, the library's defaults, same rules), records
# the machine it ran on, and rewrites the part of README.md between the lines
# <!-- perf-table:begin --> and <!-- perf-table:end --> with the table, the
# machine and the command that made it. Nothing else in the README changes.
#
# usage: bench/readme_table.sh [BUILDDIR [README]]
#        (defaults: build, and README.md beside bench/)
# environment: ROUNDS (default 3), SECS (seconds per sockperf run, default 3),
#   PROVIDERS (default "shm dpdk"), PIN (default 1); passed to bench/accel.sh;
#   APPS (default 1; 0 leaves bench/apps.sh out).
# Exit status: 0 when the README was rewritten; 1 when accel.sh failed (the
# README is then left as it is, and the output says why).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=$(cd "${1:-$top/build}" && pwd) || exit 2
readme=${2:-$top/README.md}
rounds=${ROUNDS:-3}
secs=${SECS:-3}
providers=${PROVIDERS:-shm dpdk}
begin='<!-- perf-table:begin -->'
end='<!-- perf-table:end -->'

[ -f "$readme" ] || { echo "readme_table.sh: $readme not found" >&2; exit 2; }
[ "$(grep -cxF "$begin" "$readme")" = 1 ] && [ "$(grep -cxF "$end" "$readme")" = 1 ] ||
	{ echo "readme_table.sh: $readme needs one '$begin' and one '$end' line" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-readme-table.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# The machine: CPU model, clock and count, container or VM, kernel, Debian
# version, load average at the start.
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)
mhz=$(sed -n 's/^cpu MHz[[:space:]]*: *\([0-9]*\).*/\1/p' /proc/cpuinfo | head -n 1)
cpus=$(nproc 2>/dev/null || grep -c '^processor' /proc/cpuinfo)
kernel=$(uname -r)
debian=$(cat /etc/debian_version 2>/dev/null || echo unknown)
load=$(cut -d' ' -f1-3 /proc/loadavg)
virt=
command -v systemd-detect-virt >/dev/null 2>&1 && virt=$(systemd-detect-virt 2>/dev/null)
[ "$virt" = none ] && virt=
pinning="server on CPU 0, client on CPU 1"
[ "${PIN:-1}" = 1 ] && [ "$cpus" -ge 2 ] && command -v taskset >/dev/null || pinning="not pinned"

cmd="ROUNDS=$rounds SECS=$secs sh bench/readme_table.sh"
[ "$providers" = "shm dpdk" ] || cmd="PROVIDERS=\"$providers\" $cmd"
echo "readme_table.sh: running bench/accel.sh ($rounds rounds x $secs s, kernel $providers)" >&2
ROUNDS=$rounds SECS=$secs PROVIDERS=$providers REDIS_N=0 \
	sh "$top/bench/accel.sh" "$b" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
if [ $rc -ne 0 ] || ! grep -q '^kernel ' "$tmp/out"; then
	cat "$tmp/err" >&2
	echo "readme_table.sh: bench/accel.sh failed (exit $rc); $readme unchanged" >&2
	exit 1
fi
# a run that was not accelerated is left out of the medians, and the table
# says so in accel.sh's own line under it
grep -q 'not counted' "$tmp/out" && cat "$tmp/err" >&2
: >"$tmp/apps"
if [ "${APPS:-1}" = 1 ]; then
	echo "readme_table.sh: running bench/apps.sh ($rounds rounds, kernel shm dpdk)" >&2
	ROUNDS=$rounds PATHS="kernel $providers" sh "$top/bench/apps.sh" "$b" >"$tmp/apps.out" 2>"$tmp/apps.err"
	arc=$?
	sed -n '/^real programs over/,$p' "$tmp/apps.out" >"$tmp/apps"
	if [ $arc -ne 0 ] || [ ! -s "$tmp/apps" ]; then
		cat "$tmp/apps.err" >&2
		echo "readme_table.sh: bench/apps.sh failed (exit $arc); $readme unchanged" >&2
		exit 1
	fi
	cat "$tmp/apps"
fi

{
	echo "$begin"
	echo '```'
	sed '/./,$!d' "$tmp/out"
	if [ -s "$tmp/apps" ]; then
		echo
		cat "$tmp/apps"
	fi
	echo '```'
	echo
	echo "Made by \`$cmd\` (\`./quickstart table\` builds, then runs it):"
	echo "sockperf TCP over 127.0.0.1, both ends launched, $pinning; latency is one-way"
	echo "(half a 64 B round trip); \`dpdk\` is our provider over a \`net_memif\` pair. A run counts"
	echo "only when the client's \`conn_accel_<provider>\` counter says it went over that provider."
	if [ -s "$tmp/apps" ]; then
		echo "The second table is \`bench/apps.sh\`: real programs with the library's defaults, both"
		echo "ends launched, each client a new process (its time includes loading libfabric, about"
		echo "0.3 s here, and for dpdk starting DPDK); the rows are described at the top of the script."
	fi
	echo "Machine: $cpu ($mhz MHz), $cpus CPUs${virt:+, $virt}, Linux $kernel, Debian $debian;"
	echo "load average $load at the start (a shared machine: the 16 KiB figures vary most"
	echo "between runs, the latency medians least)."
	echo "$end"
} >"$tmp/block"

awk -v begin="$begin" -v end="$end" -v block="$tmp/block" '
$0 == begin { while ((getline line < block) > 0) print line; skip = 1; next }
$0 == end { skip = 0; next }
!skip { print }' "$readme" >"$tmp/readme" || exit 1
cat "$tmp/readme" >"$readme"
echo "readme_table.sh: $readme updated" >&2
