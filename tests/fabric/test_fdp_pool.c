/* Check tests of FI_DPDK_POOL's claim (fdp_claim.c) across fork, without
 * Open vSwitch: a pool directory made here (the "pool" file and a lock file
 * per port, as fabsock-ovs makes them), and the port a process claimed read
 * from the domain fi_getinfo offers (net_virtio_user<I>, or the reason there
 * is none). No EAL starts: fi_getinfo claims, fi_fabric would start DPDK. */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

static char pool_dir[256];
static int pool_ports; /* made by make_pool, removed by the fixture */

/* A pool of n ports in a fresh directory; FI_DPDK_POOL points at it. */
static void make_pool(int n)
{
	char path[512];
	FILE *f;

	snprintf(pool_dir, sizeof(pool_dir), "%s/fdp-pool.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(pool_dir));
	pool_ports = n;
	snprintf(path, sizeof(path), "%s/pool", pool_dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "port %d %s/port%d.sock 198.18.7.%d/24 02:fb:00:07:00:%02x\n", i,
			pool_dir, i, i + 1, i);
		snprintf(path, sizeof(path), "%s/port%d.lock", pool_dir, i);
		int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	fclose(f);

	char libs[4096];
	const char *top = getenv("top_builddir");
	snprintf(libs, sizeof(libs), "%s/src/fabric/.libs", top ? top : ".");
	setenv("FI_PROVIDER_PATH", libs, 1);
	setenv("FI_PROVIDER", "dpdk", 1);
	unsetenv("FI_DPDK_DEVICE");
	unsetenv("FI_DPDK_IP");
	setenv("FI_DPDK_POOL", pool_dir, 1);
}

static void remove_pool(void)
{
	char path[512];

	if (!pool_ports)
		return;
	for (int i = 0; i < pool_ports; i++) {
		snprintf(path, sizeof(path), "%s/port%d.lock", pool_dir, i);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/pool", pool_dir);
	unlink(path);
	rmdir(pool_dir);
	pool_ports = 0;
}

/* The domain name fi_getinfo offers for prov (NULL: none), into out. */
static void domain_of(const char *prov, char *out, size_t cap)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	ck_assert_ptr_nonnull(hints);
	hints->mode = ~0ull;
	hints->fabric_attr->prov_name = strdup(prov);
	out[0] = '\0';
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info) == 0 && info) {
		snprintf(out, cap, "%s", info->domain_attr->name);
		fi_freeinfo(info);
	}
	fi_freeinfo(hints);
}

/* Run the domain look-up in a forked child: 0 when its domain is want. */
static int child_domain_is(const char *want)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char got[256];

		domain_of("dpdk", got, sizeof(got));
		if (strstr(got, want) == got)
			_exit(0);
		fprintf(stderr, "child: domain '%s', want '%s'\n", got, want);
		_exit(1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

START_TEST(child_claims_its_own_port)
{
	char got[256];

	make_pool(3);
	domain_of("dpdk", got, sizeof(got));
	ck_assert_str_eq(got, "net_virtio_user0");
	/* the parent's lock is not the child's: port 1 */
	ck_assert_int_eq(child_domain_is("net_virtio_user1"), 0);
	/* and the parent keeps port 0 */
	domain_of("dpdk", got, sizeof(got));
	ck_assert_str_eq(got, "net_virtio_user0");
}
END_TEST

START_TEST(loading_claims_nothing)
{
	char got[256];

	make_pool(2);
	/* libfabric loads and initialises every provider, ours included */
	domain_of("fabsock-none", got, sizeof(got));
	ck_assert_str_eq(got, "");
	/* so a child of a process that never asked for dpdk gets port 0 */
	ck_assert_int_eq(child_domain_is("net_virtio_user0"), 0);
}
END_TEST

START_TEST(pool_taken_by_the_parent)
{
	char got[256];

	make_pool(1);
	domain_of("dpdk", got, sizeof(got));
	ck_assert_str_eq(got, "net_virtio_user0");
	/* the reason is the domain's name: fi_fabric then fails with it */
	ck_assert_int_eq(child_domain_is("ovs pool"), 0);
	ck_assert_int_eq(child_domain_is("net_virtio_user"), 1);
}
END_TEST

static Suite *pool_suite(void)
{
	Suite *s = suite_create("fdp_pool");
	TCase *tc = tcase_create("claim");

	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, NULL, remove_pool);
	tcase_add_test(tc, child_claims_its_own_port);
	tcase_add_test(tc, loading_claims_nothing);
	tcase_add_test(tc, pool_taken_by_the_parent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pool_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
