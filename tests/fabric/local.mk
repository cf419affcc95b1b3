# tests/fabric: provider tests. Owned by the provider issue.

# Unit test of frame parsing/building and checksums (pure C, no EAL).
check_PROGRAMS += tests/fabric/test_fdp_frame
TESTS += tests/fabric/test_fdp_frame
tests_fabric_test_fdp_frame_SOURCES = tests/fabric/test_fdp_frame.c
tests_fabric_test_fdp_frame_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_fabric_test_fdp_frame_LDADD = src/fabric/libfdpcore.la $(CHECK_LIBS)

# tests of the reliability/RDM engine
include tests/fabric/rel.mk
