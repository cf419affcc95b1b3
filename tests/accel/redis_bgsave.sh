#!/bin/sh
# redis BGSAVE (fork) under load, everything launched with FABSOCK_TCP_ACCEL=1,
# over shm and over tcp. Load: redis-benchmark (20 accelerated connections
# from an epoll loop: hiredis connects non-blocking) and redis_load.py (8
# accelerated connections pipelining SET/GET and checking every reply). Each
# BGSAVE forks the server, which moves its accelerated connections to the
# kernel (the clients answer from recv and from epoll_wait, or from their
# negotiation threads, and their epoll sets hand the sockets to the kernel
# set). No errors on either load, every BGSAVE succeeds, and no migration may
# end without the peer's answer.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup accel-redis-bgsave
fsk_need_preload
fsk_need_cmd redis-server redis-cli redis-benchmark ss
T=$fsk_tmp
L=$FSK_LAUNCHER

run() { # provider
	prov=$1
	export FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov"
	port=$(fsk_free_port) || fsk_fail "no free port"
	rm -f "$T"/*.log "$T/dump.rdb"
	fsk_bg timeout -k 5 120 "$L" --log info --log-file "$T/server.log" -- \
		redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--dir "$T" --daemonize no --logfile "$T/redis.log"
	srv=$fsk_last_pid
	fsk_wait_listen "$port" 150 || { cat "$T/redis.log"; fsk_fail "redis-server did not listen"; }
	cli() { timeout -k 5 30 "$L" --log info --log-file "$T/cli.log" -- redis-cli -p "$port" "$@"; }

	timeout -k 5 100 "$L" --log info --log-file "$T/bench.log" -- \
		redis-benchmark -p "$port" -c 20 -n 300000 -r 10000 -d 64 -t set,get -q \
		>"$T/bench.out" 2>&1 &
	bench=$!
	rm -f "$T/stop"
	timeout -k 5 100 "$L" --log info --log-file "$T/load.log" -- \
		"$FSK_PYTHON" "$top_srcdir/tests/accel/redis_load.py" "$port" 8 "$T/stop" \
		>"$T/load.out" 2>&1 &
	load=$!
	sleep 1
	saves=0
	while [ $saves -lt 3 ] && kill -0 $load 2>/dev/null; do
		[ "$(cli BGSAVE)" = "Background saving started" ] || fsk_fail "$prov: BGSAVE refused"
		i=0
		until cli INFO persistence | grep -q 'rdb_bgsave_in_progress:0'; do
			sleep 0.1
			i=$((i + 1))
			[ $i -lt 300 ] || fsk_fail "$prov: BGSAVE did not end within 30 s"
		done
		cli INFO persistence | grep -q 'rdb_last_bgsave_status:ok' || fsk_fail "$prov: BGSAVE failed"
		saves=$((saves + 1))
	done
	touch "$T/stop"
	wait $load || { cat "$T/load.out"; fsk_fail "$prov: the accelerated load failed"; }
	wait $bench || { cat "$T/bench.out"; fsk_fail "$prov: redis-benchmark failed"; }
	[ $saves -ge 1 ] || fsk_fail "$prov: the benchmark ended before the first BGSAVE"
	grep -qi 'error' "$T/bench.out" && { cat "$T/bench.out"; fsk_fail "$prov: redis-benchmark reported errors"; }
	[ "$(grep -c 'requests per second' "$T/bench.out")" = 2 ] ||
		{ cat "$T/bench.out"; fsk_fail "$prov: redis-benchmark did not complete both tests"; }
	cli SHUTDOWN NOSAVE >/dev/null 2>&1
	wait $srv
	fsk_assert_loaded "$T/server.log" "redis-server"
	fsk_assert_loaded "$T/bench.log" "redis-benchmark"
	fsk_assert_loaded "$T/load.log" "redis_load.py"
	c() { v=$(grep -a "info: counter $2 = " "$1" | tail -n1 | sed 's/.* = //'); echo "${v:-0}"; }
	acc=$(c "$T/server.log" "conn_accel_$prov")
	fork=$(c "$T/server.log" migrate_fork)
	gone=$(c "$T/server.log" migrate_peer_gone)
	peer=$(sed -n 's/^ops [0-9]* migrated //p' "$T/load.out")
	echo "$prov: $saves BGSAVE(s) under load; server: $acc accelerated connections," \
		"$fork migrated at fork, $gone without the peer's answer; load: $(cat "$T/load.out")"
	[ "$acc" -ge 8 ] || fsk_fail "$prov: the load's connections were not accelerated"
	[ "$fork" -ge 8 ] && [ "${peer:-0}" -ge 8 ] || fsk_fail "$prov: no connection was migrated at fork"
	[ "$gone" -eq 0 ] || fsk_fail "$prov: $gone migration(s) ended without the peer's answer"
}

run shm
run tcp
echo "PASS: redis BGSAVE under load, accelerated, shm and tcp"
