# 64 B ping-pong over the stack's own API (shm) vs kernel TCP: `make bench-stack`.
noinst_PROGRAMS += bench/stack_pingpong
bench_stack_pingpong_SOURCES = bench/stack_pingpong.c
bench_stack_pingpong_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS)
bench_stack_pingpong_LDADD = src/stack/libstk.la $(FABRIC_LIBS) -lpthread

.PHONY: bench-stack
bench-stack: bench/stack_pingpong
	./bench/stack_pingpong 100000 shm
	./bench/stack_pingpong 20000 tcp
