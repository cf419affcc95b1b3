#!/bin/sh
# Behaviour test: dup/dup2/dup3, fcntl/fcntl64, ioctl, close, high fd numbers.
# Runs bh_fd on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-fd
fsk_behav_compare --accel 8 bh_fd
# The same with every socket sent to the kernel by policy, and with debug
# logging (a log line per socket) on: neither may change what the app sees.
fsk_behav_compare --accel 0 bh_fd --default kernel
fsk_behav_compare --accel 8 bh_fd --log debug
# Accepting in a thread while the client connects, as a server process
# would: a negotiating connect gets its answer (exercises acceleration).
fsk_behav_compare --accel 8 BH_ACCEPT_THREAD=1 bh_fd
