# tests/stack: accelerated TCP through the stack's own API (no LD_PRELOAD).
check_PROGRAMS += tests/stack/test_stream
TESTS += tests/stack/test_stream
tests_stack_test_stream_SOURCES = tests/stack/test_stream.c
tests_stack_test_stream_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_stream_LDADD = src/stack/libstk.la $(CHECK_LIBS) $(FABRIC_LIBS) -lpthread
include tests/stack/ready.mk

# The leftover of a migrated connection (fork/exec), no fabric needed.
check_PROGRAMS += tests/stack/test_migrate
TESTS += tests/stack/test_migrate
tests_stack_test_migrate_SOURCES = tests/stack/test_migrate.c
tests_stack_test_migrate_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(FABRIC_CFLAGS)
tests_stack_test_migrate_LDADD = src/stack/libstk.la $(CHECK_LIBS) -lpthread
