#!/bin/sh
# Behaviour test: poll, ppoll, select, pselect over mixed fds.
# Runs bh_poll on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-poll
fsk_behav_compare --accel 4 bh_poll
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 4 BH_ACCEPT_THREAD=1 bh_poll
