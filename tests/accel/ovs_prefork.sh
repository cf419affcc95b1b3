#!/bin/sh
# Servers that fork, on the dpdk provider through Open vSwitch (ovs_lib.sh
# starts OVS-DPDK from scratch and removes everything at the end); every
# program launched with `fabsock --ovs BRIDGE --provider dpdk`:
#   1. nginx, master_process on, 2 workers, its default user line (master
#      root, workers nobody): the master only listens and claims no port;
#      each worker claims a port of its own when its first accepted
#      connection needs the fabric. A launched curl (3 fetches) and a
#      launched wrk (8 keep-alive connections, every body compared) get
#      byte-exact responses; the counters of each worker show connections
#      over dpdk, the clients' show all of theirs over dpdk, no fallback;
#   2. redis BGSAVE under load: redis-server, redis-benchmark and
#      redis_load.py (every reply checked) each on a port of their own; each
#      BGSAVE forks the server, which moves its connections to the kernel;
#      the loads end without an error, the server's connections were on dpdk.
# A connection that silently stays on the kernel fails the test.
. "$top_srcdir/tests/accel/lib.sh"
for c in nginx wrk curl redis-server redis-cli redis-benchmark; do
	command -v $c >/dev/null || { echo "SKIP: $c missing (./quickstart check installs it)"; exit 77; }
done
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody (nginx's default user line)"; exit 77; }
ovs_ports=4 # 2 nginx workers and a client; then 3 redis processes
ovs_subnet=198.18.92.0/24
launch_timeout=150
. "$top_srcdir/tests/accel/ovs_lib.sh"

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
# all_dpdk LOG WHAT N: the process logging to LOG had N or more connections,
# every one over dpdk, none on the kernel
all_dpdk() {
	_req=$(counter "$1" accel_requested)
	_acc=$(counter "$1" conn_accel_dpdk)
	_fell=$(fallbacks "$1")
	echo "$2: $_req connection(s), $_acc over dpdk${_fell:+, on the kernel: $_fell}"
	[ "$_req" -ge "$3" ] && [ "$_acc" -eq "$_req" ] && [ -z "$_fell" ] && return 0
	echo "FAIL: $2: not every connection over dpdk"
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
redis_stop() {
	[ -s "$tmp/redis.pid" ] && kill -9 "$(cat "$tmp/redis.pid")" 2>/dev/null
	rm -f "$tmp/redis.pid"
}
stop_servers() { ng_stop; redis_stop; }
ovs_stop_first=stop_servers

# ---- 1. nginx: master and 2 workers ------------------------------------------
port=$(free_port)
mkdir -p "$tmp/www" "$ng"
head -c 100000 /dev/urandom >"$tmp/www/blob"
# the workers (nobody) read the files
chmod -R a+rX "$tmp"
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
launch ng nginx -c "$ng/nginx.conf" -g 'daemon off;' &
pids="$pids $!"
fsk_wait_listen "$port" 150 || { echo "FAIL: nginx did not listen"; tail -n 5 "$tmp/ng.log"; exit 1; }
i=0
while [ "$(ps -o pid= --ppid "$(cat "$ng/nginx.pid" 2>/dev/null || echo 0)" | wc -l)" -lt 2 ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
master=$(cat "$ng/nginx.pid")
workers=$(ps -o pid= --ppid "$master" | tr -d ' ' | tr '\n' ' ')
echo "nginx: master $master ($(ps -o user= -p "$master")), workers $workers($(ps -o user= --ppid "$master" | sort -u | tr '\n' ' ')); pool: $(sh "$fsk_ovs" status "$br" | grep -c held) port(s) held"
[ "$(ps -o user= --ppid "$master" | sort -u)" = nobody ] || { echo "FAIL: the workers do not run as nobody"; status=1; }
[ -z "$(holder 0)" ] || { echo "FAIL: a port is held before any connection (the master claimed one)"; status=1; }

want=$(fsk_sha "$tmp/www/blob")
for k in 1 2 3; do
	(launch curl$k curl -sS --max-time 60 -o "$tmp/got$k" "http://127.0.0.1:$port/blob") ||
		{ echo "FAIL: curl $k"; tail -n 3 "$tmp/curl$k.log"; status=1; }
	[ "$(fsk_sha "$tmp/got$k" 2>/dev/null)" = "$want" ] || { echo "FAIL: curl $k: the body differs"; status=1; }
	all_dpdk "$tmp/curl$k.log" "curl $k (port $(claimed "$tmp/curl$k.log"))" 1 || status=1
done
(launch wrk wrk -t2 -c8 -d3s --timeout 20s -s "$top_srcdir/tests/accel/wrk_check.lua" \
	"http://127.0.0.1:$port/blob" -- "$tmp/www/blob") || { echo "FAIL: wrk exit $?"; status=1; }
reqs=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' "$tmp/wrk.out")
exact=$(sed -n 's/^bodies: \([0-9]*\) exact, .*/\1/p' "$tmp/wrk.out")
echo "wrk (port $(claimed "$tmp/wrk.log")): ${reqs:-0} requests, $(grep '^bodies:' "$tmp/wrk.out"), $(grep 'Requests/sec' "$tmp/wrk.out" | tr -s ' ')"
if [ "${reqs:-0}" -eq 0 ] || [ "${exact:-0}" -ne "$reqs" ] || grep -q 'Socket errors\|Non-2xx' "$tmp/wrk.out"; then
	echo "FAIL: wrk against nginx:"; cat "$tmp/wrk.out"; status=1
fi
# wrk opens and closes one connection of its own first (a blocking connect,
# a probe): it ends during the negotiation, on the kernel, counted by the
# worker as fallback_io; its 8 connections must all be over dpdk
wacc=$(counter "$tmp/wrk.log" conn_accel_dpdk)
wfell=$(fallbacks "$tmp/wrk.log")
echo "wrk: $(counter "$tmp/wrk.log" accel_requested) connection(s) (the probe included), $wacc over dpdk${wfell:+, on the kernel: $wfell}"
[ "$wacc" -eq 8 ] && [ -z "$wfell" ] || { echo "FAIL: wrk's connections not over dpdk"; status=1; }
ng_stop
wait
ports_of_workers=$(grep -a 'FI_DPDK_POOL=[^ ]*: port [0-9]*' "$tmp/ng.log" | sed 's/.*: port \([0-9]*\) .*/\1/' | sort -u | tr '\n' ' ')
total=0
probes=0
for w in $workers; do
	acc=$(pid_counter "$tmp/ng.log" "$w" conn_accel_dpdk)
	fell=$(fallbacks "$tmp/ng.log" "$w")
	echo "nginx worker $w: $acc connection(s) over dpdk${fell:+, on the kernel: $fell}"
	[ "$acc" -ge 1 ] || { echo "FAIL: worker $w: no connection over dpdk"; status=1; }
	total=$((total + acc))
	probes=$((probes + $(pid_counter "$tmp/ng.log" "$w" fallback_io)))
	[ -z "$(echo "$fell" | sed 's/fallback_io=1 //')" ] || { echo "FAIL: worker $w: connections on the kernel"; status=1; }
done
[ "$total" -eq 11 ] && [ "$probes" -le 1 ] ||
	{ echo "FAIL: the workers carried $total connections over dpdk (want 3 curl + 8 wrk), $probes ended while negotiating (want wrk's probe at most)"; status=1; }
echo "nginx: ports claimed by its processes: $ports_of_workers"
[ "$(echo "$ports_of_workers" | wc -w)" -eq 2 ] || { echo "FAIL: the 2 workers did not claim 2 ports"; status=1; }
grep -a 'exited on signal\|\[alert\]\|\[emerg\]' "$tmp/ng.log" && { echo "FAIL: nginx"; status=1; }

# ---- 2. redis BGSAVE under load ----------------------------------------------
rport=$(free_port)
launch redis redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
	--daemonize no --pidfile "$tmp/redis.pid" --logfile "$tmp/redis-server.log" &
pids="$pids $!"
fsk_wait_listen "$rport" 150 || { echo "FAIL: redis-server did not listen"; exit 1; }
# redis-cli is not launched (no port each): a plain client of the server
cli() { timeout 30 redis-cli -p "$rport" "$@"; }
launch bench redis-benchmark -p "$rport" -c 20 -n 200000 -r 10000 -d 64 -t set,get -q &
bench=$!
rm -f "$tmp/stop"
launch load "$python" "$top_srcdir/tests/accel/redis_load.py" "$rport" 8 "$tmp/stop" &
load=$!
i=0
until [ "$(counter "$tmp/load.log" conn_accel_dpdk)" != 0 ] || grep -q 'negotiat\|fabric' "$tmp/load.log" 2>/dev/null ||
	[ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
sleep 3
saves=0
while [ $saves -lt 2 ] && kill -0 $load 2>/dev/null; do
	[ "$(cli BGSAVE)" = "Background saving started" ] || { echo "FAIL: BGSAVE refused"; status=1; break; }
	i=0
	until cli INFO persistence | grep -q 'rdb_bgsave_in_progress:0'; do
		sleep 0.1
		i=$((i + 1))
		[ $i -lt 300 ] || { echo "FAIL: BGSAVE did not end within 30 s"; status=1; break; }
	done
	cli INFO persistence | grep -q 'rdb_last_bgsave_status:ok' || { echo "FAIL: BGSAVE failed"; status=1; }
	saves=$((saves + 1))
	sleep 1
done
touch "$tmp/stop"
wait $load || { echo "FAIL: redis_load.py: $(cat "$tmp/load.out")"; status=1; }
wait $bench || { echo "FAIL: redis-benchmark"; cat "$tmp/bench.out"; status=1; }
grep -qi 'error' "$tmp/bench.out" && { echo "FAIL: redis-benchmark reported errors"; status=1; }
[ "$(grep -c 'requests per second' "$tmp/bench.out")" = 2 ] ||
	{ echo "FAIL: redis-benchmark did not complete both tests"; cat "$tmp/bench.out"; status=1; }
cli SHUTDOWN NOSAVE >/dev/null 2>&1
i=0
while [ -s "$tmp/redis.pid" ] && kill -0 "$(cat "$tmp/redis.pid")" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo "redis: $saves BGSAVE(s) under load; load: $(cat "$tmp/load.out"); bench: $(tr '\r' '\n' <"$tmp/bench.out" | grep 'requests per second' | tr '\n' ' ')"
acc=$(counter "$tmp/redis.log" conn_accel_dpdk)
fork=$(counter "$tmp/redis.log" migrate_fork)
gone=$(counter "$tmp/redis.log" migrate_peer_gone)
fell=$(fallbacks "$tmp/redis.log")
echo "redis-server (port $(claimed "$tmp/redis.log")): $acc connection(s) over dpdk, $fork moved at fork, $gone without the peer's answer${fell:+, on the kernel: $fell}"
[ "$saves" -ge 1 ] || { echo "FAIL: no BGSAVE under load"; status=1; }
[ "$acc" -ge 28 ] && [ -z "$fell" ] || { echo "FAIL: redis-server's connections not over dpdk"; status=1; }
[ "$fork" -ge 8 ] || { echo "FAIL: no connection moved at fork"; status=1; }
[ "$gone" -eq 0 ] || { echo "FAIL: $gone migration(s) without the peer's answer"; status=1; }
all_dpdk "$tmp/load.log" "redis_load.py" 8 || status=1
all_dpdk "$tmp/bench.log" "redis-benchmark" 20 || status=1

# ---- teardown, checked -------------------------------------------------------
ovs_teardown
if [ $status -ne 0 ]; then
	for f in ng wrk curl1 redis bench load; do echo "== $f"; grep -a 'warn\|error\|kernel' "$tmp/$f.log" | tail -n 5; done
	grep -i 'err\|warn\|vhost' "$run/vswitchd.log" | tail -n 20
fi
[ $status -eq 0 ] && echo PASS
exit $status
