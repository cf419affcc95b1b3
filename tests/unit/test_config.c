/* Configuration: defaults, profiles, every knob, and the one-line error on bad values. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stack/stk_config.h"
#include "stack/stk_log.h"
#include "unit.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name)
{
	for (const char *const *p = fake_env; p && p[0]; p += 2)
		if (strcmp(p[0], name) == 0)
			return p[1];
	return NULL;
}

static struct stk_config cfg;
static int log_pipe[2];

static void setup(void)
{
	ck_assert_int_eq(pipe2(log_pipe, O_NONBLOCK), 0);
	stk_log_set_fd(log_pipe[1]);
	stk_log_level = STK_LOG_WARN;
}

static void teardown(void)
{
	stk_config_free(&cfg);
	stk_log_set_fd(2);
	close(log_pipe[0]);
	close(log_pipe[1]);
}

/* Everything logged since setup, as one string. */
static const char *logged(void)
{
	static char buf[4096];
	ssize_t n = read(log_pipe[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static int load(const char *const *env)
{
	fake_env = env;
	return stk_config_load(&cfg, fake_getenv, "testprog");
}

/* A temporary file holding text; its name goes into path (at least 32 bytes). */
static void write_temp(char *path, const char *text)
{
	strcpy(path, "/tmp/fsk-test-config-XXXXXX");
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static unsigned count_lines(const char *s)
{
	unsigned n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_defaults)
{
	const char *env[] = { NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert(cfg.enabled);
	ck_assert_int_eq(cfg.log_level, STK_LOG_WARN);
	ck_assert_str_eq(cfg.providers, "shm,dpdk,verbs,efa,tcp");
	ck_assert_int_eq(cfg.profile, STK_PROFILE_BALANCED);
	ck_assert_uint_eq(cfg.spin_us, 50);
	ck_assert_int_eq(cfg.default_action, STK_ACTION_ACCEL);
	ck_assert_uint_eq(cfg.rules.count, 0);
	ck_assert_str_eq(logged(), "");
}
END_TEST

START_TEST(test_profile_then_override)
{
	const char *lat[] = { "FABSOCK_PROFILE", "latency", NULL };
	ck_assert_int_eq(load(lat), 0);
	ck_assert_int_eq(cfg.profile, STK_PROFILE_LATENCY);
	ck_assert_uint_eq(cfg.spin_us, 1000);
	stk_config_free(&cfg);
	const char *both[] = { "FABSOCK_PROFILE", "throughput", "FABSOCK_SPIN_US", "7", NULL };
	ck_assert_int_eq(load(both), 0);
	ck_assert_int_eq(cfg.profile, STK_PROFILE_THROUGHPUT);
	ck_assert_uint_eq(cfg.spin_us, 7);
	ck_assert_uint_eq(cfg.window_bytes, 1024 * 1024);
}
END_TEST

START_TEST(test_spin_clamped_with_warning)
{
	const char *env[] = { "FABSOCK_SPIN_US", "99999999999", NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert(cfg.enabled);
	ck_assert_uint_eq(cfg.spin_us, STK_SPIN_US_MAX);
	const char *log = logged();
	ck_assert_ptr_nonnull(strstr(log, "warn: FABSOCK_SPIN_US"));
	ck_assert_ptr_nonnull(strstr(log, "clamped"));
}
END_TEST

START_TEST(test_providers_and_synonym)
{
	const char *env[] = { "FABSOCK_PROVIDER", "tcp,shm", NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert_str_eq(cfg.providers, "tcp,shm");
	stk_config_free(&cfg);
	const char *both[] = { "FABSOCK_PROVIDER", "tcp", "FABSOCK_PROVIDERS", "dpdk,shm", NULL };
	ck_assert_int_eq(load(both), 0);
	ck_assert_str_eq(cfg.providers, "dpdk,shm");
}
END_TEST

START_TEST(test_rules_and_default)
{
	const char *env[] = { "FABSOCK_RULES", "use os tcp_server *:22; default kernel", NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert_uint_eq(cfg.rules.count, 1);
	ck_assert(cfg.rules.rules[0].active);
	ck_assert_int_eq(cfg.default_action, STK_ACTION_KERNEL);
	stk_config_free(&cfg);
	const char *over[] = { "FABSOCK_RULES", "default kernel", "FABSOCK_DEFAULT", "vma", NULL };
	ck_assert_int_eq(load(over), 0);
	ck_assert_int_eq(cfg.default_action, STK_ACTION_ACCEL);
}
END_TEST

START_TEST(test_config_file_after_inline)
{
	char path[32];
	write_temp(path, "# file rules\napplication-id testprog\nuse os udp_receiver *:53\n");
	const char *env[] = { "FABSOCK_RULES", "use vma tcp_client *:*", "FABSOCK_CONFIG", path,
			      NULL };
	int ret = load(env);
	unlink(path);
	ck_assert_int_eq(ret, 0);
	ck_assert_uint_eq(cfg.rules.count, 2);
	ck_assert_int_eq(cfg.rules.rules[0].role, STK_ROLE_TCP_CLIENT); /* inline first */
	ck_assert_int_eq(cfg.rules.rules[1].role, STK_ROLE_UDP_RECEIVER);
	ck_assert(cfg.rules.rules[1].active); /* application-id matched "testprog" */
}
END_TEST

START_TEST(test_log_file)
{
	char path[32];
	write_temp(path, "");
	int fd;
	const char *env[] = { "FABSOCK_LOG", "info", "FABSOCK_LOG_FILE", path, NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert_int_eq(cfg.log_level, STK_LOG_INFO);
	STK_INFO("hello %d", 42);
	int log_fd = stk_log_get_fd();
	ck_assert_int_ne(log_fd, log_pipe[1]);
	close(log_fd);
	stk_log_set_fd(log_pipe[1]);
	char buf[256] = { 0 };
	fd = open(path, O_RDONLY);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	unlink(path);
	char want[64];
	snprintf(want, sizeof(want), "fabsock[%d]: info: hello 42\n", (int)getpid());
	ck_assert_str_eq(buf, want);
}
END_TEST

/* An app that closes every fd (closefrom) and reuses the numbers never gets our
 * log lines in its files: the log file is reopened instead. */
START_TEST(test_log_file_survives_fd_reuse)
{
	char log_path[32], app_path[32];
	write_temp(log_path, "");
	write_temp(app_path, "");
	ck_assert_int_eq(stk_log_open_file(log_path), 0);
	int log_fd = stk_log_get_fd();
	ck_assert_int_gt(log_fd, 2);
	ck_assert_int_eq(fcntl(log_fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	int app = open(app_path, O_WRONLY | O_APPEND);
	ck_assert_int_eq(dup2(app, log_fd), log_fd); /* the app now owns that number */
	stk_log(STK_LOG_ERROR, "after reuse");
	char buf[256] = { 0 };
	int fd = open(app_path, O_RDONLY);
	ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), 0); /* nothing in the app's file */
	close(fd);
	fd = open(log_path, O_RDONLY);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	ck_assert_ptr_nonnull(strstr(buf, "error: after reuse\n"));
	close(app);
	close(log_fd);
	close(stk_log_get_fd());
	stk_log_set_fd(log_pipe[1]);
	unlink(log_path);
	unlink(app_path);
}
END_TEST

/* A line logged by one of the library's threads while the log file is closed
 * behind our back does not reopen it there (the app's next open() must get the
 * lowest free number); it is written before the app thread's next line. */
static void *log_internal(void *arg)
{
	(void)arg;
	stk_log_thread_internal();
	stk_log(STK_LOG_ERROR, "from our thread");
	return NULL;
}

START_TEST(test_log_file_internal_thread_waits)
{
	char log_path[32], buf[512] = { 0 };
	write_temp(log_path, "");
	ck_assert_int_eq(stk_log_open_file(log_path), 0);
	close(stk_log_get_fd()); /* the app's closefrom() */
	int lowest = dup(0);
	close(lowest);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, log_internal, NULL), 0);
	pthread_join(t, NULL);
	int fd = open(log_path, O_RDONLY);
	ck_assert_int_eq(fd, lowest); /* nothing of ours took it */
	ck_assert_int_eq(read(fd, buf, sizeof(buf) - 1), 0);
	stk_log(STK_LOG_ERROR, "from the app");
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	char *ours = strstr(buf, "error: from our thread\n");
	char *app = strstr(buf, "error: from the app\n");
	ck_assert_ptr_nonnull(ours);
	ck_assert_ptr_nonnull(app);
	ck_assert(ours < app);
	close(stk_log_get_fd());
	stk_log_set_fd(log_pipe[1]);
	unlink(log_path);
}
END_TEST

/* Each bad environment disables the library with exactly one error line that
 * names the culprit. */
static const struct {
	const char *name, *value, *expect;
} bad_env[] = {
	{ "FABSOCK_LOG", "loud", "FABSOCK_LOG:1:1: expected error|warn|info|debug, got 'loud'" },
	{ "FABSOCK_PROFILE", "fast", "FABSOCK_PROFILE:1:1: expected latency|throughput|balanced" },
	{ "FABSOCK_SPIN_US", "12us", "FABSOCK_SPIN_US:1:3: expected an unsigned integer, got '12us'" },
	{ "FABSOCK_SPIN_US", "-1", "FABSOCK_SPIN_US:1:1: expected an unsigned integer" },
	{ "FABSOCK_SPIN_US", "", "FABSOCK_SPIN_US:1:1: expected an unsigned integer" },
	{ "FABSOCK_PROVIDERS", "shm,,tcp", "FABSOCK_PROVIDERS:1:5: empty provider name" },
	{ "FABSOCK_PROVIDERS", "shm tcp", "FABSOCK_PROVIDERS:1:4: unexpected ' '" },
	{ "FABSOCK_DEFAULT", "maybe", "FABSOCK_DEFAULT:1:1: expected accel|kernel, got 'maybe'" },
	{ "FABSOCK_DISABLE", "yes", "FABSOCK_DISABLE:1:1: expected 0 or 1" },
	{ "FABSOCK_RULES", "use os tcp_server *:1;use os bogus *:1",
	  "FABSOCK_RULES:1:30: expected tcp_server|" },
	{ "FABSOCK_CONFIG", "/nonexistent/fsk.conf",
	  "FABSOCK_CONFIG:1:1: cannot open '/nonexistent/fsk.conf': No such file or directory" },
	{ "FABSOCK_CONFIG", "/tmp", "FABSOCK_CONFIG:1:1: '/tmp' is not a regular file" },
	{ "FABSOCK_LOG_FILE", "/nonexistent/log", "FABSOCK_LOG_FILE:1:1: cannot open" },
};

START_TEST(test_bad_values_disable)
{
	const char *env[] = { bad_env[_i].name, bad_env[_i].value, NULL };
	ck_assert_int_eq(load(env), -EINVAL);
	ck_assert(!cfg.enabled);
	const char *log = logged();
	ck_assert_msg(strstr(log, bad_env[_i].expect) != NULL, "log '%s' lacks '%s'", log,
		      bad_env[_i].expect);
	ck_assert_ptr_nonnull(strstr(log, "error: "));
	ck_assert_ptr_nonnull(strstr(log, "libfabsock disabled, sockets use the kernel\n"));
	ck_assert_uint_eq(count_lines(log), 1);
}
END_TEST

START_TEST(test_bad_config_file_position)
{
	char path[32];
	write_temp(path, "use os tcp_server *:1\n\n   use accel tcp_client 10.0.0.0/8:1-\n");
	const char *env[] = { "FABSOCK_CONFIG", path, NULL };
	int ret = load(env);
	unlink(path);
	ck_assert_int_eq(ret, -EINVAL);
	char want[128];
	snprintf(want, sizeof(want), "%s:3:38: expected the end of a port range", path);
	const char *log = logged();
	ck_assert_msg(strstr(log, want) != NULL, "log '%s' lacks '%s'", log, want);
}
END_TEST

START_TEST(test_disable_flag)
{
	const char *env[] = { "FABSOCK_DISABLE", "1", NULL };
	ck_assert_int_eq(load(env), 0);
	ck_assert(!cfg.enabled);
	ck_assert_str_eq(logged(), "");
}
END_TEST

Suite *unit_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("load");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_profile_then_override);
	tcase_add_test(tc, test_spin_clamped_with_warning);
	tcase_add_test(tc, test_providers_and_synonym);
	tcase_add_test(tc, test_rules_and_default);
	tcase_add_test(tc, test_config_file_after_inline);
	tcase_add_test(tc, test_log_file);
	tcase_add_test(tc, test_log_file_internal_thread_waits);
	tcase_add_test(tc, test_log_file_survives_fd_reuse);
	tcase_add_loop_test(tc, test_bad_values_disable, 0,
			    (int)(sizeof(bad_env) / sizeof(bad_env[0])));
	tcase_add_test(tc, test_bad_config_file_position);
	tcase_add_test(tc, test_disable_flag);
	suite_add_tcase(s, tc);
	return s;
}
