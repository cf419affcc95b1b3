# Shared by the acceleration tests (sourced): launcher, ports, bounded waits.
set -u
. "$top_srcdir/tests/preload/lib.sh"
. "$top_srcdir/tests/lib/common.sh"
launcher="$top_builddir/tools/fabsock"
echo_py="$top_srcdir/tests/accel/echo.py"
python=$(command -v python3) || { echo "SKIP: python3 missing"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-accel.XXXXXX")
pids=""
cleanup() {
	_status=$?
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	# every accelerated test: no sleep ended at the safety cap (common.sh)
	fsk_no_late_wakes "$tmp" || { [ "$_status" != 0 ] || _status=1; }
	rm -rf "$tmp"
	exit "$_status"
}
trap cleanup EXIT

free_port() {
	"$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_ready FILE: bounded (5 s) wait for the server's "listening" line (a
# probe connection would be taken by a server that accepts once).
wait_ready() {
	i=0
	until grep -q listening "$1" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "server did not start"; return 1; }
	done
}

# counter LOG NAME: the value libfabsock dumped at exit (FABSOCK_LOG=info), or 0.
counter() {
	v=$(grep -a "info: counter $2 = " "$1" | tail -n1 | sed 's/.* = //')
	echo "${v:-0}"
}

# wait_line FILE WORD: bounded (10 s) wait for a line containing WORD.
wait_line() {
	i=0
	until grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
		[ $i -lt 200 ] || return 1
	done
}

# shm_in_netns PAYLOAD_TEXT: `run_pair shm "ip netns exec NS"` (the caller's
# function, logs in $tmp/cli.log and $tmp/srv.log) inside a private network
# namespace where only this test uses TCP, then check that the kernel's TCP
# segment counter grew by no more than the negotiation and the doorbells (one
# byte, and its ACK, each time a sleeping peer is woken) need. Returns 1 on a
# failure. Without permission for namespaces: the run alone.
shm_in_netns() {
	ns="fsk-accel-$$"
	if ! ip netns add "$ns" 2>/dev/null; then
		echo "no permission for network namespaces: shm run without the segment check"
		run_pair shm ""
		return
	fi
	trap '_rc=$?; ip netns del "$ns" 2>/dev/null; (exit $_rc); cleanup' EXIT
	ip netns exec "$ns" ip link set lo up
	before=$(ip netns exec "$ns" awk '/^Tcp:/ { if (h) print $12; h = 1 }' /proc/net/snmp)
	rc=0
	run_pair shm "ip netns exec $ns" || rc=1
	after=$(ip netns exec "$ns" awk '/^Tcp:/ { if (h) print $12; h = 1 }' /proc/net/snmp)
	bells=$(( $(counter "$tmp/cli.log" doorbells) + $(counter "$tmp/srv.log" doorbells) ))
	limit=$((100 + 2 * bells))
	echo "shm: kernel TCP OutSegs in the namespace grew by $((after - before)) for $1 bytes ($bells doorbells; limit $limit)"
	[ $((after - before)) -lt $limit ] || { echo "FAIL: the payload went through kernel TCP"; rc=1; }
	return $rc
}

# on_dpdk DEVARGS IP [launcher options] -- CMD...: run CMD launched on the
# dpdk provider (port DEVARGS, address IP) with FABSOCK_LOG=info, bounded
# (90 s). Launcher options: e.g. --provider dpdk, --eal-args ARGS. DPDK_WRAP,
# when set, is a command put before the launcher (e.g. "taskset -c 1").
on_dpdk() {
	_dev=$1 _ip=$2
	shift 2
	# shellcheck disable=SC2086 # DPDK_WRAP is a command line
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_LOG=info timeout 90 \
		${DPDK_WRAP:-} "$launcher" --dpdk "$_dev" --ip "$_ip" "$@"
}

# assert_dpdk LOG WHAT MIN_CONNS MIN_BYTES: the counters in LOG show at
# least MIN_CONNS connections and MIN_BYTES bytes each way over dpdk.
# Prints one line; returns 1 when short.
assert_dpdk() {
	_n=$(counter "$1" conn_accel_dpdk)
	_tx=$(counter "$1" bytes_tx_dpdk)
	_rx=$(counter "$1" bytes_rx_dpdk)
	echo "$2: $_n connection(s) over dpdk, sent $_tx, received $_rx"
	[ "$_n" -ge "$3" ] && [ "$_tx" -ge "$4" ] && [ "$_rx" -ge "$4" ] && return 0
	echo "FAIL: $2: the counters do not show the traffic over dpdk"
	return 1
}

# warn_lines FILE: the number of libfabsock warn/error lines in FILE.
warn_lines() {
	grep -c 'warn\|error' "$1" 2>/dev/null || true
}
