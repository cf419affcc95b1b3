#!/bin/sh
# netns_dpdk.sh with each namespace's DPDK port on net_af_xdp (a second veth
# pair dedicated to DPDK; see there).
FSK_NETNS_PMD=af_xdp
. "${top_srcdir:?run from make check or set top_srcdir}/tests/accel/netns_dpdk.sh"
