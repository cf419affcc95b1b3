# tests/stack/ready.mk: readiness (poll/select/epoll) over mixed fds.
# Included at the end of tests/stack/local.mk.
check_PROGRAMS += tests/stack/test_ready
TESTS += tests/stack/test_ready
tests_stack_test_ready_SOURCES = tests/stack/test_ready.c
tests_stack_test_ready_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread

check_PROGRAMS += tests/stack/test_ready_pair
TESTS += tests/stack/test_ready_pair
tests_stack_test_ready_pair_SOURCES = tests/stack/test_ready_pair.c $(STK_PAIR_SOURCES)
tests_stack_test_ready_pair_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_ready_pair_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread
