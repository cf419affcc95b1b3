#!/bin/sh
# Real programs, kernel TCP vs libfabsock on shm vs libfabsock on dpdk (two
# processes joined by a net_memif pair), in one run, with the library's default
# settings (issue #15). Rounds alternate the paths; the table reports medians
# over rounds. Every launched run is counted only when the counters its client
# process(es) dump at exit (FABSOCK_LOG=info) say its connections went over
# that provider (conn_accel_<provider> > 0 and no fallback_* counter, but for
# the server's fallback_io: a connection its client closed during the
# negotiation, which carried nothing);
# otherwise the row shows `fallback` and the counter on stderr.
#
# Rows (each one function, each bounded in time by timeout):
#  nginx-sendfile  nginx (sendfile on) serves a 10 MiB file; one curl process
#                  downloads it 20 times, a new connection each: MB/s
#  socat           64 MiB one way, the sender half-closes: MB/s (client start
#                  to server exit)
#  asyncio-echo    python asyncio echo server; an asyncio client runs 200
#                  connections, each 100 x 16 KiB echoed: seconds (lower wins)
#  sockperf-16k    sockperf throughput, 16 KiB messages: MB/s
#  nginx-ab        nginx + ab -k -c 4, 100 KB file: requests/s
#  redis-P16       redis-benchmark GET -P 16: requests/s
#  memcached       memcached + memcslap (set, 4 threads): operations/s
#  nginx-wrk       nginx + wrk keep-alive, small page: requests/s
#  connect         bench/connect: connect + 64 B each way + close, one at a
#                  time, N connections: median us per connection (lower wins)
# A program not installed prints `missing: <package>` in its row.
#
# usage: bench/apps.sh [BUILDDIR]
# environment: ROUNDS (3), PATHS ("kernel shm dpdk"), ROWS (all, space list of
#   the names above), PIN (1: server on CPU 0, client on CPU 1), and sizes:
#   FILE_MB (10), CURL_N (20), SOCAT_MB (64), ECHO_CONNS (200), ECHO_MSGS (100),
#   SECS (3: sockperf, wrk), AB_N (4000), REDIS_N (400000), MC_N (10000 per
#   thread), CONNECT_N (2000); BASE (another build directory: path PROV@base
#   runs PROV with that build's launcher), FSK_ENV (extra VAR=value words for
#   every launched process, e.g. FABSOCK_SPIN_US=1000000)
set -u
b=$(cd "${1:-${top_builddir:-build}}" && pwd) || exit 2
own_launcher="$b/tools/fabsock"
base_launcher=${BASE:+$(cd "$BASE" && pwd)/tools/fabsock}
rounds=${ROUNDS:-3}
paths=${PATHS:-kernel shm dpdk}
rows=${ROWS:-nginx-sendfile socat asyncio-echo sockperf-16k nginx-ab redis-P16 memcached nginx-wrk connect}
secs=${SECS:-3}
. "$(dirname "$0")/lib.sh"
fsk_env=${FSK_ENV:+$FSK_ENV }
pin_default
[ -x "$own_launcher" ] || { echo "bench/apps.sh: $own_launcher not built" >&2; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fsk-apps-bench.XXXXXX") || exit 1
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
py=$(python3 -c 'import sys; print(sys.executable)')
nginx=$(command -v nginx || echo /usr/sbin/nginx)

# missing PROGRAM PACKAGE: true (and the row says so) when PROGRAM is absent.
missing() {
	command -v "$1" >/dev/null 2>&1 || [ -x "$1" ] && return 1
	echo "$row missing: $2" >>"$tmp/missing"
	return 0
}

# server PATH PORT COMMAND...: starts COMMAND on PATH in the background (at
# most 200 s), its output and counters in $tmp/srv.log; waits until it listens.
server() {
	sp=$1 spt=$2
	shift 2
	rm -f "$tmp/srv.log" "$tmp/cli.log" "$tmp/memif.sock"
	$(wrap "$sp" server) env FABSOCK_LOG_FILE="$tmp/srv.log" timeout 200 "$@" >>"$tmp/srv.log" 2>&1 &
	spid=$!
	listening "$spt"
}

# client PATH COMMAND...: runs COMMAND on PATH (at most 120 s); stdout in
# $tmp/cli.out, stderr and the library's log in $tmp/cli.log.
client() {
	cp_=$1
	shift
	$(wrap "$cp_" client) env FABSOCK_LOG_FILE="$tmp/cli.log" timeout 120 "$@" >"$tmp/cli.out" 2>>"$tmp/cli.log"
}

# stop: the server gets SIGINT (timeout passes it on; most servers then exit
# normally and so dump their counters), SIGTERM after 3 s.
stop() {
	[ -n "$spid" ] || return 0
	kill -INT "$spid" 2>/dev/null
	i=0
	while [ $i -lt 30 ] && kill -0 "$spid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	spid=
}

# ctr FILE NAME: the sum of counter NAME over the processes that logged to FILE.
ctr() { grep -a "info: counter $2 = " "$1" 2>/dev/null | sed 's/.* = //' | awk '{ s += $1 } END { print s + 0 }'; }

# record PATH VALUE: appends "ROW PATH VALUE" to $tmp/results, VALUE replaced
# by `fallback` when a launched client's connections did not all go over PATH,
# and by `fail` when empty; the counters that show it (and where the time went)
# go to $tmp/counters.
record() {
	rp=$1 v=${2:-}
	if [ "$rp" != kernel ]; then
		rc=${rp%@base} # the provider, for counter names
		acc=$(ctr "$tmp/cli.log" "conn_accel_$rc")
		req=$(ctr "$tmp/cli.log" accel_requested)
		# the client's fallbacks, and the server's but one: fallback_io there is
		# a connection the client closed before the negotiation ended (wrk
		# opens one), which carried nothing; shown in the counters line
		fb=$( { grep -a "info: counter fallback_[a-z_]* = [1-9]" "$tmp/cli.log"
			grep -a "info: counter fallback_[a-z_]* = [1-9]" "$tmp/srv.log" | grep -v fallback_io; } 2>/dev/null |
			sed 's/.*counter //; s/ = /=/' | sort | uniq | tr '\n' ' ')
		sio=$(ctr "$tmp/srv.log" fallback_io)
		sacc=$(ctr "$tmp/srv.log" "conn_accel_$rc")
		echo "round $r $row $rp: client conn_accel_$rc=$acc accel_requested=$req" \
			"server conn_accel_$rc=$sacc doorbells(c/s)=$(ctr "$tmp/cli.log" doorbells)/$(ctr "$tmp/srv.log" doorbells)" \
			"bells(c/s)=$(ctr "$tmp/cli.log" bells)/$(ctr "$tmp/srv.log" bells)" \
			"msgs_tx(c/s)=$(ctr "$tmp/cli.log" msgs_tx)/$(ctr "$tmp/srv.log" msgs_tx)" \
			"bytes_tx_$rc(c/s)=$(ctr "$tmp/cli.log" "bytes_tx_$rc")/$(ctr "$tmp/srv.log" "bytes_tx_$rc")" \
			"migrated_to_kernel(c/s)=$(ctr "$tmp/cli.log" migrated_to_kernel)/$(ctr "$tmp/srv.log" migrated_to_kernel)" \
			"server fallback_io=$sio ${fb:+fallbacks: $fb}" >>"$tmp/counters"
		if [ "$acc" -eq 0 ] || [ -n "$fb" ]; then
			echo "apps.sh: $row $rp round $r: fallback: conn_accel_$rc=$acc/$req ${fb:-}" >&2
			grep -a 'stays on the kernel\|error\|warn' "$tmp/cli.log" "$tmp/srv.log" 2>/dev/null | head -n 3 | sed 's/^/    /' >&2
			[ -z "${KEEP:-}" ] || cp "$tmp/cli.log" "$tmp/srv.log" "$KEEP/" 2>/dev/null
			v=fallback
		fi
	fi
	[ -n "$v" ] || {
		echo "apps.sh: $row $rp round $r: no result; the client's output ends:" >&2
		tail -n 4 "$tmp/cli.out" "$tmp/cli.log" 2>/dev/null | sed 's/^/    /' >&2
		v=fail
	}
	echo "$row $rp $v" >>"$tmp/results"
}

now() { date +%s.%N; }

nginx_conf() { # PORT: $tmp/nginx.conf, one process, sendfile, $tmp/www
	cat >"$tmp/nginx.conf" <<NGX
daemon off;
master_process off;
worker_processes 1;
pid $tmp/nginx.pid;
error_log stderr error;
events { worker_connections 1024; }
http {
	access_log off;
	sendfile on;
	keepalive_requests 1000000;
	client_body_temp_path $tmp/ngx-body;
	proxy_temp_path $tmp/ngx-proxy;
	fastcgi_temp_path $tmp/ngx-fcgi;
	uwsgi_temp_path $tmp/ngx-uwsgi;
	scgi_temp_path $tmp/ngx-scgi;
	server { listen 127.0.0.1:$1; root $tmp/www; }
}
NGX
}

row_nginx_sendfile() {
	missing "$nginx" nginx && return
	missing curl curl && return
	p=$(port)
	nginx_conf "$p"
	n=${CURL_N:-20}
	urls=
	i=0
	while [ $i -lt "$n" ]; do urls="$urls -o /dev/null http://127.0.0.1:$p/big"; i=$((i + 1)); done
	server "$1" "$p" "$nginx" -e stderr -p "$tmp" -c "$tmp/nginx.conf"
	# one curl process, a new connection per download (Connection: close)
	client "$1" curl -s -H 'Connection: close' -w '%{size_download} %{time_total}\n' $urls
	stop
	# the first download also waits for the client's first fabric open
	# (libfabric's load): shown apart, in the counters
	awk -v r="$r" -v p="$1" 'NR == 1 { f = $2 } NR > 1 && $1 > 0 { b += $1; t += $2 }
		END { if (t > 0) printf "round %s nginx-sendfile %s: first download %.3f s, the others %.1f MB/s\n", r, p, f, b / t / 1e6 }' \
		"$tmp/cli.out" >>"$tmp/counters"
	record "$1" "$(awk -v n="$n" '$1 > 0 { b += $1; t += $2; k++ }
		END { if (k == n && t > 0) printf "%.1f", b / t / 1e6 }' "$tmp/cli.out")"
}

row_socat() {
	missing socat socat && return
	p=$(port)
	mb=${SOCAT_MB:-64}
	server "$1" "$p" socat -u "TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr" "OPEN:$tmp/socat.out,creat,trunc"
	t0=$(now)
	client "$1" socat -u "OPEN:/dev/zero,readbytes=$((mb * 1048576))" "TCP:127.0.0.1:$p"
	wait "$spid" 2>/dev/null   # the server exits at EOF (the half-close)
	t1=$(now)
	spid=
	got=$(stat -c %s "$tmp/socat.out" 2>/dev/null || echo 0)
	rm -f "$tmp/socat.out"
	v=
	[ "$got" -eq $((mb * 1048576)) ] && v=$(echo "$t0 $t1" | awk -v b="$got" '{ printf "%.1f", b / ($2 - $1) / 1e6 }')
	record "$1" "$v"
}

echo_py() {
	cat >"$tmp/echo.py" <<'PY'
import asyncio, sys, time
async def handle(r, w):
    while True:
        d = await r.read(65536)
        if not d:
            break
        w.write(d)
        await w.drain()
    w.close()
async def serve(port):
    s = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with s:
        await s.serve_forever()
async def one(port, msgs, size):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    buf = b"x" * size
    for _ in range(msgs):
        w.write(buf)
        await w.drain()
        await r.readexactly(size)
    w.close()
    await w.wait_closed()
async def clients(port, conns, msgs, size):
    t0 = time.perf_counter()
    await asyncio.gather(*(one(port, msgs, size) for _ in range(conns)))
    print("%.3f" % (time.perf_counter() - t0))
if sys.argv[1] == "server":
    try:
        asyncio.run(serve(int(sys.argv[2])))
    except KeyboardInterrupt:  # exit normally: the library dumps its counters
        pass
else:
    asyncio.run(clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), 16384))
PY
}

row_asyncio_echo() {
	p=$(port)
	echo_py
	server "$1" "$p" "$py" "$tmp/echo.py" server "$p"
	client "$1" "$py" "$tmp/echo.py" client "$p" "${ECHO_CONNS:-200}" "${ECHO_MSGS:-100}"
	stop
	[ -z "${KEEP:-}" ] || cp "$tmp/srv.log" "$KEEP/echo-srv-$1.log"
	record "$1" "$(sed -n 's/^\([0-9.]*\)$/\1/p' "$tmp/cli.out" | tail -n 1)"
}

row_sockperf_16k() {
	missing sockperf sockperf && return
	p=$(port)
	server "$1" "$p" sockperf server --tcp -i 127.0.0.1 -p "$p"
	client "$1" sockperf throughput --tcp -i 127.0.0.1 -p "$p" -t "$secs" -m 16384
	stop
	record "$1" "$(sed -n 's/.*BandWidth is \([0-9.]*\) MBps.*/\1/p' "$tmp/cli.out" "$tmp/cli.log" | tail -n 1)"
}

row_nginx_ab() {
	missing "$nginx" nginx && return
	missing ab apache2-utils && return
	p=$(port)
	nginx_conf "$p"
	server "$1" "$p" "$nginx" -e stderr -p "$tmp" -c "$tmp/nginx.conf"
	client "$1" ab -q -k -c 4 -n "${AB_N:-4000}" "http://127.0.0.1:$p/100k"
	stop
	v=$(sed -n 's/^Requests per second: *\([0-9.]*\).*/\1/p' "$tmp/cli.out")
	grep -q '^Failed requests: *0$' "$tmp/cli.out" || v=
	record "$1" "$v"
}

row_redis_P16() {
	missing redis-server redis-server && return
	missing redis-benchmark redis-tools && return
	p=$(port)
	server "$1" "$p" redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize no --logfile ''
	client "$1" redis-benchmark -p "$p" -c 50 -P 16 -n "${REDIS_N:-400000}" -t get -q
	stop
	record "$1" "$(tr '\r' '\n' <"$tmp/cli.out" | sed -n 's/^GET: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)"
}

row_memcached() {
	missing memcached memcached && return
	missing memcslap libmemcached-tools && return
	p=$(port)
	server "$1" "$p" memcached -u "$(id -un)" -p "$p" -l 127.0.0.1 -U 0 -t 1
	client "$1" memcslap --servers="127.0.0.1:$p" --concurrency=4 --execute-number="${MC_N:-10000}"
	stop
	record "$1" "$(sed -n 's/^Time to set *\([0-9]*\) keys by .*: *\([0-9.]*\) seconds.*/\1 \2/p' "$tmp/cli.out" |
		awk '$2 > 0 { printf "%.0f", $1 / $2 }')"
}

row_nginx_wrk() {
	missing "$nginx" nginx && return
	missing wrk wrk && return
	p=$(port)
	nginx_conf "$p"
	server "$1" "$p" "$nginx" -e stderr -p "$tmp" -c "$tmp/nginx.conf"
	client "$1" wrk -t 1 -c 16 -d "${secs}s" "http://127.0.0.1:$p/small"
	stop
	v=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/cli.out")
	grep -q 'Non-2xx\|Socket errors' "$tmp/cli.out" && v=
	record "$1" "$v"
}

row_connect() {
	[ -x "$b/bench/connect" ] || { echo "$row missing: bench/connect (make)" >>"$tmp/missing"; return; }
	p=$(port)
	server "$1" "$p" "$b/bench/connect" server "$p"
	client "$1" "$b/bench/connect" client "$p" "${CONNECT_N:-2000}"
	stop
	record "$1" "$(sed -n 's/^connect+exchange .* median \([0-9.]*\) us.*/\1/p' "$tmp/cli.out" | head -n 1)"
}

mkdir -p "$tmp/www" "$tmp/ngx-body"
head -c $((${FILE_MB:-10} * 1048576)) /dev/zero >"$tmp/www/big"
head -c 102400 /dev/zero >"$tmp/www/100k"
echo "<html><body>small</body></html>" >"$tmp/www/small"
: >"$tmp/results"
: >"$tmp/missing"
: >"$tmp/counters"

r=1
while [ $r -le "$rounds" ]; do
	for row in $rows; do
		# alternate the paths: each round starts with the next one
		set -- $paths
		k=$(( (r - 1) % $# ))
		while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
		for path in "$@"; do
			"row_$(echo "$row" | tr -- '-' '_')" "$path"
			stop
		done
	done
	r=$((r + 1))
done

echo "per-run counters (client / server; launched runs):"
sed 's/^/  /' "$tmp/counters"
echo
awk -v rounds="$rounds" -v paths="$paths" -v rows="$rows" "$awk_median"'
FILENAME ~ /missing$/ { m = $0; sub(/^[^ ]* /, "", m); miss[$1] = m; next }
$3 == "fallback" || $3 == "fail" { bad[$1, $2] = bad[$1, $2] " " $3; next }
{ v[$1, $2] = v[$1, $2] " " $3 }
END {
	unit["nginx-sendfile"] = "MB/s"; unit["socat"] = "MB/s"; unit["asyncio-echo"] = "s (lower)"
	unit["sockperf-16k"] = "MB/s"; unit["nginx-ab"] = "req/s"; unit["redis-P16"] = "req/s"
	unit["memcached"] = "ops/s"; unit["nginx-wrk"] = "req/s"; unit["connect"] = "us (lower)"
	lower["asyncio-echo"] = 1; lower["connect"] = 1
	np = split(paths, P, " "); nr = split(rows, R, " ")
	printf "real programs over 127.0.0.1, %d rounds, medians over rounds; library defaults\n", rounds
	printf "%-16s %-11s", "workload", "unit"
	for (i = 1; i <= np; i++) { printf " %12s", P[i]; if (P[i] != "kernel") printf " %9s", "x kernel" }
	printf "\n"
	for (j = 1; j <= nr; j++) {
		w = R[j]
		printf "%-16s %-11s", w, unit[w]
		if (w in miss) { printf " %s\n", miss[w]; continue }
		k = v[w, "kernel"] != "" ? median(v[w, "kernel"]) : 0
		for (i = 1; i <= np; i++) {
			p = P[i]
			if (v[w, p] == "") {
				s = bad[w, p]; sub(/^ /, "", s); split(s, f, " ")
				printf " %12s", f[1] == "" ? "-" : f[1]
				if (p != "kernel") printf " %9s", "-"
				continue
			}
			m = median(v[w, p])
			printf " %12s", sprintf(m >= 100 ? "%.0f" : "%.2f", m)
			if (p != "kernel") printf " %9s", (k > 0 ? sprintf("%.2f", lower[w] ? k / m : m / k) : "-")
		}
		printf "\n"
	}
	for (x in bad) { split(x, y, SUBSEP); printf "%s %s: not counted:%s\n", y[1], y[2], bad[x] }
	printf "x kernel: speed-up (for seconds and us: kernel time / this time); >1 is faster\n"
}' "$tmp/missing" "$tmp/results"
