# tests/pkg: the Debian packages (debian/), built from a copy of the tree,
# checked by lintian, installed, used and purged (tests/pkg/deb.sh, 1 to 3
# minutes). Not part of make check: it needs root and installs packages on
# this machine. make check-deb runs it (./quickstart check does, after the
# suites); its log is tests/pkg/deb.log, its summary tests/pkg/check-deb.log.
EXTRA_DIST += tests/pkg/deb.sh tests/pkg/deb_run.sh \
	debian/changelog debian/control debian/copyright debian/rules debian/source/format \
	debian/libfabsock0.install debian/libfabsock0.symbols debian/libfabsock-dev.install \
	debian/fabsock.install debian/libfabric1-dpdk.install debian/not-installed debian/.gitignore
check-deb:
	$(MAKE) $(AM_MAKEFLAGS) check-TESTS TESTS='tests/pkg/deb.sh' \
		TEST_SUITE_LOG='tests/pkg/check-deb.log'
.PHONY: check-deb
