# src/fabric: the libfabric DPDK provider (libdpdk-fi.so).
#
# libfdpcore.la: the parts with no DPDK dependency (frame parsing/building),
# linked into the provider and into unit tests and the fuzzer.
# libdpdk-fi.la: the provider, a libtool module installed where libfabric
# looks for external providers; it exports fi_prov_ini only (fdp.map).
# -z nodelete: libfabric dlcloses providers at exit while DPDK's interrupt
# thread (code in librte_*, log lines through our log hook) still runs; the
# provider and its DPDK libraries must stay mapped until the process ends.
noinst_LTLIBRARIES += src/fabric/libfdpcore.la
src_fabric_libfdpcore_la_SOURCES = \
	src/fabric/fdp_proto.h \
	src/fabric/fdp_frame.h \
	src/fabric/fdp_frame.c
src_fabric_libfdpcore_la_CFLAGS = $(AM_CFLAGS) -fPIC

fiprov_LTLIBRARIES = src/fabric/libdpdk-fi.la
src_fabric_libdpdk_fi_la_SOURCES = \
	src/fabric/fdp.h \
	src/fabric/fdp_attr.c \
	src/fabric/fdp_av.c \
	src/fabric/fdp_claim.c \
	src/fabric/fdp_cntr.c \
	src/fabric/fdp_cq.c \
	src/fabric/fdp_dgram.c \
	src/fabric/fdp_domain.c \
	src/fabric/fdp_eal.c \
	src/fabric/fdp_eal_files.c \
	src/fabric/fdp_eal_quiet.c \
	src/fabric/fdp_fd_floor.c \
	src/fabric/fdp_eal.h \
	src/fabric/fdp_enosys.c \
	src/fabric/fdp_enosys.h \
	src/fabric/fdp_ep.c \
	src/fabric/fdp_eq.c \
	src/fabric/fdp_fabric.c \
	src/fabric/fdp_init.c \
	src/fabric/fdp_mcast.c \
	src/fabric/fdp_pool.c \
	src/fabric/fdp_port.c \
	src/fabric/fdp_port.h \
	src/fabric/fdp_port_arp.c \
	src/fabric/fdp_port_mc.c \
	src/fabric/fdp_port_dev.h \
	src/fabric/fdp_port_rx.c \
	src/fabric/fdp_port_tx.c \
	src/fabric/fdp_progress.c \
	src/fabric/fdp_util.c \
	src/fabric/fdp_wait.c \
	src/fabric/fdp_wait.h
src_fabric_libdpdk_fi_la_CFLAGS = $(AM_CFLAGS) $(FABRIC_CFLAGS) $(DPDK_CFLAGS)
src_fabric_libdpdk_fi_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-Wl,--version-script=$(top_srcdir)/src/fabric/fdp.map -Wl,-z,nodelete
src_fabric_libdpdk_fi_la_LIBADD = src/fabric/libfdpcore.la $(FABRIC_LIBS) $(DPDK_LIBS)
EXTRA_src_fabric_libdpdk_fi_la_DEPENDENCIES = src/fabric/fdp.map
EXTRA_DIST += src/fabric/fdp.map
dist_man_MANS += man/fi_dpdk.7

# The reliability protocol, the message layer and the RDM endpoint.
include src/fabric/rel.mk
