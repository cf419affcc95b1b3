# tests/preload: interposition edge cases (constructor order, re-entrancy).
check_LTLIBRARIES += tests/preload/libearly_ctor.la
tests_preload_libearly_ctor_la_SOURCES = tests/preload/early_ctor.c
tests_preload_libearly_ctor_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -rpath /nowhere
TESTS += tests/preload/early_ctor.sh tests/preload/exports.sh
EXTRA_DIST += tests/preload/early_ctor.sh tests/preload/exports.sh tests/preload/lib.sh
