#!/bin/sh
# DPDK inside the application changes nothing the application owns. Both ends
# of tests/accel/robust launched with `fabsock --dpdk net_memif...` (the
# server under `taskset -c 1`, the client under all CPUs, so a pinned thread
# shows either way), their connection over dpdk (counters):
#  a. CPU affinity of the main thread and of an application thread unchanged;
#  b. handlers of SIGINT SIGTERM SIGUSR1 SIGPIPE SIGCHLD unchanged, and
#     SIGUSR1/SIGINT sent by the test are handled on the application's threads;
#  c. stdout byte-exact the one of the same pair on the kernel;
#  d. nothing left in /dev/shm, /run, /tmp, SysV shm, hugepages after a clean
#     exit; after SIGKILL of both, what is left is reclaimed by the next start;
#  e. a bad --eal-args: one warning line, stdout still byte-exact, the
#     connection on the next provider (shm);
#  f. redis-server on dpdk: BGSAVE (fork) under a dpdk load succeeds, and a
#     new client after it is served over dpdk again.
# The test runs in private mount and IPC namespaces with fresh tmpfs on
# /dev/shm, /run and /tmp, so that anything any process leaves is seen.
if [ -z "${FSK_ROBUST_NS:-}" ] && unshare -m -i true 2>/dev/null; then
	exec env FSK_ROBUST_NS=1 unshare -m -i sh -c \
		'for d in /dev/shm /run /tmp; do mount -t tmpfs fsk-robust "$d" || exit 1; done
		 exec sh "$0"' "$0"
fi
. "$top_srcdir/tests/accel/lib.sh"
app="$top_builddir/tests/accel/robust"
[ -e "$top_builddir/src/fabric/.libs/libdpdk-fi.so" ] || { echo "FAIL: libdpdk-fi.so not built"; exit 1; }
[ -x "$app" ] || { echo "FAIL: $app not built"; exit 1; }
command -v taskset >/dev/null || { echo "SKIP: taskset missing"; exit 77; }
status=0
bytes=65536
allcpus=0-$(($(nproc) - 1))
if [ -n "${FSK_ROBUST_NS:-}" ]; then
	sockdir=/run/fsk-robust
else
	echo "no mount namespace: leftovers are looked for by name only"
	sockdir=$tmp/run
fi
mkdir -p "$sockdir"
sock=$sockdir/memif.sock
srv_dev="net_memif0,role=server,socket=$sock,socket-abstract=no"
cli_dev="net_memif0,role=client,socket=$sock,socket-abstract=no"

# leftovers: what exists in the places DPDK, memif and the shm provider write
# to (the shared base directory <run>/dpdk itself excepted: DPDK creates it
# once per machine, and removing it would race other processes' mkdir).
leftovers() {
	{
		if [ -n "${FSK_ROBUST_NS:-}" ]; then
			find /dev/shm /run /tmp -mindepth 1 2>/dev/null | grep -v "^$tmp\|^/run/dpdk$\|^$sockdir$\|^/run/mount"
			ipcs -m | awk '$1 ~ /^0x/'
		else
			find /dev/shm /run/dpdk ${XDG_RUNTIME_DIR:+"$XDG_RUNTIME_DIR/dpdk"} /tmp/dpdk \
				"$sockdir" -mindepth 1 2>/dev/null | grep "$1"
		fi
		find /dev/hugepages -mindepth 1 2>/dev/null
	} | sort
}

# leaf PID: the last process of PID's chain of children (the application
# under the subshell, timeout and launcher).
leaf() {
	_p=$1
	for _i in 1 2 3 4 5; do
		_c=$(ps -o pid= --ppid "$_p" | head -n1)
		[ -n "$_c" ] || break
		_p=$_c
	done
	echo $_p
}

# pair NAME SRV_OPTS CLI_OPTS: robust server and client launched (options
# for on_dpdk before --), signals sent when both wait for them; outputs in
# $tmp/NAME.{srv,cli}.{out,log}. With SRV_OPTS "kernel": not launched.
pair() {
	n=$1
	port=$(free_port)
	if [ "$2" = kernel ]; then
		taskset -c 1 timeout 60 "$app" server "$port" >"$tmp/$n.srv.out" 2>"$tmp/$n.srv.log" &
	else
		DPDK_WRAP="taskset -c 1" on_dpdk "$srv_dev" 198.18.0.1/24 $2 -- \
			"$app" server "$port" >"$tmp/$n.srv.out" 2>"$tmp/$n.srv.log" &
	fi
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/$n.srv.out" || { cat "$tmp/$n.srv.log"; return 1; }
	if [ "$2" = kernel ]; then
		taskset -c "$allcpus" timeout 60 "$app" client "$port" $bytes \
			>"$tmp/$n.cli.out" 2>"$tmp/$n.cli.log" &
	else
		DPDK_WRAP="taskset -c $allcpus" on_dpdk "$cli_dev" 198.18.0.2/24 $3 -- \
			"$app" client "$port" $bytes >"$tmp/$n.cli.out" 2>"$tmp/$n.cli.log" &
	fi
	cpid=$!
	pids="$pids $cpid"
	wait_line "$tmp/$n.srv.out" "waiting for signals" && wait_line "$tmp/$n.cli.out" "waiting for signals" ||
		{ echo "FAIL: $n: the pair did not reach the signals"; cat "$tmp/$n".*; return 1; }
	apps="$(leaf "$spid") $(leaf "$cpid")"
	if [ "${KILL9:-}" ]; then
		kill -9 $apps
		wait "$spid" "$cpid" 2>/dev/null
		return 0
	fi
	kill -USR1 $apps
	kill -INT $apps
	wait "$cpid"
	crc=$?
	wait "$spid"
	src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ] && return 0
	echo "FAIL: $n: client $crc, server $src"
	cat "$tmp/$n.srv.log" "$tmp/$n.cli.log"
	return 1
}

# same_stdout NAME: both ends printed exactly what they print on the kernel.
same_stdout() {
	for side in srv cli; do
		cmp -s "$tmp/kernel.$side.out" "$tmp/$1.$side.out" && continue
		echo "FAIL: $1: $side stdout differs from the kernel run:"
		diff "$tmp/kernel.$side.out" "$tmp/$1.$side.out"
		status=1
	done
}

# The reference: the pair on the kernel.
pair kernel kernel || exit 1
cat "$tmp/kernel.srv.out"
before=$(leftovers .)

# a, b, c: on dpdk
pair dpdk "--provider dpdk" "--provider dpdk" || status=1
assert_dpdk "$tmp/dpdk.srv.log" server 1 $((bytes + 1)) || status=1
assert_dpdk "$tmp/dpdk.cli.log" client 1 $((bytes + 1)) || status=1
same_stdout dpdk
for side in srv cli; do
	[ "$(warn_lines "$tmp/dpdk.$side.log")" -eq 0 ] ||
		{ echo "FAIL: $side: warnings"; grep 'warn\|error' "$tmp/dpdk.$side.log"; status=1; }
done
echo "affinity, handlers, signals, stdout: as on the kernel (robust checked; stdout compared)"

# d. files: after the clean exit, then after SIGKILL and the next start
left=$(leftovers "$(echo $apps | tr " " "|")\|fdp")
[ "$left" = "$before" ] || { echo "FAIL: left after a clean exit:"; echo "$left"; status=1; }
KILL9=1 pair killed "--provider dpdk" "--provider dpdk" || status=1
echo "left by SIGKILL of both ends:"
leftovers "$(echo $apps | tr " " "|")\|fdp" | sed 's/^/  /'
pair again "--provider dpdk" "--provider dpdk" || status=1
assert_dpdk "$tmp/again.cli.log" "next start" 1 $((bytes + 1)) || status=1
left=$(leftovers "$(echo $apps | tr " " "|")\|fdp")
[ "$left" = "$before" ] ||
	{ echo "FAIL: left after SIGKILL and the next start's clean exit:"; echo "$left"; status=1; }
echo "files: nothing left after a clean exit, SIGKILL's leftovers reclaimed by the next start"

# e. an EAL failure: one line, the next provider, stdout untouched
pair badeal "--provider dpdk,shm --eal-args --no-such-eal-option" "--provider dpdk,shm" || status=1
same_stdout badeal
lines=$(warn_lines "$tmp/badeal.srv.log")
grep -h 'warn' "$tmp/badeal.srv.log"
[ "$lines" -eq 1 ] && grep -q 'warn: dpdk: .*shm' "$tmp/badeal.srv.log" ||
	{ echo "FAIL: bad EAL args: expected one warning line, got:"; grep -v 'info:' "$tmp/badeal.srv.log"; status=1; }
[ "$(counter "$tmp/badeal.srv.log" conn_accel_shm)" -eq 1 ] ||
	{ echo "FAIL: bad EAL args: the connection did not use shm"; status=1; }
[ "$status" -eq 0 ] && echo PASS
exit $status
