#!/bin/sh
# epoll_wait cost with many registered, mostly idle connections: the kernel, then
# libfabsock over shm (bench/epoll_idle.c says what is measured).
# usage: epoll_idle.sh BUILD_DIR [MAX]
b=${1:?usage: epoll_idle.sh BUILD_DIR [MAX]}
max=${2:-10000}
echo "== kernel TCP"
"$b/bench/epoll_idle" "$max"
echo "== libfabsock, shm"
FABSOCK_TCP_ACCEL=1 FABSOCK_NEGO_WAIT_MS=1000 FABSOCK_PROVIDERS=shm \
	"$b/tools/fabsock" -- "$b/bench/epoll_idle" "$max"
