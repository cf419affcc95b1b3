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
	unset FI_PROVIDER FI_DPDK_DROP FI_DPDK_DUP FI_DPDK_REORDER FI_DPDK_RXD
}

# A control (OOB) TCP port for fi_pingpong: derived from the PID and a
# per-call offset, skipping ports with any socket on them (listening, or in
# TIME_WAIT from an earlier run) when ss is available.
fdp_oob_port() {
	p=$(( 20000 + ($$ * 7 + ${1:-0} * 131) % 20000 ))
	if command -v ss >/dev/null 2>&1; then
		n=0
		while [ $n -lt 200 ] && [ -n "$(ss -Htan "sport = :$p" 2>/dev/null)" ]; do
			p=$(( 20000 + (p - 20000 + 997) % 20000 ))
			n=$((n + 1))
		done
	fi
	echo $p
}

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
	[ -n "${FDP_KEEP_LOGS:-}" ] || rm -f "$slog" "$clog"
}

# fdp_xfer LABEL "SRV_ENV" "CLI_ENV" SRV_WRAP CLI_WRAP READY OOB_ADDR OOB_PORT [rdm_xfer args]
# A byte-exact rdm_xfer transfer (native RDM): the server starts, READY (a
# shell function or "true") waits until its port can be reached, then the
# client runs; both must exit 0. Prints both sides' reports (of a server
# run with FI_LOG_LEVEL=info, only the provider's closing statistics);
# FDP_XFER_EXPECT, when set, is an extended regex the server's output must
# match (e.g. that faults were injected).
fdp_xfer() {
	label=$1 senv=$2 cenv=$3 swrap=$4 cwrap=$5 ready=$6 host=$7 port=$8
	shift 8
	xbin="$top_builddir/tests/fabric/rdm_xfer"
	[ -x "$xbin" ] || fdp_fail "$xbin not built (make check builds it)"
	slog=$(mktemp)
	# shellcheck disable=SC2086
	env $senv $swrap timeout "$FDP_TIMEOUT" "$xbin" server -H "$host" -P "$port" "$@" >"$slog" 2>&1 &
	spid=$!
	$ready
	# shellcheck disable=SC2086
	env $cenv $cwrap timeout "$FDP_TIMEOUT" "$xbin" client -H "$host" -P "$port" "$@" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	echo "== $label: client rc=$crc server rc=$src"
	grep -v '^libfabric:' "$slog"
	grep -E 'rdm ep closed|port stats' "$slog" | sed 's/^libfabric:[^<]*<info> /  server: /'
	if [ -n "${FDP_XFER_EXPECT:-}" ] && ! grep -Eq "$FDP_XFER_EXPECT" "$slog"; then
		rm -f "$slog"
		fdp_fail "$label: server output does not match /$FDP_XFER_EXPECT/"
	fi
	rm -f "$slog"
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || fdp_fail "$label"
}

# fdp_af_xdp_check NETNS IFACE "ENV": open our port (fdp_open) in NETNS with
# ENV (FI_DPDK_DEVICE=net_af_xdp0,iface=IFACE ...). When it fails, ask
# xdp_probe (raw system calls, neither DPDK nor our code) whether AF_XDP
# works on IFACE: if it does, the failure is ours (FAIL); if the
# environment refuses a step, SKIP naming it.
fdp_af_xdp_check() {
	ns=$1 ifc=$2 oenv=$3
	probe="$top_builddir/tests/fabric/xdp_probe"
	# shellcheck disable=SC2086
	out=$(ip netns exec "$ns" env $oenv FI_LOG_LEVEL=warn timeout 20 \
		"$top_builddir/tests/fabric/fdp_open" 2>&1) && return 0
	echo "$out" | grep -v '^libfabric:.*core:' | tail -n 5
	[ -x "$probe" ] || fdp_fail "our net_af_xdp port failed, and $probe is not built to tell whether the environment can"
	pout=$(ip netns exec "$ns" timeout 20 "$probe" "$ifc" 2>&1)
	prc=$?
	echo "$pout"
	case $prc in
	0) fdp_fail "AF_XDP works on $ifc here (xdp_probe), but our net_af_xdp port did not open" ;;
	77) fdp_skip "this kernel/container refuses AF_XDP on a veth: $pout" ;;
	*) fdp_fail "xdp_probe $ifc: exit $prc" ;;
	esac
}

# fdp_netns_run PMD [native|pingpong]: two network namespaces, each with its own DPDK port on
# one end of a veth pair (no kernel address on it), plus a second veth pair
# with kernel addresses for fi_pingpong's TCP control channel (an XDP
# program takes every frame of its interface, so the control channel must
# not share it). Runs dgram and rdm (dpdk;ofi_rxd) pingpongs, the native RDM
# endpoint's fi_pingpong, and a 16 MiB native RDM transfer checked byte by
# byte with 5 % injected loss on both sides. With "native", only the native
# RDM cases run; with "pingpong", only the dgram and dpdk;ofi_rxd ones.
fdp_netns_run() {
	pmd=$1 only=${2:-}
	id=$$
	nsa=fdpa$id nsb=fdpb$id
	command -v ip >/dev/null 2>&1 || fdp_skip "iproute2 (ip) not installed"
	. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib/netns.sh"
	trap 'fsk_netns_destroy' EXIT INT TERM
	fsk_netns_create "$nsa" "$nsb" ||
		{ fsk_netns_destroy; fdp_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
	fsk_netns_veth "$nsa" "$nsb" "fd$id" "fe$id" || fdp_fail "veth (data)"
	fsk_netns_veth "$nsa" "$nsb" "fc$id" "ff$id" 198.19.1.1/24 198.19.1.2/24 || fdp_fail "veth (control)"

	srv="FI_DPDK_DEVICE=net_${pmd}0,iface=fd$id FI_DPDK_IP=198.18.2.1/24"
	cli="FI_DPDK_DEVICE=net_${pmd}0,iface=fe$id FI_DPDK_IP=198.18.2.2/24"
	if [ "$pmd" = af_xdp ]; then
		fdp_af_xdp_check "$nsa" "fd$id" "$srv"
	fi
	if [ "$only" != native ]; then
		fdp_pingpong "$pmd dgram" dpdk dgram 1k "$srv" "$cli" "ip netns exec $nsa" \
			"ip netns exec $nsb" 198.19.1.1 "$(fdp_oob_port 11)" -I 200
		fdp_pingpong "$pmd rdm (dpdk;ofi_rxd)" "dpdk;ofi_rxd" rdm 1m "FI_DPDK_RXD=1 $srv" "FI_DPDK_RXD=1 $cli" \
			"ip netns exec $nsa" "ip netns exec $nsb" 198.19.1.1 "$(fdp_oob_port 12)" -I 20
	fi
	if [ "$only" = pingpong ]; then
		echo "PASS"
		return 0
	fi
	fdp_pingpong "$pmd native rdm, integrity checked" dpdk rdm 64k "$srv" "$cli" \
		"ip netns exec $nsa" "ip netns exec $nsb" 198.19.1.1 "$(fdp_oob_port 13)" -I 20 -c -S 65536
	faults="FI_DPDK_DROP=0.05 FI_DPDK_SEED=5"
	FDP_XFER_EXPECT='injected drop/dup/reorder [1-9][0-9]*/0/0.*' \
	fdp_xfer "$pmd native rdm 2 x 16 MiB byte-exact, tagged, 5 % loss both ways" \
		"$srv $faults FI_LOG_LEVEL=info" "$cli $faults" "ip netns exec $nsa" "ip netns exec $nsb" true \
		198.19.1.1 "$(fdp_oob_port 14)" -n 2 -b 16777216 -s 1048576 -t -T 150
	echo "PASS"
}
