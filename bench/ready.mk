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
