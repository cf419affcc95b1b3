# Shared by the preload tests: the library under test, and (in a sanitizer build)
# the runtime libraries that must be loaded before it.
fsk_lib="$top_builddir/src/.libs/libfabsock.so"
fsk_san_preload=""
if [ "${FSK_SANITIZERS:-no}" = yes ]; then
	fsk_san_preload="$($CC -print-file-name=libasan.so) $($CC -print-file-name=libubsan.so)"
fi
[ -f "$fsk_lib" ] || { echo "missing $fsk_lib"; exit 99; }
