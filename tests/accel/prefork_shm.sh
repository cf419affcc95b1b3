#!/bin/sh
# A pre-fork server on shm (prefork_lib.sh): nginx, master_process on, 2
# workers, its default user line (master root, workers nobody), launched
# with --provider shm. The listener opens shm in the master; each worker
# opens an endpoint of its own when its first accepted connection needs it.
# A launched curl (3 fetches) and a launched wrk (8 connections, every body
# compared) run as nobody too: libfabric's shm maps a peer's region only
# when both run as the same user (users.sh). Bodies byte-exact; each
# worker's counters show connections over shm, the clients' all of theirs;
# a connection that stays on the kernel fails the test. Needs root.
. "$top_srcdir/tests/accel/lib.sh"
for c in nginx wrk curl setpriv; do
	command -v $c >/dev/null || { echo "SKIP: $c missing (./quickstart check installs it)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (nginx's workers and the clients run as nobody)"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody (nginx's default user line)"; exit 77; }
as_nobody="setpriv --reuid nobody --regid $(id -gn nobody) --clear-groups"
$as_nobody test -x "$launcher" || { echo "SKIP: $launcher not reachable as nobody"; exit 77; }
# the clients' python (a sanitizer build fetches with it): one nobody can run
ng_python=/usr/bin/python3
[ -z "$(fsk_asan_runtime)" ] || $as_nobody "$ng_python" -c '' ||
	{ echo "SKIP: $ng_python not runnable as nobody"; exit 77; }
status=0

# run_on_shm NAME WRAP CMD...: CMD launched on shm, as WRAP says (nothing:
# the caller's user), logs in $tmp/NAME.*; replaces the calling shell
run_on_shm() {
	_n=$1 _wrap=$2
	shift 2
	# shellcheck disable=SC2086 # WRAP is a command line
	exec env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=5000 FABSOCK_LOG=info timeout 60 \
		$_wrap "$launcher" --provider shm -- "$@" >"$tmp/$_n.out" 2>"$tmp/$_n.log"
}
ng_server() { _name=$1; shift; run_on_shm "$_name" "" "$@"; }
ng_client() { _name=$1; shift; run_on_shm "$_name" "$as_nobody" "$@"; }
ng_prov=shm
. "$top_srcdir/tests/accel/prefork_lib.sh"
trap '_rc=$?; ng_stop; (exit $_rc); cleanup' EXIT

ng_start
ng_clients
ng_stop
wait
ng_check_workers
[ $status -eq 0 ] && echo PASS
exit $status
