# tests/behav: behaviour tests. Each C program exercises a family of wrapped
# calls and prints a deterministic transcript; its script runs it on the
# kernel and under the launcher (libfabsock preloaded) and diffs the two.
# Plus the launcher's own test and the bad-configuration test.

BH_PROGS = \
	tests/behav/bh_tcp tests/behav/bh_tcp_nb tests/behav/bh_udp \
	tests/behav/bh_poll tests/behav/bh_epoll tests/behav/bh_fd \
	tests/behav/bh_errors tests/behav/bh_fork tests/behav/bh_sendfile \
	tests/behav/bh_unix tests/behav/bh_fortify tests/behav/bh_signal \
	tests/behav/bh_threads tests/behav/bh_addr tests/behav/bh_bypass \
	tests/behav/bh_stream tests/behav/bh_oob tests/behav/bh_iopaths \
	tests/behav/bh_ready tests/behav/bh_zerocopy
check_PROGRAMS += $(BH_PROGS)

# Test code ignores some setup results on purpose (a failed setup shows up
# in the transcript); glibc marks them warn_unused_result under fortify.
# bh.c may accept in a thread (BH_ACCEPT_THREAD): every program links
# pthread.
BH_CFLAGS = $(AM_CFLAGS) -Wno-unused-result -pthread
BH_COMMON = tests/behav/bh.c tests/behav/bh.h tests/lib/tcp_pair.c tests/lib/tcp_pair.h

tests_behav_bh_tcp_SOURCES = tests/behav/bh_tcp.c $(BH_COMMON)
tests_behav_bh_tcp_LDADD = -lpthread
tests_behav_bh_tcp_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_tcp_nb_SOURCES = tests/behav/bh_tcp_nb.c $(BH_COMMON)
tests_behav_bh_tcp_nb_LDADD = -lpthread
tests_behav_bh_tcp_nb_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_udp_SOURCES = tests/behav/bh_udp.c $(BH_COMMON)
tests_behav_bh_udp_LDADD = -lpthread
tests_behav_bh_udp_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_poll_SOURCES = tests/behav/bh_poll.c $(BH_COMMON)
tests_behav_bh_poll_LDADD = -lpthread
tests_behav_bh_poll_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_epoll_SOURCES = tests/behav/bh_epoll.c $(BH_COMMON)
tests_behav_bh_epoll_LDADD = -lpthread
tests_behav_bh_epoll_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_fd_SOURCES = tests/behav/bh_fd.c $(BH_COMMON)
tests_behav_bh_fd_LDADD = -lpthread
tests_behav_bh_fd_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_errors_SOURCES = tests/behav/bh_errors.c $(BH_COMMON)
tests_behav_bh_errors_LDADD = -lpthread
tests_behav_bh_errors_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_fork_SOURCES = tests/behav/bh_fork.c $(BH_COMMON)
tests_behav_bh_fork_LDADD = -lpthread
tests_behav_bh_fork_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_sendfile_SOURCES = tests/behav/bh_sendfile.c $(BH_COMMON)
tests_behav_bh_sendfile_LDADD = -lpthread
tests_behav_bh_sendfile_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_unix_SOURCES = tests/behav/bh_unix.c $(BH_COMMON)
tests_behav_bh_unix_LDADD = -lpthread
tests_behav_bh_unix_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_signal_SOURCES = tests/behav/bh_signal.c $(BH_COMMON)
tests_behav_bh_signal_LDADD = -lpthread
tests_behav_bh_signal_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_threads_SOURCES = tests/behav/bh_threads.c $(BH_COMMON)
tests_behav_bh_threads_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_threads_LDADD = -lpthread
tests_behav_bh_addr_SOURCES = tests/behav/bh_addr.c $(BH_COMMON)
tests_behav_bh_addr_LDADD = -lpthread
tests_behav_bh_addr_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_bypass_SOURCES = tests/behav/bh_bypass.c $(BH_COMMON)
tests_behav_bh_bypass_LDADD = -lpthread
tests_behav_bh_bypass_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_stream_SOURCES = tests/behav/bh_stream.c $(BH_COMMON)
tests_behav_bh_stream_LDADD = -lpthread
tests_behav_bh_stream_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_oob_SOURCES = tests/behav/bh_oob.c $(BH_COMMON)
tests_behav_bh_oob_LDADD = -lpthread
tests_behav_bh_oob_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_iopaths_SOURCES = tests/behav/bh_iopaths.c $(BH_COMMON)
tests_behav_bh_iopaths_LDADD = -lpthread -ldl
tests_behav_bh_iopaths_CFLAGS = $(BH_CFLAGS) -U_FORTIFY_SOURCE
tests_behav_bh_ready_SOURCES = tests/behav/bh_ready.c $(BH_COMMON)
tests_behav_bh_ready_LDADD = -lpthread
tests_behav_bh_ready_CFLAGS = $(BH_CFLAGS)
tests_behav_bh_zerocopy_SOURCES = tests/behav/bh_zerocopy.c $(BH_COMMON)
tests_behav_bh_zerocopy_LDADD = -lpthread
tests_behav_bh_zerocopy_CFLAGS = $(BH_CFLAGS)
# The fortified entry points need -O2 and _FORTIFY_SOURCE=2 (re-defined in
# case the user's flags set another level); fortify.sh proves with nm that
# the _chk symbols are really referenced.
tests_behav_bh_fortify_SOURCES = tests/behav/bh_fortify.c $(BH_COMMON)
tests_behav_bh_fortify_LDADD = -lpthread
tests_behav_bh_fortify_CFLAGS = $(BH_CFLAGS) -O2 -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2

BH_TESTS = \
	tests/behav/launcher.sh \
	tests/behav/tcp.sh tests/behav/tcp_nb.sh tests/behav/udp.sh \
	tests/behav/poll.sh tests/behav/epoll.sh tests/behav/fd.sh \
	tests/behav/errors.sh tests/behav/fork.sh tests/behav/sendfile.sh \
	tests/behav/unix.sh tests/behav/fortify.sh tests/behav/signal.sh \
	tests/behav/threads.sh tests/behav/addr.sh tests/behav/bypass.sh \
	tests/behav/stream.sh \
	tests/behav/oob.sh tests/behav/iopaths.sh tests/behav/ready.sh \
	tests/behav/zerocopy.sh \
	tests/behav/badconfig.sh tests/behav/coverage.sh \
	tests/behav/manpages.sh
TESTS += $(BH_TESTS)
EXTRA_DIST += $(BH_TESTS) tests/lib/common.sh tests/lib/behav.sh
