# tests of the reliability/RDM engine. The unit tests compile the pure-C
# engines directly (no DPDK, no EAL) and run them over a simulated lossy link.
fdp_rel_unit_sources = \
	src/fabric/fdp_rel.c \
	src/fabric/fdp_rel_rx.c \
	src/fabric/fdp_rel_timer.c \
	src/fabric/fdp_msg.c \
	src/fabric/fdp_msg_send.c \
	src/fabric/fdp_msg_recv.c \
	tests/fabric/rel_sim.h \
	tests/fabric/rel_sim.c
fdp_rel_unit_cflags = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
# the small-scenario harness of test_rel and test_rel_timers
fdp_rel_small_sources = tests/fabric/rel_small.h tests/fabric/rel_small.c

check_PROGRAMS += tests/fabric/test_rel tests/fabric/test_rel_timers tests/fabric/test_msg
TESTS += tests/fabric/test_rel tests/fabric/test_rel_timers tests/fabric/test_msg

tests_fabric_test_rel_SOURCES = tests/fabric/test_rel.c $(fdp_rel_small_sources) \
	$(fdp_rel_unit_sources)
tests_fabric_test_rel_CFLAGS = $(fdp_rel_unit_cflags)
tests_fabric_test_rel_LDADD = $(CHECK_LIBS)

tests_fabric_test_rel_timers_SOURCES = tests/fabric/test_rel_timers.c $(fdp_rel_small_sources) \
	$(fdp_rel_unit_sources)
tests_fabric_test_rel_timers_CFLAGS = $(fdp_rel_unit_cflags)
tests_fabric_test_rel_timers_LDADD = $(CHECK_LIBS)

tests_fabric_test_msg_SOURCES = tests/fabric/test_msg.c $(fdp_rel_unit_sources)
tests_fabric_test_msg_CFLAGS = $(fdp_rel_unit_cflags)
tests_fabric_test_msg_LDADD = $(CHECK_LIBS)

# Behaviour test: the native RDM endpoint between two processes over a
# net_memif pair (fi_pingpong, tagged, 1 MiB, several endpoints, 256 MiB
# byte-exact with injected loss/duplication/reordering). rdm_xfer is its
# libfabric test program.
check_PROGRAMS += tests/fabric/rdm_xfer
tests_fabric_rdm_xfer_SOURCES = tests/fabric/rdm_xfer.c
tests_fabric_rdm_xfer_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_rdm_xfer_LDADD = $(FABRIC_LIBS)
TESTS += tests/fabric/fabric_rdm_memif.sh
EXTRA_DIST += tests/fabric/fabric_rdm_memif.sh

# libFuzzer target of the reliability engine + message layer (clang when
# configure found it, run for a bounded time; SKIP otherwise).
if HAVE_CLANG
check_SCRIPTS += tests/fabric/fuzz_rel
endif
tests/fabric/fuzz_rel: $(top_srcdir)/tests/fabric/fuzz_rel.c $(top_srcdir)/tests/fabric/rel_sim.c \
		$(top_srcdir)/tests/fabric/rel_sim.h $(top_srcdir)/src/fabric/fdp_rel.c \
		$(top_srcdir)/src/fabric/fdp_rel_rx.c $(top_srcdir)/src/fabric/fdp_rel_timer.c \
		$(top_srcdir)/src/fabric/fdp_rel.h $(top_srcdir)/src/fabric/fdp_rel_int.h \
		$(top_srcdir)/src/fabric/fdp_rel_proto.h \
		$(top_srcdir)/src/fabric/fdp_msg.c $(top_srcdir)/src/fabric/fdp_msg_send.c \
		$(top_srcdir)/src/fabric/fdp_msg_recv.c $(top_srcdir)/src/fabric/fdp_msg.h \
		$(top_srcdir)/src/fabric/fdp_msg_int.h
	@$(MKDIR_P) tests/fabric
	$(AM_V_CCLD)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined \
		-I$(top_srcdir)/src -I$(top_srcdir)/tests/fabric -I$(top_builddir) -o $@ \
		$(top_srcdir)/tests/fabric/fuzz_rel.c $(top_srcdir)/tests/fabric/rel_sim.c \
		$(top_srcdir)/src/fabric/fdp_rel.c $(top_srcdir)/src/fabric/fdp_rel_rx.c \
		$(top_srcdir)/src/fabric/fdp_rel_timer.c $(top_srcdir)/src/fabric/fdp_msg.c \
		$(top_srcdir)/src/fabric/fdp_msg_send.c $(top_srcdir)/src/fabric/fdp_msg_recv.c
CLEANFILES += tests/fabric/fuzz_rel
TESTS += tests/fabric/fabric_fuzz_rel.sh
EXTRA_DIST += tests/fabric/fuzz_rel.c tests/fabric/fabric_fuzz_rel.sh

# Behaviour test: timers run from the progress thread while the application
# makes no libfabric call (rdm_xfer -S, 10 % loss).
TESTS += tests/fabric/fabric_rdm_stall.sh
EXTRA_DIST += tests/fabric/fabric_rdm_stall.sh

# Behaviour test: a completed send (fi_inject, FI_INJECT_COMPLETE) reaches
# the peer although the sender closes its endpoint right after it, with 30 %
# loss on the sender (fi_close lingers until the peer acknowledged).
check_PROGRAMS += tests/fabric/rdm_close
tests_fabric_rdm_close_SOURCES = tests/fabric/rdm_close.c
tests_fabric_rdm_close_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
tests_fabric_rdm_close_LDADD = $(FABRIC_LIBS)
TESTS += tests/fabric/fabric_rdm_close.sh
EXTRA_DIST += tests/fabric/fabric_rdm_close.sh
