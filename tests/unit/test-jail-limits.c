/*
 * hangar-jail's limits (programs/hangar-jail/limits.c) against directories
 * laid out like cgroup hierarchies: what it writes to a cgroup v2 directory
 * (memory.max, memory.swap.max, pids.max, cpu.max), how it asks the parent
 * to hand a controller down (cgroup.subtree_control), when it falls back to
 * v1 controllers, and what it records for the library. The kernel's files
 * are plain files here (or a FIFO, to see each write), so the file logic is
 * tested on any host, including one whose controllers are all on v1.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/* hangar-jail.c's, which this test does not link: the last message said. */
static char said[4][512];
static int nsaid;

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(said[nsaid % 4], sizeof(said[0]), fmt, ap);
	va_end(ap);
	nsaid++;
}

static char top[64], v1_root[96];

static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/hangar-limits-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	nsaid = 0;
	/* Never the host's v1 hierarchies: a missing directory unless a test makes one. */
	snprintf(v1_root, sizeof(v1_root), "%s/v1", top);
	limits_v1_root = v1_root;
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

/* top/rest as a directory (made, or there already). */
static void mkdirf(const char *rest)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", top, rest);
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* An empty writable file, as the kernel shows a cgroup's interface files. */
static void touch(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	close(fd);
}

/* dir/name's content ("" when empty), which must exist. */
static const char *content(const char *dir, const char *name)
{
	static char buf[4][4096];
	static int k;
	char path[PATH_MAX], *text;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = lstate_read_file(path, sizeof(buf[0]) - 1, NULL);
	ck_assert_msg(text != NULL, "%s: %s", path, strerror(errno));
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s", text);
	free(text);
	return buf[k];
}

static const struct limits lim = { .memory_mb = 256, .pids = 64, .cpus = 3, .disk_mb = 100, .shm_mb = 64 };

/* A sandbox cgroup where every controller is enabled: each limit lands in its v2 file. */
START_TEST(v2_files_written)
{
	char cg[256], rec[1024];
	struct limit_cgroups c;

	snprintf(cg, sizeof(cg), "%s/hangar-sb", top);
	mkdirf("hangar-sb");
	touch(cg, "memory.max");
	touch(cg, "memory.swap.max");
	touch(cg, "pids.max");
	touch(cg, "cpu.max");
	touch(cg, "cgroup.procs");
	limits_setup(&c, &lim, "sb", cg);
	ck_assert_str_eq(content(cg, "memory.max"), "268435456");
	ck_assert_str_eq(content(cg, "memory.swap.max"), "0");
	ck_assert_str_eq(content(cg, "pids.max"), "64");
	ck_assert_str_eq(content(cg, "cpu.max"), "300000 100000");
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		ck_assert_int_eq(c.v2[i], 1);
		ck_assert_str_eq(c.path[i], cg);
	}
	ck_assert_int_eq(nsaid, 0);
	/* v2: the freezer's cgroup, which the child joined already; nothing to join or remove here. */
	ck_assert_int_eq(limits_join(&c, 4242), 0);
	ck_assert_str_eq(content(cg, "cgroup.procs"), "");
	limits_remove(&c);
	ck_assert_int_eq(access(cg, F_OK), 0);
	/* What the library reads back (usage.c). */
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\nmemory v2 %s\npids v2 %s\ncpu v2 %s\n",
		 cg, cg, cg);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* Without swap accounting there is no memory.swap.max to set, and nothing is said about it. */
START_TEST(v2_without_swap_file)
{
	char cg[256];
	struct limit_cgroups c;

	snprintf(cg, sizeof(cg), "%s/hangar-sb", top);
	mkdirf("hangar-sb");
	touch(cg, "memory.max");
	touch(cg, "pids.max");
	touch(cg, "cpu.max");
	limits_setup(&c, &lim, "sb", cg);
	ck_assert_str_eq(content(cg, "memory.max"), "268435456");
	ck_assert_int_eq(access(strcat(cg, "/memory.swap.max"), F_OK), -1);
	ck_assert_int_eq(nsaid, 0);
}
END_TEST

/*
 * A sandbox cgroup whose parent has not handed the controllers down: the
 * jail asks the parent for each (+memory, +pids, +cpu in its
 * cgroup.subtree_control), and, as none appears, falls back to the v1
 * controller of that name where there is one (memory here) and leaves the
 * others unlimited, saying so.
 */
START_TEST(v2_asks_parent_then_v1)
{
	char parent[256], cg[256], v1[256], rec[1024], fifo[PATH_MAX], got[256];
	struct limit_cgroups c;
	ssize_t n;
	int fd;

	snprintf(parent, sizeof(parent), "%s/hangar", top);
	snprintf(cg, sizeof(cg), "%s/hangar/sb", top);
	mkdirf("hangar");
	mkdirf("hangar/sb");
	/*
	 * A FIFO whose read end is open already: each write the jail makes
	 * lands in the pipe (it never blocks: a pipe holds far more), in order.
	 */
	snprintf(fifo, sizeof(fifo), "%s/cgroup.subtree_control", parent);
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);
	fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	/* A v1 memory hierarchy only, with the files the kernel would make in a new cgroup. */
	mkdirf("v1");
	mkdirf("v1/memory");
	mkdirf("v1/memory/hangar");
	mkdirf("v1/memory/hangar/sb");
	snprintf(v1, sizeof(v1), "%s/v1/memory/hangar/sb", top);
	touch(v1, "memory.limit_in_bytes");
	touch(v1, "memory.memsw.limit_in_bytes");
	touch(v1, "cgroup.procs");

	limits_setup(&c, &lim, "sb", cg);
	n = read(fd, got, sizeof(got) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	got[n] = '\0';
	ck_assert_str_eq(got, "+memory+pids+cpu");

	ck_assert_int_eq(c.v2[0], 0);
	ck_assert_str_eq(c.path[0], v1);
	ck_assert_str_eq(content(v1, "memory.limit_in_bytes"), "268435456");
	ck_assert_str_eq(content(v1, "memory.memsw.limit_in_bytes"), "268435456");
	ck_assert_str_eq(c.path[1], "");
	ck_assert_str_eq(c.path[2], "");
	ck_assert_int_eq(nsaid, 2);
	ck_assert_msg(strstr(said[0], "no pids cgroup controller"), "said: %s", said[0]);
	ck_assert_msg(strstr(said[1], "no cpu cgroup controller"), "said: %s", said[1]);
	/* v1: the child joins each controller's cgroup itself. */
	ck_assert_int_eq(limits_join(&c, 4242), 0);
	ck_assert_str_eq(content(v1, "cgroup.procs"), "4242");
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\nmemory v1 %s\n", v1);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* No v2 cgroup and no v1 hierarchy: nothing is limited, each controller is named once. */
START_TEST(nothing_to_limit)
{
	struct limit_cgroups c;

	limits_setup(&c, &lim, "sb", NULL);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		ck_assert_str_eq(c.path[i], "");
	ck_assert_int_eq(nsaid, 3);
	ck_assert_ptr_nonnull(strstr(said[0], "no memory cgroup controller"));
	ck_assert_int_eq(limits_join(&c, 4242), 0);
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	ck_assert_str_eq(content(top, "limits"), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\n");
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("jail-limits");
	TCase *tc = tcase_create("cgroups");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, v2_files_written);
	tcase_add_test(tc, v2_without_swap_file);
	tcase_add_test(tc, v2_asks_parent_then_v1);
	tcase_add_test(tc, nothing_to_limit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
