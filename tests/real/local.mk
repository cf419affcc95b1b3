# tests/real: real programs under the launcher in pass-through mode (curl and
# python3 http.server, socat, sockperf, redis), and accelerated (*_accel.sh:
# FABSOCK_TCP_ACCEL=1 over shm, bytes checked against libfabsock's counters). Each proves the preload was
# loaded and checks the bytes; a missing tool is a SKIP with the reason.
# demo.sh runs bench/demo.sh (./quickstart demo) short: a table of numbers
# for kernel, shm and dpdk, and a PNG plot.
REAL_TESTS = tests/real/curl.sh tests/real/socat.sh tests/real/sockperf.sh \
	tests/real/redis.sh tests/real/sockperf_accel.sh tests/real/iperf3_accel.sh \
	tests/real/redis_accel.sh tests/real/demo.sh
TESTS += $(REAL_TESTS)
EXTRA_DIST += $(REAL_TESTS) tests/real/resp_big.py
