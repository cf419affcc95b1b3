# src/stack: sockets over messages (no dlsym; testable without LD_PRELOAD).
noinst_LTLIBRARIES += src/stack/libstk.la
src_stack_libstk_la_SOURCES = \
	src/stack/stk_config.c src/stack/stk_config.h \
	src/stack/stk_counters.c src/stack/stk_counters.h \
	src/stack/stk_log.c src/stack/stk_log.h \
	src/stack/stk_rules.c src/stack/stk_rules.h \
	src/stack/stk.h \
	src/stack/stk_api.c src/stack/stk_api_proc.c src/stack/stk_api_ready.c \
	src/stack/stk_sock.c src/stack/stk_sock.h \
	src/stack/stk_tcp.c \
	src/stack/stk_sys.c src/stack/stk_sys.h
src_stack_libstk_la_CFLAGS = $(AM_CFLAGS) -fPIC

# Accelerated TCP (issue 3): endpoint per provider, negotiation, stream.
src_stack_libstk_la_SOURCES += \
	src/stack/stk_accel.c src/stack/stk_accel.h \
	src/stack/stk_conn.c src/stack/stk_conn.h \
	src/stack/stk_cork.c src/stack/stk_cork.h \
	src/stack/stk_fab.c src/stack/stk_fab.h \
	src/stack/stk_fi.c src/stack/stk_fi.h \
	src/stack/stk_lazy.c src/stack/stk_lazy.h \
	src/stack/stk_hooks.c src/stack/stk_hooks.h \
	src/stack/stk_nego.c src/stack/stk_nego.h src/stack/stk_nego_wire.c \
	src/stack/stk_peer.c src/stack/stk_peer.h \
	src/stack/stk_stream.c src/stack/stk_stream.h src/stack/stk_stream_proto.h \
	src/stack/stk_stream_proto.c \
	src/stack/stk_thread.c src/stack/stk_thread.h \
	src/stack/stk_wake.c src/stack/stk_wake.h \
	src/stack/stk_migrate.c src/stack/stk_migrate.h
src_stack_libstk_la_CFLAGS += $(FABRIC_CFLAGS)
src_stack_libstk_la_LIBADD = -ldl -lpthread

# Readiness (issue 3 item 5): poll/ppoll/select/pselect and epoll over mixed fds.
src_stack_libstk_la_SOURCES += \
	src/stack/stk_ready.c src/stack/stk_ready.h \
	src/stack/stk_poll.c \
	src/stack/stk_epoll.c src/stack/stk_epoll.h
