#!/bin/sh
# A send that completed must reach its peer even when the sender closes its
# endpoint at once (fabtests' fi_msg_inject -A inj_complete lost its one
# message that way): rdm_close over a net_memif pair, the client opening a
# fresh native RDM endpoint per round, sending one message (fi_inject;
# fi_sendmsg with FI_INJECT_COMPLETE; a default fi_sendmsg) and closing it
# right after the call or its completion. The client drops 30 % of its
# frames (FI_DPDK_DROP), so most rounds need a retransmission after the
# completion; the first one also waits for ARP. The server must get every
# message. Last, the fi_rdm_multi_client pattern without injected loss: the
# server answers each message, the client closes as soon as fi_cq_sread
# returned the answer, and the server's send must complete without error
# (the closing endpoint sends the ack it owes).
FDP_TIMEOUT=${FDP_TIMEOUT:-120}
. "${top_srcdir:-$(dirname "$0")/../..}/tests/fabric/fabric_lib.sh"
fdp_require

BIN="$top_builddir/tests/fabric/rdm_close"
[ -x "$BIN" ] || fdp_fail "$BIN not built (make check builds it)"
sock=/tmp/fdp-close-$$.sock
trap 'rm -f "$sock"' EXIT INT TERM
srv="FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
cli="FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"

memif_ready() {
	for _ in $(seq 100); do grep -q "@$sock\$" /proc/net/unix && return 0; sleep 0.1; done
}

run() {
	mode=$1 rounds=$2 port=$3
	rm -f "$sock"
	slog=$(mktemp) clog=$(mktemp)
	# shellcheck disable=SC2086
	env $srv timeout "$FDP_TIMEOUT" "$BIN" server -P "$port" -n "$rounds" -m "$mode" -T 60 >"$slog" 2>&1 &
	spid=$!
	memif_ready
	faults="FI_DPDK_DROP=0.3 FI_DPDK_SEED=11"
	[ "$mode" = reply ] && faults=
	# shellcheck disable=SC2086
	env $cli $faults timeout "$FDP_TIMEOUT" \
		"$BIN" client -P "$port" -n "$rounds" -m "$mode" -T 60 >"$clog" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	grep -v '^libfabric:' "$clog" "$slog"
	rm -f "$slog" "$clog"
	echo "== $mode: client rc=$crc server rc=$src"
	[ "$crc" -eq 0 ] || fdp_fail "$mode: client failed"
	[ "$src" -eq 0 ] || fdp_fail "$mode: messages lost after the sender closed its endpoint"
}

run inject 20 "$(fdp_oob_port 21)"
run injcomp 20 "$(fdp_oob_port 22)"
run sendmsg 10 "$(fdp_oob_port 23)"
run reply 20 "$(fdp_oob_port 24)"
echo "PASS"
