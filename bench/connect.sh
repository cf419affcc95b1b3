#!/bin/sh
# What the negotiation costs a connection: bench/connect (connect + 64-byte
# exchange each way + close, one connection at a time) on the kernel, then with
# both ends launched and FABSOCK_TCP_ACCEL=1 (the same destination, so the
# outcome cache is warm after the first connection), blocking and non-blocking
# connect. Target (issue #15): connect+negotiate+exchange ≤ 1.5× the kernel's
# connect+exchange.
#
# usage: bench/connect.sh [BUILDDIR]    (default: $top_builddir, else .)
# environment: N connections per run (default 500), FABSOCK_PROVIDERS (shm),
#   PIN (1: server on CPU 0, client on CPU 1, as bench/apps.sh; with 2 CPUs or
#   more and taskset)
set -u
b=${1:-${top_builddir:-.}}
b=$(cd "$b" && pwd) || exit 2
bin="$b/bench/connect"
launcher="$b/tools/fabsock"
n=${N:-500}
for f in "$bin" "$launcher"; do
	[ -x "$f" ] || { echo "connect.sh: $f not built (run make in $b)" >&2; exit 2; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-connect.XXXXXX") || exit 1
spid=""
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT

pin_srv= pin_cli=
if [ "${PIN:-1}" = 1 ] && [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null; then
	pin_srv="taskset -c 0" pin_cli="taskset -c 1"
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # label, wrapper words...
	label=$1
	shift
	p=$(port)
	$pin_srv "$@" "$bin" server "$p" >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	i=0
	until grep -q listening "$tmp/srv.out" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
		[ $i -lt 200 ] || { echo "server did not start"; exit 1; }
	done
	for mode in "" nb; do
		echo "== $label ${mode:-blocking}"
		$pin_cli "$@" "$bin" client "$p" "$n" $mode || echo "(client failed)"
	done
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	spid=""
}

export FABSOCK_PROVIDERS=${FABSOCK_PROVIDERS:-shm}
run kernel env
run "launched, FABSOCK_TCP_ACCEL=1" env FABSOCK_TCP_ACCEL=1 "$launcher" --
