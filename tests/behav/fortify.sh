#!/bin/sh
# Behaviour test: the fortified entry points (__read_chk, __recv_chk,
# __recvfrom_chk, __poll_chk, __ppoll_chk, __fdelt_chk). First proves with
# nm that bh_fortify really calls each _chk symbol (else the test would
# silently exercise the plain calls), then compares kernel vs libfabsock.
. "${top_srcdir:?run from make check or set top_srcdir}/tests/lib/common.sh"
. "$top_srcdir/tests/lib/behav.sh"
fsk_setup behav-fortify
bin="$top_builddir/tests/behav/bh_fortify"
[ -x "$bin" ] || fsk_fail "$bin not built"
fsk_need_cmd nm
undef=$(nm -u "$bin") || fsk_fail "nm -u $bin"
for sym in __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk __fdelt_chk; do
	echo "$undef" | grep -Eq "^ *U $sym(@|$)" ||
		fsk_fail "bh_fortify does not reference $sym (built without -O2 -D_FORTIFY_SOURCE=2?)"
done
echo "# bh_fortify references all six _chk symbols"
fsk_behav_compare --accel 2 bh_fortify
