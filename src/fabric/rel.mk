# src/fabric: the RDM endpoint and its engines (fdp_rel*, fdp_msg*, fdp_rdm.c).
# Pure-C engines (no DPDK): the reliability protocol and the message layer.
src_fabric_libdpdk_fi_la_SOURCES += \
	src/fabric/fdp_rel_proto.h \
	src/fabric/fdp_rel.h \
	src/fabric/fdp_rel_int.h \
	src/fabric/fdp_rel.c \
	src/fabric/fdp_rel_rx.c \
	src/fabric/fdp_rel_timer.c \
	src/fabric/fdp_msg.h \
	src/fabric/fdp_msg_int.h \
	src/fabric/fdp_msg.c \
	src/fabric/fdp_msg_send.c \
	src/fabric/fdp_msg_recv.c
# The native FI_EP_RDM endpoint class on the provider framework (fdp.h).
src_fabric_libdpdk_fi_la_SOURCES += src/fabric/fdp_rdm.c
