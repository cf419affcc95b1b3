#!/bin/sh
# Sockets used by another preloaded library's constructor, before and after
# libfabsock's own constructor, in both LD_PRELOAD orders.
set -u
. "$top_srcdir/tests/preload/lib.sh"
early="$top_builddir/tests/preload/.libs/libearly_ctor.so"
status=0
for order in "$fsk_lib $early" "$early $fsk_lib"; do
	out=$(FABSOCK_LOG=debug LD_PRELOAD="$fsk_san_preload $order" timeout 10 /bin/sh -c 'exit 0' 2>&1)
	rc=$?
	echo "order [$order]: rc=$rc"
	echo "$out" | sed 's/^/  /'
	echo "$out" | grep -q "early constructor: ok" || { echo "FAIL: early constructor"; status=1; }
	echo "$out" | grep -q "libfabsock .* active" || { echo "FAIL: libfabsock not active"; status=1; }
	echo "$out" | grep -q "tcp_server local 127.0.0.1:" || { echo "FAIL: early socket not seen"; status=1; }
	[ $rc -eq 0 ] || status=1
done
exit $status
