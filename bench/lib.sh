# Shell helpers shared by bench/accel.sh and bench/apps.sh (sourced, not run).
# The sourcing script sets: tmp (its scratch directory), spid (the server's
# pid, or empty), pin (1: pin server to CPU 0 and client to CPU 1),
# own_launcher and base_launcher (tools/fabsock of this build and of BASE),
# and fsk_env (extra environment words for launched processes, may be empty).

# port: a free TCP port on 127.0.0.1.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# listening PORT: a second for the server to start, then (a server slow to
# start on a loaded machine) up to 10 s more until it listens on PORT.
listening() {
	sleep 1
	command -v ss >/dev/null || return 0
	i=0
	while [ $i -lt 100 ] && ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; do
		kill -0 "$spid" 2>/dev/null || return 0
		sleep 0.1
		i=$((i + 1))
	done
}

# pin_default: pin=1 when PIN is 1 (default), there are 2 CPUs or more and
# taskset exists.
pin_default() {
	pin=
	[ "${PIN:-1}" = 1 ] && [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] && command -v taskset >/dev/null &&
		pin=1
}

# wrap PATH ROLE: the command prefix that runs a ROLE (server | client) on PATH
# (kernel, a provider PROV, or PROV@base: the BASE build's launcher). dpdk: the
# two processes joined by a net_memif pair ($tmp/memif.sock), server
# 198.18.0.1, client 198.18.0.2. Launched processes log at info, so each dumps
# its counters at exit.
wrap() {
	w=
	if [ -n "$pin" ]; then
		if [ "$2" = server ]; then w="taskset -c 0"; else w="taskset -c 1"; fi
	fi
	launcher=$own_launcher
	case $1 in *@base)
		[ -x "$base_launcher" ] || { echo "$(basename "$0"): $1 needs BASE=builddir" >&2; exit 2; }
		launcher=$base_launcher ;;
	esac
	case ${1%@base} in
	kernel) ;;
	dpdk)
		if [ "$2" = server ]; then ip=198.18.0.1; else ip=198.18.0.2; fi
		w="$w env ${fsk_env}FABSOCK_LOG=info $launcher --dpdk net_memif0,role=$2,socket=$tmp/memif.sock --ip $ip/24 --" ;;
	*) w="$w env FABSOCK_PROVIDERS=${1%@base} ${fsk_env}FABSOCK_LOG=info $launcher --" ;;
	esac
	echo "$w"
}

# pid_of NAME PORT: the pid of the process named NAME (its comm) whose command
# line has "-p PORT" (the launcher, env and timeout in front of it have other
# names); empty when none runs.
pid_of() {
	for p in $(pgrep -f -- "-p $2" 2>/dev/null); do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$1" ] && { echo "$p"; return 0; }
	done
}

# cpu_ticks PID...: user + system clock ticks of the processes (all their
# threads) so far; a pid that is gone counts 0.
cpu_ticks() {
	t=0
	for p in "$@"; do
		[ -n "$p" ] || continue
		v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/"$p"/stat 2>/dev/null)
		t=$((t + ${v:-0}))
	done
	echo "$t"
}

# awk_median: an awk function, median(LIST) of a space-separated list of
# numbers; put in front of an awk program: awk "$awk_median"'...'.
awk_median='function median(list,   a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
'

# now_s: wall clock, seconds with fractions.
now_s() { date +%s.%N; }
