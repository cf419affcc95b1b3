# src/preload: the interposition layer, linked with the stack into libfabsock.so.
noinst_LTLIBRARIES += src/preload/libpl.la
src_preload_libpl_la_SOURCES = \
	src/preload/pl_fdtab.c src/preload/pl_fdtab.h \
	src/preload/pl_guard.h \
	src/preload/pl_init.c src/preload/pl_init.h \
	src/preload/pl_real.c src/preload/pl_real.h \
	src/preload/pl_wrap.h \
	src/preload/pl_wrap_aio.c \
	src/preload/pl_wrap_bypass.c \
	src/preload/pl_wrap_fd.c \
	src/preload/pl_wrap_io.c \
	src/preload/pl_wrap_pass.c \
	src/preload/pl_wrap_proc.c \
	src/preload/pl_wrap_ready.c \
	src/preload/pl_wrap_sock.c \
	src/preload/pl_wrap_stdio.c \
	src/preload/pl_wrap_syscall.c

# SONAME libfabsock.so.0 (libtool -version-info current:revision:age);
# libfabsock.so is the link that -lfabsock finds.
lib_LTLIBRARIES += src/libfabsock.la
src_libfabsock_la_SOURCES =
src_libfabsock_la_LIBADD = src/preload/libpl.la src/stack/libstk.la -ldl -lpthread
src_libfabsock_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -shared \
	-Wl,--version-script=$(top_srcdir)/src/preload/libfabsock.map -Wl,-z,now
EXTRA_src_libfabsock_la_DEPENDENCIES = $(top_srcdir)/src/preload/libfabsock.map
EXTRA_DIST += src/preload/libfabsock.map
