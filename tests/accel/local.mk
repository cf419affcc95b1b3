# tests/accel: TCP acceleration through the preload (on by default).
TESTS += tests/accel/echo.sh tests/accel/fallback.sh tests/accel/nego.sh tests/accel/many.sh \
	tests/accel/many10k.sh tests/accel/fork.sh tests/accel/redis_bgsave.sh \
	tests/accel/bulk.sh tests/accel/cork.sh tests/accel/death.sh tests/accel/dpdk_memif.sh \
	tests/accel/idle.sh tests/accel/netns_dpdk.sh tests/accel/netns_xdp.sh tests/accel/memif_real.sh \
	tests/accel/sizes.sh tests/accel/dpdk_robust.sh tests/accel/warmup.sh \
	tests/accel/hostile.sh tests/accel/users.sh tests/accel/listen.sh tests/accel/duplex.sh \
	tests/accel/abort.sh tests/accel/fork_busy.sh tests/accel/bell.sh tests/accel/stat.sh tests/accel/ovs.sh \
	tests/accel/sendfile.sh tests/accel/ovs_prefork.sh tests/accel/prefork_shm.sh tests/accel/udp.sh
EXTRA_DIST += tests/accel/echo.sh tests/accel/fallback.sh tests/accel/echo.py tests/accel/lib.sh \
	tests/accel/nego.sh tests/accel/nego.py tests/accel/many.sh tests/accel/many10k.sh \
	tests/accel/fork.sh tests/accel/fork.py tests/accel/redis_bgsave.sh tests/accel/redis_load.py \
	tests/accel/bulk.sh tests/accel/bulk.py tests/accel/cork.sh tests/accel/cork.py tests/accel/death.sh tests/accel/death.py \
	tests/accel/dpdk_memif.sh tests/accel/streams.py tests/accel/dpdk_fork.py \
	tests/accel/idle.sh tests/accel/idle.py \
	tests/accel/netns_dpdk.sh tests/accel/netns_xdp.sh tests/accel/memif_real.sh \
	tests/accel/dpdk_phases.sh tests/lib/netns.sh tests/accel/sizes.sh tests/accel/dpdk_robust.sh \
	tests/accel/warmup.sh tests/accel/warmup.py tests/accel/hostile.sh tests/accel/hostile.py \
	tests/accel/users.sh tests/accel/listen.sh tests/accel/hold.py tests/accel/duplex.sh \
	tests/accel/abort.sh tests/accel/fork_busy.sh tests/accel/bell.sh tests/accel/stat.sh tests/accel/ovs.sh \
	tests/accel/sendfile.sh tests/accel/sendfile.py \
	tests/accel/ovs_lib.sh tests/accel/ovs_prefork.sh tests/accel/wrk_check.lua \
	tests/accel/prefork_lib.sh tests/accel/prefork_shm.sh \
	tests/accel/udp.sh tests/accel/udp_peer.py tests/accel/udp_mc_peer.py

# udp: a UDP program that uses the whole socket API against a kernel peer
# (tests/accel/udp.sh).
check_PROGRAMS += tests/accel/udp
tests_accel_udp_SOURCES = tests/accel/udp.c

# many: N concurrent connections through one epoll echo server, byte-checked.
check_PROGRAMS += tests/accel/many
tests_accel_many_SOURCES = tests/accel/many.c
tests_accel_many_CFLAGS = $(AM_CFLAGS) -pthread
tests_accel_many_LDADD = -lpthread

# robust: an app that checks its affinity, signal handlers and stdout
# survive a launcher (tests/accel/dpdk_robust.sh).
check_PROGRAMS += tests/accel/robust
tests_accel_robust_SOURCES = tests/accel/robust.c
tests_accel_robust_CFLAGS = $(AM_CFLAGS) -pthread
tests_accel_robust_LDADD = -lpthread

# duplex: a reader and a writer thread on one socket, every byte checked;
# a reader woken at once by a peer idle after its write (tests/accel/duplex.sh).
check_PROGRAMS += tests/accel/duplex
tests_accel_duplex_SOURCES = tests/accel/duplex.c
tests_accel_duplex_CFLAGS = $(AM_CFLAGS) -pthread
tests_accel_duplex_LDADD = -lpthread

# abort: a close with unread data, transcript compared with the kernel's
# (tests/accel/abort.sh).
check_PROGRAMS += tests/accel/abort
tests_accel_abort_SOURCES = tests/accel/abort.c
