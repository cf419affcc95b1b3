#!/bin/sh
# The stack's include order: every #include "stack/stk_X.h" in src/stack names
# a module on the including file's line of src/stack/layers.txt or above it.
# A module missing from layers.txt is an error too, and so is an #include of
# stk.h (the preload's interface) below the last line.
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}/src/stack
order=$src/layers.txt
[ -r "$order" ] || { echo "layers.sh: cannot read $order"; exit 1; }

# rank NAME: the line number of the module NAME in layers.txt, or nothing
rank() {
	awk -v n="$1" '!/^#/ && NF { for (i = 1; i <= NF; i++) if ($i == n) print NR }' "$order"
}

# stk.h, the interface to the preload, belongs to the last line (the socket API)
top=$(awk '!/^#/ && NF { n = NR } END { print n }' "$order")

bad=0
for f in "$src"/stk_*.c "$src"/stk_*.h; do
	[ -e "$f" ] || continue
	base=$(basename "$f"); name=${base#stk_}; name=${name%.[ch]}
	r=$(rank "$name")
	if [ -z "$r" ]; then
		echo "layers.sh: $base: module '$name' is not in src/stack/layers.txt"
		bad=1
		continue
	fi
	if grep -q '^#include "stack/stk\.h"' "$f" && [ "$r" -ne "$top" ]; then
		echo "layers.sh: $base (layer line $r) includes stk.h, the socket API's (line $top)"
		bad=1
	fi
	for inc in $(sed -n 's|^#include "stack/stk_\([a-z0-9_]*\)\.h".*|\1|p' "$f"); do
		ri=$(rank "$inc")
		if [ -z "$ri" ]; then
			echo "layers.sh: $base includes stk_$inc.h, which is not in layers.txt"
			bad=1
		elif [ "$ri" -gt "$r" ]; then
			echo "layers.sh: $base (layer line $r) includes stk_$inc.h (line $ri, above it)"
			bad=1
		fi
	done
done
[ $bad -eq 0 ] && echo "layers.sh: every stack file includes only its own layer and those below"
exit $bad
