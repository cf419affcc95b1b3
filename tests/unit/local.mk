# tests/unit: one Check suite per module, linked against the module itself.
UNIT_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -I$(top_srcdir)/tests/unit
UNIT_LIBS = $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test_rules tests/unit/test_config tests/unit/test_fdtab
TESTS += tests/unit/test_rules tests/unit/test_config tests/unit/test_fdtab

tests_unit_test_rules_SOURCES = tests/unit/test_rules.c tests/unit/unit_main.c tests/unit/unit.h
tests_unit_test_rules_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_rules_LDADD = src/stack/libstk.la $(UNIT_LIBS)

tests_unit_test_config_SOURCES = tests/unit/test_config.c tests/unit/unit_main.c
tests_unit_test_config_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_config_LDADD = src/stack/libstk.la $(UNIT_LIBS)

# The fd table alone (not the wrappers: they would interpose the test itself).
tests_unit_test_fdtab_SOURCES = tests/unit/test_fdtab.c tests/unit/unit_main.c \
	src/preload/pl_fdtab.c
tests_unit_test_fdtab_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_fdtab_LDADD = src/stack/libstk.la $(UNIT_LIBS) -lpthread

# The real-symbol table and its system-call fallbacks.
check_PROGRAMS += tests/unit/test_real
TESTS += tests/unit/test_real
tests_unit_test_real_SOURCES = tests/unit/test_real.c tests/unit/unit_main.c \
	src/preload/pl_real.c
tests_unit_test_real_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_real_LDADD = $(UNIT_LIBS) -ldl

# stk_peer: the checks of what a negotiation peer says.
check_PROGRAMS += tests/unit/test_peer
TESTS += tests/unit/test_peer
tests_unit_test_peer_SOURCES = tests/unit/test_peer.c tests/unit/unit_main.c tests/unit/unit.h
tests_unit_test_peer_CFLAGS = $(UNIT_CFLAGS) $(FABRIC_CFLAGS)
tests_unit_test_peer_LDADD = src/stack/libstk.la $(UNIT_LIBS) $(FABRIC_LIBS) -lpthread
