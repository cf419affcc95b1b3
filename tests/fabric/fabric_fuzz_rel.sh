#!/bin/sh
# Run the libFuzzer target of the reliability engine and message layer for a
# bounded time. SKIP when clang (with libFuzzer) is not available.
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
fuzz="$top_builddir/tests/fabric/fuzz_rel"
if [ ! -x "$fuzz" ]; then
	echo "SKIP: $fuzz not built (configure found no clang with -fsanitize=fuzzer)"
	exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
timeout 120 "$fuzz" -max_total_time="${FDP_FUZZ_SECONDS:-15}" -rss_limit_mb=1024 \
	-timeout=10 -artifact_prefix="$dir/" "$dir" 2>"$dir/log"
rc=$?
tail -n 3 "$dir/log"
if [ $rc -ne 0 ]; then
	echo "FAIL: fuzzer exit $rc; crashing input:"
	ls "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* 2>/dev/null | head -1 | xargs -r od -An -tx1 | head -5
	exit 1
fi
echo "PASS"
