# Shared by the acceleration tests (sourced): launcher, ports, bounded waits.
set -u
. "$top_srcdir/tests/preload/lib.sh"
launcher="$top_builddir/tools/fabsock"
echo_py="$top_srcdir/tests/accel/echo.py"
python=$(command -v python3) || { echo "SKIP: python3 missing"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-accel.XXXXXX")
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
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
