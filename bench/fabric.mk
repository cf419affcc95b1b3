# provider benchmarks (fabric_*.sh). `make bench-fabric` prints a table of
# fi_pingpong latency/bandwidth medians for dpdk (memif), shm, tcp and udp.
# Never part of `make check`.
EXTRA_DIST += bench/fabric_pingpong.sh
.PHONY: bench-fabric
bench-fabric: src/fabric/libdpdk-fi.la
	$(SHELL) $(srcdir)/bench/fabric_pingpong.sh $(abs_top_builddir)
