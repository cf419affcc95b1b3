# tests/lint: structure checks over the sources (no build products needed).
TESTS += tests/lint/layers.sh tests/lint/sizes.sh tests/lint/preload_iface.sh
EXTRA_DIST += tests/lint/layers.sh tests/lint/sizes.sh tests/lint/preload_iface.sh
