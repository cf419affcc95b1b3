#!/bin/sh
# Behaviour test: signals vs blocking calls (EINTR, SA_RESTART, atomic masks
# of ppoll/pselect/epoll_pwait/epoll_pwait2).
# Runs bh_signal on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-signal
fsk_behav_compare --accel 2 bh_signal
fsk_behav_compare --accel 0 bh_signal --default kernel
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 2 BH_ACCEPT_THREAD=1 bh_signal
