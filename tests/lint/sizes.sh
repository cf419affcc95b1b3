#!/bin/sh
# The size rules of docs/design.md: no C source file (library, tools, tests,
# benchmarks) over 800 lines, no function over 100 lines, except the entries
# of the design document's list
# "Exceptions to the size rules", each written as
#   - `path/file.c`: reason                 (a whole file)
#   - `path/file.c` `function`: reason      (one function)
# A function's length is the count of lines between its opening brace and its
# closing brace, both at column 0 (the project's style).
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
doc=$top/docs/design.md
[ -r "$doc" ] || { echo "sizes.sh: cannot read $doc"; exit 1; }
FILE_MAX=800
FUNC_MAX=100

exceptions=$(sed -n '/^## .*Exceptions to the size rules/,/^## /p' "$doc" |
	sed -n 's/^- `\([^`]*\)`\( `\([^`]*\)`\)\{0,1\}:.*/\1 \3/p')
excepted() { # file [function]
	printf '%s\n' "$exceptions" | grep -qxF "$1${2:+ $2}" ||
		{ [ -z "$2" ] && return 1; printf '%s\n' "$exceptions" | grep -qxF "$1 $2"; }
}

bad=0
cd "$top" || exit 1
for f in src/stack/*.c src/preload/*.c src/fabric/*.c tools/*.c tests/*/*.c bench/*.c; do
	[ -e "$f" ] || continue
	n=$(wc -l < "$f")
	if [ "$n" -gt $FILE_MAX ] && ! excepted "$f"; then
		echo "sizes.sh: $f has $n lines (over $FILE_MAX)"
		bad=1
	fi
	long=$(awk -v lim=$FUNC_MAX '
		/^\{/ { start = FNR; name = prev; next }
		/^\}/ { if (start && FNR - start - 1 > lim) {
				if (name ~ /^START_TEST\(/) { sub(/^START_TEST\(/, "", name); sub(/\).*/, "", name) }
				sub(/\(.*/, "", name); n = split(name, w, /[ *]+/)
				print w[n] " " FNR - start - 1 }
			start = 0; next }
		!start && /^[a-zA-Z_].*\(/ { prev = $0 }' "$f")
	[ -z "$long" ] && continue
	while read -r fn len; do
		if ! excepted "$f" "$fn"; then
			echo "sizes.sh: $f: function $fn has $len lines (over $FUNC_MAX)"
			bad=1
		fi
	done <<EOT
$long
EOT
done
[ $bad -eq 0 ] && echo "sizes.sh: every file and function within the size rules or named as an exception"
exit $bad
