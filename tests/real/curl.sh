#!/bin/sh
# Real programs, pass-through: curl fetches files from python3's http.server,
# both under the launcher. Proves both processes loaded libfabsock (info
# line) and that every byte arrived (sha256), for a large and a small file.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
fsk_setup real-curl
fsk_need_preload
fsk_need_cmd curl sha256sum ss "$FSK_PYTHON"
T=$fsk_tmp
L=$FSK_LAUNCHER

mkdir "$T/www"
# 8 MiB plus an odd tail, and a one-line file: sizes that are not multiples
# of any buffer size.
head -c $((8 * 1024 * 1024 + 12345)) /dev/urandom >"$T/www/blob.bin"
echo "hello from libfabsock" >"$T/www/small.txt"

port=$(fsk_free_port) || fsk_fail "no free port"
fsk_bg timeout -k 5 120 "$L" --log info --log-file "$T/server.log" -- \
	"$FSK_PYTHON" -m http.server --bind 127.0.0.1 --directory "$T/www" "$port" \
	>"$T/server.out" 2>&1
fsk_wait_listen "$port" 150 || {
	cat "$T/server.out" "$T/server.log"
	fsk_fail "http.server did not listen on 127.0.0.1:$port within 15 s"
}

# In a sanitizer build the launcher preloads the ASan runtime too, and curl
# deadlocks in its first setlocale() with libasan alone preloaded (no
# libfabsock involved: glibc's setlocale lock, seen with gdb). Probe that,
# and if so fetch with Python's urllib instead, still under the launcher.
client=curl
asan=$(fsk_asan_runtime)
if [ -n "$asan" ]; then
	if ! ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 \
		LD_PRELOAD="$asan" timeout 10 curl --version >/dev/null 2>&1; then
		client=urllib
		fsk_note "curl hangs with only $asan preloaded (ASan runtime vs curl, not libfabsock): using python3 urllib as the client"
	fi
fi
if [ $client = curl ]; then
	timeout -k 5 60 "$L" --log info --log-file "$T/client.log" -- \
		curl -sS --fail --max-time 50 \
		-o "$T/blob.got" "http://127.0.0.1:$port/blob.bin" \
		-o "$T/small.got" "http://127.0.0.1:$port/small.txt" 2>"$T/curl.err"
else
	timeout -k 5 60 "$L" --log info --log-file "$T/client.log" -- \
		"$FSK_PYTHON" -c 'import sys, urllib.request
for url, out in zip(sys.argv[1::2], sys.argv[2::2]):
    with urllib.request.urlopen(url, timeout=50) as r, open(out, "wb") as f:
        f.write(r.read())' \
		"http://127.0.0.1:$port/blob.bin" "$T/blob.got" \
		"http://127.0.0.1:$port/small.txt" "$T/small.got" 2>"$T/curl.err"
fi || {
	cat "$T/curl.err" "$T/server.out"
	fsk_fail "$client failed"
}

fsk_assert_loaded "$T/server.log" "python3 http.server"
fsk_assert_loaded "$T/client.log" "$client"
want=$(fsk_sha "$T/www/blob.bin")
got=$(fsk_sha "$T/blob.got")
[ "$want" = "$got" ] || fsk_fail "blob.bin: sha256 $got, want $want ($(wc -c <"$T/blob.got") bytes)"
cmp -s "$T/www/small.txt" "$T/small.got" || fsk_fail "small.txt differs"
[ -s "$T/curl.err" ] && fsk_fail "$client wrote to stderr: $(cat "$T/curl.err")"
n=$(grep -c '"GET /[a-z]*\.[a-z]* HTTP/1\.[01]" 200' "$T/server.out")
[ "$n" = 2 ] || { cat "$T/server.out"; fsk_fail "server log shows $n successful GETs, want 2"; }
echo "PASS: $client fetched $(wc -c <"$T/blob.got") + $(wc -c <"$T/small.got") bytes, sha256 $got"
