# bench: benchmarks (not tests). Fragments per concern.
include bench/fabric.mk
# Stack benchmarks (bench-stack, bench-ready, bench-epoll).
include bench/stack.mk
include bench/ready.mk

# Pass-through overhead of the preload (bench/overhead.sh runs it with and
# without libfabsock) and the demo (bench/demo.sh, ./quickstart demo).
# `make bench` runs both; make check runs only a 1-second demo
# (tests/real/demo.sh) that checks its output, never timings.
noinst_PROGRAMS += bench/overhead
bench_overhead_SOURCES = bench/overhead.c
bench_overhead_LDADD = -ldl
EXTRA_DIST += bench/overhead.sh bench/demo.sh bench/accel.sh bench/connect.sh bench/footprint.sh \
	bench/readme_table.sh bench/apps.sh bench/lib.sh bench/bulk.sh

# Connection set-up cost, kernel vs launched (what the negotiation adds).
noinst_PROGRAMS += bench/connect
bench_connect_SOURCES = bench/connect.c
bench_connect_LDADD = -lpthread

# Steady-state bulk throughput, one connection (write and sendfile), kernel
# vs launched: start-up and set-up excluded (bench/bulk.sh).
noinst_PROGRAMS += bench/bulk
bench_bulk_SOURCES = bench/bulk.c

.PHONY: bench bench-overhead bench-demo bench-accel bench-connect bench-footprint bench-apps
bench: bench-overhead bench-demo
bench-overhead: bench/overhead tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/overhead.sh $(abs_top_builddir)
bench-demo: tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/demo.sh $(abs_top_builddir)
# Kernel vs accelerated TCP with sockperf, and redis-benchmark (bench/accel.sh).
bench-accel: tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/accel.sh $(abs_top_builddir)
bench-connect: bench/connect tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/connect.sh $(abs_top_builddir)
# Real programs (nginx, socat, asyncio, sockperf, ab, redis, memcached, wrk,
# connect+close), kernel vs shm vs dpdk, library defaults (bench/apps.sh).
bench-apps: bench/connect tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/apps.sh $(abs_top_builddir)

# What a launched process costs besides speed: RSS, first-socket start-up,
# idle CPU; kernel vs shm vs dpdk (memif).
noinst_PROGRAMS += bench/footprint
bench_footprint_SOURCES = bench/footprint.c
bench-footprint: bench/footprint tools/fabsock src/libfabsock.la
	$(SHELL) $(srcdir)/bench/footprint.sh $(abs_top_builddir)
