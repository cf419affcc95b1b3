#!/bin/sh
# What a process that used the provider leaves behind: nothing.
# 1. Clean exit: a native RDM transfer over a net_memif pair whose server
#    socket is a file (socket-abstract=no), FI_LOG_LEVEL=info (DPDK's log
#    lines go through fi_log, also from the EAL interrupt thread at exit).
#    Both ends exit 0 (no crash at cleanup, repeated), each logs that its
#    port was stopped and closed and its pool freed, and afterwards there is
#    no runtime directory of theirs, no memif socket file, no hugepage file.
#    Over net_ring0 (no memif) rte_eal_cleanup itself must have run.
# 2. SIGKILL: a server killed while its port is up leaves its socket file;
#    the next server on the same path must reclaim it (start and exit
#    cleanly, file gone), and an empty runtime directory of a dead process
#    (planted) must be removed at that start.
FDP_TIMEOUT=${FDP_TIMEOUT:-60}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

XFER="$top_builddir/tests/fabric/rdm_xfer"
OPEN="$top_builddir/tests/fabric/fdp_open"
[ -x "$XFER" ] && [ -x "$OPEN" ] || fdp_fail "rdm_xfer/fdp_open not built (make check builds them)"
if [ "$(id -u)" -eq 0 ]; then rundir=/var/run/dpdk
else rundir=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
sock=/tmp/fdp-clean-$$.sock
logs=$(mktemp -d)
trap 'rm -rf "$sock" "$logs"' EXIT INT TERM
dev="net_memif0,socket=$sock,socket-abstract=no"
srv="FI_DPDK_DEVICE=$dev,role=server FI_DPDK_IP=198.18.0.1/15"
cli="FI_DPDK_DEVICE=$dev,role=client FI_DPDK_IP=198.18.0.2/15"

# pids LOG...: the provider processes that wrote these FI_LOG_LEVEL=info logs
pids() { sed -n 's/^libfabric:\([0-9]*\):.*/\1/p' "$@" | sort -u; }

# leftovers PID...: runtime dirs of these processes, hugepage files
leftovers() {
	for p in "$@"; do
		ls -d "$rundir"/fdp"$p"-* 2>/dev/null
	done
	awk '$3 == "hugetlbfs" { print $2 }' /proc/mounts | while read -r m; do
		ls -d "$m"/fdp* "$m"/rtemap_* 2>/dev/null
	done
}

wait_listen() {
	for _ in $(seq 100); do
		[ -S "$sock" ] && grep -q " $sock\$" /proc/net/unix && return 0
		sleep 0.1
	done
	return 1
}

# --- 1. clean exits
i=0
while [ $i -lt 3 ]; do
	i=$((i + 1))
	port=$(fdp_oob_port $((30 + i)))
	# shellcheck disable=SC2086
	env $srv FI_LOG_LEVEL=info timeout "$FDP_TIMEOUT" "$XFER" server -P "$port" \
		-b 4194304 -s 65536 -T 40 >"$logs/s" 2>&1 &
	spid=$!
	wait_listen || { cat "$logs/s"; fdp_fail "memif server socket file $sock never listened"; }
	# shellcheck disable=SC2086
	env $cli FI_LOG_LEVEL=info timeout "$FDP_TIMEOUT" "$XFER" client -P "$port" \
		-b 4194304 -s 65536 -T 40 >"$logs/c" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	echo "== clean exit $i: client rc=$crc server rc=$src"
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		grep -v 'fi_param_get\|core:fi_getinfo\|ofi_' "$logs/s" "$logs/c" | tail -n 20
		fdp_fail "transfer or exit failed (rc $crc/$src)"
	fi
	for side in s c; do
		grep -q 'port .* stopped and closed, mbuf pool freed' "$logs/$side" ||
			{ tail -n 5 "$logs/$side"; fdp_fail "$side: port not closed at cleanup"; }
	done
	p2=$(pids "$logs/s" "$logs/c")
	[ "$(echo "$p2" | wc -w)" -eq 2 ] || fdp_fail "expected 2 provider pids in the logs, got: $p2"
	# shellcheck disable=SC2086
	left=$(leftovers $p2)
	[ -z "$left" ] || fdp_fail "left behind: $left"
	[ ! -e "$sock" ] || fdp_fail "memif socket file $sock left after a clean exit"
done
echo "3 clean exits: no crash, ports closed, no runtime dir/socket/hugepage file"

out=$(FI_DPDK_DEVICE=net_ring0 FI_DPDK_IP=198.18.0.1/15 FI_LOG_LEVEL=info \
	timeout "$FDP_TIMEOUT" "$OPEN" 2>&1)
rc=$?
[ $rc -eq 0 ] || { echo "$out" | tail -n 5; fdp_fail "fdp_open over net_ring0: rc $rc"; }
echo "$out" | grep -q 'rte_eal_cleanup done' ||
	{ echo "$out" | tail -n 5; fdp_fail "net_ring0: rte_eal_cleanup not called"; }
echo "net_ring0: fdp_open exits 0 after rte_eal_cleanup"

# A child forked right after fi_getinfo: while the EAL starts in the
# background (FI_DPDK_EAL_EARLY, default) its fi_fabric fails at once with
# -FI_ENODEV (the EAL's half-made state is its parent's; no hang on the
# starting thread's lock); without the early start (=0) nothing is started
# yet and the child starts its own. The parent's port opens either way.
for early in 1 0; do
	want="No such device"
	[ $early = 1 ] || want="Success"
	out=$(FDP_OPEN_FORK=1 FI_DPDK_EAL_EARLY=$early FI_DPDK_DEVICE=net_ring0 \
		FI_DPDK_IP=198.18.0.1/15 timeout "$FDP_TIMEOUT" "$OPEN" 2>&1)
	rc=$?
	[ $rc -eq 0 ] && echo "$out" | grep -q "^child fi_fabric: $want" &&
		echo "$out" | grep -q '^fi_endpoint: Success' ||
		{ echo "$out" | tail -n 5; fdp_fail "fork after fi_getinfo (FI_DPDK_EAL_EARLY=$early): rc $rc, child not '$want'"; }
done
echo "net_ring0: a child forked after fi_getinfo: -FI_ENODEV during an early EAL start, its own EAL without"

# --- 2. SIGKILL, then reclaim at the next start
port=$(fdp_oob_port 40)
# shellcheck disable=SC2086
env $srv timeout "$FDP_TIMEOUT" "$XFER" server -P "$port" -T 40 >"$logs/s" 2>&1 &
spid=$!
wait_listen || { cat "$logs/s"; fdp_fail "server never listened"; }
# the timeout wrapper's child is the server
kpid=$(pgrep -P "$spid" | head -1)
[ -n "$kpid" ] || fdp_fail "no server process under timeout"
left=$(leftovers "$kpid")
[ -z "$left" ] || fdp_fail "a running provider keeps files: $left"
kill -KILL "$kpid"
wait "$spid" 2>/dev/null
[ -S "$sock" ] || fdp_fail "the killed server's socket file is gone already (test cannot check reclaim)"
echo "killed server $kpid left its socket file, as expected"
sh -c 'exit 0' &
dead=$!
wait $dead
mkdir -p "$rundir" && mkdir "$rundir/fdp$dead-0badc0de" || fdp_fail "cannot plant a stale runtime dir"

port=$(fdp_oob_port 41)
# shellcheck disable=SC2086
env $srv FI_LOG_LEVEL=info timeout "$FDP_TIMEOUT" "$XFER" server -P "$port" \
	-b 1048576 -s 65536 -T 40 >"$logs/s" 2>&1 &
spid=$!
sleep 0.5
wait_listen || { cat "$logs/s"; fdp_fail "next server did not start on the stale socket path"; }
# shellcheck disable=SC2086
env $cli timeout "$FDP_TIMEOUT" "$XFER" client -P "$port" -b 1048576 -s 65536 -T 40 >"$logs/c" 2>&1
crc=$?
wait "$spid"
src=$?
[ $crc -eq 0 ] && [ $src -eq 0 ] || { tail -n 5 "$logs/s" "$logs/c"; fdp_fail "after SIGKILL: rc $crc/$src"; }
grep -q 'removed stale memif socket' "$logs/s" || fdp_fail "stale socket not reclaimed"
[ ! -e "$rundir/fdp$dead-0badc0de" ] || { rmdir "$rundir/fdp$dead-0badc0de"; fdp_fail "stale runtime dir not reclaimed"; }
[ ! -e "$sock" ] || fdp_fail "socket file left after the second server's clean exit"
# shellcheck disable=SC2046
left=$(leftovers "$kpid" $(pids "$logs/s"))
[ -z "$left" ] || fdp_fail "left behind: $left"
echo "after SIGKILL: socket file and stale runtime dir reclaimed at the next start"
echo "PASS"
