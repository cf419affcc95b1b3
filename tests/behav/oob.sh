#!/bin/sh
# Behaviour test: TCP urgent data (MSG_OOB, POLLPRI, SIOCATMARK, SO_OOBINLINE).
# Runs bh_oob on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-oob
fsk_behav_compare --accel 10 bh_oob
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 10 BH_ACCEPT_THREAD=1 bh_oob
