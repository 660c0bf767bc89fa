/*
 * The local provider's reading of a sandbox's limits and usage
 * (libhangar/providers/local/usage.c) from the dir/limits file hangar-jail
 * writes and the cgroup files it names, against directories laid out like
 * cgroup v2 and v1 ones: this host's controllers are all on v1, so the v2
 * files (memory.current, memory.events, pids.current, pids.events) are
 * never read by a real sandbox here.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "providers/local/lstate.h"
#include "providers/local/usage.h"

#define ID "sb-0123456789abcdef"

static char top[64], root[96], dir[96], cg[160];

static void put(const char *in, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", in, name);
	f = fopen(path, "we");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	ck_assert_int_eq(fclose(f), 0);
}

static void mk(const char *path)
{
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* A sandbox directory whose limits name one v2 cgroup under a private root for every controller. */
static void setup(void)
{
	char limits[1024];

	snprintf(top, sizeof(top), "/tmp/hangar-usage-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	snprintf(root, sizeof(root), "%s/cg/", top);
	snprintf(dir, sizeof(dir), "%s/%s", top, ID);
	snprintf(cg, sizeof(cg), "%shangar/%s", root, ID);
	usage_cgroup_root = root;
	mk(root);
	snprintf(limits, sizeof(limits), "%shangar", root);
	mk(limits);
	mk(cg);
	mk(dir);
	snprintf(limits, sizeof(limits),
		 "memory_mb 64\npids 32\ncpus 2\ndisk_mb 100\nmemory v2 %s\npids v2 %s\ncpu v2 %s\n", cg, cg, cg);
	put(dir, "limits", limits);
	put(cg, "memory.current", "1048576\n");
	/* Every key the kernel writes there, the one wanted among the others. */
	put(cg, "memory.events", "low 0\nhigh 0\nmax 5\noom 4\noom_group_kill 9\noom_kill 2\n");
	put(cg, "pids.current", "7\n");
	put(cg, "pids.events", "max 3\n");
}

static void teardown(void)
{
	char cmd[128];

	usage_cgroup_root = "/sys/fs/cgroup/";
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

/* Ids and tokens: hex of the length asked, fresh each time, nothing past a bound. */
START_TEST(random_hex_ids)
{
	char a[2 * 32 + 1], b[2 * 32 + 1], id[3 + 16 + 1] = "sb-", big[2 * 65 + 1];

	ck_assert_int_eq(lstate_random_hex(a, 32), 0);
	ck_assert_int_eq(lstate_random_hex(b, 32), 0);
	ck_assert_uint_eq(strlen(a), 64);
	ck_assert_uint_eq(strspn(a, "0123456789abcdef"), 64);
	ck_assert_str_ne(a, b);
	ck_assert_int_eq(lstate_random_hex(id + 3, 8), 0);
	ck_assert_msg(lstate_valid_id(id), "%s is not a sandbox id", id);
	ck_assert_int_eq(lstate_random_hex(big, 65), -EINVAL);
}
END_TEST

START_TEST(v2_limits_read)
{
	struct usage_limits u;

	ck_assert_int_eq(usage_read_limits(dir, ID, &u), 0);
	ck_assert_uint_eq(u.memory_mb, 64);
	ck_assert_uint_eq(u.pids, 32);
	ck_assert_uint_eq(u.cpus, 2);
	ck_assert_uint_eq(u.disk_mb, 100);
	for (int i = 0; i < 3; i++) {
		ck_assert_str_eq(u.cgroup[i], cg);
		ck_assert_int_eq(u.v2[i], 1);
	}
}
END_TEST

START_TEST(v2_metric)
{
	hangar_sandbox_metric m;

	/* No jail (pid 0): the disk is its limit, unmeasured. */
	ck_assert_int_eq(usage_metric(dir, ID, 0, &m), 0);
	ck_assert_uint_eq(m.mem_total_bytes, 64u << 20);
	ck_assert_uint_eq(m.mem_used_bytes, 1048576);
	ck_assert_uint_eq(m.pids_max, 32);
	ck_assert_uint_eq(m.pids_used, 7);
	ck_assert_uint_eq(m.cpu_count, 2);
	ck_assert_uint_eq(m.disk_total_bytes, 100u << 20);
}
END_TEST

START_TEST(v2_oom_kills_and_events)
{
	char msgs[USAGE_EVENTS][USAGE_MSG_MAX];
	const char *levels[USAGE_EVENTS];

	ck_assert_int_eq(usage_oom_kills(dir, ID), 2);
	ck_assert_int_eq(usage_events(dir, ID, 0, msgs, levels), 2);
	ck_assert_str_eq(msgs[0], "memory limit of 64 MB reached: the OOM killer killed 2 processes");
	ck_assert_str_eq(levels[0], "error");
	ck_assert_str_eq(msgs[1], "process limit of 32 reached: 3 forks refused");
	ck_assert_str_eq(levels[1], "warn");
	/* The count is read afresh each time (exec reads it around a command). */
	put(cg, "memory.events", "oom 5\noom_kill 3\n");
	ck_assert_int_eq(usage_oom_kills(dir, ID), 3);
	/* Nothing hit: no event. */
	put(cg, "memory.events", "oom 0\noom_kill 0\n");
	put(cg, "pids.events", "max 0\n");
	ck_assert_int_eq(usage_events(dir, ID, 0, msgs, levels), 0);
}
END_TEST

/* A limits file naming cgroups outside the root, another sandbox's, or with ".." is not followed. */
START_TEST(foreign_cgroups_ignored)
{
	char bad[3][256], limits[1600];
	struct usage_limits u;

	snprintf(bad[0], sizeof(bad[0]), "/tmp/elsewhere/%s", ID);
	snprintf(bad[1], sizeof(bad[1]), "%shangar/sb-ffffffffffffffff", root);
	snprintf(bad[2], sizeof(bad[2]), "%shangar/../hangar/%s", root, ID);
	for (int i = 0; i < 3; i++) {
		snprintf(limits, sizeof(limits), "memory_mb 64\nmemory v2 %s\npids v2 %s\n", bad[i], bad[i]);
		put(dir, "limits", limits);
		ck_assert_int_eq(usage_read_limits(dir, ID, &u), 0);
		ck_assert_msg(!u.cgroup[0][0] && !u.cgroup[1][0], "followed %s", bad[i]);
		ck_assert_int_eq(usage_oom_kills(dir, ID), -1);
	}
}
END_TEST

/* v1: the memory controller's own files, and clean-up of the v1 directories only. */
START_TEST(v1_files_and_removal)
{
	char v1[256], limits[1024];
	hangar_sandbox_metric m;

	snprintf(v1, sizeof(v1), "%smemory", root);
	mk(v1);
	snprintf(v1, sizeof(v1), "%smemory/" ID, root);
	mk(v1);
	put(v1, "memory.usage_in_bytes", "2097152\n");
	put(v1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	snprintf(limits, sizeof(limits), "memory_mb 64\npids 32\ncpus 2\ndisk_mb 100\nmemory v1 %s\npids v2 %s\n", v1,
		 cg);
	put(dir, "limits", limits);
	ck_assert_int_eq(usage_metric(dir, ID, 0, &m), 0);
	ck_assert_uint_eq(m.mem_used_bytes, 2097152);
	ck_assert_int_eq(usage_oom_kills(dir, ID), 1);
	/* A real cgroup directory goes with its interface files; here they must go first. */
	unlink(strcat(strcpy(limits, v1), "/memory.usage_in_bytes"));
	unlink(strcat(strcpy(limits, v1), "/memory.oom_control"));
	usage_remove_cgroups(dir, ID);
	ck_assert_int_eq(access(v1, F_OK), -1);
	ck_assert_int_eq(access(cg, F_OK), 0); /* v2: the jail's freezer cgroup, not the library's to remove */
}
END_TEST

/*
 * What an unprivileged caller's jail records here: no cgroup, a process
 * limit from RLIMIT_NPROC, and why the others do not hold. The metric
 * reports only the limit that holds (0 for the others), processes counted
 * without a cgroup; the logs say what is not limited, and why.
 */
START_TEST(limits_that_do_not_hold)
{
	char msgs[USAGE_EVENTS][USAGE_MSG_MAX];
	const char *levels[USAGE_EVENTS];
	hangar_sandbox_metric m;
	struct usage_limits u;

	put(dir, "limits",
	    "memory_mb 64\npids 32\ncpus 2\ndisk_mb 100\n"
	    "memory none cgroup v2: the sandbox has no cgroup v2 of its own; cgroup v1: cannot make x: Permission denied\n"
	    "pids rlimit 32\n"
	    "cpu none cgroup v1: no cpu hierarchy at /sys/fs/cgroup/cpu\n");
	ck_assert_int_eq(usage_read_limits(dir, ID, &u), 0);
	ck_assert_uint_eq(u.memory_mb, 64);
	ck_assert_uint_eq(u.pids, 32);
	ck_assert_int_eq(u.rlimit_pids, 1);
	ck_assert_str_eq(u.cgroup[0], "");
	ck_assert_str_eq(u.why[0],
			 "cgroup v2: the sandbox has no cgroup v2 of its own; cgroup v1: cannot make x: Permission denied");
	ck_assert_str_eq(u.why[1], "");
	ck_assert_str_eq(u.why[2], "cgroup v1: no cpu hierarchy at /sys/fs/cgroup/cpu");
	ck_assert(!USAGE_HOLDS(&u, 0) && USAGE_HOLDS(&u, 1) && !USAGE_HOLDS(&u, 2));
	/* The test itself as the "jail": its children are counted (itself first, with its threads). */
	ck_assert_int_eq(usage_metric(dir, ID, 0, &m), 0);
	ck_assert_uint_eq(m.mem_total_bytes, 0);
	ck_assert_uint_eq(m.cpu_count, 0);
	ck_assert_uint_eq(m.pids_max, 32);
	ck_assert_int_eq(usage_oom_kills(dir, ID), -1);
	ck_assert_int_eq(usage_events(dir, ID, 0, msgs, levels), 2);
	ck_assert_str_eq(msgs[0], "the sandbox's memory is not limited: cgroup v2: the sandbox has no cgroup v2 of its "
				  "own; cgroup v1: cannot make x: Permission denied");
	ck_assert_str_eq(levels[0], "warn");
	ck_assert_str_eq(msgs[1], "the sandbox's CPU time is not limited: cgroup v1: no cpu hierarchy at "
				  "/sys/fs/cgroup/cpu");
	/* A jail from before these lines: no cgroup named is no limit, said without a reason. */
	put(dir, "limits", "memory_mb 64\npids 32\ncpus 2\ndisk_mb 100\n");
	ck_assert_int_eq(usage_metric(dir, ID, 0, &m), 0);
	ck_assert_uint_eq(m.mem_total_bytes, 0);
	ck_assert_uint_eq(m.pids_max, 0);
	ck_assert_int_eq(usage_events(dir, ID, 0, msgs, levels), 3);
	ck_assert_str_eq(msgs[1], "the sandbox's process count is not limited");
}
END_TEST

/* Processes counted without a cgroup: every task of the jail's first child and below. */
START_TEST(processes_counted_without_cgroup)
{
	hangar_sandbox_metric m;
	int p[2];
	pid_t jail;
	char c;

	put(dir, "limits", "memory_mb 64\npids 32\ncpus 2\ndisk_mb 100\npids rlimit 32\n");
	ck_assert_int_eq(pipe(p), 0);
	/* A "jail" whose first child ("bwrap") has two children of its own: 3 tasks. */
	jail = fork();
	ck_assert_int_ge(jail, 0);
	if (jail == 0) {
		/* Each waits for EOF on the pipe, which comes when the test closes its end. */
		close(p[1]);
		if (fork() == 0) { /* "bwrap", named as the exec'd one is */
			prctl(PR_SET_NAME, "bwrap");
			for (int i = 0; i < 2 && fork() != 0; i++)
				;
		}
		_exit(read(p[0], &c, 1) < 0);
	}
	for (int tries = 0; tries < 200; tries++) {
		ck_assert_int_eq(usage_metric(dir, ID, jail, &m), 0);
		if (m.pids_used == 3)
			break;
		usleep(10000);
	}
	ck_assert_uint_eq(m.pids_used, 3);
	ck_assert_uint_eq(m.pids_max, 32);
	close(p[1]);
	close(p[0]);
	waitpid(jail, NULL, 0);
}
END_TEST

/* Whether /proc/PID/FILE holds want, polled for up to about 10 s. */
static int proc_says(pid_t pid, const char *file, const char *want)
{
	struct timespec pause = { 0, 2 * 1000 * 1000 };
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "re");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if (strstr(buf, want))
			return 1;
		nanosleep(&pause, NULL);
	}
	return 0;
}

/*
 * The jail's first child may be its cgroup warm-up, a fork of its own that
 * runs for a moment or waits to be reaped: the sandbox's bwrap is found past
 * it. Here this process is the jail, with a fork of itself first (_i 0:
 * running, 1: a zombie) and an exec'd program second.
 */
START_TEST(jail_child_skips_own_forks)
{
	int hold[2];
	pid_t own, exec_d;

	ck_assert_int_eq(pipe(hold), 0);
	own = fork();
	ck_assert_int_ge(own, 0);
	if (own == 0) {
		char c;

		close(hold[1]);
		if (_i == 0)
			while (read(hold[0], &c, 1) < 0 && errno == EINTR)
				;
		_exit(0);
	}
	close(hold[0]);
	if (_i == 1)
		ck_assert_msg(proc_says(own, "stat", ") Z "), "the fork did not become a zombie");
	exec_d = fork();
	ck_assert_int_ge(exec_d, 0);
	if (exec_d == 0) {
		execlp("sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	ck_assert_msg(proc_says(exec_d, "comm", "sleep"), "sleep did not start");
	/* The hazard is there: the first child is the fork... */
	ck_assert_int_eq(lstate_first_child(getpid()), own);
	/* ...and the sandbox's process is found past it. */
	ck_assert_int_eq(lstate_jail_child(getpid()), exec_d);
	kill(exec_d, SIGKILL);
	close(hold[1]);
	waitpid(exec_d, NULL, 0);
	waitpid(own, NULL, 0);
	/* No child that is not a fork of its own: none. */
	ck_assert_int_eq(lstate_jail_child(getpid()), 0);
}
END_TEST

static Suite *usage_suite(void)
{
	Suite *s = suite_create("local-usage");
	TCase *tc = tcase_create("cgroups");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, random_hex_ids);
	tcase_add_test(tc, v2_limits_read);
	tcase_add_test(tc, v2_metric);
	tcase_add_test(tc, v2_oom_kills_and_events);
	tcase_add_test(tc, foreign_cgroups_ignored);
	tcase_add_test(tc, v1_files_and_removal);
	tcase_add_test(tc, limits_that_do_not_hold);
	tcase_add_test(tc, processes_counted_without_cgroup);
	tcase_add_loop_test(tc, jail_child_skips_own_forks, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(usage_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
