#!/bin/sh
# A SKIP never hides our own failure: the af_xdp tests skip only when
# xdp_probe (raw AF_XDP/bpf system calls, no DPDK, none of our code) says
# the environment refuses AF_XDP on a veth. Here our port is made to fail
# on purpose (an EAL option that does not exist) on a veth where AF_XDP
# works: fdp_af_xdp_check must FAIL, not SKIP; with a correct configuration
# it must pass.
FDP_TIMEOUT=${FDP_TIMEOUT:-60}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require
command -v ip >/dev/null 2>&1 || fdp_skip "iproute2 (ip) not installed"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib/netns.sh"
id=$$
ns=fdpx$id nsb=fdpy$id
trap 'fsk_netns_destroy' EXIT INT TERM
fsk_netns_create "$ns" "$nsb" ||
	{ fsk_netns_destroy; fdp_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
fsk_netns_veth "$ns" "$nsb" "fx$id" "fy$id" || fdp_fail "veth"

probe="$top_builddir/tests/fabric/xdp_probe"
[ -x "$probe" ] || fdp_fail "$probe not built (make check builds it)"
out=$(ip netns exec "$ns" timeout 20 "$probe" "fx$id" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && fdp_skip "the environment refuses AF_XDP on a veth: $out"
[ $rc -eq 0 ] || fdp_fail "xdp_probe: exit $rc"

good="FI_DPDK_DEVICE=net_af_xdp0,iface=fx$id FI_DPDK_IP=198.18.3.1/24"
(fdp_af_xdp_check "$ns" "fx$id" "$good")
rc=$?
echo "== correct configuration: rc=$rc"
[ $rc -eq 0 ] || fdp_fail "our net_af_xdp port did not open on a veth where AF_XDP works"

out=$(fdp_af_xdp_check "$ns" "fx$id" "$good FI_DPDK_EAL_ARGS=--no-such-eal-option" 2>&1)
rc=$?
echo "$out" | tail -n 3
echo "== our port broken on purpose: rc=$rc"
[ $rc -eq 1 ] || fdp_fail "our own failure was reported with exit $rc (77 = SKIP), not as a failure"
echo "$out" | grep -q "AF_XDP works on fx$id" || fdp_fail "the failure does not say the environment works"
echo "PASS"
