#!/bin/sh
# Real programs, pass-through: redis-server (epoll, non-blocking accept,
# writev) with redis-cli and redis-benchmark as clients, all under the
# launcher. Stores 2000 keys through redis-cli --pipe (one pipelined
# connection), reads them back with MGET and compares the sha256 of the
# values; then redis-benchmark (50 parallel connections) must finish with
# no errors, and DBSIZE must still match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-redis
fsk_need_preload
fsk_need_cmd redis-server redis-cli redis-benchmark sha256sum ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER
n=2000

port=$(fsk_free_port) || fsk_fail "no free port"
fsk_bg timeout -k 5 120 "$L" --log info --log-file "$T/server.log" -- \
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$T" --daemonize no --logfile "$T/redis.log"
fsk_wait_listen "$port" 150 || { cat "$T/redis.log"; fsk_fail "redis-server did not listen on $port"; }

cli() { timeout -k 5 60 "$L" --log info --log-file "$T/cli.log" -- redis-cli -p "$port" "$@"; }

# Values: 1..300 bytes of hex from a hash chain, deterministic per key.
"$FSK_PYTHON" - "$n" "$T" <<'PY'
import hashlib, sys
n, d = int(sys.argv[1]), sys.argv[2]
with open(d + "/cmds", "wb") as c, open(d + "/want", "w") as w:
    for i in range(1, n + 1):
        v = (hashlib.sha256(str(i).encode()).hexdigest() * 5)[: 1 + (i * 37) % 300]
        k = "key:%d" % i
        c.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k.encode(), len(v), v.encode()))
        w.write(v + "\n")
PY
cli --pipe <"$T/cmds" >"$T/pipe.out" 2>&1 || { cat "$T/pipe.out"; fsk_fail "redis-cli --pipe failed"; }
grep -q "errors: 0, replies: $n" "$T/pipe.out" || { cat "$T/pipe.out"; fsk_fail "redis-cli --pipe: not $n clean replies"; }

keys=$(seq 1 "$n" | sed 's/^/key:/')
# shellcheck disable=SC2086 # one argument per key
cli MGET $keys >"$T/got" || fsk_fail "MGET failed"
want=$(fsk_sha "$T/want")
got=$(fsk_sha "$T/got")
[ "$want" = "$got" ] || { diff "$T/want" "$T/got" | head; fsk_fail "MGET values differ (sha256 $got, want $want)"; }

timeout -k 5 100 "$L" --log info --log-file "$T/bench.log" -- \
	redis-benchmark -p "$port" -c 50 -n 20000 -t set,get,lpush,lpop -q \
	>"$T/bench.out" 2>&1 || { cat "$T/bench.out"; fsk_fail "redis-benchmark failed"; }
grep -qi 'error' "$T/bench.out" && { cat "$T/bench.out"; fsk_fail "redis-benchmark reported errors"; }
[ "$(grep -c 'requests per second' "$T/bench.out")" = 4 ] ||
	{ cat "$T/bench.out"; fsk_fail "redis-benchmark did not complete all 4 tests"; }
# redis-benchmark writes key:__rand_int__ and mylist: the 2000 keys survive.
cli GET key:1234 >"$T/one" && [ "$(cat "$T/one")" = "$(sed -n 1234p "$T/want")" ] ||
	fsk_fail "key:1234 changed after the benchmark"

fsk_assert_loaded "$T/server.log" "redis-server"
fsk_assert_loaded "$T/cli.log" "redis-cli"
fsk_assert_loaded "$T/bench.log" "redis-benchmark"
echo "PASS: redis: $n values sha256 $got; redis-benchmark set/get/lpush/lpop x20000, 50 connections, no errors"
