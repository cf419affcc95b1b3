#!/bin/sh
# The native RDM endpoint between two network namespaces over net_af_xdp on
# a veth pair (XDP attached in native/driver mode, the socket bound in copy
# mode: veth has no zero-copy): fi_pingpong with data checks, then 2 x
# 16 MiB byte-exact with 5 % injected loss. Regression test of the packed
# mbuf pool (src/fabric/fdp_pool.c): with DPDK's default pool layout the
# XDP socket's UMEM covered only the lower 58 % of the pool, the kernel
# silently skipped every descriptor above it, and transmission stopped for
# good after a few hundred frames.
FDP_TIMEOUT=${FDP_TIMEOUT:-180}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require
fdp_netns_run af_xdp native
