#!/bin/sh
# One host, two processes: the real programs of tests/accel/dpdk_phases.sh
# (1 GiB with 5 % loss, sockperf, iperf3, redis), each end launched on the
# dpdk provider only, the two ports a net_memif pair (servers role=server,
# clients role=client; a memif server takes the next client once the last
# one left). Both ends run in one private network namespace where only this
# test uses TCP: the negotiation goes over its loopback (127.0.0.1), and
# the kernel's TCP segment counters there show that the payload did not.
# FSK_MEMIF_BULK: bytes of the bulk transfer (default 1 GiB).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/netns.sh"
fsk_setup accel-memif-real
fsk_need_preload
fsk_need_cmd ip ss sockperf iperf3 redis-server redis-cli redis-benchmark sha256sum "$FSK_PYTHON"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || fsk_fail "libdpdk-fi.so not built"

ns=fskm$$
fsk_exit_hook=fsk_netns_destroy
fsk_netns_create "$ns" ||
	{ fsk_netns_destroy; fsk_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
sock="$fsk_tmp/memif.sock"
ph_ns_a=$ns ph_ns_b=$ns
ph_dev_a="net_memif0,role=server,socket=$sock" ph_dev_b="net_memif0,role=client,socket=$sock"
ph_ip_a=198.18.9.1/24 ph_ip_b=198.18.9.2/24
ph_srv=127.0.0.1
ph_seg_ns=$ns ph_seg_ends=2
ph_bulk=${FSK_MEMIF_BULK:-1073741824}
ph_what="net_memif pair, one host, two processes"
. "$top_srcdir/tests/accel/dpdk_phases.sh"
ph_run
