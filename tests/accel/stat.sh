#!/bin/sh
# fabsock-stat against what the test knows: a launched server and client on
# shm after a known echo (sockets, states, byte counts, counters, providers),
# a plain client of a launched server (a kernel socket with its fallback
# reason), a refresh with rates, bad arguments, and a SIGKILLed process that
# leaves the list with its segment removed.
. "$top_srcdir/tests/accel/lib.sh"
stat="$top_builddir/tools/fabsock-stat"
hold_py="$top_srcdir/tests/accel/hold.py"
bytes=100000
status=0
fail() { echo "FAIL: $*"; status=1; }

launched() { # log file, then the command
	log=$1
	shift
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS=shm FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$@" 2>"$log"
}

port=$(free_port)
launched "$tmp/srv.log" "$python" "$hold_py" server "$port" >"$tmp/srv.out" &
pids="$pids $!"
wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; exit 1; }
launched "$tmp/cli.log" "$python" "$hold_py" client "$port" "$bytes" "$tmp/done" >"$tmp/cli.out" &
pids="$pids $!"
wait_line "$tmp/cli.out" echoed || { echo "FAIL: no echo"; cat "$tmp/cli.out" "$tmp/cli.log"; exit 1; }

# a plain (not launched) client of a second launched server
port2=$(free_port)
launched "$tmp/srv2.log" "$python" "$hold_py" server "$port2" >"$tmp/srv2.out" &
pids="$pids $!"
wait_ready "$tmp/srv2.out" || { cat "$tmp/srv2.log"; exit 1; }
env -u LD_PRELOAD "$python" "$hold_py" client "$port2" 1000 "$tmp/done" >"$tmp/plain.out" &
pids="$pids $!"
wait_line "$tmp/plain.out" echoed || { echo "FAIL: no plain echo"; exit 1; }

"$stat" --json >"$tmp/stat.json" || fail "fabsock-stat --json exited $?"
"$stat" >"$tmp/stat.txt" || fail "fabsock-stat exited $?"
cat "$tmp/stat.txt"

# check.py-like assertions in one python run; prints the client's pid
cli_pid=$("$python" - "$tmp/stat.json" "$port" "$port2" "$bytes" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
port, port2, size = sys.argv[2], sys.argv[3], int(sys.argv[4])
errors = []
def find(pred):
    return [(p, s) for p in doc["processes"] for s in p["sockets"] if pred(s)]
cli = find(lambda s: s["remote"].endswith(":" + port) and s["state"] != "listening")
srv = find(lambda s: s["local"].endswith(":" + port) and s["state"] not in ("listening",))
lis = find(lambda s: s["local"].endswith(":" + port) and s["state"] == "listening")
plain = find(lambda s: s["local"].endswith(":" + port2) and s["state"] == "kernel")
for name, found in (("client", cli), ("server", srv), ("listener", lis), ("plain peer", plain)):
    if len(found) != 1:
        errors.append("%s: %d sockets found, want 1" % (name, len(found)))
if not errors:
    for name, (p, s) in (("client", cli[0]), ("server", srv[0])):
        if s["state"] != "accelerated" or s["provider"] != "shm":
            errors.append("%s: state %s on %r" % (name, s["state"], s["provider"]))
        if s["bytes_tx"] != size or s["bytes_rx"] != size:
            errors.append("%s: bytes tx %d rx %d, want %d" % (name, s["bytes_tx"], s["bytes_rx"], size))
        if s["msgs_tx"] < 1 or s["msgs_rx"] < 1 or s["rx_queue"] != 0:
            errors.append("%s: msgs %d/%d rx_queue %d" % (name, s["msgs_tx"], s["msgs_rx"], s["rx_queue"]))
        if "shm" not in p["providers"] or p["counters"]["conn_accel_shm"] != 1:
            errors.append("%s: providers %s conn_accel_shm %d" % (name, p["providers"], p["counters"]["conn_accel_shm"]))
        if p["counters"]["bytes_tx_shm"] != size:
            errors.append("%s: counter bytes_tx_shm %d" % (name, p["counters"]["bytes_tx_shm"]))
    if cli[0][0]["pid"] == srv[0][0]["pid"] or srv[0][0]["pid"] != lis[0][0]["pid"]:
        errors.append("client, server and listener pids %d %d %d" % (cli[0][0]["pid"], srv[0][0]["pid"], lis[0][0]["pid"]))
    p, s = plain[0]
    if "not marked" not in s["reason"] or p["counters"]["fallback_plain_peer"] != 1:
        errors.append("plain peer: reason %r fallback_plain_peer %d" % (s["reason"], p["counters"]["fallback_plain_peer"]))
    if not s["remote"].startswith("127.0.0.1:"):
        errors.append("plain peer: remote %r" % s["remote"])
for e in errors:
    print("FAIL: " + e, file=sys.stderr)
print(cli[0][0]["pid"] if cli else 0)
sys.exit(1 if errors else 0)
EOF
) || status=1
echo "client pid $cli_pid"

# one process, and a refresh with rates
"$stat" -p "$cli_pid" --json -w 1 -n 2 >"$tmp/w.json" || fail "-p -w -n exited $?"
"$python" - "$tmp/w.json" "$cli_pid" <<'EOF' || status=1
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1])]
pids = {p["pid"] for d in docs for p in d["processes"]}
ok = len(docs) == 2 and pids == {int(sys.argv[2])} and \
     all("tx_bytes_per_s" in s for s in docs[1]["processes"][0]["sockets"])
if not ok:
    print("FAIL: -p/-w/-n: %d documents, pids %s" % (len(docs), pids), file=sys.stderr)
    sys.exit(1)
EOF
[ "$(stat -c '%a %u' "/dev/shm/fsk-stat.$cli_pid")" = "600 $(id -u)" ] || fail "segment mode/owner"

# bad input: one line, exit 2
for args in "-w 0" "-p x" "-n 3" "--bogus"; do
	# shellcheck disable=SC2086
	"$stat" $args >/dev/null 2>"$tmp/err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "fabsock-stat $args: exit $rc, $(cat "$tmp/err")"
done

# SIGKILL: the process leaves the list, its segment is removed
kill -9 "$cli_pid"
i=0
while kill -0 "$cli_pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "/dev/shm/fsk-stat.$cli_pid" ] || fail "the killed process's segment vanished by itself"
"$stat" --json >"$tmp/after.json" || fail "fabsock-stat after the kill exited $?"
grep -q "\"pid\":$cli_pid," "$tmp/after.json" && fail "killed pid $cli_pid still listed"
[ -e "/dev/shm/fsk-stat.$cli_pid" ] && fail "killed process's segment not reclaimed"
"$stat" -p "$cli_pid" >/dev/null 2>&1 && fail "-p of the killed pid succeeded"

touch "$tmp/done"
# a sanitizer build: the launched processes' reports are in their logs
if grep -l "ERROR: AddressSanitizer\|runtime error:" "$tmp"/*.log 2>/dev/null; then
	fail "sanitizer report in a launched process's log"
fi
exit $status
