# tests/fabric: provider tests. Owned by the provider issue.

# Unit test of frame parsing/building and checksums (pure C, no EAL).
check_PROGRAMS += tests/fabric/test_fdp_frame
TESTS += tests/fabric/test_fdp_frame
tests_fabric_test_fdp_frame_SOURCES = tests/fabric/test_fdp_frame.c
tests_fabric_test_fdp_frame_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_fabric_test_fdp_frame_LDADD = src/fabric/libfdpcore.la $(CHECK_LIBS)

# The provider's objects and DGRAM endpoint in one process over net_ring0
# (a loopback device): addresses, CQ formats/data/errors, wait fd, ARP
# failure, bad device, affinity and signal handlers left alone.
check_PROGRAMS += tests/fabric/test_fdp_dgram
TESTS += tests/fabric/test_fdp_dgram
tests_fabric_test_fdp_dgram_SOURCES = tests/fabric/test_fdp_dgram.c
tests_fabric_test_fdp_dgram_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_test_fdp_dgram_LDADD = $(FABRIC_LIBS) $(CHECK_LIBS)
EXTRA_tests_fabric_test_fdp_dgram_DEPENDENCIES = src/fabric/libdpdk-fi.la

# Two processes over a net_memif pair with fi_pingpong.
TESTS += tests/fabric/fabric_pingpong_memif.sh
EXTRA_DIST += tests/fabric/fabric_lib.sh tests/fabric/fabric_pingpong_memif.sh

# tests of the reliability/RDM engine
include tests/fabric/rel.mk
