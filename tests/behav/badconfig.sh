#!/bin/sh
# Bad configuration falls back cleanly: for each bad input (inline rules,
# multi-line rules, a rules file, a bad FABSOCK_SPIN_US, a bad
# FABSOCK_PROFILE, a missing rules file) the preloaded program prints
# exactly one line on stderr,
#   fabsock[<pid>]: error: <source>:<line>:<col>: <expected>; libfabsock disabled, sockets use the kernel
# naming the right source, line and column, nothing on stdout but its own
# output, and its transcript is byte-identical to the kernel's.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup badconfig
fsk_need_preload
T=$fsk_tmp
prog="$top_builddir/tests/behav/bh_udp"
[ -x "$prog" ] || fsk_fail "$prog not built"
fails=0
bad() { echo "not ok: $*"; fails=$((fails + 1)); }

timeout 60 "$prog" >"$T/kernel.out" 2>"$T/kernel.err" || fsk_fail "bh_udp fails on the kernel"

# expect_error NAME SOURCES LINE COLMIN COLMAX [env assignments...] -- [launcher options]
# Runs bh_udp under the launcher with the given environment and options;
# SOURCES is the accepted source name, or several separated by '|'.
expect_error() {
	name=$1 src=$2 line=$3 cmin=$4 cmax=$5
	shift 5
	envs=""
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		envs="$envs $(printf '%s' "$1" | sed "s/'/'\\\\''/g; s/^/'/; s/$/'/")"
		shift
	done
	[ "${1:-}" = -- ] && shift
	eval "env $envs timeout 60 \"\$FSK_LAUNCHER\" \"\$@\" -- \"\$prog\"" \
		>"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	[ $rc = 0 ] || bad "$name: exit $rc"
	cmp -s "$T/kernel.out" "$T/$name.out" || {
		bad "$name: transcript differs from the kernel's"
		diff "$T/kernel.out" "$T/$name.out" | head -n 20
	}
	n=$(wc -l <"$T/$name.err")
	[ "$n" = 1 ] || bad "$name: want exactly one stderr line, got $n: $(cat "$T/$name.err")"
	l=$(head -n 1 "$T/$name.err")
	echo "$name: $l"
	re='^fabsock\[[0-9]+\]: error: (.*):([0-9]+):([0-9]+): (.+); libfabsock disabled, sockets use the kernel$'
	if ! echo "$l" | grep -Eq "$re"; then
		bad "$name: not '<source>:<line>:<col>: <what>; libfabsock disabled, sockets use the kernel'"
		return
	fi
	gsrc=$(echo "$l" | sed -E "s/$re/\\1/")
	gline=$(echo "$l" | sed -E "s/$re/\\2/")
	gcol=$(echo "$l" | sed -E "s/$re/\\3/")
	case "|$src|" in
	*"|$gsrc|"*) ;;
	*) bad "$name: source '$gsrc', want '$src'" ;;
	esac
	[ "$gline" = "$line" ] || bad "$name: line $gline, want $line"
	[ "$gcol" -ge "$cmin" ] && [ "$gcol" -le "$cmax" ] ||
		bad "$name: column $gcol, want $cmin..$cmax"
}

# Column of the first occurrence of TOKEN in TEXT (1-based).
col_of() { awk -v t="$1" -v s="$2" 'BEGIN { print index(t, s) }'; }

# 1. inline rules, second statement on the same line: 'bogus' at its column.
r='use accel tcp_client 1.2.3.4:80; use bogus tcp_server *:*'
c=$(col_of "$r" bogus)
expect_error inline FABSOCK_RULES 1 "$c" "$c" "FABSOCK_RULES=$r" --

# 2. the same through --rules, spread over lines: error on line 2, in the
#    address:port token.
r='use kernel tcp_server *:22
use accel udp_sender *:99999'
expect_error multiline FABSOCK_RULES 2 22 28 -- --rules "$r"

# 3. a rules file: comment, good rule, bad prefix on line 3.
printf '%s\n' '# libvma.conf style' 'use kernel tcp_server *:22' \
	'use accel tcp_client 10.0.0.1/33:80' >"$T/bad.conf"
expect_error file "$T/bad.conf" 3 22 35 "FABSOCK_CONFIG=$T/bad.conf" --

# 4. the same file through --config.
expect_error file-option "$T/bad.conf" 3 22 35 -- --config "$T/bad.conf"

# 5. a bad number: the value of FABSOCK_SPIN_US, first bad character or start.
expect_error spin FABSOCK_SPIN_US 1 1 3 "FABSOCK_SPIN_US=50us" --

# 6. a bad profile name.
expect_error profile FABSOCK_PROFILE 1 1 1 "FABSOCK_PROFILE=fastest" --

# 7. a missing rules file: named by the variable that points at it.
expect_error missing "FABSOCK_CONFIG|$T/does-not-exist.conf" 1 1 1 \
	"FABSOCK_CONFIG=$T/does-not-exist.conf" --

[ $fails = 0 ] || fsk_fail "$fails bad-configuration checks failed"
echo "PASS: bad configuration falls back with one precise line"
