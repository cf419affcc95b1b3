#!/bin/sh
# The man pages agree with the code: fabsock(1) documents every option the
# launcher's --help lists, fabsock(7) every FABSOCK_* variable the library
# reads (taken from the library's own strings) and every rules keyword; both
# render without groff warnings (when groff is installed).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup manpages
fsk_need_preload
fsk_need_cmd strings
T=$fsk_tmp
m1="$top_srcdir/man/fabsock.1"
m7="$top_srcdir/man/fabsock.7"
fails=0
bad() { echo "not ok: $*"; fails=$((fails + 1)); }

# man source to plain words: drop escapes for '-' so '\-\-profile' reads --profile.
sed 's/\\-/-/g' "$m1" >"$T/m1"
sed 's/\\-/-/g' "$m7" >"$T/m7"

"$FSK_LAUNCHER" --help >"$T/help"
for opt in $(grep -oE -- '--[a-z][a-z-]+' "$T/help" | sort -u); do
	grep -q -- "$opt" "$T/m1" || bad "fabsock.1 lacks option $opt (in --help)"
done
for v in $(grep -oE 'FABSOCK_[A-Z_]+' "$T/help" | sort -u); do
	grep -q "$v" "$T/m1" || bad "fabsock.1 lacks $v (in --help)"
done

# Every FABSOCK_* name compiled into the library is documented in fabsock(7).
strings -a "$FSK_LIBRARY" | grep -oE 'FABSOCK_[A-Z_]+[A-Z]' | sort -u >"$T/vars"
[ -s "$T/vars" ] || bad "no FABSOCK_* strings found in $FSK_LIBRARY"
while read -r v; do
	grep -q "$v" "$T/m7" || bad "fabsock.7 lacks $v (read by the library)"
done <"$T/vars"
for w in accel kernel vma os tcp_server tcp_client udp_receiver udp_sender \
	udp_connect application-id default use; do
	grep -qw -- "$w" "$T/m7" || bad "fabsock.7 lacks rules keyword $w"
done

if command -v groff >/dev/null 2>&1; then
	for m in "$m1" "$m7"; do
		w=$(groff -man -ww -z "$m" 2>&1)
		[ -z "$w" ] || bad "groff warnings in $m: $w"
	done
else
	echo "# groff not installed: rendering not checked"
fi
[ $fails = 0 ] || fsk_fail "$fails man page checks failed"
echo "PASS: man pages cover $(wc -l <"$T/vars") variables and every launcher option"
