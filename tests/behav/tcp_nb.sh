#!/bin/sh
# Behaviour test: non-blocking TCP: EINPROGRESS, EAGAIN, O_NONBLOCK/FIONBIO.
# Runs bh_tcp_nb on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-tcp_nb
fsk_behav_compare --accel 4 bh_tcp_nb
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 4 BH_ACCEPT_THREAD=1 bh_tcp_nb
