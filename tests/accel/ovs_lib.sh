# Shared by the tests on Open vSwitch with DPDK (sourced after lib.sh; set
# ovs_ports, the pool's size, and ovs_subnet, its A.B.C.0/24, first):
# OVS-DPDK started from scratch in a private directory (ovsdb-server,
# ovs-vswitchd with DPDK on 2 MB hugepages reserved here, one PMD core
# allowed to sleep), bridge $br with a pool of $ovs_ports vhost-user ports
# (fabsock-ovs up), and the helpers to launch processes on the pool. At exit
# (trap, also on failure) the processes in $pids, the bridge, the pool, OVS,
# its database and the hugepages are removed; a test sets ovs_stop_first to
# a function of its own that stops what it started otherwise (run first).
# SKIP when OVS-DPDK cannot run here (its own tools say so).
fsk_ovs="$top_srcdir/tools/fabsock-ovs"
vswitchd=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || { echo "FAIL: libdpdk-fi.so not built"; exit 1; }
for c in ovsdb-tool ovsdb-server ovs-vsctl ovs-appctl ovs-ofctl; do
	command -v $c >/dev/null || { echo "SKIP: $c missing (apt-get install openvswitch-switch-dpdk)"; exit 77; }
done
[ -x "$vswitchd" ] || { echo "SKIP: $vswitchd missing (apt-get install openvswitch-switch-dpdk)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: OVS-DPDK and hugepages need root"; exit 77; }

run="$tmp/ovs"
br="fsk$$"
pages=$((128 + 64 * ovs_ports)) # 2 MB pages: OVS 256 MB, 64 MB per process, as much slack
nr=/proc/sys/vm/nr_hugepages
pages_before=
status=0
export OVS_RUNDIR="$run" OVS_LOGDIR="$run" OVS_DBDIR="$run"
export FABSOCK_OVS_DIR="$tmp/pools" FABSOCK_OVS_DB="unix:$run/db.sock"
vsctl() { timeout 10 ovs-vsctl --db="unix:$run/db.sock" "$@"; }

# OVS_KEEP=DIR: OVS's logs and the processes' logs are copied there at the end
ovs_stop_first=:
ovs_stop() {
	$ovs_stop_first
	[ -z "${OVS_KEEP:-}" ] || { mkdir -p "$OVS_KEEP" && cp -r "$run" "$tmp"/*.log "$tmp"/*.out "$OVS_KEEP"/; } 2>/dev/null
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	# a launched process is timeout's child: the holders of the ports too
	[ ! -r "$FABSOCK_OVS_DIR/$br/pool" ] ||
		for p in $(sh "$fsk_ovs" status "$br" | awk '$6 == "held" { print $8 }'); do kill -9 "$p"; done 2>/dev/null
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
sh "$fsk_ovs" up "$br" "$ovs_ports" --subnet "$ovs_subnet" || { echo "FAIL: fabsock-ovs up"; exit 1; }
[ "$(vsctl list-ports "$br" | wc -l)" -eq "$ovs_ports" ] || { echo "FAIL: bridge $br has not $ovs_ports ports"; status=1; }

fi_log=info
# launch NAME CMD...: CMD launched on the pool (dpdk only), logs in
# $tmp/NAME.* (the provider's at level $fi_log: the port it claims), bounded
# ($launch_timeout s, default 60; a first write waits up to 8 s for the
# server's greeting: a server opens the provider at its first accepted
# connection); it replaces the calling shell: `(launch ...)` or `launch ... &`
launch() {
	_n=$1
	shift
	exec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=8000 FABSOCK_LOG=info \
		${fi_log:+FI_LOG_LEVEL=$fi_log} FI_LOG_PROV=dpdk timeout ${launch_timeout:-60} "$launcher" --ovs "$br" --provider dpdk -- "$@" \
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

# ovs_teardown: the holders of the pool's ports are killed (the tests are
# about ports, not their exit), then every port must be free and the bridge
# and pool go; sets status=1 otherwise
ovs_teardown() {
	_i=0
	while [ $_i -lt "$ovs_ports" ]; do _p=$(holder $_i); [ -z "$_p" ] || kill -9 "$_p" 2>/dev/null; _i=$((_i + 1)); done
	wait 2>/dev/null
	_i=0
	while [ $_i -lt "$ovs_ports" ]; do
		[ -z "$(holder $_i)" ] || { echo "FAIL: port $_i still held"; status=1; }
		_i=$((_i + 1))
	done
	sh "$fsk_ovs" down "$br" || status=1
	vsctl br-exists "$br" && { echo "FAIL: bridge $br left"; status=1; }
	[ ! -e "$FABSOCK_OVS_DIR/$br" ] || { echo "FAIL: pool directory left"; status=1; }
}
