#!/bin/sh
# fi_pingpong dgram and rdm (dpdk;ofi_rxd) between two network namespaces
# joined by a veth pair, the DPDK ports on net_af_xdp (SKIP when the kernel
# refuses XDP). The native RDM cases are fabric_netns_af_xdp_rdm.sh.
FDP_TIMEOUT=${FDP_TIMEOUT:-180}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require
fdp_netns_run af_xdp pingpong
