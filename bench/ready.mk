# bench/ready.mk: poll/epoll-driven 64 B ping-pong, accelerated (stack API) vs
# kernel TCP: `make bench-ready`. Included from bench/local.mk.
noinst_PROGRAMS += bench/ready_poll
bench_ready_poll_SOURCES = bench/ready_poll.c
bench_ready_poll_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
bench_ready_poll_LDADD = src/stack/libstk.la $(FABRIC_LIBS) -lpthread

.PHONY: bench-ready
bench-ready: bench/ready_poll
	./bench/ready_poll 50000 shm
	./bench/ready_poll 20000 tcp

# epoll_wait with up to 10,000 registered idle connections, kernel vs
# accelerated (through the launcher): `make bench-epoll`.
noinst_PROGRAMS += bench/epoll_idle
bench_epoll_idle_SOURCES = bench/epoll_idle.c
EXTRA_DIST += bench/epoll_idle.sh

.PHONY: bench-epoll
bench-epoll: bench/epoll_idle tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/epoll_idle.sh $(abs_top_builddir)
