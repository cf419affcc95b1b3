#!/bin/sh
# fi_pingpong between two processes over a net_memif pair: the dpdk provider's
# DGRAM endpoint, RDM through ofi_rxd layered on it (FI_DPDK_RXD=1; sizes up
# to 1 MiB), and `-p dpdk -e rdm`, which must be the native RDM endpoint.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

sock=/tmp/fdp-$$.sock
trap 'rm -f "$sock"' EXIT INT TERM
srv="FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
cli="FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"

fdp_pingpong "memif dgram" dpdk dgram 1k "$srv" "$cli" "" "" 127.0.0.1 "$(fdp_oob_port 1)" -I 200
rm -f "$sock"
fdp_pingpong "memif rdm (dpdk;ofi_rxd)" "dpdk;ofi_rxd" rdm 1m "FI_DPDK_RXD=1 $srv" "FI_DPDK_RXD=1 $cli" "" "" 127.0.0.1 "$(fdp_oob_port 2)" -I 50
rm -f "$sock"
fdp_pingpong "memif rdm tagged + integrity" "dpdk;ofi_rxd" rdm 64k "FI_DPDK_RXD=1 $srv" "FI_DPDK_RXD=1 $cli" "" "" 127.0.0.1 "$(fdp_oob_port 3)" -I 50 -m tagged -c -S 65536
rm -f "$sock"
# no FI_PROVIDER filter: the default choice must be native (its close logs
# "rdm ep closed"; ofi_rxd over the DGRAM endpoint would not)
FDP_KEEP_LOGS=1 fdp_pingpong "memif rdm (native, default choice)" dpdk rdm 1m \
	"FI_LOG_LEVEL=info $srv" "FI_LOG_LEVEL=info $cli" "" "" 127.0.0.1 "$(fdp_oob_port 4)" -I 50
grep -q 'rdm ep closed' "$clog" || fdp_fail "fi_pingpong -p dpdk -e rdm did not use the native RDM endpoint"
rm -f "$slog" "$clog"
echo "PASS"
