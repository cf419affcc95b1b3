# Behaviour comparison: run a test program on the kernel alone and under the
# launcher (libfabsock preloaded, pass-through), and require the same
# transcript on stdout, the same stderr and the same exit status.
#
#   . "$top_srcdir/tests/lib/common.sh"
#   . "$top_srcdir/tests/lib/behav.sh"
#   fsk_behav_compare --accel N [NAME=value...] bh_tcp [launcher options...]
#
# --accel N (required) states how many sockets (both ends of a connection
# count, as libfabsock's counter "accelerated" does) the preloaded run must
# accelerate at least; fewer fails the test, with the fallback reasons. N = 0
# says the comparison is of the kernel path only (every socket sent to the
# kernel by policy, or a program that uses no TCP): it is reported as such
# and not counted as an acceleration test. Every preloaded run must also end
# with sleep_late_wakes = 0 (common.sh, fsk_no_late_wakes).
#
# The program must exist in $top_builddir/tests/behav and exit 0 on the
# kernel (it checks its own results): a wrong answer on both sides is a
# failure too. Both runs use a soft RLIMIT_NOFILE of 1024 (a common default,
# and low enough that programs can test raising it). Launcher options after
# the program name (e.g. --default kernel, --log debug) apply to the
# preloaded run; they come after --log info, so they win.

# fsk_behav_run OUTPREFIX CMD...: run with a 60 s bound, record outputs/status.
# $fsk_run_env (NAME=value words) is put in the environment of the run.
fsk_behav_run() {
	out=$1
	shift
	(
		ulimit -S -n 1024 2>/dev/null
		# shellcheck disable=SC2086 # a list of NAME=value words
		exec env $fsk_run_env timeout -k 5 60 "$@"
	) >"$out.out" 2>"$out.err"
	echo $? >"$out.rc"
}

# fsk_behav_compare [NAME=value...] PROG [launcher options...]
# Leading NAME=value words go into the environment of both runs.
fsk_behav_compare() {
	[ "${1:-}" = --accel ] && [ -n "${2:-}" ] ||
		fsk_fail "fsk_behav_compare: say --accel N first (how many sockets must be accelerated)"
	want_accel=$2
	shift 2
	fsk_run_env=
	while [ $# -gt 0 ]; do
		case $1 in
		*=*) fsk_run_env="$fsk_run_env $1" ;;
		*) break ;;
		esac
		shift
	done
	prog=$1
	shift
	bin="$top_builddir/tests/behav/$prog"
	[ -x "$bin" ] || fsk_fail "$bin not built (make check builds it)"
	fsk_need_preload
	log="$fsk_tmp/$prog.log"

	fsk_behav_run "$fsk_tmp/kernel" "$bin"
	rm -f "$log"
	fsk_behav_run "$fsk_tmp/preload" "$FSK_LAUNCHER" --log info \
		--log-file "$log" "$@" -- "$bin"

	krc=$(cat "$fsk_tmp/kernel.rc")
	prc=$(cat "$fsk_tmp/preload.rc")
	status=0
	if [ "$krc" != 0 ]; then
		echo "--- kernel run of $prog failed (exit $krc); its transcript:"
		cat "$fsk_tmp/kernel.out" "$fsk_tmp/kernel.err"
		status=1
	fi
	if ! diff -u "$fsk_tmp/kernel.out" "$fsk_tmp/preload.out" >"$fsk_tmp/diff"; then
		echo "--- $prog: transcript differs under the preload (- kernel, + libfabsock):"
		cat "$fsk_tmp/diff"
		status=1
	fi
	if ! diff -u "$fsk_tmp/kernel.err" "$fsk_tmp/preload.err" >"$fsk_tmp/diff"; then
		echo "--- $prog: stderr differs under the preload (- kernel, + libfabsock):"
		cat "$fsk_tmp/diff"
		status=1
	fi
	if [ "$krc" != "$prc" ]; then
		echo "--- $prog: exit status $krc on the kernel, $prc under libfabsock"
		status=1
	fi
	fsk_assert_loaded "$log" "$prog"
	got_accel=$(fsk_counter_sum accelerated "$log")
	if [ "$got_accel" -lt "$want_accel" ]; then
		echo "--- $prog: $got_accel socket(s) accelerated under libfabsock, want at least $want_accel; fallbacks:"
		grep -a 'stays on the kernel\|counter fallback' "$log"
		status=1
	fi
	if ! fsk_no_late_wakes "$fsk_tmp"; then
		status=1
	fi
	if [ "$status" != 0 ]; then
		echo "--- libfabsock log:"
		cat "$log"
		fsk_fail "$prog under libfabsock${fsk_run_env:+ (env$fsk_run_env)}${*:+ (launcher $*)}: see above (transcript, acceleration or late wake-ups)"
	fi
	lines=$(wc -l <"$fsk_tmp/kernel.out")
	if [ "$want_accel" = 0 ]; then
		accel_note="kernel path only ($got_accel accelerated)"
	else
		accel_note="$got_accel socket(s) accelerated (want >= $want_accel)"
	fi
	echo "ok: $prog${fsk_run_env:+ (env$fsk_run_env)}${*:+ (launcher $*)}: $lines transcript lines identical, exit $krc on both; $accel_note"
}
