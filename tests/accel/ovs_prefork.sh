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

ng_server() { launch "$@"; }
ng_client() { launch "$@"; }
ng_prov=dpdk
. "$top_srcdir/tests/accel/prefork_lib.sh"
redis_stop() {
	[ -s "$tmp/redis.pid" ] && kill -9 "$(cat "$tmp/redis.pid")" 2>/dev/null
	rm -f "$tmp/redis.pid"
}
stop_servers() { ng_stop; redis_stop; }
ovs_stop_first=stop_servers

# ---- 1. nginx: master and 2 workers ------------------------------------------
ng_start
[ -z "$(holder 0)" ] || { echo "FAIL: a port is held before any connection (the master claimed one)"; status=1; }
ng_clients
for k in 1 2 3; do echo "curl $k: port $(claimed "$tmp/curl$k.log")"; done
echo "wrk: port $(claimed "$tmp/wrk.log")"
ng_stop
wait
ng_check_workers
ports_of_workers=$(grep -a 'FI_DPDK_POOL=[^ ]*: port [0-9]*' "$tmp/ng.log" | sed 's/.*: port \([0-9]*\) .*/\1/' | sort -u | tr '\n' ' ')
echo "nginx: ports claimed by its processes: $ports_of_workers"
[ "$(echo "$ports_of_workers" | wc -w)" -eq 2 ] || { echo "FAIL: the 2 workers did not claim 2 ports"; status=1; }

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
all_on "$tmp/load.log" "redis_load.py" 8 || status=1
all_on "$tmp/bench.log" "redis-benchmark" 20 || status=1

# ---- teardown, checked -------------------------------------------------------
ovs_teardown
if [ $status -ne 0 ]; then
	for f in ng wrk curl1 redis bench load; do echo "== $f"; grep -a 'warn\|error\|kernel' "$tmp/$f.log" | tail -n 5; done
	grep -i 'err\|warn\|vhost' "$run/vswitchd.log" | tail -n 20
fi
[ $status -eq 0 ] && echo PASS
exit $status
