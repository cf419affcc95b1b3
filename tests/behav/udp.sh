#!/bin/sh
# Behaviour test: UDP: sendto/recvfrom, connected UDP, MSG_PEEK/TRUNC, mmsg.
# Runs bh_udp on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-udp
fsk_behav_compare --accel 0 bh_udp
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 0 BH_ACCEPT_THREAD=1 bh_udp
