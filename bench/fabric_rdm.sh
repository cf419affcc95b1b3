#!/bin/sh
# The dpdk provider's native FI_EP_RDM endpoint against ofi_rxd layered on
# the provider's DGRAM endpoint ("dpdk;ofi_rxd"), in the same run, over a
# net_memif pair between two processes: fi_pingpong 64 B latency (one-way,
# fi_pingpong's usec/xfer) and 64 KiB bandwidth (one direction:
# size / usec per transfer). Runs alternate native / rxd so machine noise
# hits both alike; prints medians over ROUNDS runs.
# Targets: native <= 2 us one-way at 64 B and >= 1.5x faster than
# rxd; 64 KiB >= 1 GB/s.
#
# usage: bench/fabric_rdm.sh [BUILDDIR]     (default: $top_builddir, else .)
# environment: ROUNDS (default 5), LAT_ITERS (20000), BW_ITERS (2000)
#
# `-p dpdk -e rdm` is the native endpoint; "dpdk;ofi_rxd" exists only with
# FI_DPDK_RXD=1 (the provider offers its DGRAM endpoint to ofi_rxd then).
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
rounds=${ROUNDS:-5}
lat_iters=${LAT_ITERS:-20000}
bw_iters=${BW_ITERS:-2000}
[ -e "$b/src/fabric/.libs/libdpdk-fi.so" ] ||
	{ echo "fabric_rdm.sh: $b/src/fabric/.libs/libdpdk-fi.so not built" >&2; exit 2; }
command -v fi_pingpong >/dev/null 2>&1 ||
	{ echo "fabric_rdm.sh: fi_pingpong not installed (apt-get install libfabric-bin)" >&2; exit 2; }
export FI_PROVIDER_PATH="$b/src/fabric/.libs"
unset FI_DPDK_DROP FI_DPDK_DUP FI_DPDK_REORDER FI_DPDK_RXD FI_PROVIDER
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fdp-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
# a control port nobody holds right now (other tests run alongside)
free_port() {
	"$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# pp PROVNAME EXTRA_ENV SIZE ITERS: prints "usec_per_xfer" of one run, or "fail"
pp() {
	prov=$1 xenv=$2 size=$3 iters=$4
	port=$(free_port)
	sock="$tmp/memif.sock"
	rm -f "$sock"
	env $xenv FI_DPDK_DEVICE="net_memif0,role=server,socket=$sock" \
		FI_DPDK_IP=198.18.0.1/15 timeout 120 \
		fi_pingpong -p "$prov" -e rdm -B "$port" -S "$size" -I "$iters" \
		>"$tmp/srv" 2>&1 &
	spid=$!
	# memif sockets are abstract (DPDK 22.11): wait until the server listens
	for _ in $(seq 100); do grep -q "@$sock\$" /proc/net/unix && break; sleep 0.1; done
	env $xenv FI_DPDK_DEVICE="net_memif0,role=client,socket=$sock" \
		FI_DPDK_IP=198.18.0.2/15 timeout 120 \
		fi_pingpong -p "$prov" -e rdm -P "$port" -S "$size" -I "$iters" 127.0.0.1 \
		>"$tmp/cli" 2>&1
	wait "$spid"
	if ! awk 'NR == 2 && $3 ~ /^=/ { print $7; ok = 1 } END { if (!ok) { print "fail"; exit 1 } }' "$tmp/cli"; then
		echo "fabric_rdm.sh: $prov $size B run failed:" >&2
		tail -n 3 "$tmp/cli" "$tmp/srv" >&2
	fi
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else print v[int((NR + 1) / 2)] }'; }

: >"$tmp/nat_lat"; : >"$tmp/rxd_lat"; : >"$tmp/nat_bw"; : >"$tmp/rxd_bw"
for r in $(seq "$rounds"); do
	pp dpdk '' 64 "$lat_iters" >>"$tmp/nat_lat"
	pp 'dpdk;ofi_rxd' FI_DPDK_RXD=1 64 "$lat_iters" >>"$tmp/rxd_lat"
	pp dpdk '' 65536 "$bw_iters" >>"$tmp/nat_bw"
	pp 'dpdk;ofi_rxd' FI_DPDK_RXD=1 65536 "$bw_iters" >>"$tmp/rxd_bw"
	echo "round $r: native $(tail -n 1 "$tmp/nat_lat") us, rxd $(tail -n 1 "$tmp/rxd_lat") us;" \
		"64 KiB native $(tail -n 1 "$tmp/nat_bw") us, rxd $(tail -n 1 "$tmp/rxd_bw") us" >&2
done
grep -q fail "$tmp"/*_lat "$tmp"/*_bw && echo "fabric_rdm.sh: some runs failed (counted out)" >&2
nl=$(grep -v fail "$tmp/nat_lat" | median); rl=$(grep -v fail "$tmp/rxd_lat" | median)
nb=$(grep -v fail "$tmp/nat_bw" | median); rb=$(grep -v fail "$tmp/rxd_bw" | median)
awk -v nl="$nl" -v rl="$rl" -v nb="$nb" -v rb="$rb" -v r="$rounds" 'BEGIN {
	printf "fi_pingpong over net_memif, medians of %d runs\n", r
	printf "%-22s %14s %14s %8s\n", "", "native dpdk", "dpdk;ofi_rxd", "speedup"
	printf "%-22s %14.2f %14.2f %7.2fx\n", "64 B one-way (us)", nl, rl, rl / nl
	printf "%-22s %14.0f %14.0f %7.2fx\n", "64 KiB (MB/s, 1 dir)", 65536 / nb, 65536 / rb, rb / nb
	printf "targets: native <= 2 us: %s; >= 1.5x rxd: %s; 64 KiB >= 1000 MB/s: %s\n",
		(nl <= 2) ? "met" : "MISSED", (rl / nl >= 1.5) ? "met" : "MISSED",
		(65536 / nb >= 1000) ? "met" : "MISSED"
}'
