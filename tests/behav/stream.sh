#!/bin/sh
# Behaviour test: TCP stream semantics under churn (both directions, mixed
# APIs and sizes, MSG_PEEK, MSG_WAITALL) and resets (close with unread
# data, SO_LINGER 0).
# Runs bh_stream on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-stream
fsk_behav_compare --accel 6 bh_stream
fsk_behav_compare --accel 0 bh_stream --default kernel
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 6 BH_ACCEPT_THREAD=1 bh_stream
