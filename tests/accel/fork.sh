#!/bin/sh
# fork, exec and fd passing with accelerated connections: both ends launched
# with FABSOCK_TCP_ACCEL=1, over shm and over tcp. fork.py runs each scenario:
# a server that forks per connection and echoes 1 MiB; prefork workers that
# accept on an inherited listener (accelerated on their own endpoints); parent
# and child using one connection; 1 MiB in flight and unread at fork; 1 MiB
# sent just before it; the peer blocked in recv, epoll_wait and poll at fork
# time; an idle peer (its negotiation thread answers; the connection goes
# on on the kernel); exec with an inherited connection and unread bytes;
# inetd-style fork + dup2 + exec with the request unread; SCM_RIGHTS. Each
# checks exact bytes, that the connection was accelerated before, and that no
# migration ended without the peer's answer. (A peer busy for seconds:
# fork_busy.sh.)
. "$top_srcdir/tests/accel/lib.sh"
fork_py="$top_srcdir/tests/accel/fork.py"
status=0

run() { # provider scenario
	prov=$1
	scen=$2
	port=$(free_port)
	rm -f "$tmp/srv.out"
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$fork_py" server "$scen" "$port" \
		>"$tmp/srv.out" 2>"$tmp/srv.log" &
	spid=$!
	pids="$pids $spid"
	wait_ready "$tmp/srv.out" || { cat "$tmp/srv.log"; return 1; }
	env FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=2000 FABSOCK_PROVIDERS="$prov" FABSOCK_LOG=info \
		timeout 60 "$launcher" -- "$python" "$fork_py" client "$scen" "$port" \
		>"$tmp/cli.out" 2>"$tmp/cli.log"
	crc=$?
	wait $spid
	src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "FAIL: $prov $scen: client $crc server $src"
		grep -a -E "FAIL|warn|error" "$tmp/cli.log" "$tmp/srv.log" | grep -v "fi_getinfo" | head -20
		return 1
	fi
	mig=$(counter "$tmp/cli.log" migrated_to_kernel)
	echo "ok: $prov $scen (client migrated $mig connection(s) on the peer's request)"
}

for prov in shm tcp; do
	for scen in perconn prefork shared inflight sendfork recvblock epollblock pollblock idle exec inetd pass; do
		run "$prov" "$scen" || status=1
	done
done
exit $status
