#!/bin/sh
# deb_run.sh MODE DIR: the runs of tests/pkg/deb.sh, with the installed
# packages only; logs in DIR. Every program runs under `env -i` (a plain
# PATH, no FI_PROVIDER_PATH, no FABSOCK_LIB): what it finds, it finds from
# the installed files.
#   private  run inside a fresh mount namespace (unshare -m): /dev/shm and
#            /run get empty tmpfs mounts, and whatever is in them at the
#            end was left by the runs
#   shared   no namespace: files in /dev/shm and /run/fabsock newer than
#            the start of the runs count as left behind
# 1. fabsock --env names the installed library (libfabsock.so.0) and the
#    provider directory; fi_info -p dpdk sees the installed provider with
#    only FI_DPDK_DEVICE and FI_DPDK_IP set.
# 2. sockperf ping-pong (64 B, 2 s), server and client under /usr/bin/fabsock
#    on shm: both ends' counters say the connection was accelerated, every
#    message went over shm, none was lost; the server had the installed
#    library mapped.
# 3. fi_pingpong -p dpdk over a net_memif pair, DGRAM and native RDM.
. "${top_srcdir:?}/tests/lib/common.sh"
mode=${1:?private or shared}
out=${2:?log directory}
mkdir -p "$out" || fsk_fail "mkdir $out"
fsk_setup pkg-deb-run
fsk_need_cmd dpkg-architecture pgrep

case $mode in
private)
	mount -t tmpfs -o mode=1777 fsk-deb-shm /dev/shm || fsk_fail "tmpfs on /dev/shm in the mount namespace"
	mount -t tmpfs -o mode=755 fsk-deb-run /run || fsk_fail "tmpfs on /run in the mount namespace"
	;;
shared) touch "$out/start" ;;
*) fsk_fail "mode: private or shared, got '$mode'" ;;
esac
mkdir -p /run/fabsock || fsk_fail "mkdir /run/fabsock"

triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH) || fsk_fail "dpkg-architecture"
libdir=/usr/lib/$triplet
# bare CMD...: CMD with a plain PATH and nothing else of this environment
# (in the background: fsk_bg env -i $bare_env CMD..., so that the recorded
# pid is the command's own)
bare_env="PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=${HOME:-/root} LC_ALL=C"
# shellcheck disable=SC2086 # a list of VAR=value words without spaces
bare() { env -i $bare_env "$@"; }

# ---- 1. what the installed launcher and libfabric find
[ "$(bare sh -c 'command -v fabsock')" = /usr/bin/fabsock ] || fsk_fail "fabsock is not /usr/bin/fabsock on PATH"
bare fabsock --env >"$out/env" || fsk_fail "fabsock --env"
grep -qx "export LD_PRELOAD='$libdir/libfabsock.so.0'" "$out/env" ||
	{ cat "$out/env"; fsk_fail "fabsock --env: LD_PRELOAD is not $libdir/libfabsock.so.0"; }
grep -qx "export FI_PROVIDER_PATH='$libdir/libfabric'" "$out/env" ||
	{ cat "$out/env"; fsk_fail "fabsock --env: FI_PROVIDER_PATH is not $libdir/libfabric"; }
bare FI_DPDK_DEVICE=net_null0 FI_DPDK_IP=198.18.0.1/24 timeout 60 fi_info -p dpdk >"$out/fi_info" 2>&1 ||
	{ cat "$out/fi_info"; fsk_fail "fi_info -p dpdk with FI_DPDK_DEVICE=net_null0 FI_DPDK_IP only"; }
grep -q 'provider: dpdk' "$out/fi_info" || { cat "$out/fi_info"; fsk_fail "fi_info -p dpdk lists no dpdk provider"; }
fsk_note "fabsock --env: $libdir/libfabsock.so.0, FI_PROVIDER_PATH $libdir/libfabric; fi_info -p dpdk: $(grep -c 'provider: dpdk' "$out/fi_info") entries"

# ---- 2. sockperf ping-pong, both ends launched, shm
port=$(fsk_free_port) || fsk_fail "no free port"
# shellcheck disable=SC2086
fsk_bg env -i $bare_env FABSOCK_NEGO_WAIT_MS=2000 timeout -k 5 60 fabsock --provider shm --log info \
	--log-file "$out/srv.log" -- sockperf server --tcp -i 127.0.0.1 -p "$port" >"$out/srv.out" 2>&1
spid=$fsk_last_pid
fsk_wait_listen "$port" 150 || { cat "$out/srv.out"; fsk_fail "sockperf server did not listen on $port"; }
server=$(pgrep -x sockperf -P "$spid" | head -n 1)
[ -n "$server" ] && grep -q " $libdir/libfabsock.so.0" "/proc/$server/maps" ||
	fsk_fail "the sockperf server (pid ${server:-?}) does not have $libdir/libfabsock.so.0 mapped"
bare FABSOCK_NEGO_WAIT_MS=2000 timeout -k 5 30 fabsock --provider shm --log info \
	--log-file "$out/cli.log" -- sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m 64 -t 2 \
	>"$out/cli.out" 2>&1 || { cat "$out/cli.out"; fsk_fail "sockperf ping-pong failed"; }
# SIGINT: sockperf's server exits through its handler, libfabsock dumps its counters
kill -INT "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
fsk_assert_accel "$out/cli.log" "sockperf ping-pong client" 1 shm
fsk_assert_accel "$out/srv.log" "sockperf server" 1 shm
recv=$(sed -n 's/.*\[Valid Duration\].*ReceivedMessages=\([0-9]*\).*/\1/p' "$out/cli.out" | head -n 1)
[ -n "$recv" ] && [ "$recv" -gt 0 ] || { cat "$out/cli.out"; fsk_fail "sockperf ping-pong: no replies"; }
grep -q '# dropped messages = 0; # duplicated messages = 0; # out-of-order messages = 0' "$out/cli.out" ||
	{ cat "$out/cli.out"; fsk_fail "sockperf ping-pong: messages dropped, duplicated or out of order"; }
tx=$(fsk_counter "$out/cli.log" bytes_tx_shm)
rx=$(fsk_counter "$out/srv.log" bytes_rx_shm)
[ "$tx" -ge $((recv * 64)) ] && [ "$tx" = "$rx" ] ||
	fsk_fail "sockperf ping-pong: client sent $tx bytes over shm, server received $rx, replies $recv x 64"
fsk_note "sockperf ping-pong under /usr/bin/fabsock: $recv round trips over shm ($tx bytes each way)"

# ---- 3. fi_pingpong -p dpdk over net_memif, the installed provider
# pingpong EP LAST_SIZE ITERATIONS: one server, one client; the client's
# table must end with a complete row for LAST_SIZE.
pingpong() {
	sock=/run/fabsock/deb-$$.sock
	oob=$(fsk_free_port) || fsk_fail "no free port"
	# shellcheck disable=SC2086
	fsk_bg env -i $bare_env FI_DPDK_DEVICE="net_memif0,role=server,socket=$sock" FI_DPDK_IP=198.18.0.1/24 \
		timeout -k 5 90 fi_pingpong -p dpdk -e "$1" -B "$oob" -I "$3" >"$out/pp-$1-srv.out" 2>&1
	ppid=$fsk_last_pid
	fsk_wait_listen "$oob" 300 || { cat "$out/pp-$1-srv.out"; fsk_fail "fi_pingpong $1 server did not listen on $oob"; }
	bare FI_DPDK_DEVICE="net_memif0,role=client,socket=$sock" FI_DPDK_IP=198.18.0.2/24 \
		timeout -k 5 90 fi_pingpong -p dpdk -e "$1" -P "$oob" -I "$3" 127.0.0.1 >"$out/pp-$1-cli.out" 2>&1
	crc=$?
	wait "$ppid"
	src=$?
	cat "$out/pp-$1-cli.out"
	[ "$crc" = 0 ] && [ "$src" = 0 ] || { cat "$out/pp-$1-srv.out"; fsk_fail "fi_pingpong -p dpdk -e $1: client $crc, server $src"; }
	grep -Eq "^$2[[:space:]]+[0-9.]+k?[[:space:]]+=" "$out/pp-$1-cli.out" ||
		fsk_fail "fi_pingpong -p dpdk -e $1: no completed row for size $2"
}
pingpong dgram 1k 200
pingpong rdm 1m 50
fsk_note "fi_pingpong -p dpdk over net_memif: dgram and rdm complete"

# ---- what the runs left behind. /run/dpdk, DPDK's base directory, may
# stay empty: the provider removes only its own directory in it (other DPDK
# programs share the base).
case $mode in
private) left=$(find /dev/shm /run -mindepth 1 ! -path /run/fabsock ! \( -path /run/dpdk -type d -empty \)) ;;
shared) left=$(find /dev/shm /run/fabsock -mindepth 1 -newer "$out/start") ;;
esac
[ -z "$left" ] || { echo "$left"; fsk_fail "the runs left files behind (above)"; }
fsk_note "nothing left in /dev/shm or /run/fabsock"
