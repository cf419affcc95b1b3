#!/bin/sh
# Behaviour test: MSG_ZEROCOPY. SO_ZEROCOPY set before connect, on an
# accelerated connection and on a listener; completions on the error queue,
# POLLERR/EPOLLERR; MSG_ZEROCOPY without the option. Runs bh_zerocopy on the
# kernel and under libfabsock; transcripts must match. The kernel gives the
# completions, so libfabsock hands such sockets to it: the launched run must
# show the accelerated connection migrated (migrate_zerocopy) and the
# not-yet-connected ones refused (fallback_zerocopy).
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-zerocopy
log="$fsk_tmp/bh_zerocopy.log"
for env in "" BH_ACCEPT_THREAD=1; do
	# shellcheck disable=SC2086 # one NAME=value word or none
	fsk_behav_compare --accel 4 $env bh_zerocopy
	mig=$(fsk_counter "$log" migrate_zerocopy)
	fell=$(fsk_counter "$log" fallback_zerocopy)
	[ "$mig" -ge 1 ] && [ "$fell" -ge 2 ] ||
		fsk_fail "bh_zerocopy: migrate_zerocopy = $mig (want 1), fallback_zerocopy = $fell (want 2)"
done
