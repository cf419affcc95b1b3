#!/bin/sh
# Behaviour test: sendfile/sendfile64 into TCP and UDP.
# Runs bh_sendfile on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-sendfile
fsk_behav_compare --accel 2 bh_sendfile
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 2 BH_ACCEPT_THREAD=1 bh_sendfile
# The copying path (a sendfile never moves its connection to the kernel):
# chunks, offsets and short counts through the stack.
fsk_behav_compare --accel 2 FABSOCK_SENDFILE_KERNEL=0 bh_sendfile
