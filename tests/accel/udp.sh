#!/bin/sh
# UDP over the dpdk provider's raw UDP endpoint against a plain kernel peer:
# network namespaces A and B joined by a veth pair. In A, tests/accel/udp is
# launched on net_af_packet on A's veth end, the port's IP 198.18.9.1 (not the
# kernel's; A's kernel has 198.19.9.1 on the same link). In B, udp_peer.py
# (python3, no libfabsock) has both 198.18.9.2 and 198.19.9.2. The peer sends
# numbered datagrams to the port's IP (dpdk) and some to A's kernel address
# (the launched socket's kernel side); the program echoes each through
# another receive call (poll/epoll/select mixed with kernel fds, recvmmsg,
# MSG_PEEK, MSG_TRUNC, FIONREAD), then acts as a connected client of the
# peer's echo port (sendmmsg/recvmmsg), disconnects and sends once more.
# Then multicast: two launched sockets join a group on the port, a kernel
# member in B receives the program's datagrams to the group; leaving stops
# delivery.
# Every datagram is checked byte for byte on both sides, and the counters
# must show the traffic went over dpdk: a silent fallback to the kernel
# fails, and so does kernel UDP traffic in A beyond the kernel-path share.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/netns.sh"
fsk_setup accel-udp
fsk_need_preload
fsk_need_cmd ip "$FSK_PYTHON"
prog="$top_builddir/tests/accel/udp"
[ -x "$prog" ] || fsk_fail "$prog not built (make check builds it)"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || fsk_fail "libdpdk-fi.so not built"

count=${FSK_UDP_COUNT:-400}
kcount=96 # half of them through the kernel socket, mixed with the port's
id=$$
nsa=fsua$id nsb=fsub$id
fsk_exit_hook=fsk_netns_destroy
fsk_netns_create "$nsa" "$nsb" ||
	{ fsk_netns_destroy; fsk_skip "cannot create network namespaces here (need root / CAP_SYS_ADMIN)"; }
fsk_netns_veth "$nsa" "$nsb" "fua$id" "fub$id" 198.19.9.1/24 198.19.9.2/24 || fsk_fail "veth pair"
ip -n "$nsb" addr add 198.18.9.2/24 dev "fub$id" || fsk_fail "peer address"
# connect() of a UDP socket is the kernel's too: it needs a route to the peer
ip -n "$nsa" route add 198.18.9.0/24 dev "fua$id" || fsk_fail "route to the port's subnet"

udp_in() { ip netns exec "$nsa" awk '/^Udp:/ { if (h) print $2; h = 1 }' /proc/net/snmp; }
udp_out() { ip netns exec "$nsa" awk '/^Udp:/ { if (h) print $5; h = 1 }' /proc/net/snmp; }
in0=$(udp_in) out0=$(udp_out)

T=$fsk_tmp
peer_py="$top_srcdir/tests/accel/udp_peer.py"
# on_port NAME SECONDS [launcher options] -- CMD...: CMD launched in A on the
# DPDK port, bounded, in the background ($fsk_last_pid); libfabsock's log
# (FABSOCK_LOG=info: the counters at exit) in $T/NAME.log.
on_port() {
	_name=$1 _secs=$2
	shift 2
	fsk_bg ip netns exec "$nsa" nice timeout -k 5 "$_secs" "$FSK_LAUNCHER" --log info \
		--log-file "$T/$_name.log" --dpdk "net_af_packet0,iface=fua$id" --ip 198.18.9.1/24 \
		--provider dpdk "$@"
}
# wait_word FILE WORD PID: bounded (30 s) wait for WORD in FILE while PID
# lives; on a failure, what the programs said.
wait_word() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt 300 ] && kill -0 "$3" 2>/dev/null && continue
		tail -n 20 "$T"/*.out "$T"/*.err 2>/dev/null
		grep -a 'warn\|error' "$T"/*.log 2>/dev/null | tail -n 20
		fsk_fail "no '$2' in $1"
	done
}
on_port app 90 -- "$prog" 7001 198.18.9.2 7002 "$count" >"$T/app.out" 2>"$T/app.err"
app=$fsk_last_pid
wait_word "$T/app.out" listening "$app"
fsk_bg ip netns exec "$nsb" nice timeout -k 5 90 "$FSK_PYTHON" "$peer_py" \
	198.18.9.1 7001 198.19.9.1 "$count" "$kcount" 7002 "fub$id" >"$T/peer.out" 2>&1
wait "$app"
rc=$?
cat "$T/app.out" "$T/peer.out"
if [ $rc -ne 0 ] || ! grep -q '^ok$' "$T/app.out" || ! grep -q 'echoes ok' "$T/peer.out"; then
	cat "$T/app.err"
	grep -a 'warn\|error' "$T/app.log" | tail -n 20
	fsk_fail "the UDP exchange failed (program exit $rc)"
fi
in1=$(udp_in) out1=$(udp_out)

c() { fsk_counter "$T/app.log" "$1"; }
socks=$(c udp_accel_dpdk) tx=$(c datagrams_tx_dpdk) rx=$(c datagrams_rx_dpdk)
krx=$(c udp_kernel_rx) ktx=$(c udp_kernel_tx)
echo "counters: udp_accel_dpdk $socks, datagrams_tx_dpdk $tx, datagrams_rx_dpdk $rx," \
	"udp_kernel_rx $krx, udp_kernel_tx $ktx"
echo "kernel UDP in namespace A: InDatagrams +$((in1 - in0)), OutDatagrams +$((out1 - out0))"
[ "$socks" -ge 2 ] || fsk_fail "udp_accel_dpdk $socks: the sockets were not accelerated"
# server: count + kcount / 2 + END echoed; client: count + 1 sent and echoed
want=$((2 * count + kcount / 2 + 2))
[ "$rx" -ge $want ] || fsk_fail "datagrams_rx_dpdk $rx: fewer than $want"
[ "$tx" -ge $want ] || fsk_fail "datagrams_tx_dpdk $tx: fewer than $want"
[ "$krx" -ge $((kcount / 2)) ] || fsk_fail "udp_kernel_rx $krx: the kernel side was not read ($((kcount / 2)) sent there)"
# the kernel carried the kernel-path share only (with its retries)
limit=$((2 * kcount + 16))
[ $((in1 - in0)) -le $limit ] || fsk_fail "kernel UDP InDatagrams in A grew by $((in1 - in0)) (limit $limit)"
[ $((out1 - out0)) -le $limit ] || fsk_fail "kernel UDP OutDatagrams in A grew by $((out1 - out0)) (limit $limit)"
echo "unicast: $count datagrams each way over dpdk, then $kcount mixed with the kernel socket's, byte-exact"

# Rules: udp_receiver decides at bind. A receiver a rule keeps on the kernel
# is reached at A's kernel address; one a rule accelerates (the default being
# kernel) at the port's.
rules_run() { # NAME PORT RULES DEST_IP [BIND_IP]
	on_port "$1" 40 --rules "$3" -- "$FSK_PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[2], int(sys.argv[1])))
print("bound", flush=True)
s.settimeout(20)
d, a = s.recvfrom(2048)
s.sendto(d, a)' "$2" "${5:-0.0.0.0}" >"$T/$1.out" 2>&1
	_app=$fsk_last_pid
	wait_word "$T/$1.out" bound "$_app"
	ip netns exec "$nsb" timeout 20 "$FSK_PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.3)
for _ in range(30):
    s.sendto(b"rule", (sys.argv[1], int(sys.argv[2])))
    try:
        if s.recv(64) == b"rule":
            sys.exit(0)
    except socket.timeout:
        pass
sys.exit(1)' "$4" "$2" || fsk_fail "rules: $1: no echo from $4:$2"
	wait "$_app" || fsk_fail "rules: $1 failed"
}
rules_run rule_kernel 7005 'use kernel udp_receiver *:7005' 198.19.9.1
[ "$(fsk_counter "$T/rule_kernel.log" kernel_by_rule)" -ge 1 ] &&
	[ "$(fsk_counter "$T/rule_kernel.log" udp_accel_dpdk)" -eq 0 ] ||
	fsk_fail "rules: 'use kernel udp_receiver' did not keep the socket on the kernel"
rules_run rule_accel 7006 'default kernel; use accel udp_receiver *:7006' 198.18.9.1
[ "$(fsk_counter "$T/rule_accel.log" udp_accel_dpdk)" -eq 1 ] &&
	[ "$(fsk_counter "$T/rule_accel.log" datagrams_rx_dpdk)" -ge 1 ] ||
	fsk_fail "rules: 'use accel udp_receiver' did not accelerate the socket"
echo "rules: udp_receiver kept one socket on the kernel and accelerated another"
# bound to the port's IP itself (the kernel does not own it)
rules_run bind_port_ip 7007 '' 198.18.9.1 198.18.9.1
[ "$(fsk_counter "$T/bind_port_ip.log" udp_accel_dpdk)" -eq 1 ] ||
	fsk_fail "a socket bound to the port's IP was not accelerated"
echo "bind to the port's IP: accelerated"

# A flood beyond the receive buffers: with the smallest SO_RCVBUF the socket
# keeps at most its 64 receives of 500 datagrams, intact, and survives; then
# SO_RCVTIMEO, and a blocking receive asleep until a datagram wakes it.
on_port flood 40 -- "$prog" flood 7030 64 >"$T/flood.out" 2>&1
flood=$fsk_last_pid
wait_word "$T/flood.out" 'flood ready' "$flood"
ip netns exec "$nsb" timeout 20 "$FSK_PYTHON" "$peer_py" burst 198.18.9.1 7030 500 0 1 ||
	fsk_fail "flood: the sender failed"
wait "$flood" || { cat "$T/flood.out"; fsk_fail "flood: the program failed"; }
cat "$T/flood.out"

# exec: datagrams the port took before the program execs itself reach the
# new image, which holds the socket (the kernel's now), in order.
on_port exec 40 -- "$prog" exec 7050 20 >"$T/exec.out" 2>&1
execp=$fsk_last_pid
wait_word "$T/exec.out" 'exec ready' "$execp"
ip netns exec "$nsb" timeout 20 "$FSK_PYTHON" "$peer_py" burst 198.18.9.1 7050 20 5 0 ||
	fsk_fail "exec: the sender failed"
wait "$execp" || { cat "$T/exec.out"; grep -a 'warn\|error' "$T/exec.log"; fsk_fail "exec: the program failed"; }
cat "$T/exec.out"

# A real program: sockperf's UDP server launched, its client plain in B.
if command -v sockperf >/dev/null 2>&1; then
	on_port sp 30 -- sockperf server -i 0.0.0.0 -p 7040 >"$T/sp-server.out" 2>&1
	sp=$fsk_last_pid
	i=0
	until ip netns exec "$nsa" awk '$2 ~ /:1B80$/ { f = 1 } END { exit !f }' /proc/net/udp; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt 200 ] || { cat "$T/sp-server.out"; fsk_fail "sockperf server did not bind"; }
	done
	ip netns exec "$nsb" timeout 20 sockperf ping-pong -i 198.18.9.1 -p 7040 -t 2 -m 64 \
		>"$T/sp-client.out" 2>&1 || { cat "$T/sp-client.out"; fsk_fail "sockperf ping-pong failed"; }
	kill "$sp" 2>/dev/null
	wait "$sp" 2>/dev/null
	grep -a 'Summary\|dropped' "$T/sp-client.out"
	grep -q '# dropped messages = 0;' "$T/sp-client.out" || fsk_fail "sockperf: messages dropped"
	sprx=$(fsk_counter "$T/sp.log" datagrams_rx_dpdk)
	[ "$sprx" -ge 1000 ] || fsk_fail "sockperf: datagrams_rx_dpdk $sprx: the server's datagrams did not go over dpdk"
	echo "sockperf: $sprx datagrams each way over dpdk"
else
	echo "sockperf not installed: its phase is left out"
fi

# Multicast: the peer joins 239.7.8.9 on 198.18.9.2 and waits for the
# launched program's datagrams; the program's two sockets join the group on
# the port and take the peer's datagrams, one leaves and must get nothing more.
mc=239.7.8.9 mcount=64
mc_py="$top_srcdir/tests/accel/udp_mc_peer.py"
fsk_bg ip netns exec "$nsb" nice timeout -k 5 60 "$FSK_PYTHON" "$mc_py" recv $mc 7012 $mcount 198.18.9.2 \
	>"$T/mcpeer.out" 2>&1
mcpeer=$fsk_last_pid
on_port mc 60 -- "$prog" mcast $mc 7010 7012 $mcount >"$T/mc.out" 2>"$T/mc.err"
mcapp=$fsk_last_pid
wait_word "$T/mcpeer.out" joined "$mcpeer"
wait_word "$T/mc.out" joined "$mcapp"
ip netns exec "$nsb" timeout 30 "$FSK_PYTHON" "$mc_py" send $mc 7010 $mcount 198.18.9.2 2 ||
	fsk_fail "multicast: the peer's sender failed"
wait_word "$T/mc.out" left "$mcapp"
ip netns exec "$nsb" timeout 30 "$FSK_PYTHON" "$mc_py" send $mc 7010 $mcount 198.18.9.2 1 ||
	fsk_fail "multicast: the peer's sender failed"
wait "$mcapp"
rc=$?
wait "$mcpeer"
prc=$?
cat "$T/mc.out" "$T/mcpeer.out"
[ $rc -eq 0 ] && grep -q '^ok$' "$T/mc.out" || { cat "$T/mc.err"; fsk_fail "multicast: the program failed"; }
[ $prc -eq 0 ] && grep -q 'mc recv ok' "$T/mcpeer.out" || fsk_fail "multicast: the kernel member missed datagrams"
mrx=$(fsk_counter "$T/mc.log" datagrams_rx_dpdk) mtx=$(fsk_counter "$T/mc.log" datagrams_tx_dpdk)
echo "multicast counters: datagrams_rx_dpdk $mrx, datagrams_tx_dpdk $mtx"
[ "$mrx" -ge $((2 * mcount)) ] || fsk_fail "multicast: datagrams_rx_dpdk $mrx < $((2 * mcount))"
[ "$mtx" -ge "$mcount" ] || fsk_fail "multicast: datagrams_tx_dpdk $mtx < $mcount"
echo "PASS: unicast and multicast UDP over dpdk against kernel peers, byte-exact"
