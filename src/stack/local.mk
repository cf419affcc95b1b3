# src/stack: sockets over messages (no dlsym; testable without LD_PRELOAD).
# Files in the layer order of src/stack/layers.txt (checked by tests/lint/layers.sh).
noinst_LTLIBRARIES += src/stack/libstk.la
EXTRA_DIST += src/stack/layers.txt
src_stack_libstk_la_SOURCES = \
	src/stack/stk_sys.c src/stack/stk_sys.h \
	src/stack/stk_time.h \
	src/stack/stk_log.c src/stack/stk_log.h \
	src/stack/stk_rules.c src/stack/stk_rules.h \
	src/stack/stk_config.c src/stack/stk_config.h \
	src/stack/stk_counters.c src/stack/stk_counters.h \
	src/stack/stk_stat.c src/stack/stk_stat.h \
	src/stack/stk_hooks.c src/stack/stk_hooks.h \
	src/stack/stk_thread.c src/stack/stk_thread.h \
	src/stack/stk_wake.c src/stack/stk_wake.h \
	src/stack/stk_watch.c src/stack/stk_watch.h \
	src/stack/stk_wait.c src/stack/stk_wait.h \
	src/stack/stk_fi.c src/stack/stk_fi.h \
	src/stack/stk_fab.c src/stack/stk_fab.h src/stack/stk_fab_int.h src/stack/stk_fab_open.c \
	src/stack/stk_fab_io.c src/stack/stk_fab_addr.c src/stack/stk_fab_bell.c src/stack/stk_fab_bell.h \
	src/stack/stk_nego.c src/stack/stk_nego.h src/stack/stk_nego_wire.c \
	src/stack/stk_stream_proto.c src/stack/stk_stream_proto.h \
	src/stack/stk_peer.c src/stack/stk_peer.h \
	src/stack/stk_leftover.c src/stack/stk_leftover.h \
	src/stack/stk_cork.c src/stack/stk_cork.h \
	src/stack/stk_stream.c src/stack/stk_stream.h src/stack/stk_stream_int.h \
	src/stack/stk_stream_table.c src/stack/stk_stream_tx.c src/stack/stk_stream_rx.c \
	src/stack/stk_stream_close.c src/stack/stk_stream_sleep.c src/stack/stk_stream_wait.c \
	src/stack/stk_stream_mig.c src/stack/stk_stat_conn.c src/stack/stk_stat_conn.h \
	src/stack/stk_conn.c src/stack/stk_conn.h \
	src/stack/stk_lazy.c src/stack/stk_lazy.h src/stack/stk_lazy_int.h src/stack/stk_lazy_step.c \
	src/stack/stk_lazy_thread.c \
	src/stack/stk_ready.c src/stack/stk_ready.h \
	src/stack/stk_epoll.c src/stack/stk_epoll.h src/stack/stk_epoll_int.h \
	src/stack/stk_epoll_item.c src/stack/stk_epoll_ctl.c src/stack/stk_epoll_wait.c \
	src/stack/stk_poll.c \
	src/stack/stk_migrate.c src/stack/stk_migrate.h \
	src/stack/stk_sock.c src/stack/stk_sock.h \
	src/stack/stk_accel.c src/stack/stk_accel.h \
	src/stack/stk_tcp.c \
	src/stack/stk_udp.c src/stack/stk_udp.h src/stack/stk_udp_fab.c src/stack/stk_udp_rx.c \
	src/stack/stk_udp_opt.c src/stack/stk_udp_exec.c \
	src/stack/stk_udp_ready.c \
	src/stack/stk_api.c src/stack/stk_api_proc.c src/stack/stk_api_ready.c \
	src/stack/stk.h
src_stack_libstk_la_CFLAGS = $(AM_CFLAGS) -fPIC $(FABRIC_CFLAGS)
src_stack_libstk_la_LIBADD = -ldl -lpthread
