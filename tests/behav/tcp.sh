#!/bin/sh
# Behaviour test: blocking TCP: every data call, options, names, shutdown, bulk.
# Runs bh_tcp on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-tcp
fsk_behav_compare --accel 4 bh_tcp
# The same with every socket sent to the kernel by policy, and with debug
# logging (a log line per socket) on: neither may change what the app sees.
fsk_behav_compare --accel 0 bh_tcp --default kernel
fsk_behav_compare --accel 4 bh_tcp --log debug
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 4 BH_ACCEPT_THREAD=1 bh_tcp
