#!/bin/sh
# Behaviour test: socketpair and SCM_RIGHTS-passed sockets.
# Runs bh_unix on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-unix
fsk_behav_compare --accel 0 bh_unix
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 0 BH_ACCEPT_THREAD=1 bh_unix
