# tests/accel: TCP acceleration through the preload (FABSOCK_TCP_ACCEL=1).
TESTS += tests/accel/echo.sh tests/accel/fallback.sh tests/accel/fork.sh \
	tests/accel/redis_bgsave.sh
EXTRA_DIST += tests/accel/echo.sh tests/accel/fallback.sh tests/accel/echo.py tests/accel/lib.sh \
	tests/accel/fork.sh tests/accel/fork.py tests/accel/redis_bgsave.sh \
	tests/accel/redis_load.py
