#!/bin/sh
# Progress without the application: the native RDM endpoint's timers
# (retransmission, acks) must run from the provider's progress thread while
# an application makes no libfabric call. Over a net_memif pair with 10 %
# injected loss both ways, the server posts its receives and then stays away
# for 1.5 s; the client fills a window of 8 x 64 KiB sends (more than the
# 256-frame send window, so it also needs acks to send the rest), stays away
# for 1 s, and then needs ONE fi_cq_read to return all 8 completions: only
# possible if both progress threads acknowledged and retransmitted meanwhile
# (sends complete when acknowledged). The 16 MiB transfer then finishes
# byte-exact, with no FI_EHOSTUNREACH. rdm_xfer -S is the test program.
FDP_TIMEOUT=${FDP_TIMEOUT:-120}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

XFER="$top_builddir/tests/fabric/rdm_xfer"
[ -x "$XFER" ] || fdp_fail "$XFER not built (make check builds it)"
sock=/tmp/fdp-stall-$$.sock
trap 'rm -f "$sock"' EXIT INT TERM
faults="FI_DPDK_DROP=0.1 FI_DPDK_SEED=11"
srv="$faults FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
cli="$faults FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"
args="-n 1 -b 16777216 -s 65536 -w 8 -S 1000 -T 90"

port=$(fdp_oob_port 21)
rm -f "$sock"
slog=$(mktemp)
# shellcheck disable=SC2086
env $srv timeout "$FDP_TIMEOUT" "$XFER" server -P "$port" $args >"$slog" 2>&1 &
spid=$!
# memif sockets are abstract names (DPDK 22.11): wait until the server listens
for _ in $(seq 100); do grep -q "@$sock\$" /proc/net/unix && break; sleep 0.1; done
# shellcheck disable=SC2086
env $cli timeout "$FDP_TIMEOUT" "$XFER" client -P "$port" $args 2>&1
crc=$?
wait "$spid"
src=$?
echo "== stall: client rc=$crc server rc=$src"
cat "$slog"
rm -f "$slog"
[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || fdp_fail "transfer with a stalled application"
echo "PASS"
