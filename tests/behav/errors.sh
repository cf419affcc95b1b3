#!/bin/sh
# Behaviour test: every call on bad fds (EBADF, ENOTSOCK), bad socket() args.
# Runs bh_errors on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-errors
fsk_behav_compare --accel 0 bh_errors
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 0 BH_ACCEPT_THREAD=1 bh_errors
