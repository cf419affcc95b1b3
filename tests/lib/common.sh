# Shared helpers for libfabsock's behaviour and real-program tests.
# Source it from a test script (POSIX sh):
#   . "${top_srcdir:?}/tests/lib/common.sh"
#
# Contract: automake's harness exports top_srcdir and top_builddir
# (absolute); scripts run by hand may set them, else they are guessed from
# the current directory (a build tree). Exit codes: 0 pass, 77 skip (with
# the reason printed), anything else fail.
#
# Every process a test starts runs under `timeout`; every wait is a
# bounded loop. fsk_cleanup (run from the EXIT trap; it runs the command in
# $fsk_exit_hook too, when set) stops only the
# processes this test started (their pids are recorded) and removes the
# test's temporary directory.

: "${top_builddir:=$(pwd)}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
export top_srcdir top_builddir

FSK_LAUNCHER="$top_builddir/tools/fabsock"
FSK_LIBRARY="$top_builddir/src/.libs/libfabsock.so"
fsk_pids=""
fsk_tmp=""

fsk_skip() { echo "SKIP: $*"; exit 77; }
fsk_fail() { echo "FAIL: $*" >&2; echo "FAIL: $*"; exit 1; }
fsk_note() { echo "# $*"; }

fsk_cleanup() {
	fsk_status=$?
	for p in $fsk_pids; do
		kill "$p" 2>/dev/null
	done
	for p in $fsk_pids; do
		wait "$p" 2>/dev/null
	done
	fsk_pids=""
	[ -z "${fsk_exit_hook:-}" ] || $fsk_exit_hook
	# every accelerated test: no sleep ended at the safety cap (a lost wake-up)
	if [ -n "$fsk_tmp" ] && [ -d "$fsk_tmp" ] && ! fsk_no_late_wakes "$fsk_tmp"; then
		FSK_KEEP_TMP=1
		[ "$fsk_status" != 0 ] || fsk_status=1
	fi
	if [ -n "$fsk_tmp" ] && [ -d "$fsk_tmp" ] && [ "${FSK_KEEP_TMP:-0}" != 1 ]; then
		rm -rf "$fsk_tmp"
	fi
	exit "$fsk_status"
}

# fsk_setup NAME: a private temporary directory in $fsk_tmp, cleanup on exit.
fsk_setup() {
	fsk_tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-$1.XXXXXX") || fsk_fail "mktemp"
	trap 'fsk_cleanup' EXIT
	trap 'exit 130' INT TERM HUP
}

# fsk_need_preload: the launcher and the library must exist (the library is
# built by `make all`; missing means the build is broken: fail, not skip).
fsk_need_preload() {
	[ -x "$FSK_LAUNCHER" ] || fsk_fail "launcher $FSK_LAUNCHER not built"
	[ -f "$FSK_LIBRARY" ] || fsk_fail "library $FSK_LIBRARY not built"
}

# fsk_need_cmd CMD...: skip when a tool a test drives is not installed.
fsk_need_cmd() {
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			fsk_skip "$c not installed (apt-get install it; ./quickstart check does)"
	done
}

# fsk_bg CMD...: start CMD in the background, record its pid.
fsk_bg() {
	"$@" &
	fsk_pids="$fsk_pids $!"
	fsk_last_pid=$!
}

# Debian's interpreter when present (a pyenv or venv shim on PATH would put
# an extra shell process under the preload).
if [ -x /usr/bin/python3 ]; then FSK_PYTHON=/usr/bin/python3; else FSK_PYTHON=python3; fi

# fsk_free_port: print a TCP port on 127.0.0.1 that is free right now.
fsk_free_port() {
	"$FSK_PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# fsk_wait_listen PORT [TENTHS [NETNS]]: wait until something listens on
# TCP port PORT (in network namespace NETNS when given), at most TENTHS
# tenths of a second (default 100).
fsk_wait_listen() {
	i=0
	while [ "$i" -lt "${2:-100}" ]; do
		if ${3:+ip netns exec "$3"} ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# fsk_wait_udp PORT [TENTHS]: same for a bound UDP socket.
fsk_wait_udp() {
	i=0
	while [ "$i" -lt "${2:-100}" ]; do
		if ss -Hlun "sport = :$1" 2>/dev/null | grep -q .; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# fsk_assert_loaded LOGFILE [WHAT]: the library's start-up info line must
# be in LOGFILE, proving the preload really ran in that process.
fsk_assert_loaded() {
	grep -Eq '^fabsock\[[0-9]+\]: info: libfabsock [^ ]+ active' "$1" 2>/dev/null ||
		{
			echo "--- $1:"
			cat "$1" 2>/dev/null
			fsk_fail "${2:-the program} ran without libfabsock (no 'active' info line in $1)"
		}
}

# fsk_counter LOGFILE NAME: the value of libfabsock's counter NAME as dumped
# at exit with FABSOCK_LOG=info (the last dump in LOGFILE), 0 when absent.
fsk_counter() {
	v=$(grep -a "^fabsock\[[0-9]*\]: info: counter $2 = " "$1" 2>/dev/null | tail -n 1 |
		sed 's/.* = //')
	echo "${v:-0}"
}

# fsk_counter_sum NAME FILE...: libfabsock's counter NAME summed over the
# processes that logged to FILEs (each one's last dump at exit counts once:
# a process dumps again at every exec, and a forked child starts from its
# parent's values, so the sum over a fork is an upper bound).
fsk_counter_sum() {
	_name=$1
	shift
	cat "$@" 2>/dev/null | grep -a "^fabsock\[[0-9]*\]: info: counter $_name = " |
		sed 's/^fabsock\[\([0-9]*\)\]: info: counter [a-z_0-9]* = \([0-9]*\)$/\1 \2/' |
		awk '{ last[$1] = $2 } END { s = 0; for (p in last) s += last[p]; print s }'
}

# fsk_no_late_wakes DIR: every libfabsock log under DIR (any file holding a
# counter dump) shows sleep_late_wakes = 0: no sleep of an accelerated
# socket ended at the safety cap instead of at its wake-up. Prints the
# culprits and returns 1 otherwise. Called by the EXIT trap of every test
# that uses fsk_setup (and by tests/accel/lib.sh's cleanup).
fsk_no_late_wakes() {
	_bad=0
	for _f in $(grep -a -r -l 'info: counter sleep_late_wakes = ' "$1" 2>/dev/null); do
		_n=$(fsk_counter_sum sleep_late_wakes "$_f")
		[ "$_n" = 0 ] && continue
		echo "FAIL: $_f: sleep_late_wakes = $_n (a sleep missed its wake-up and ended at the safety cap)"
		_bad=1
	done
	return $_bad
}

# fsk_assert_accel LOGFILE WHAT N PROV: the process logging to LOGFILE
# accelerated at least N connections, over provider PROV (shm, tcp).
fsk_assert_accel() {
	a=$(fsk_counter "$1" accelerated)
	p=$(fsk_counter "$1" "conn_accel_$4")
	[ "$a" -ge "$3" ] && [ "$p" -ge "$3" ] ||
		{
			grep -a 'stays on the kernel\|counter fallback' "$1" | grep -v ' = 0$'
			fsk_fail "$2: $a connection(s) accelerated ($p over $4), want at least $3"
		}
}

# fsk_assert_all_accel LOGFILE WHAT MIN PROV: at least MIN connections of the
# process logging to LOGFILE asked for acceleration, every one of them was
# accelerated over PROV and none fell back to the kernel (the fallback_*
# counters name the reasons).
fsk_assert_all_accel() {
	tracked=$(fsk_counter "$1" accel_requested)
	acc=$(fsk_counter "$1" accelerated)
	fell=0
	reasons=""
	for c in $(grep -a -o 'info: counter fallback_[a-z_]* = [0-9]*' "$1" | sed 's/info: counter //; s/ = /=/'); do
		n=${c#*=}
		[ "$n" -gt 0 ] || continue
		fell=$((fell + n))
		reasons="$reasons ${c%=*}=$n"
	done
	[ "$tracked" -ge "$3" ] || fsk_fail "$2: only $tracked connections asked for acceleration"
	[ "$acc" = "$tracked" ] && [ "$fell" = 0 ] ||
		fsk_fail "$2: $tracked connections, $acc accelerated, $fell fell back:$reasons"
	fsk_assert_accel "$1" "$2" "$acc" "$4"
	fsk_note "$2: $tracked connections, $acc accelerated over $4, $fell on the kernel"
}

# fsk_asan_runtime: print the ASan runtime libfabsock.so links with (a
# sanitizer build), nothing otherwise. Read from the library itself rather
# than trusting FSK_SANITIZERS.
fsk_asan_runtime() {
	ldd "$FSK_LIBRARY" 2>/dev/null | awk '$1 ~ /^libasan\.so/ && $3 ~ /^\// { print $3 }'
}

# fsk_sha FILE: print the sha256 of FILE.
fsk_sha() { sha256sum "$1" | cut -d' ' -f1; }
