#!/bin/sh
# Run the stack's libFuzzer targets (tests/stack/fuzz_nego.c, fuzz_stream.c)
# for a bounded time each (STK_FUZZ_SECONDS, default 15), starting from the
# seed corpus kept in tests/stack/corpus (copied: the run's finds stay in a
# temporary directory). SKIP when clang (with libFuzzer) is not available.
: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM
for t in nego stream; do
	fuzz="$top_builddir/tests/stack/fuzz_$t"
	if [ ! -x "$fuzz" ]; then
		echo "SKIP: $fuzz not built (configure found no clang with -fsanitize=fuzzer)"
		exit 77
	fi
	mkdir -p "$dir/$t"
	cp "$top_srcdir/tests/stack/corpus/$t"/* "$dir/$t/"
	timeout 120 "$fuzz" -max_total_time="${STK_FUZZ_SECONDS:-15}" -rss_limit_mb=1024 \
		-max_len=4096 -artifact_prefix="$dir/$t-" "$dir/$t" 2>"$dir/$t.log"
	rc=$?
	echo "fuzz_$t: $(grep -a '^Done\|^#[0-9]*.*DONE' "$dir/$t.log" | tail -n 1)"
	if [ $rc -ne 0 ]; then
		echo "FAIL: fuzz_$t exit $rc; crashing input:"
		tail -n 20 "$dir/$t.log"
		ls "$dir/$t"-crash-* "$dir/$t"-leak-* 2>/dev/null | head -1 | xargs -r od -An -tx1 | head -5
		status=1
	fi
done
exit $status
