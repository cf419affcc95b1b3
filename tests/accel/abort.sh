#!/bin/sh
# A close with unread data resets the connection (tcp(7)): the peer reads
# the bytes sent before the reset, then ECONNRESET, then EOF, and its write
# gets EPIPE — also when the closing end's library had not processed the
# unread bytes yet (still in the fabric provider). tests/accel/abort.c runs
# ROUNDS connections (its four ways of closing, in turn) on the kernel and
# with both ends launched over shm and over tcp; the server's transcripts
# must be identical and every connection accelerated.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup accel-abort
fsk_need_preload
T=$fsk_tmp
prog="$top_builddir/tests/accel/abort"
[ -x "$prog" ] || fsk_fail "$prog not built (make check builds it)"
ROUNDS=80

# launch NAME ROLE: the launcher words for one end of run NAME (none on the kernel).
launch() {
	[ "$1" = kernel ] || echo "$FSK_LAUNCHER --log info --log-file $T/$1.$2.log --"
}

run() { # name: kernel, or the provider
	name=$1
	port=$(fsk_free_port) || fsk_fail "no free port"
	rm -rf "$T/sync"
	mkdir "$T/sync" && mkfifo "$T/sync/s2c" "$T/sync/c2s" || fsk_fail "mkfifo"
	# shellcheck disable=SC2046 # words, no spaces in $T (mktemp)
	fsk_bg timeout -k 5 40 $(launch "$name" srv) "$prog" server "$port" $ROUNDS "$T/sync" \
		>"$T/$name.out" 2>"$T/$name.srv.err"
	srv=$fsk_last_pid
	i=0
	until grep -q listening "$T/$name.out" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
		[ $i -lt 200 ] || fsk_fail "$name: the server did not start"
	done
	# shellcheck disable=SC2046
	timeout -k 5 40 $(launch "$name" cli) "$prog" client "$port" $ROUNDS "$T/sync" 2>"$T/$name.cli.err" ||
		{ cat "$T/$name.cli.err"; fsk_fail "$name: the client failed"; }
	wait "$srv" || { cat "$T/$name.srv.err"; fsk_fail "$name: the server failed"; }
}

run kernel
grep -q "^$ROUNDS rounds" "$T/kernel.out" || { cat "$T/kernel.out"; fsk_fail "kernel run incomplete"; }
for prov in shm tcp; do
	export FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=$prov
	run "$prov"
	fsk_assert_accel "$T/$prov.srv.log" "$prov server" $ROUNDS "$prov"
	fsk_assert_all_accel "$T/$prov.cli.log" "$prov client" $ROUNDS "$prov"
	for end in srv cli; do
		late=$(fsk_counter "$T/$prov.$end.log" sleep_late_wakes)
		[ "$late" = 0 ] || fsk_fail "$prov $end: sleep_late_wakes = $late"
	done
	if ! diff -u "$T/kernel.out" "$T/$prov.out" >"$T/diff"; then
		echo "--- the server's transcript differs (- kernel, + $prov):"
		cat "$T/diff"
		fsk_fail "$prov: a close with unread data is not what the kernel does"
	fi
done
echo "PASS: close with unread data: the kernel's transcript over shm and tcp ($ROUNDS connections each)"
