# netns.sh - private network namespaces, joined by veth pairs, for tests that
# put a DPDK port (net_af_packet / net_af_xdp) on a veth end or want their
# own kernel TCP counters (sourced; POSIX sh).
#
# Contract: fsk_netns_create returns non-zero (and creates nothing) when
# namespaces cannot be created here (no root / CAP_SYS_ADMIN): the caller
# skips. After a successful create the caller must arrange for
# fsk_netns_destroy to run on exit (its trap); deleting a namespace deletes
# the veth ends inside it, and with them their peers.

fsk_netns_list=""

# fsk_netns_create NS...: the namespaces (one or more), loopback up in each.
fsk_netns_create() {
	command -v ip >/dev/null 2>&1 || return 1
	ip netns add "$1" 2>/dev/null || return 1
	fsk_netns_list="$fsk_netns_list $1"
	ip -n "$1" link set lo up || return 1
	shift
	for ns in "$@"; do
		ip netns add "$ns" || return 1
		fsk_netns_list="$fsk_netns_list $ns"
		ip -n "$ns" link set lo up || return 1
	done
}

# fsk_netns_veth NS_A NS_B IF_A IF_B [ADDR_A/N ADDR_B/N]: a veth pair, IF_A in
# NS_A and IF_B in NS_B, both up, with the given kernel addresses (none when
# omitted: a port whose frames only DPDK handles).
fsk_netns_veth() {
	ip link add "$3" type veth peer name "$4" || return 1
	ip link set "$3" netns "$1" && ip link set "$4" netns "$2" || return 1
	ip -n "$1" link set "$3" up && ip -n "$2" link set "$4" up || return 1
	[ $# -lt 6 ] && return 0
	ip -n "$1" addr add "$5" dev "$3" && ip -n "$2" addr add "$6" dev "$4"
}

# fsk_netns_destroy: delete every namespace fsk_netns_create made.
fsk_netns_destroy() {
	for ns in $fsk_netns_list; do
		ip netns del "$ns" 2>/dev/null
	done
	fsk_netns_list=""
}

# fsk_netns_tcp_outsegs NS, fsk_netns_tcp_insegs NS: the kernel's TCP
# OutSegs and InSegs counters in NS (/proc/net/snmp: the Tcp: header line,
# then the values).
fsk_netns_tcp_outsegs() {
	ip netns exec "$1" awk '/^Tcp:/ { if (h) print $12; h = 1 }' /proc/net/snmp
}
fsk_netns_tcp_insegs() {
	ip netns exec "$1" awk '/^Tcp:/ { if (h) print $11; h = 1 }' /proc/net/snmp
}
