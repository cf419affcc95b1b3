# tests/stack/ready.mk: readiness (poll/select/epoll) over mixed fds.
# Included at the end of tests/stack/local.mk.
# test_ready (poll, select) and test_ready_epoll share the connection double
# (tests/stack/ready_fake.h).
READY_FAKE_SOURCES = tests/stack/ready_fake.c tests/stack/ready_fake.h
check_PROGRAMS += tests/stack/test_ready
TESTS += tests/stack/test_ready
tests_stack_test_ready_SOURCES = tests/stack/test_ready.c $(READY_FAKE_SOURCES)
tests_stack_test_ready_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

check_PROGRAMS += tests/stack/test_ready_epoll
TESTS += tests/stack/test_ready_epoll
tests_stack_test_ready_epoll_SOURCES = tests/stack/test_ready_epoll.c $(READY_FAKE_SOURCES)
tests_stack_test_ready_epoll_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_epoll_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

check_PROGRAMS += tests/stack/test_ready_pair
TESTS += tests/stack/test_ready_pair
tests_stack_test_ready_pair_SOURCES = tests/stack/test_ready_pair.c $(STK_PAIR_SOURCES)
tests_stack_test_ready_pair_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_pair_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

# test_ready_dgram: datagram sockets' tagged objects through poll and epoll.
check_PROGRAMS += tests/stack/test_ready_dgram
TESTS += tests/stack/test_ready_dgram
tests_stack_test_ready_dgram_SOURCES = tests/stack/test_ready_dgram.c
tests_stack_test_ready_dgram_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_dgram_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread
