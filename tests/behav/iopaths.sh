#!/bin/sh
# Behaviour test: every way glibc moves bytes through a TCP socket (splice,
# tee, vmsplice, copy_file_range, dprintf and __dprintf_chk, stdio on
# fdopen'ed sockets, syscall(), preadv2/pwritev2 and friends, POSIX aio) and
# the iovec rules (NULL/empty elements, IOV_MAX, MSG_TRUNC without a buffer),
# each before and after acceleration. Runs bh_iopaths on the kernel and
# under libfabsock; transcripts must match byte for byte, and the launched
# run must have accelerated the warm connections (a silent fallback fails)
# and moved connections to the kernel for stdio and aio.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-iopaths
fsk_need_cmd nm
# The program really calls the names the preload must catch (not something
# gcc turned them into).
for s in splice tee vmsplice copy_file_range dprintf vdprintf __dprintf_chk \
	__vdprintf_chk fdopen syscall preadv2 pwritev2 aio_read aio_write; do
	nm -u "$top_builddir/tests/behav/bh_iopaths" | grep -q " $s\(@\|\$\)" ||
		fsk_fail "bh_iopaths does not reference $s"
done
log="$fsk_tmp/bh_iopaths.log"
fsk_behav_compare --accel 22 bh_iopaths
# 11 warm pairs (2 ends each) reach the fabric before their path runs.
fsk_assert_accel "$log" "bh_iopaths" 22 shm
mig=$(fsk_counter "$log" migrate_bypass)
[ "$mig" -ge 3 ] || fsk_fail "bh_iopaths: migrate_bypass = $mig, want >= 3 (stdio, std streams, aio)"
fsk_behav_compare --accel 22 BH_ACCEPT_THREAD=1 bh_iopaths
fsk_assert_accel "$log" "bh_iopaths (accept thread)" 22 shm
