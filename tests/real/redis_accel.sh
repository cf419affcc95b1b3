#!/bin/sh
# Real programs, accelerated: redis-server with FABSOCK_TCP_ACCEL=1 over shm.
# A blocking-connect client (python3 speaking RESP) stores a 1 MiB value and
# reads it back byte-exact: its connection must be accelerated and the value
# must have travelled over shm both ways (bytes_tx_shm / bytes_rx_shm >= 1 MiB);
# redis-cli reads it back too (sha256).
# redis-cli and redis-benchmark (hiredis: non-blocking connect, then epoll) must
# be accelerated too: redis-cli's GET over shm, and every one of
# redis-benchmark's connections (50 per test, set and get, no errors).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-redis-accel
fsk_need_preload
fsk_need_cmd redis-server redis-cli redis-benchmark sha256sum ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
export FABSOCK_TCP_ACCEL=1 FABSOCK_PROVIDERS=shm FABSOCK_NEGO_WAIT_MS=2000
big=$((1 << 20))
resp_py="$top_srcdir/tests/real/resp_big.py"

port=$(fsk_free_port) || fsk_fail "no free port"
fsk_bg timeout -k 5 120 "$L" --log info --log-file "$T/server.log" -- \
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$T" --daemonize no --logfile "$T/redis.log"
spid=$fsk_last_pid
fsk_wait_listen "$port" 150 || { cat "$T/redis.log"; fsk_fail "redis-server did not listen on $port"; }

# 1 MiB of printable pseudo-random bytes, stored and read back byte-exact by a
# blocking-connect client (python3 speaking RESP).
"$FSK_PYTHON" "$resp_py" gen "$big" "$T/big" || fsk_fail "resp_big.py gen"
timeout -k 5 60 "$L" --log info --log-file "$T/resp.log" -- \
	"$FSK_PYTHON" "$resp_py" setget 127.0.0.1 "$port" "$T/big" >"$T/resp.out" 2>&1 ||
	{ cat "$T/resp.out"; fsk_fail "python RESP client: SET/GET of 1 MiB failed"; }
fsk_assert_accel "$T/resp.log" "python RESP client" 1 shm
[ "$(fsk_counter "$T/resp.log" bytes_tx_shm)" -ge "$big" ] || fsk_fail "SET: the value did not go over shm"
[ "$(fsk_counter "$T/resp.log" bytes_rx_shm)" -ge "$big" ] || fsk_fail "GET: the value did not come over shm"

# redis-cli reads it back too (hiredis connects non-blocking).
timeout -k 5 60 "$L" --log info --log-file "$T/get.log" -- \
	redis-cli -p "$port" --raw GET big >"$T/got" 2>"$T/get.err" ||
	{ cat "$T/get.err"; fsk_fail "redis-cli GET failed"; }
# --raw ends the value with a newline
head -c "$big" "$T/got" >"$T/got.value"
[ "$(wc -c <"$T/got")" = $((big + 1)) ] && [ "$(fsk_sha "$T/big")" = "$(fsk_sha "$T/got.value")" ] ||
	fsk_fail "redis-cli GET big: $(wc -c <"$T/got") bytes, sha256 $(fsk_sha "$T/got.value") want $(fsk_sha "$T/big")"
fsk_assert_accel "$T/get.log" "redis-cli" 1 shm
[ "$(fsk_counter "$T/get.log" bytes_rx_shm)" -ge "$big" ] || fsk_fail "redis-cli GET: the value did not come over shm"
fsk_note "1 MiB SET/GET byte-exact, over shm for the python client (sha256 $(fsk_sha "$T/big"))"

timeout -k 5 100 "$L" --log info --log-file "$T/bench.log" -- \
	redis-benchmark -p "$port" -c 50 -n 20000 -t set,get -q \
	>"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fsk_fail "redis-benchmark failed"; }
tr '\r' '\n' <"$T/bench.out" | grep -qi 'error' && { cat "$T/bench.out"; fsk_fail "redis-benchmark reported errors"; }
[ "$(tr '\r' '\n' <"$T/bench.out" | grep -c 'requests per second')" -ge 2 ] ||
	{ cat "$T/bench.out"; fsk_fail "redis-benchmark did not complete set and get"; }
# redis-benchmark opens 50 connections per test plus one to read the config
fsk_assert_all_accel "$T/bench.log" redis-benchmark 50 shm
acc=$(fsk_counter "$T/bench.log" accelerated)
# redis shuts down on SIGTERM; libfabsock dumps its counters at exit
kill "$spid"
wait "$spid"
fsk_assert_accel "$T/server.log" "redis-server" 1 shm
echo "PASS: redis accelerated: 1 MiB SET/GET byte-exact over shm; redis-benchmark 50 connections without errors ($acc accelerated)"
