#!/bin/sh
# The preload talks to the stack through one header: every file of src/preload
# includes no stack header but stack/stk.h (and stack/stk_sys.h, the table of
# real symbols), and stack/stk.h includes no stack header but stack/stk_sys.h.
# Usage: top_srcdir=<source tree> sh preload_iface.sh
set -u
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
allowed='stack/stk\.h|stack/stk_sys\.h'
bad=0

# the #include lines naming a stack header (quoted or angled) in the files given
stack_includes() {
	grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]stack/' "$@" /dev/null
}

preload=$(ls "$top_srcdir"/src/preload/*.c "$top_srcdir"/src/preload/*.h 2>/dev/null)
if [ -z "$preload" ]; then
	echo "FAIL: no src/preload sources under $top_srcdir"
	exit 1
fi

found=$(stack_includes $preload | grep -vE "[\"<]($allowed)[\">]")
if [ -n "$found" ]; then
	echo "FAIL: src/preload includes stack headers other than stk.h/stk_sys.h:"
	echo "$found" | sed "s|$top_srcdir/||"
	bad=1
fi

if [ ! -f "$top_srcdir/src/stack/stk.h" ]; then
	echo "FAIL: src/stack/stk.h is missing"
	bad=1
elif found=$(stack_includes "$top_srcdir/src/stack/stk.h" | grep -vE '["<]stack/stk_sys\.h[">]') &&
	[ -n "$found" ]; then
	echo "FAIL: src/stack/stk.h includes other stack headers:"
	echo "$found" | sed "s|$top_srcdir/||"
	bad=1
fi

[ "$bad" -eq 0 ] && echo "ok: src/preload includes only stack/stk.h and stack/stk_sys.h"
exit "$bad"
