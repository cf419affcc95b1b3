#!/bin/sh
# The dpdk provider's native FI_EP_RDM endpoint between two processes over a
# net_memif pair: fi_pingpong (all sizes up to 1 MiB, with data checks),
# tagged messages, several endpoints at once, and a 256 MiB transfer checked
# byte by byte while the provider injects 10 % loss, duplication and
# reordering on both sides.
#
# No FI_PROVIDER filter anywhere: `-p dpdk -e rdm` must give the native
# endpoint first. libfabric 1.17 would list the layered "dpdk;ofi_rxd" first
# (built-in providers before external ones), so the provider offers its
# DGRAM endpoint to ofi_rxd only with FI_DPDK_RXD=1; checked here with fi_info.
# generous bounds: on a loaded 2-core machine the 256 MiB run can take a minute
FDP_TIMEOUT=${FDP_TIMEOUT:-200}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

XFER="$top_builddir/tests/fabric/rdm_xfer"
[ -x "$XFER" ] || fdp_fail "$XFER not built (make check builds it)"
sock=/tmp/fdp-rdm-$$.sock
rdm_provs() {
	env "$@" FI_DPDK_DEVICE="net_memif0,role=server,socket=$sock" FI_DPDK_IP=198.18.0.1/15 \
		timeout 30 fi_info -p dpdk -t FI_EP_RDM 2>/dev/null | sed -n 's/^provider: //p' | tr '\n' ' '
}
got=$(rdm_provs)
[ "$got" = "dpdk " ] || fdp_fail "fi_info -p dpdk -t FI_EP_RDM: expected only the native 'dpdk', got '$got'"
got=$(rdm_provs FI_DPDK_RXD=1)
case "$got" in *"dpdk;ofi_rxd"*) ;; *) fdp_fail "FI_DPDK_RXD=1: no dpdk;ofi_rxd in '$got'";; esac
echo "fi_info RDM: default '$(rdm_provs)', FI_DPDK_RXD=1 '$got'"

trap 'rm -f "$sock"' EXIT INT TERM
srv="FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
cli="FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"

rm -f "$sock"
fdp_pingpong "native rdm, all sizes, data checked" dpdk rdm 1m "$srv" "$cli" "" "" \
	127.0.0.1 "$(fdp_oob_port 11)" -I 100 -c
rm -f "$sock"
fdp_pingpong "native rdm tagged, all sizes, data checked" dpdk rdm 1m "$srv" "$cli" "" "" \
	127.0.0.1 "$(fdp_oob_port 12)" -I 100 -c -m tagged

# the memif client must find the server's socket listening (DPDK 22.11
# memif sockets are abstract: look in /proc/net/unix, not the file system)
memif_ready() {
	for _ in $(seq 100); do grep -q "@$sock\$" /proc/net/unix && return 0; sleep 0.1; done
}
xfer() {
	rm -f "$sock"
	senv=$1 cenv=$2 label=$3
	shift 3
	fdp_xfer "$label" "$senv" "$cenv" "" "" memif_ready 127.0.0.1 "$(fdp_oob_port 13)" -T 180 "$@"
}

xfer "$srv" "$cli" "4 endpoint pairs x 16 MiB, tagged (reverse-posted tags), FI_SOURCE" \
	-n 4 -b 16777216 -s 1048576 -t
faults="FI_DPDK_DROP=0.1 FI_DPDK_DUP=0.1 FI_DPDK_REORDER=0.1 FI_DPDK_SEED=7"
xfer "$srv $faults" "$cli $faults" "256 MiB byte-exact, 10 % loss/dup/reorder both ways" \
	-n 1 -b 268435456 -s 1048576
echo "PASS"
