#!/bin/sh
# fi_pingpong between two processes over a net_memif pair: the dpdk provider's
# DGRAM endpoint, and RDM through ofi_rxd layered on it (sizes up to 1 MiB).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

sock=/tmp/fdp-$$.sock
trap 'rm -f "$sock"' EXIT INT TERM
srv="FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
cli="FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"

fdp_pingpong "memif dgram" dpdk dgram 1k "$srv" "$cli" "" "" 127.0.0.1 "$(fdp_oob_port 1)" -I 200
rm -f "$sock"
fdp_pingpong "memif rdm (dpdk;ofi_rxd)" "dpdk;ofi_rxd" rdm 1m "$srv" "$cli" "" "" 127.0.0.1 "$(fdp_oob_port 2)" -I 50
rm -f "$sock"
fdp_pingpong "memif rdm tagged + integrity" "dpdk;ofi_rxd" rdm 64k "$srv" "$cli" "" "" 127.0.0.1 "$(fdp_oob_port 3)" -I 50 -m tagged -c -S 65536
if env $srv timeout 30 fi_info -p dpdk -t FI_EP_RDM 2>/dev/null | grep -q '^provider: dpdk$'; then
	rm -f "$sock"
	fdp_pingpong "memif rdm (native)" dpdk rdm 1m "FI_PROVIDER=^ofi_rxd $srv" "FI_PROVIDER=^ofi_rxd $cli" "" "" 127.0.0.1 "$(fdp_oob_port 4)" -I 50
else
	echo "(native dpdk RDM endpoint not present in this build: not run)"
fi
echo "PASS"
