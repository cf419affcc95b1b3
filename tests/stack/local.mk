# tests/stack: accelerated TCP through the stack's own API (no LD_PRELOAD).
# The suites over a real connection share its set-up (tests/lib/stk_pair.h).
STK_PAIR_SOURCES = tests/lib/stk_pair.c tests/lib/stk_pair.h tests/lib/tcp_pair.c \
	tests/lib/tcp_pair.h
# main() of the Check suite programs here and in tests/unit.
EXTRA_DIST += tests/lib/check_main.h
# test_stream (the stream) and test_nego (negotiation fallbacks, codec) share
# a forked client (tests/stack/fork_pair.h).
FORK_PAIR_SOURCES = tests/stack/fork_pair.c tests/stack/fork_pair.h $(STK_PAIR_SOURCES)
# test_udp: an accelerated UDP socket's control messages and multicast path.
check_PROGRAMS += tests/stack/test_udp
TESTS += tests/stack/test_udp
tests_stack_test_udp_SOURCES = tests/stack/test_udp.c
tests_stack_test_udp_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_udp_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread
check_PROGRAMS += tests/stack/test_stream
TESTS += tests/stack/test_stream
tests_stack_test_stream_SOURCES = tests/stack/test_stream.c $(FORK_PAIR_SOURCES)
tests_stack_test_stream_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_stream_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

check_PROGRAMS += tests/stack/test_nego
TESTS += tests/stack/test_nego
tests_stack_test_nego_SOURCES = tests/stack/test_nego.c $(FORK_PAIR_SOURCES)
tests_stack_test_nego_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_nego_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread
include tests/stack/ready.mk

# The shm bell between two endpoints of one process (stk_fab_bell.h).
check_PROGRAMS += tests/stack/test_fab_bell
TESTS += tests/stack/test_fab_bell
tests_stack_test_fab_bell_SOURCES = tests/stack/test_fab_bell.c
tests_stack_test_fab_bell_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_fab_bell_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

# The leftover of a migrated connection (fork/exec), no fabric needed.
check_PROGRAMS += tests/stack/test_migrate
TESTS += tests/stack/test_migrate
tests_stack_test_migrate_SOURCES = tests/stack/test_migrate.c
tests_stack_test_migrate_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_migrate_LDADD = src/stack/libstk.la $(CHECK_LIBS) -lpthread

# libFuzzer targets for the bytes a peer sends on the stack's side: the
# negotiation records with the checks of what they say (fuzz_nego), and the
# stream header of every fabric message (fuzz_stream). Built with clang when
# configure found it, run for a bounded time from a seed corpus kept here
# (tests/stack/corpus/*), SKIP otherwise.
if HAVE_CLANG
check_SCRIPTS += tests/stack/fuzz_nego tests/stack/fuzz_stream
endif
STK_FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -I$(top_srcdir)/src -I$(top_builddir) \
	$(FABRIC_CFLAGS)
tests/stack/fuzz_nego: $(top_srcdir)/tests/stack/fuzz_nego.c \
		$(top_srcdir)/src/stack/stk_nego_wire.c $(top_srcdir)/src/stack/stk_peer.c \
		$(top_srcdir)/src/stack/stk_nego.h $(top_srcdir)/src/stack/stk_peer.h
	@$(MKDIR_P) tests/stack
	$(AM_V_CCLD)$(CLANG) $(STK_FUZZ_FLAGS) -o $@ $(top_srcdir)/tests/stack/fuzz_nego.c \
		$(top_srcdir)/src/stack/stk_nego_wire.c $(top_srcdir)/src/stack/stk_peer.c
tests/stack/fuzz_stream: $(top_srcdir)/tests/stack/fuzz_stream.c \
		$(top_srcdir)/src/stack/stk_stream_proto.c $(top_srcdir)/src/stack/stk_stream_proto.h
	@$(MKDIR_P) tests/stack
	$(AM_V_CCLD)$(CLANG) $(STK_FUZZ_FLAGS) -o $@ $(top_srcdir)/tests/stack/fuzz_stream.c \
		$(top_srcdir)/src/stack/stk_stream_proto.c
CLEANFILES += tests/stack/fuzz_nego tests/stack/fuzz_stream
TESTS += tests/stack/stack_fuzz.sh
EXTRA_DIST += tests/stack/fuzz_nego.c tests/stack/fuzz_stream.c tests/stack/stack_fuzz.sh \
	tests/stack/corpus
