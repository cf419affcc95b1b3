#!/bin/sh
# Behaviour test: IPv6, AF_UNIX paths, malformed addresses and wrong socket
# types reach the kernel through the wrappers' rule matching unharmed.
# Runs bh_addr on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-addr
fsk_behav_compare --accel 2 bh_addr
# With rules that match on addresses and ports (both kinds of action).
fsk_behav_compare --accel 0 bh_addr --rules 'use kernel tcp_client 127.0.0.0/8:1-1024; use accel tcp_server [::1]/128:*; use accel udp_sender *:*; use kernel tcp_client *:*'
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 2 BH_ACCEPT_THREAD=1 bh_addr
