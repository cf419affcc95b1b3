# fabric_lib.sh - helpers for the provider's behaviour tests (sourced).
# Every process runs under `timeout`; results are checked from fi_pingpong's
# own output (the table row of the largest size must be there and complete).

: "${top_builddir:=$(cd "$(dirname "$0")/../.." && pwd)}"
FDP_LIBDIR="$top_builddir/src/fabric/.libs"
FDP_TIMEOUT=${FDP_TIMEOUT:-90}

fdp_skip() { echo "SKIP: $*"; exit 77; }
fdp_fail() { echo "FAIL: $*"; exit 1; }

fdp_require() {
	command -v fi_pingpong >/dev/null 2>&1 || fdp_skip "fi_pingpong not installed (apt-get install libfabric-bin)"
	[ -e "$FDP_LIBDIR/libdpdk-fi.so" ] || fdp_fail "$FDP_LIBDIR/libdpdk-fi.so not built"
	export FI_PROVIDER_PATH="$FDP_LIBDIR"
	unset FI_PROVIDER FI_DPDK_DROP FI_DPDK_DUP FI_DPDK_REORDER
}

# A control (OOB) TCP port unique to this test process.
fdp_oob_port() { echo $(( 20000 + ($$ * 7 + ${1:-0}) % 20000 )); }

# fdp_pingpong LABEL PROV EP EXPECT_LAST_SIZE "SRV_ENV" "CLI_ENV" SRV_WRAP CLI_WRAP OOB_HOST OOB_PORT [fi_pingpong args]
# SRV_ENV/CLI_ENV are "VAR=value ..." lists; *_WRAP a command prefix (e.g.
# "ip netns exec ns1") or "".
fdp_pingpong() {
	label=$1 prov=$2 ep=$3 last=$4 senv=$5 cenv=$6 swrap=$7 cwrap=$8 host=$9
	shift 9
	port=$1
	shift
	slog=$(mktemp) clog=$(mktemp)
	# shellcheck disable=SC2086
	env $senv $swrap timeout "$FDP_TIMEOUT" fi_pingpong -p "$prov" -e "$ep" -B "$port" "$@" >"$slog" 2>&1 &
	spid=$!
	sleep 1
	# shellcheck disable=SC2086
	env $cenv $cwrap timeout "$FDP_TIMEOUT" fi_pingpong -p "$prov" -e "$ep" -P "$port" "$@" "$host" >"$clog" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	echo "== $label: client rc=$crc server rc=$src"
	cat "$clog"
	if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then
		echo "-- server output:"; cat "$slog"
		rm -f "$slog" "$clog"
		fdp_fail "$label: fi_pingpong failed"
	fi
	if ! grep -Eq "^$last[[:space:]]+[0-9.]+k?[[:space:]]+=" "$clog"; then
		rm -f "$slog" "$clog"
		fdp_fail "$label: no completed row for size $last"
	fi
	rm -f "$slog" "$clog"
}
