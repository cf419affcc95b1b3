#!/bin/sh
# Behaviour test: threads creating, using, duplicating and closing sockets
# concurrently; cross-thread wake-ups (shutdown, epoll_ctl).
# Runs bh_threads on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-threads
fsk_behav_compare --accel 1202 bh_threads
fsk_behav_compare --accel 1202 bh_threads --log debug
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 1202 BH_ACCEPT_THREAD=1 bh_threads
