# provider benchmarks (fabric_*). `make bench-fabric` prints a table of
# fi_pingpong latency/bandwidth medians for dpdk (memif), shm, tcp and udp,
# then the CQ wait-fd wake-up latency. Never part of `make check`.
noinst_PROGRAMS += bench/fabric_wakeup
bench_fabric_wakeup_SOURCES = bench/fabric_wakeup.c
bench_fabric_wakeup_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS) -pthread
bench_fabric_wakeup_LDADD = $(FABRIC_LIBS) -lpthread
EXTRA_DIST += bench/fabric_pingpong.sh
.PHONY: bench-fabric
bench-fabric: src/fabric/libdpdk-fi.la bench/fabric_wakeup
	$(SHELL) $(srcdir)/bench/fabric_pingpong.sh $(abs_top_builddir)
	FI_PROVIDER_PATH=$(abs_top_builddir)/src/fabric/.libs FI_DPDK_DEVICE=net_ring0 \
	FI_DPDK_IP=198.18.9.1/24 bench/fabric_wakeup
EXTRA_DIST += bench/fabric_rdm.sh
# What ordering the EAL start against libfabric's load could gain (the
# loader lock held through libfabric's PSM constructors): startup_order.c.
noinst_PROGRAMS += bench/startup_order
bench_startup_order_SOURCES = bench/startup_order.c
bench_startup_order_CFLAGS = $(AM_CFLAGS) $(DPDK_CFLAGS) -pthread
bench_startup_order_LDADD = $(DPDK_LIBS) -ldl -lpthread
