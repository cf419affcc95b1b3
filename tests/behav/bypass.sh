#!/bin/sh
# Behaviour test: fds closed behind the wrappers' back (fclose of fdopen,
# close_range, closefrom, syscall(SYS_close)) and reused as something else;
# a daemon that closes everything above stderr and then opens its files.
# Runs bh_bypass on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-bypass
fsk_behav_compare --accel 2 bh_bypass
fsk_behav_compare --accel 2 bh_bypass --log debug
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 2 BH_ACCEPT_THREAD=1 bh_bypass
