#!/bin/sh
# Two hosts: network namespaces A and B joined by a veth pair whose kernel
# addresses (198.19.7.x) carry the kernel connection that negotiates. In
# each, the programs are launched on the dpdk provider only, the DPDK port's
# IP (198.18.7.x) one the kernel does not own; the port is, by
# FSK_NETNS_PMD:
#  - af_packet (default): net_af_packet0 on the same veth. The kernel sees
#    the DPDK frames too and drops them (the address is not its own).
#  - af_xdp (netns_xdp.sh): net_af_xdp0 on a SECOND veth pair between A and
#    B that carries no kernel address: DPDK's XDP program takes every frame
#    of its interface, so on the first veth it would starve the kernel
#    connection. (Its xdp_prog= devarg could load a filtering program, but a
#    dedicated link needs no BPF object shipped with the tests.)
# The phases (real programs from Debian, server in A, client in B: 1 GiB
# with 5 % loss, sockperf, iperf3, redis) are tests/accel/dpdk_phases.sh;
# the kernel TCP segment counters of both namespaces are checked.
# FSK_NETNS_BULK: bytes of the bulk transfer (default 1 GiB).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/netns.sh"
pmd=${FSK_NETNS_PMD:-af_packet}
fsk_setup "accel-netns-$pmd"
fsk_need_preload
fsk_need_cmd ip ss sockperf iperf3 redis-server redis-cli redis-benchmark sha256sum "$FSK_PYTHON"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || fsk_fail "libdpdk-fi.so not built"
case $pmd in
af_packet) ;;
af_xdp)
	pmds=$(pkg-config --variable=libdir libdpdk 2>/dev/null)
	ls "$pmds"/dpdk/pmds-*/librte_net_af_xdp.so >/dev/null 2>&1 ||
		fsk_skip "DPDK's af_xdp PMD (librte_net_af_xdp.so) is not installed"
	;;
*) fsk_fail "FSK_NETNS_PMD=$pmd: expected af_packet or af_xdp" ;;
esac

id=$$
nsa=fska$id nsb=fskb$id
ifa=fsa$id ifb=fsb$id
ka=198.19.7.1 kb=198.19.7.2
fsk_exit_hook=fsk_netns_destroy
fsk_netns_create "$nsa" "$nsb" ||
	{ fsk_netns_destroy; fsk_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
fsk_netns_veth "$nsa" "$nsb" "$ifa" "$ifb" "$ka/24" "$kb/24" || fsk_fail "veth pair"
if [ "$pmd" = af_xdp ]; then
	fsk_netns_veth "$nsa" "$nsb" "fda$id" "fdb$id" || fsk_fail "second veth pair (DPDK's)"
	ph_dev_a="net_af_xdp0,iface=fda$id" ph_dev_b="net_af_xdp0,iface=fdb$id"
	ph_what="net_af_xdp, two namespaces, a veth pair of its own"
else
	ph_dev_a="net_af_packet0,iface=$ifa" ph_dev_b="net_af_packet0,iface=$ifb"
	ph_what="net_af_packet, two namespaces, on the kernel's veth"
fi
ph_ns_a=$nsa ph_ns_b=$nsb
ph_ip_a=198.18.7.1/24 ph_ip_b=198.18.7.2/24
ph_srv=$ka
ph_seg_ns="$nsa $nsb" ph_seg_ends=1
ph_bulk=${FSK_NETNS_BULK:-1073741824}
. "$top_srcdir/tests/accel/dpdk_phases.sh"
ph_run
