#!/bin/sh
# Launched processes on the dpdk provider through Open vSwitch: OVS-DPDK
# started from scratch in a private directory (ovsdb-server, ovs-vswitchd
# with DPDK on 2 MB hugepages this script reserves, one PMD core allowed to
# sleep), a pool of 3 vhost-user ports (fabsock-ovs up), and processes
# launched with `fabsock --ovs BRIDGE` that claim them:
#   1. sockperf ping-pong for 2 s, server and client each on a port of
#      their own, both over dpdk (counters), through OVS (port statistics);
#   2. a byte-exact echo while two other processes hold ports: the third
#      claims the third port;
#   3. all ports taken: one line, and the process runs on the kernel;
#   4. a SIGKILLed holder's port is free again and claimed by the next one.
# Everything (processes, bridge, pool, OVS, its database, hugepages) is
# removed at the end, also on failure. SKIP when OVS-DPDK cannot run here.
. "$top_srcdir/tests/accel/lib.sh"
fsk_ovs="$top_srcdir/tools/fabsock-ovs"
vswitchd=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || { echo "FAIL: libdpdk-fi.so not built"; exit 1; }
for c in ovsdb-tool ovsdb-server ovs-vsctl ovs-appctl ovs-ofctl sockperf; do
	command -v $c >/dev/null || { echo "SKIP: $c missing (apt-get install openvswitch-switch-dpdk sockperf)"; exit 77; }
done
[ -x "$vswitchd" ] || { echo "SKIP: $vswitchd missing (apt-get install openvswitch-switch-dpdk)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: OVS-DPDK and hugepages need root"; exit 77; }

run="$tmp/ovs"
br="fsk$$"
pages=320 # OVS 256 MB, 3 processes x 64 MB, some slack: 2 MB pages
nr=/proc/sys/vm/nr_hugepages
pages_before=
status=0
export OVS_RUNDIR="$run" OVS_LOGDIR="$run" OVS_DBDIR="$run"
export FABSOCK_OVS_DIR="$tmp/pools" FABSOCK_OVS_DB="unix:$run/db.sock"
vsctl() { timeout 10 ovs-vsctl --db="unix:$run/db.sock" "$@"; }

# OVS_KEEP=DIR: OVS's logs and the processes' logs are copied there at the end
ovs_stop() {
	[ -z "${OVS_KEEP:-}" ] || { mkdir -p "$OVS_KEEP" && cp -r "$run" "$tmp"/*.log "$tmp"/*.out "$OVS_KEEP"/; } 2>/dev/null
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	[ -e "$run/db.sock" ] && sh "$fsk_ovs" down "$br" >/dev/null 2>&1
	for d in vswitchd ovsdb; do
		[ -s "$run/$d.pid" ] || continue
		p=$(cat "$run/$d.pid")
		timeout 5 ovs-appctl -t "$run/$d.ctl" exit >/dev/null 2>&1
		i=0
		while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
		kill -9 "$p" 2>/dev/null
	done
	# give back the pages reserved here (pages still in use by someone
	# else's process become surplus and go when freed)
	[ -z "$pages_before" ] || echo "$pages_before" >"$nr" 2>/dev/null
}
trap '_rc=$?; ovs_stop; (exit $_rc); cleanup' EXIT

# ---- OVS-DPDK from scratch -------------------------------------------------
# on top of every page in the pool now, persistent or surplus (in use by
# someone else's process: raising nr_hugepages turns those persistent)
pages_before=$(cat "$nr")
total_before=$(awk '/^HugePages_Total/ { print $2 }' /proc/meminfo)
free_before=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
echo $((total_before + pages)) >"$nr" 2>/dev/null
free_now=$(awk '/^HugePages_Free/ { print $2 }' /proc/meminfo)
if [ "$((free_now - free_before))" -lt $pages ]; then
	echo "SKIP: could not reserve $pages 2 MB hugepages (free $free_before -> $free_now)"
	exit 77
fi
mkdir -p "$run"
ovsdb-tool create "$run/conf.db" /usr/share/openvswitch/vswitch.ovsschema >"$run/err" 2>&1 ||
	{ echo "SKIP: ovsdb-tool create: $(head -n1 "$run/err")"; exit 77; }
timeout 10 ovsdb-server "$run/conf.db" --remote="punix:$run/db.sock" --pidfile="$run/ovsdb.pid" \
	--unixctl="$run/ovsdb.ctl" --log-file="$run/ovsdb.log" --detach >"$run/err" 2>&1 ||
	{ echo "SKIP: ovsdb-server does not start: $(grep -v vlog "$run/err" | head -n1)"; exit 77; }
vsctl --no-wait init
# one PMD core (CPU 1), the main thread on CPU 0, the PMD sleeps up to 50 us
# when idle; no PCI probing (the host's NICs are not ours)
vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
	other_config:dpdk-socket-mem=256 other_config:dpdk-socket-limit=256 \
	other_config:dpdk-lcore-mask=0x1 other_config:pmd-cpu-mask=0x2 \
	other_config:pmd-maxsleep=50 other_config:dpdk-extra=--no-pci
timeout 60 "$vswitchd" "unix:$run/db.sock" --pidfile="$run/vswitchd.pid" --unixctl="$run/vswitchd.ctl" \
	--log-file="$run/vswitchd.log" --detach >"$run/err" 2>&1 ||
	{ echo "SKIP: ovs-vswitchd with DPDK does not start: $(grep -i 'emer\|err' "$run/vswitchd.log" | head -n2 | sed 's/.*|//')"; exit 77; }
[ "$(vsctl get Open_vSwitch . dpdk_initialized)" = true ] ||
	{ echo "SKIP: OVS's DPDK did not initialise: $(grep -i 'emer\|err' "$run/vswitchd.log" | head -n2)"; exit 77; }
grep -i 'max sleep\|pmd.*core' "$run/vswitchd.log" | sed 's/.*|/OVS: /' | head -n3
echo "OVS-DPDK up: $(vsctl get Open_vSwitch . dpdk_version)"

# ---- the pool ----------------------------------------------------------------
sh "$fsk_ovs" up "$br" 3 --subnet 198.18.91.0/24 || { echo "FAIL: fabsock-ovs up"; exit 1; }
[ "$(vsctl list-ports "$br" | wc -l)" -eq 3 ] || { echo "FAIL: bridge $br has not 3 ports"; status=1; }

fi_log=info
# launch NAME CMD...: CMD launched on the pool (dpdk only), logs in
# $tmp/NAME.* (the provider's at level $fi_log: the port it claims); it
# replaces the calling shell: `(launch ...)` or `launch ... &`
launch() {
	_n=$1
	shift
	exec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=3000 FABSOCK_LOG=info \
		${fi_log:+FI_LOG_LEVEL=$fi_log} FI_LOG_PROV=dpdk timeout 60 "$launcher" --ovs "$br" --provider dpdk -- "$@" \
		>"$tmp/$_n.out" 2>"$tmp/$_n.log"
}
# holder I: the pid holding port I (fabsock-ovs status), or nothing
holder() { sh "$fsk_ovs" status "$br" | awk -v i="$1" '$2 == i && $6 == "held" { print $8 }'; }
# wait_port I: bounded (20 s) wait for port I's link (OVS connected to the
# process holding it)
wait_port() {
	i=0
	until [ "$(vsctl get interface "$br-p$1" link_state 2>/dev/null)" = up ]; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt 200 ] || { echo "port $1 did not come up in 20 s"; return 1; }
	done
}
# rx_packets I: packets OVS received on port I while it is connected (live,
# from OpenFlow; a port whose process left has none), 0 when unknown
rx_packets() {
	ofport=$(vsctl get interface "$br-p$1" ofport)
	_v=$(timeout 5 ovs-ofctl dump-ports "$br" "$ofport" | sed -n 's/.*rx pkts=\([0-9]*\).*/\1/p' | head -n1)
	echo "${_v:-0}"
}
claimed() { grep -ao 'FI_DPDK_POOL=[^ ]*: port [0-9]*' "$1" | sed 's/.* //' | head -n1; }

# 1. sockperf ping-pong through OVS
sp=$(free_port)
launch s1 sockperf server --tcp -i 127.0.0.1 -p "$sp" &
s1=$!
pids="$pids $s1"
wait_port 0 || status=1
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
wait_ready "$tmp/s2.out" && wait_port 1 || status=1
(launch c2 "$python" "$echo_py" client "$ep" 1000000) || { echo "FAIL: echo client"; status=1; }
wait $s2 || { echo "FAIL: echo server"; status=1; }
cat "$tmp/c2.out"
echo "echo: server port $(claimed "$tmp/s2.log"), client port $(claimed "$tmp/c2.log")"
[ "$(claimed "$tmp/c2.log")" = 2 ] || { echo "FAIL: the third process did not get port 2"; status=1; }
assert_dpdk "$tmp/c2.log" "echo client" 1 1000000 || status=1
assert_dpdk "$tmp/s2.log" "echo server" 1 1000000 || status=1

# 3. all ports taken: one line, the kernel
launch h1 sockperf server --tcp -i 127.0.0.1 -p "$(free_port)" &
h1=$!
launch h2 sockperf server --tcp -i 127.0.0.1 -p "$(free_port)" &
h2=$!
pids="$pids $h1 $h2"
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
# the servers (sockperf) are killed: the test is about ports, not their exit
for i in 0 1 2; do p=$(holder $i); [ -z "$p" ] || kill -9 "$p" 2>/dev/null; done
wait 2>/dev/null
for i in 0 1 2; do [ -z "$(holder $i)" ] || { echo "FAIL: port $i still held"; status=1; }; done
sh "$fsk_ovs" down "$br" || status=1
vsctl br-exists "$br" && { echo "FAIL: bridge $br left"; status=1; }
[ -e "$FABSOCK_OVS_DIR/$br" ] && { echo "FAIL: pool directory left"; status=1; }
if [ $status -ne 0 ]; then
	for f in s1 c1 s2 c2 c3 c4; do echo "== $f"; grep -a 'warn\|error' "$tmp/$f.log" | grep -v 'returned -61\|OFI_MRAIL' | tail -n 5; done
	grep -i 'err\|warn\|vhost' "$run/vswitchd.log" | tail -n 40
fi
[ $status -eq 0 ] && echo PASS
exit $status
