# Shared by the pre-fork server tests (sourced after lib.sh): nginx with
# master_process on, 2 workers and its default user line (master root,
# workers nobody), and the counters that show where each process's
# connections went. The caller defines, before calling ng_start:
#   ng_server NAME CMD...  run CMD launched, stdout/stderr in $tmp/NAME.out
#   ng_client NAME CMD...  and $tmp/NAME.log, FABSOCK_LOG=info; replaces the
#                          calling shell (`(ng_client ...)`, `ng_server ... &`)
#   ng_prov                the provider every connection must be on
# and calls ng_stop from its EXIT trap.

# pid_counter LOG PID NAME: counter NAME as process PID dumped it at exit
# into LOG (a shared log: nginx's processes), 0 when absent
pid_counter() {
	_v=$(grep -a "^fabsock\[$2\]: info: counter $3 = " "$1" | tail -n1 | sed 's/.* = //')
	echo "${_v:-0}"
}
# fallbacks LOG [PID]: the fallback_* counters other than 0 ("name=N ..."),
# of process PID (any when not given), plain peers (clients not launched)
# left out
fallbacks() {
	grep -a "^fabsock\[${2:-[0-9]*}\]: info: counter fallback_[a-z_]* = [1-9]" "$1" |
		grep -v 'fallback_plain_peer' | sed 's/.*counter //; s/ = /=/' | tr '\n' ' '
}
# all_on LOG WHAT N: the process logging to LOG had N or more connections,
# every one over $ng_prov, none on the kernel
all_on() {
	_req=$(counter "$1" accel_requested)
	_acc=$(counter "$1" "conn_accel_$ng_prov")
	_fell=$(fallbacks "$1")
	echo "$2: $_req connection(s), $_acc over $ng_prov${_fell:+, on the kernel: $_fell}"
	[ "$_req" -ge "$3" ] && [ "$_acc" -eq "$_req" ] && [ -z "$_fell" ] && return 0
	echo "FAIL: $2: not every connection over $ng_prov"
	grep -a 'stays on the kernel\|warn\|error' "$1" | head -n 5
	return 1
}

ng="$tmp/ng"
ng_stop() {
	[ -s "$ng/nginx.pid" ] || return 0
	_m=$(cat "$ng/nginx.pid")
	_w=$(ps -o pid= --ppid "$_m" 2>/dev/null)
	kill -QUIT "$_m" 2>/dev/null
	_i=0
	while kill -0 "$_m" 2>/dev/null && [ $_i -lt 100 ]; do sleep 0.1; _i=$((_i + 1)); done
	for _p in $_m $_w; do kill -9 "$_p" 2>/dev/null; done
	rm -f "$ng/nginx.pid"
}

# ng_start: nginx launched on a free port ($port) serving $tmp/www/blob
# (100 kB); sets master and workers; status=1 when the workers are not 2
# processes of user nobody
ng_start() {
	port=$(free_port)
	mkdir -p "$tmp/www" "$ng" "$tmp/got"
	head -c 100000 /dev/urandom >"$tmp/www/blob"
	# the workers (nobody) read the files; clients of another user write theirs
	chmod -R a+rX "$tmp"
	chmod 1777 "$tmp/got"
	cat >"$ng/nginx.conf" <<CONF
master_process on;
worker_processes 2;
pid $ng/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
	access_log off;
	keepalive_requests 1000000; # wrk keeps its 8 connections to the end
	client_body_temp_path $ng/body;
	proxy_temp_path $ng/proxy;
	fastcgi_temp_path $ng/fcgi;
	uwsgi_temp_path $ng/uwsgi;
	scgi_temp_path $ng/scgi;
	server { listen 127.0.0.1:$port; root $tmp/www; }
}
CONF
	ng_server ng nginx -c "$ng/nginx.conf" -g 'daemon off;' &
	pids="$pids $!"
	fsk_wait_listen "$port" 150 || { echo "FAIL: nginx did not listen"; tail -n 5 "$tmp/ng.log"; exit 1; }
	_i=0
	while [ "$(ps -o pid= --ppid "$(cat "$ng/nginx.pid" 2>/dev/null || echo 0)" | wc -l)" -lt 2 ] && [ $_i -lt 100 ]; do
		sleep 0.1
		_i=$((_i + 1))
	done
	master=$(cat "$ng/nginx.pid")
	workers=$(ps -o pid= --ppid "$master" | tr -d ' ' | tr '\n' ' ')
	echo "nginx: master $master ($(ps -o user= -p "$master")), workers $workers($(ps -o user= --ppid "$master" | sort -u | tr '\n' ' '))"
	[ "$(echo "$workers" | wc -w)" -eq 2 ] && [ "$(ps -o user= --ppid "$master" | sort -u)" = nobody ] ||
		{ echo "FAIL: not 2 workers of user nobody"; status=1; }
}

# ng_fetch NAME URL OUT: a launched curl; in a sanitizer build Python's
# urllib (curl deadlocks in its first setlocale() under the ASan runtime
# alone, tests/real/curl.sh), $ng_python (default: the tests' python)
ng_fetch() {
	if [ -n "$(fsk_asan_runtime)" ]; then
		ng_client "$1" "${ng_python:-$python}" -c 'import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=60) as r, open(sys.argv[2], "wb") as f:
    f.write(r.read())' "$2" "$3"
	else
		ng_client "$1" curl -sS --max-time 60 -o "$3" "$2"
	fi
}

# ng_clients: 3 launched fetches (sha256 of each body) and a launched wrk (2
# threads, 8 keep-alive connections, 3 s, every body compared), each
# connection over $ng_prov; sets status=1 otherwise
ng_clients() {
	_want=$(fsk_sha "$tmp/www/blob")
	for _k in 1 2 3; do
		(ng_fetch curl$_k "http://127.0.0.1:$port/blob" "$tmp/got/$_k") ||
			{ echo "FAIL: curl $_k"; tail -n 3 "$tmp/curl$_k.log"; status=1; }
		[ "$(fsk_sha "$tmp/got/$_k" 2>/dev/null)" = "$_want" ] || { echo "FAIL: curl $_k: the body differs"; status=1; }
		all_on "$tmp/curl$_k.log" "curl $_k" 1 || status=1
	done
	(ng_client wrk wrk -t2 -c8 -d3s --timeout 20s -s "$top_srcdir/tests/accel/wrk_check.lua" \
		"http://127.0.0.1:$port/blob" -- "$tmp/www/blob") || { echo "FAIL: wrk exit $?"; status=1; }
	_reqs=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$tmp/wrk.out")
	_exact=$(sed -n 's/^bodies: \([0-9]*\) exact, .*/\1/p' "$tmp/wrk.out")
	echo "wrk: ${_reqs:-0} requests, $(grep '^bodies:' "$tmp/wrk.out"), $(grep 'Requests/sec' "$tmp/wrk.out" | tr -s ' ')"
	if [ "${_reqs:-0}" -eq 0 ] || [ "${_exact:-0}" -ne "$_reqs" ] || grep -q 'Socket errors\|Non-2xx' "$tmp/wrk.out"; then
		echo "FAIL: wrk against nginx:"; cat "$tmp/wrk.out"; status=1
	fi
	# wrk opens and closes one connection of its own first (a blocking
	# connect, a probe): it ends during the negotiation, on the kernel,
	# counted by the worker as fallback_io; its 8 connections must all be
	# over $ng_prov
	_acc=$(counter "$tmp/wrk.log" "conn_accel_$ng_prov")
	_fell=$(fallbacks "$tmp/wrk.log")
	echo "wrk: $(counter "$tmp/wrk.log" accel_requested) connection(s) (the probe included), $_acc over $ng_prov${_fell:+, on the kernel: $_fell}"
	[ "$_acc" -eq 8 ] && [ -z "$_fell" ] || { echo "FAIL: wrk's connections not over $ng_prov"; status=1; }
}

# ng_check_workers: after ng_stop (the workers dumped their counters at
# exit), each worker carried connections over $ng_prov, 11 in all (3 curl,
# 8 wrk), none on the kernel but wrk's probe; sets status=1 otherwise
ng_check_workers() {
	_total=0
	_probes=0
	for _w in $workers; do
		_acc=$(pid_counter "$tmp/ng.log" "$_w" "conn_accel_$ng_prov")
		_fell=$(fallbacks "$tmp/ng.log" "$_w")
		echo "nginx worker $_w: $_acc connection(s) over $ng_prov${_fell:+, on the kernel: $_fell}"
		[ "$_acc" -ge 1 ] || { echo "FAIL: worker $_w: no connection over $ng_prov"; status=1; }
		_total=$((_total + _acc))
		_probes=$((_probes + $(pid_counter "$tmp/ng.log" "$_w" fallback_io)))
		[ -z "$(echo "$_fell" | sed 's/fallback_io=1 //')" ] || { echo "FAIL: worker $_w: connections on the kernel"; status=1; }
	done
	[ "$_total" -eq 11 ] && [ "$_probes" -le 1 ] ||
		{ echo "FAIL: the workers carried $_total connections over $ng_prov (want 3 curl + 8 wrk), $_probes ended while negotiating (want wrk's probe at most)"; status=1; }
	grep -a 'exited on signal\|\[alert\]\|\[emerg\]' "$tmp/ng.log" && { echo "FAIL: nginx"; status=1; }
	return 0
}
