#!/bin/sh
# The dpdk provider's raw UDP endpoint (FI_EP_DGRAM, FI_PROTO_UDP) and
# multicast against plain kernel UDP sockets: the provider's port
# (net_af_packet) on one end of a veth pair in one network namespace, the
# kernel peer (fabric_udp.py, python3 sockets) on the other end in a second
# one. fabric_udp.py drives tests/fabric/fdp_udp and checks every byte.
: "${top_srcdir:=$(dirname "$0")/../..}"
FDP_TIMEOUT=${FDP_TIMEOUT:-240}
. "$top_srcdir/tests/fabric/fabric_lib.sh"
prog="$top_builddir/tests/fabric/fdp_udp"
[ -e "$FDP_LIBDIR/libdpdk-fi.so" ] || fdp_fail "$FDP_LIBDIR/libdpdk-fi.so not built"
[ -x "$prog" ] || fdp_fail "$prog not built (make check builds it)"
command -v python3 >/dev/null 2>&1 || fdp_skip "python3 not installed (the kernel peer)"
command -v ip >/dev/null 2>&1 || fdp_skip "iproute2 (ip) not installed"
. "$top_srcdir/tests/lib/netns.sh"

id=$$
nsa=fdua$id nsb=fdub$id
log=$(mktemp)
trap 'fsk_netns_destroy; rm -f "$log"' EXIT
trap 'exit 1' INT TERM
fsk_netns_create "$nsa" "$nsb" ||
	{ fsk_netns_destroy; fdp_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
# the provider's end has no kernel address: its kernel must see nothing
fsk_netns_veth "$nsa" "$nsb" "fu$id" "fv$id" || fdp_fail "veth"
ip -n "$nsb" addr add 198.18.3.2/24 dev "fv$id" || fdp_fail "peer address"

FDP_UDP_ENV="FI_PROVIDER_PATH=$FDP_LIBDIR FI_PROVIDER=dpdk FI_DPDK_DEVICE=net_af_packet0,iface=fu$id \
FI_DPDK_IP=198.18.3.1/24 FI_LOG_LEVEL=info FI_LOG_PROV=dpdk"
export FDP_UDP_ENV
ip netns exec "$nsb" timeout "$FDP_TIMEOUT" python3 "$top_srcdir/tests/fabric/fabric_udp.py" \
	"$nsa" "$prog" "fv$id" 198.18.3.2 198.18.3.1 "$log"
rc=$?
if [ $rc -ne 0 ]; then
	echo "-- provider log (its statistics, last lines):"
	grep -E 'port stats|device stats|rx dropped' "$log"
	grep -v '^$' "$log" | grep -v ':core:' | tail -n 15
	exit 1
fi
exit 0
