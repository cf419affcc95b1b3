#!/bin/sh
# Peers of different users (a server as nobody, its client as root: nginx's
# default set-up; and the other way round): 20 connections, byte-exact, within a bound; each ends on
# the kernel, counted, with its reason at info level only. libfabric's shm
# refuses a peer whose 0600 region it cannot map, half-way: never hand it one.
# The same pair with both ends as nobody is accelerated over shm (the check is
# the owner, not the uid 0). At the default log level neither process prints
# anything. Then nginx (master root, workers of its default `user` line) with
# a launched curl, when nginx is installed. Needs root (setpriv).
. "$top_srcdir/tests/accel/lib.sh"
many="$top_builddir/tests/accel/many"
conns=20
status=0
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (runs a server as nobody)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv missing (util-linux)"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
grp=$(id -gn nobody)
as_nobody="setpriv --reuid nobody --regid $grp --clear-groups"
# the build tree must be readable by nobody
$as_nobody test -x "$many" || { echo "SKIP: $many not reachable as nobody"; exit 77; }

# log_env LEVEL: the environment for libfabsock's log level LEVEL ("": its default)
log_env() {
	if [ -n "$1" ]; then echo "FABSOCK_LOG=$1"; else echo "-u FABSOCK_LOG"; fi
}

# pair SERVER_WRAP CLIENT_WRAP LOG_LEVEL: 20 connections x 3 echoes, logs in $tmp
pair() {
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env $(log_env "$3") FABSOCK_NEGO_WAIT_MS=1000 MANY_TIMEOUT_S=30 timeout 40 \
		$1 "$launcher" -- "$many" server "$port" $conns >"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env $(log_env "$3") FABSOCK_NEGO_WAIT_MS=1000 MANY_TIMEOUT_S=30 timeout 40 \
		$2 "$launcher" -- "$many" client "$port" $conns 3 4096 >"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] || {
		echo "FAIL: client exit $crc, server exit $src (124: timed out, 139: SIGSEGV)"
		tail -n 5 "$tmp/cli.log" "$tmp/srv.log"; return 1; }
	grep -h '^client: ok' "$tmp/cli.out"
}

# quiet LOG...: nothing on stderr at the default log level
quiet() {
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "FAIL: $f: a launched process printed at the default log level:"
		head -n 5 "$f"
		return 1
	done
}

# 1. server nobody, client root
pair "$as_nobody" "" "" && quiet "$tmp/srv.log" "$tmp/cli.log" || status=1
if pair "$as_nobody" "" info; then
	for side in srv cli; do
		acc=$(counter "$tmp/$side.log" accelerated)
		fell=$(fsk_counter_sum fallback_prov_init "$tmp/$side.log")
		echo "nobody/root: $side: $acc accelerated, $fell on the kernel (prov_init)"
		[ $((acc + fell)) -eq $conns ] || { echo "FAIL: $side: outcome not counted for every connection"; status=1; }
		[ "$(warn_lines "$tmp/$side.log")" = 0 ] || { echo "FAIL: $side: warn lines"; grep 'warn\|error' "$tmp/$side.log"; status=1; }
	done
	grep -q 'runs as another user' "$tmp/cli.log" ||
		{ echo "FAIL: the client does not say why (another user)"; status=1; }
else
	status=1
fi

# 1b. the other way round: server root, client nobody
if pair "" "$as_nobody" info; then
	for side in srv cli; do
		acc=$(counter "$tmp/$side.log" accelerated)
		fell=$(fsk_counter_sum fallback_prov_init "$tmp/$side.log")
		echo "root/nobody: $side: $acc accelerated, $fell on the kernel (prov_init)"
		[ $((acc + fell)) -eq $conns ] || { echo "FAIL: $side: outcome not counted for every connection"; status=1; }
		[ "$(warn_lines "$tmp/$side.log")" = 0 ] || { echo "FAIL: $side: warn lines"; grep 'warn\|error' "$tmp/$side.log"; status=1; }
	done
else
	status=1
fi

# 2. both nobody: accelerated over shm
if pair "$as_nobody" "$as_nobody" info; then
	fsk_assert_all_accel "$tmp/cli.log" "nobody/nobody client" $conns shm
	fsk_assert_accel "$tmp/srv.log" "nobody/nobody server" $conns shm
else
	status=1
fi

# 3. nginx with its default user line (workers as nobody), master as root
if command -v nginx >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then
	port=$(free_port)
	mkdir -p "$tmp/www" "$tmp/ng"
	head -c 200000 /dev/urandom >"$tmp/www/blob"
	chmod -R a+rX "$tmp"
	cat >"$tmp/ng/nginx.conf" <<CONF
master_process on;
worker_processes 2;
pid $tmp/ng/nginx.pid;
error_log $tmp/ng/error.log info;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $tmp/ng/body;
	proxy_temp_path $tmp/ng/proxy;
	fastcgi_temp_path $tmp/ng/fcgi;
	uwsgi_temp_path $tmp/ng/uwsgi;
	scgi_temp_path $tmp/ng/scgi;
	server { listen 127.0.0.1:$port; root $tmp/www; }
}
CONF
	# nginx at the default log level (it must stay quiet), the client at info (its counters)
	env -u FABSOCK_LOG FABSOCK_NEGO_WAIT_MS=1000 timeout 60 "$launcher" -- nginx -c "$tmp/ng/nginx.conf" \
		-g 'daemon off;' >"$tmp/ng.out" 2>"$tmp/ng.err" &
	npid=$!
	pids="$pids $npid"
	fsk_wait_listen "$port" 100 || { echo "FAIL: nginx did not start"; cat "$tmp/ng.err" "$tmp/ng/error.log"; status=1; }
	want=$(fsk_sha "$tmp/www/blob")
	# curl deadlocks in its first setlocale() under the ASan runtime alone
	# (tests/real/curl.sh): in a sanitizer build Python's urllib fetches
	# fetch URL OUT: launched, libfabsock's log at info (its counters)
	if [ -n "$(fsk_asan_runtime)" ]; then
		fetch() { env FABSOCK_LOG=info FABSOCK_NEGO_WAIT_MS=1000 timeout 20 "$launcher" -- \
			"$FSK_PYTHON" -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=15) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())' "$1" "$2"; }
	else
		fetch() { env FABSOCK_LOG=info FABSOCK_NEGO_WAIT_MS=1000 timeout 20 "$launcher" -- \
			curl -sS -o "$2" "$1"; }
	fi
	i=0
	while [ $i -lt $conns ]; do
		fetch "http://127.0.0.1:$port/blob" "$tmp/got" 2>"$tmp/curl$i.log" ||
			{ echo "FAIL: fetch $i failed"; status=1; break; }
		[ "$(fsk_sha "$tmp/got")" = "$want" ] || { echo "FAIL: fetch $i: bytes differ"; status=1; break; }
		i=$((i + 1))
	done
	acc=$(fsk_counter_sum accelerated "$tmp"/curl*.log)
	fell=$(fsk_counter_sum fallback_prov_init "$tmp"/curl*.log)
	echo "nginx: $i of $conns fetches byte-exact; client: $acc accelerated, $fell on the kernel (prov_init)"
	[ $((acc + fell)) -eq $conns ] || { echo "FAIL: client: outcome not counted for every fetch"; status=1; }
	cat "$tmp"/curl*.log | grep -v ': info: ' | grep . && { echo "FAIL: the client printed more than info lines"; status=1; }
	# a launched wrk (keep-alive, 8 connections, 2 s): it ends by itself (no
	# spin, no hang) and every request is answered
	if command -v wrk >/dev/null 2>&1; then
		env FABSOCK_LOG=info FABSOCK_NEGO_WAIT_MS=1000 timeout 30 "$launcher" -- \
			wrk -t1 -c8 -d2s "http://127.0.0.1:$port/blob" >"$tmp/wrk.out" 2>"$tmp/wrk.log"
		wrc=$?
		reqs=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$tmp/wrk.out")
		echo "nginx: launched wrk: exit $wrc, ${reqs:-0} requests"
		if [ $wrc -ne 0 ] || [ "${reqs:-0}" -eq 0 ] || grep -q 'Socket errors\|Non-2xx' "$tmp/wrk.out"; then
			echo "FAIL: wrk against nginx:"; cat "$tmp/wrk.out"; tail -n 5 "$tmp/wrk.log"; status=1
		fi
		grep -v ': info: ' "$tmp/wrk.log" | grep . && { echo "FAIL: wrk's libfabsock printed more than info lines"; status=1; }
	else
		echo "wrk not installed: the wrk part not run (./quickstart check installs it)"
	fi
	master=$(pgrep -x -P $npid nginx | head -n 1)
	wusers=$(ps -o user= --ppid "${master:-0}" 2>/dev/null | sort -u | tr '\n' ' ')
	echo "nginx workers run as: ${wusers:-?}"
	kill -QUIT $npid 2>/dev/null
	wait $npid 2>/dev/null
	if grep -q 'exited on signal' "$tmp/ng/error.log"; then
		echo "FAIL: an nginx worker crashed:"; grep 'exited on signal' "$tmp/ng/error.log"; status=1
	fi
	quiet "$tmp/ng.err" || status=1
else
	echo "nginx or curl not installed: the nginx part not run (./quickstart check installs it)"
fi
exit $status
