#!/bin/sh
# Behaviour test: readiness and error semantics of connected sockets that must
# match the kernel's (bh_ready.c): shutdown(SHUT_RD), an epoll fd seen by
# poll/select/epoll, nested epoll sets, EPOLLET after a partial read on a
# connection that fell back to the kernel, a writer whose peer was killed.
# Runs bh_ready on the kernel and under the launcher on shm; transcripts must
# match. 127.0.0.2 is a kernel server by rule, so the EPOLLET connections
# fall back (their client negotiates with a plain peer); every other
# connection must be accelerated.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-ready
# The killed-peer rounds fork their server: a slow child (sanitizers, load)
# must not send its connection to the kernel, hence the longer wait.
fsk_behav_compare --accel 16 FABSOCK_NEGO_WAIT_MS=2000 bh_ready --provider shm --rules 'use kernel tcp_server 127.0.0.2:*'
log="$fsk_tmp/bh_ready.log"
# Accelerated in the parent process: 2 (SHUT_RD) + 2 x 2 (epoll fd) + 2
# (nested) connection ends, 8 killed-peer clients (ET_ROUNDS, KILL_ROUNDS
# in bh_ready.c); the 24 EPOLLET clients fell back on meeting a plain server.
fsk_assert_accel "$log" bh_ready 16 shm
fell=$(fsk_counter "$log" fallback_plain_peer)
[ "$fell" -ge 24 ] || fsk_fail "bh_ready: $fell EPOLLET connection(s) fell back, want 24"
fsk_note "bh_ready: $(fsk_counter "$log" accelerated) accelerated over shm, $fell fell back"
