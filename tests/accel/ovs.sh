#!/bin/sh
# Launched processes on the dpdk provider through Open vSwitch: OVS-DPDK
# started from scratch in a private directory (ovsdb-server, ovs-vswitchd
# with DPDK on 2 MB hugepages this script reserves, one PMD core allowed to
# sleep), a pool of 3 vhost-user ports (fabsock-ovs up), and processes
# launched with `fabsock --ovs BRIDGE` that claim them (a server at its first
# accepted connection, a client at its first negotiation):
#   1. sockperf ping-pong for 2 s, server and client each on a port of
#      their own, both over dpdk (counters), through OVS (port statistics);
#   2. a byte-exact echo while two other processes hold ports: the third
#      claims the third port;
#   3. all ports taken (the first server, and a second one with a slow
#      client): one line, and the process runs on the kernel;
#   4. a SIGKILLed holder's port is free again and claimed by the next one.
# Everything (processes, bridge, pool, OVS, its database, hugepages) is
# removed at the end, also on failure. SKIP when OVS-DPDK cannot run here.
. "$top_srcdir/tests/accel/lib.sh"
command -v sockperf >/dev/null || { echo "SKIP: sockperf missing (apt-get install sockperf)"; exit 77; }
ovs_ports=3
ovs_subnet=198.18.91.0/24
launch_timeout=150 # the first server lives through every step
. "$top_srcdir/tests/accel/ovs_lib.sh"

# 1. sockperf ping-pong through OVS
sp=$(free_port)
launch s1 sockperf server --tcp -i 127.0.0.1 -p "$sp" &
s1=$!
pids="$pids $s1"
fsk_wait_listen "$sp" 100 || status=1
# the server claims its port and opens the provider at its first connection
(launch c0 sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp" -t 1 -m 64) || { echo "FAIL: first sockperf client"; status=1; }
before=$(rx_packets 0)
(launch c1 sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp" -t 2 -m 64) || { echo "FAIL: sockperf client"; status=1; }
grep -a 'avg-latency\|percentile 50.000\|percentile 99.000' "$tmp/c1.out" | sed 's/^sockperf: /ping-pong 64 B over OVS: /'
n=$(counter "$tmp/c1.log" conn_accel_dpdk)
after=$(rx_packets 0)
echo "sockperf client: port $(claimed "$tmp/c1.log"), $n connection(s) over dpdk; OVS rx on the server's port 0: $before -> $after"
[ "$n" -eq 1 ] && [ "$(claimed "$tmp/c1.log")" = 1 ] || { echo "FAIL: sockperf client not over dpdk on port 1"; status=1; }
[ "$(counter "$tmp/c1.log" conn_accel_dpdk)" -eq 1 ] || status=1
[ "$after" -gt "$((before + 1000))" ] || { echo "FAIL: OVS port statistics did not move"; status=1; }

# 2. byte-exact echo while two hold ports: the client is third
ep=$(free_port)
launch s2 "$python" "$echo_py" server "$ep" 1000000 &
s2=$!
pids="$pids $s2"
wait_ready "$tmp/s2.out" || status=1
(launch c2 "$python" "$echo_py" client "$ep" 1000000) || { echo "FAIL: echo client"; status=1; }
wait $s2 || { echo "FAIL: echo server"; status=1; }
cat "$tmp/c2.out"
echo "echo: server port $(claimed "$tmp/s2.log"), client port $(claimed "$tmp/c2.log")"
[ "$(claimed "$tmp/c2.log")" = 2 ] || { echo "FAIL: the third process did not get port 2"; status=1; }
assert_dpdk "$tmp/c2.log" "echo client" 1 1000000 || status=1
assert_dpdk "$tmp/s2.log" "echo server" 1 1000000 || status=1

# 3. all ports taken: one line, the kernel
hp=$(free_port)
launch h1 sockperf server --tcp -i 127.0.0.1 -p "$hp" &
h1=$!
pids="$pids $h1"
fsk_wait_listen "$hp" 100 || status=1
launch h2 sockperf under-load --tcp -i 127.0.0.1 -p "$hp" -t 50 --mps=10 -m 64 &
h2=$!
pids="$pids $h2"
wait_port 1 && wait_port 2 || status=1
sh "$fsk_ovs" status "$br"
# the application's own log only (libfabric's quiet, as by default)
(fi_log='' launch c3 sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp" -t 1 -m 64) ||
	{ echo "FAIL: sockperf client (kernel)"; status=1; }
echo "full pool: $(warn_lines "$tmp/c3.log") line(s): $(grep -a 'warn\|error' "$tmp/c3.log")"
echo "full pool: $(counter "$tmp/c3.log" conn_accel_dpdk) connection(s) over dpdk"
[ "$(warn_lines "$tmp/c3.log")" -eq 1 ] && grep -qa 'warn: dpdk: .*all ports taken.*kernel' "$tmp/c3.log" &&
	[ "$(counter "$tmp/c3.log" conn_accel_dpdk)" -eq 0 ] && grep -qa 'avg-latency' "$tmp/c3.out" ||
	{ echo "FAIL: full pool"; status=1; }

# 4. a SIGKILLed holder's port is free, and the next process gets it
victim=$(holder 2)
[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
i=0
while [ -n "$(holder 2)" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ -z "$(holder 2)" ] || { echo "FAIL: port 2 still held after SIGKILL of $victim"; status=1; }
(launch c4 sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp" -t 1 -m 64) || { echo "FAIL: sockperf client after kill"; status=1; }
echo "after SIGKILL of $victim (port 2): the next client got port $(claimed "$tmp/c4.log"), $(counter "$tmp/c4.log" conn_accel_dpdk) connection(s) over dpdk"
[ "$(claimed "$tmp/c4.log")" = 2 ] && [ "$(counter "$tmp/c4.log" conn_accel_dpdk)" -eq 1 ] ||
	{ echo "FAIL: port 2 not reclaimed"; status=1; }

# 5. a bridge with no pool: one line naming it, the kernel
env FABSOCK_TCP_ACCEL=1 FABSOCK_LOG=info timeout 30 "$launcher" --ovs nosuch$$ -- \
	sockperf ping-pong --tcp -i 127.0.0.1 -p "$sp" -t 1 -m 64 >"$tmp/c5.out" 2>"$tmp/c5.log"
echo "no pool: $(grep -a 'warn\|error' "$tmp/c5.log")"
[ "$(warn_lines "$tmp/c5.log")" -eq 1 ] && grep -qa "warn: dpdk: .*nosuch$$: no such pool.*kernel" "$tmp/c5.log" &&
	grep -qa 'avg-latency' "$tmp/c5.out" || { echo "FAIL: no pool"; tail -n 3 "$tmp/c5.out"; status=1; }

# ---- teardown, checked -------------------------------------------------------
ovs_teardown
if [ $status -ne 0 ]; then
	for f in s1 c1 s2 c2 c3 c4; do echo "== $f"; grep -a 'warn\|error' "$tmp/$f.log" | grep -v 'returned -61\|OFI_MRAIL' | tail -n 5; done
	grep -i 'err\|warn\|vhost' "$run/vswitchd.log" | tail -n 40
fi
[ $status -eq 0 ] && echo PASS
exit $status
