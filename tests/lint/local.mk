# tests/lint: checks over the source tree (no build products needed).
TESTS += tests/lint/preload_iface.sh
EXTRA_DIST += tests/lint/preload_iface.sh
