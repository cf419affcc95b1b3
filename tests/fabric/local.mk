# tests/fabric: tests of the DPDK provider (src/fabric).

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
tests_fabric_test_fdp_dgram_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS) -pthread
tests_fabric_test_fdp_dgram_LDADD = $(FABRIC_LIBS) $(CHECK_LIBS) -lpthread
EXTRA_tests_fabric_test_fdp_dgram_DEPENDENCIES = src/fabric/libdpdk-fi.la

# FI_DPDK_POOL's claim across fork (a pool directory made by the test, no
# Open vSwitch, no EAL): a child claims a port of its own, loading claims
# none, a full pool names the reason.
check_PROGRAMS += tests/fabric/test_fdp_pool
TESTS += tests/fabric/test_fdp_pool
tests_fabric_test_fdp_pool_SOURCES = tests/fabric/test_fdp_pool.c
tests_fabric_test_fdp_pool_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_test_fdp_pool_LDADD = $(FABRIC_LIBS) $(CHECK_LIBS)
EXTRA_tests_fabric_test_fdp_pool_DEPENDENCIES = src/fabric/libdpdk-fi.la

# What libfabric's man pages (checked by fabtests' getinfo_test, av_test,
# cq_test) require of fi_getinfo's capability split, FI_EVENT/FI_SYNC_ERR
# AV inserts with failing addresses, and fi_cq_signal; over net_ring0.
check_PROGRAMS += tests/fabric/test_fdp_conform
TESTS += tests/fabric/test_fdp_conform
tests_fabric_test_fdp_conform_SOURCES = tests/fabric/test_fdp_conform.c
tests_fabric_test_fdp_conform_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS) -pthread
tests_fabric_test_fdp_conform_LDADD = $(FABRIC_LIBS) $(CHECK_LIBS) -lpthread
EXTRA_tests_fabric_test_fdp_conform_DEPENDENCIES = src/fabric/libdpdk-fi.la

# Environment probe for the af_xdp tests, independent of DPDK and of the
# provider (raw AF_XDP and bpf system calls): a SKIP means the environment
# refuses AF_XDP, never that our port failed (fabric_xdp_skip.sh checks it).
check_PROGRAMS += tests/fabric/xdp_probe
tests_fabric_xdp_probe_SOURCES = tests/fabric/xdp_probe.c
TESTS += tests/fabric/fabric_xdp_skip.sh
EXTRA_DIST += tests/fabric/fabric_xdp_skip.sh

# Probe program: open fabric/domain/endpoint as FI_DPDK_* say.
check_PROGRAMS += tests/fabric/fdp_open
tests_fabric_fdp_open_SOURCES = tests/fabric/fdp_open.c
tests_fabric_fdp_open_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_fdp_open_LDADD = $(FABRIC_LIBS)

# fi_pingpong between two processes: a net_memif pair; two network
# namespaces on a veth pair with net_af_packet and net_af_xdp.
TESTS += tests/fabric/fabric_pingpong_memif.sh \
	tests/fabric/fabric_netns_af_packet.sh \
	tests/fabric/fabric_netns_af_xdp.sh
EXTRA_DIST += tests/fabric/fabric_lib.sh tests/fabric/fabric_pingpong_memif.sh \
	tests/fabric/fabric_netns_af_packet.sh tests/fabric/fabric_netns_af_xdp.sh

# libFuzzer target of the frame parser, built with clang when configure
# found it, run for a bounded time (SKIP otherwise).
if HAVE_CLANG
check_SCRIPTS += tests/fabric/fuzz_frame
endif
tests/fabric/fuzz_frame: $(top_srcdir)/tests/fabric/fuzz_frame.c \
		$(top_srcdir)/src/fabric/fdp_frame.c $(top_srcdir)/src/fabric/fdp_frame.h \
		$(top_srcdir)/src/fabric/fdp_proto.h
	@$(MKDIR_P) tests/fabric
	$(AM_V_CCLD)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined \
		-I$(top_srcdir)/src -I$(top_builddir) -o $@ \
		$(top_srcdir)/tests/fabric/fuzz_frame.c $(top_srcdir)/src/fabric/fdp_frame.c
CLEANFILES += tests/fabric/fuzz_frame
TESTS += tests/fabric/fabric_fuzz_frame.sh
EXTRA_DIST += tests/fabric/fuzz_frame.c tests/fabric/fabric_fuzz_frame.sh

# tests of the reliability/RDM engine
include tests/fabric/rel.mk

# Nothing left behind: clean exits (memif with a socket file, net_ring with
# rte_eal_cleanup) and a SIGKILLed server reclaimed at the next start.
TESTS += tests/fabric/fabric_cleanup.sh
EXTRA_DIST += tests/fabric/fabric_cleanup.sh

# The native RDM endpoint over net_af_xdp between namespaces (the
# dgram/ofi_rxd pingpongs are fabric_netns_af_xdp.sh).
TESTS += tests/fabric/fabric_netns_af_xdp_rdm.sh
EXTRA_DIST += tests/fabric/fabric_netns_af_xdp_rdm.sh

# Bad parameters / devices that will not start: one clean error per case.
TESTS += tests/fabric/fabric_bad_input.sh
EXTRA_DIST += tests/fabric/fabric_bad_input.sh

# libfabric's fabtests (v1.17) on the provider, when the machine has them or
# their source (never downloaded): unit tests over net_ring0, client/server
# tests over a net_memif pair; SKIP naming what is missing otherwise.
TESTS += tests/fabric/fabric_fabtests.sh
EXTRA_DIST += tests/fabric/fabric_fabtests.sh

# FI_PROTO_UDP (raw UDP) and multicast on net_af_packet between two
# network namespaces, against the kernel's UDP sockets: fdp_udp (libfabric
# API only) is driven by fabric_udp.py, the kernel peer.
check_PROGRAMS += tests/fabric/fdp_udp
tests_fabric_fdp_udp_SOURCES = tests/fabric/fdp_udp.c
tests_fabric_fdp_udp_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_fdp_udp_LDADD = $(FABRIC_LIBS)
TESTS += tests/fabric/fabric_udp.sh
EXTRA_DIST += tests/fabric/fabric_udp.sh tests/fabric/fabric_udp.py
