#!/bin/sh
# fabric_pingpong.sh BUILDDIR - in one run, fi_pingpong 64 B one-way latency
# and 64 KiB bandwidth over: dpdk DGRAM (memif), dpdk;ofi_rxd RDM (memif),
# native dpdk RDM (memif, when the build offers it), shm, tcp and udp.
# Each cell is the median of RUNS runs (default 5). Not a test: numbers
# vary with machine load; run it on a quiet machine.
set -u
builddir=$(cd "${1:-.}" && pwd)
RUNS=${RUNS:-5}
LAT_ITERS=${LAT_ITERS:-20000}
BW_ITERS=${BW_ITERS:-2000}
export FI_PROVIDER_PATH="$builddir/src/fabric/.libs"
[ -e "$FI_PROVIDER_PATH/libdpdk-fi.so" ] || { echo "build $FI_PROVIDER_PATH/libdpdk-fi.so first" >&2; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing (libfabric-bin)" >&2; exit 1; }
unset FI_DPDK_DROP FI_DPDK_DUP FI_DPDK_REORDER FI_PROVIDER
port=$(( 30000 + $$ % 20000 ))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# one_run PROV EP SIZE ITERS FIELD DPDK(0/1) -> prints the value or "fail"
one_run() {
	prov=$1 ep=$2 size=$3 iters=$4 field=$5 dpdk=$6
	port=$((port + 1))
	senv="" cenv=""
	if [ "$dpdk" = 1 ]; then
		sock="$tmp/m$port.sock"
		# the dpdk;ofi_rxd row: the provider offers DGRAM to ofi_rxd
		[ "$prov" = "dpdk;ofi_rxd" ] && senv="FI_DPDK_RXD=1"
		cenv="$senv FI_DPDK_DEVICE=net_memif0,role=client,socket=$sock FI_DPDK_IP=198.18.0.2/15"
		senv="$senv FI_DPDK_DEVICE=net_memif0,role=server,socket=$sock FI_DPDK_IP=198.18.0.1/15"
	fi
	# shellcheck disable=SC2086
	env $senv timeout 120 fi_pingpong -p "$prov" -e "$ep" -B "$port" -S "$size" -I "$iters" \
		>"$tmp/srv" 2>&1 &
	spid=$!
	sleep 1
	# shellcheck disable=SC2086
	env $cenv timeout 120 fi_pingpong -p "$prov" -e "$ep" -P "$port" -S "$size" -I "$iters" \
		127.0.0.1 >"$tmp/cli" 2>&1
	crc=$?
	wait "$spid"
	if [ $crc -ne 0 ]; then
		echo fail
		return
	fi
	awk -v f="$field" '$1 ~ /^[0-9.]+[kmg]?$/ && $3 ~ /^=/ { v = $f } END { print (v == "" ? "fail" : v) }' "$tmp/cli"
}

median() {
	tr ' ' '\n' | grep -v '^$' | grep -v fail | sort -g | awk '
		{ a[NR] = $1 } END {
			if (NR == 0) { print "fail"; exit }
			if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# cell PROV EP SIZE ITERS FIELD DPDK
cell() {
	vals=""
	i=0
	while [ $i -lt "$RUNS" ]; do
		vals="$vals $(one_run "$@")"
		i=$((i + 1))
	done
	echo "$vals" | median
}

rows="dpdk|dgram|1|dpdk DGRAM (memif)
dpdk;ofi_rxd|rdm|1|dpdk;ofi_rxd RDM (memif)"
if FI_DPDK_DEVICE=net_ring0 FI_DPDK_IP=198.18.0.1/15 timeout 30 fi_info -p dpdk -t FI_EP_RDM 2>/dev/null |
	grep -q '^provider: dpdk$'; then
	rows="$rows
dpdk|rdm|1|dpdk native RDM (memif)"
else
	echo "(native dpdk RDM endpoint not in this build: row skipped)"
fi
rows="$rows
shm|rdm|0|shm RDM
tcp|rdm|0|tcp;ofi_rxm RDM
udp|rdm|0|udp;ofi_rxd RDM"

echo "fi_pingpong, median of $RUNS runs; latency = one-way usec/xfer at 64 B ($LAT_ITERS iterations),"
echo "bandwidth = MB/s at 64 KiB ($BW_ITERS iterations); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-28s %14s %16s\n' "path" "64 B lat (us)" "64 KiB (MB/s)"
echo "$rows" | while IFS='|' read -r prov ep dpdk label; do
	lat=$(cell "$prov" "$ep" 64 "$LAT_ITERS" 7 "$dpdk")
	if [ "$ep" = dgram ]; then
		bw="n/a (1 frame)"
	else
		bw=$(cell "$prov" "$ep" 65536 "$BW_ITERS" 6 "$dpdk")
	fi
	printf '%-28s %14s %16s\n' "$label" "$lat" "$bw"
done
