#!/bin/sh
# The demo (bench/demo.sh, what `./quickstart demo` runs), short: one round
# of 1 s sockperf runs. The table must have its three rows (kernel TCP,
# libfabsock shm, libfabsock dpdk/memif) with a number in every cell (an
# accelerated path that fell back prints "fallback" instead: a failure
# here), the latency plot must be a PNG with its data beside it, and the
# demo must leave no process, temporary directory or memif socket behind.
# No timing is judged.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-demo
fsk_need_preload
fsk_need_cmd sockperf ss gnuplot "$FSK_PYTHON"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || fsk_fail "libdpdk-fi.so not built"
T=$fsk_tmp
out="$T/out"

# the demo's own temporary directory (and memif socket) lands under $T/run
mkdir "$T/run" || fsk_fail "mkdir"
FSK_DEMO_MARK="$T" TMPDIR="$T/run" DEMO_SECONDS=1 DEMO_ROUNDS=1 DEMO_OUT="$out" \
	timeout -k 5 150 sh "$top_srcdir/bench/demo.sh" "$top_builddir" >"$T/demo.out" 2>&1
rc=$?
cat "$T/demo.out"
[ $rc -eq 0 ] || fsk_fail "bench/demo.sh exited $rc"

# three rows, each: name, then 6 numeric cells (p50, p99, msg/s, x, MB/s, x)
for row in "kernel TCP" "libfabsock shm" "libfabsock dpdk/memif"; do
	line=$(grep "^$row  " "$out/table.txt")
	[ -n "$line" ] || fsk_fail "table: no row '$row'"
	cells=$(echo "$line" | sed "s|^$row *||")
	echo "$cells" | awk '{ for (i = 1; i <= 6; i++) if ($i !~ /^[0-9]+(\.[0-9]+)?$/) exit 1
		exit NF == 6 ? 0 : 1 }' || fsk_fail "table: row '$row' has a cell that is not a number: $cells"
done
[ "$(grep -c '^kernel TCP \|^libfabsock ' "$out/table.txt")" -eq 3 ] ||
	fsk_fail "table: expected exactly 3 rows"
grep -q "latency distribution plot: $out/latency.png" "$T/demo.out" ||
	fsk_fail "the demo did not say where the plot is"

# the plot: PNG signature 89 50 4e 47 0d 0a 1a 0a
magic=$(od -An -tx1 -N8 "$out/latency.png" 2>/dev/null | tr -d ' \n')
[ "$magic" = 89504e470d0a1a0a ] || fsk_fail "$out/latency.png is not a PNG (starts with '$magic')"
for p in kernel shm dpdk; do
	[ -s "$out/latency-$p.txt" ] && [ -s "$out/cdf-$p.dat" ] ||
		fsk_fail "raw latency data for $p missing beside the plot"
done
[ -s "$out/latency.gp" ] || fsk_fail "the gnuplot script is missing"

# nothing left behind: no temporary directory (memif socket included), no
# process of the demo (all inherit FSK_DEMO_MARK; this shell does not)
left=$(ls -A "$T/run")
[ -z "$left" ] || fsk_fail "left in TMPDIR: $left"
procs=$(grep -l -a -F "FSK_DEMO_MARK=$T" /proc/[0-9]*/environ 2>/dev/null)
[ -z "$procs" ] || fsk_fail "demo processes still running: $procs"
echo "PASS: the demo printed 3 rows of numbers and wrote $out/latency.png"
