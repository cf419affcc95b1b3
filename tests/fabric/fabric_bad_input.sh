#!/bin/sh
# Bad parameters and devices that will not start: fdp_open (fabric, domain,
# endpoint) must fail at the expected step with the expected error code,
# exit normally (status 1: no abort, no crash), and the provider must log a
# warning naming the culprit. One case per parameter:
# FI_DPDK_DEVICE (unknown driver; a vdev whose probe fails; an absent PCI
# address), FI_DPDK_IP (bad address, bad prefix), FI_DPDK_EAL_ARGS (an
# unknown option; --help, which would make DPDK exit the process),
# FI_DPDK_MTU (too small, too large, not a number), none set.
FDP_TIMEOUT=${FDP_TIMEOUT:-30}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require
OPEN="$top_builddir/tests/fabric/fdp_open"
[ -x "$OPEN" ] || fdp_fail "$OPEN not built (make check builds it)"
unset FI_DPDK_DEVICE FI_DPDK_IP FI_DPDK_EAL_ARGS FI_DPDK_MTU
ok="FI_DPDK_DEVICE=net_ring0 FI_DPDK_IP=198.18.0.1/24"
n=0

# bad LABEL "STEP: ERROR" WARN_REGEX VAR=value...
bad() {
	label=$1 step=$2 warn=$3
	shift 3
	out=$(env FI_LOG_LEVEL=warn "$@" timeout "$FDP_TIMEOUT" "$OPEN" 2>&1)
	rc=$?
	if [ $rc -ne 1 ]; then
		echo "$out" | tail -n 5
		fdp_fail "$label: exit status $rc (want 1: a clean failure, not an abort or crash)"
	fi
	echo "$out" | grep -qx "$step" ||
		{ echo "$out" | grep -v ':core:core:' | tail -n 5; fdp_fail "$label: no '$step'"; }
	echo "$out" | grep -q '^fi_endpoint' && fdp_fail "$label: went past the failing step"
	line=$(echo "$out" | grep -E '::dpdk:core:.*<(warn|info)>' | grep -E "$warn" | head -1)
	[ -n "$line" ] || { echo "$out" | grep '::dpdk:' | tail -n 5; fdp_fail "$label: no warning matching /$warn/"; }
	echo "ok: $label -> $step; ${line#*> }"
	n=$((n + 1))
}

bad "unknown driver" "fi_fabric: No such device" "FI_DPDK_DEVICE=net_nosuchdriver0" \
	FI_DPDK_DEVICE=net_nosuchdriver0 FI_DPDK_IP=198.18.0.1/24
bad "device that will not start (af_packet on a missing interface)" "fi_fabric: No such device" \
	"FI_DPDK_DEVICE=net_af_packet0,iface=fdpnosuch0" \
	FI_DPDK_DEVICE=net_af_packet0,iface=fdpnosuch0 FI_DPDK_IP=198.18.0.1/24
bad "absent PCI device" "fi_fabric: No such device" "FI_DPDK_DEVICE=0000:99:00.0" \
	FI_DPDK_DEVICE=0000:99:00.0 FI_DPDK_IP=198.18.0.1/24
# not set is not an error: logged at info level (every libfabric program loads the provider)
bad "no device" "fi_getinfo: No data available" "FI_DPDK_DEVICE and FI_DPDK_IP must be set" \
	FI_DPDK_IP=198.18.0.1/24 FI_LOG_LEVEL=info
bad "bad IP address" "fi_getinfo: No data available" "FI_DPDK_IP=300\.1\.2\.3/24" \
	FI_DPDK_DEVICE=net_ring0 FI_DPDK_IP=300.1.2.3/24
bad "bad IP prefix" "fi_getinfo: No data available" "FI_DPDK_IP=198\.18\.0\.1/40" \
	FI_DPDK_DEVICE=net_ring0 FI_DPDK_IP=198.18.0.1/40
bad "unknown EAL option" "fi_fabric: Invalid argument" "FI_DPDK_EAL_ARGS=--no-such-eal-option" \
	$ok FI_DPDK_EAL_ARGS=--no-such-eal-option
bad "EAL --help (would exit the process)" "fi_fabric: Invalid argument" "FI_DPDK_EAL_ARGS: --help" \
	$ok "FI_DPDK_EAL_ARGS=-m 64 --help"
bad "MTU too small" "fi_fabric: Invalid argument" "FI_DPDK_MTU=100:" $ok FI_DPDK_MTU=100
bad "MTU too large" "fi_fabric: Invalid argument" "FI_DPDK_MTU=65536:" $ok FI_DPDK_MTU=65536
bad "MTU not a number" "fi_fabric: Invalid argument" "FI_DPDK_MTU=abc:" $ok FI_DPDK_MTU=abc

# the same process with good parameters opens everything (the cases above
# failed for their parameter, not for the machine)
out=$(env $ok timeout "$FDP_TIMEOUT" "$OPEN" 2>&1) || { echo "$out"; fdp_fail "good parameters fail"; }
echo "ok: good parameters open fabric, domain and endpoint"
echo "PASS ($n bad-input cases)"
