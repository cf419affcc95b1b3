#!/bin/sh
# Behaviour test: fork and daemon with inherited sockets.
# Runs bh_fork on the kernel and under libfabsock; transcripts must match.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-fork
fsk_behav_compare bh_fork
