/*
 * subids_run (libhangar/util/subids.c): a function run as root of a user
 * namespace that newuidmap and newgidmap map onto the caller's image range,
 * its result, message and out data brought back, its progress delivered and
 * cancelled, and its child reaped, with no descriptor left behind, however
 * it ends; the child dies with its parent.
 *
 * Run as the test user `user` with the host's real /etc/subuid, /etc/subgid
 * and newuidmap (./dev test gives `user` the ids): skipped when not started
 * as root or when `user` has no image range. The image store and the local
 * provider's snapshots use the same call (suites local-image, local-snap).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "subids.h"

static unsigned img_uid, img_gid;
static struct subids_line uids[2], gids[2];

/* Becomes `user` with its image range's maps ready; 0 when that cannot be (not root, no `user`, no range). */
static int become_user(void)
{
	struct passwd *pw = getpwnam("user");

	if (geteuid() != 0 || !pw)
		return 0;
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid), 0);
	ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid), 0);
	/* Changing ids made this process undumpable: its /proc files root's, its child's maps unwritable. */
	ck_assert_int_eq(prctl(PR_SET_DUMPABLE, 1), 0);
	if (subids_caller_image_range(&img_uid, &img_gid) < 0)
		return 0;
	uids[0] = (struct subids_line){ 0, img_uid, SUBIDS_SLOT };
	uids[1] = (struct subids_line){ SUBIDS_SLOT, pw->pw_uid, 1 };
	gids[0] = (struct subids_line){ 0, img_gid, SUBIDS_SLOT };
	gids[1] = (struct subids_line){ SUBIDS_SLOT, pw->pw_gid, 1 };
	return 1;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Nothing of the call is left: its child reaped (this process has no other), its pipes closed. */
static void assert_nothing_left(int fds)
{
	errno = 0;
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
	ck_assert_int_eq(open_fds(), fds);
}

static struct subids_call call(int (*fn)(void *, char *, size_t), void *arg, char *msg, size_t size)
{
	return (struct subids_call){ .uid_map = uids,
				     .gid_map = gids,
				     .uid_lines = 2,
				     .gid_lines = 2,
				     .fn = fn,
				     .arg = arg,
				     .msg = msg,
				     .msg_size = size };
}

struct seen {
	unsigned uid, gid;
	char uid_map[128];
};

/* Says who it is and how its namespace is mapped. */
static int who(void *arg, char *msg, size_t size)
{
	struct seen *s = arg;
	FILE *f = fopen("/proc/self/uid_map", "re");

	(void)msg;
	(void)size;
	s->uid = (unsigned)geteuid();
	s->gid = (unsigned)getegid();
	if (!f || !fgets(s->uid_map, sizeof(s->uid_map), f))
		return -EIO;
	fclose(f);
	return 7;
}

START_TEST(ran_and_out_back)
{
	struct seen s = { 99, 99, "" };
	char msg[64] = "stale";
	struct subids_call c = call(who, &s, msg, sizeof(msg));
	enum subids_step step = SUBIDS_DIED;
	unsigned in, out, count;
	int fds;

	if (!become_user())
		return;
	fds = open_fds();
	c.out = &s;
	c.out_size = sizeof(s);
	ck_assert_int_eq(subids_run(&c, &step), 7);
	ck_assert_int_eq(step, SUBIDS_RAN);
	ck_assert_str_eq(msg, "");
	/* Root inside, its 0 the image range's first id: the maps asked for, not some other. */
	ck_assert_uint_eq(s.uid, 0);
	ck_assert_uint_eq(s.gid, 0);
	ck_assert_int_eq(sscanf(s.uid_map, "%u %u %u", &in, &out, &count), 3);
	ck_assert_uint_eq(in, 0);
	ck_assert_uint_eq(out, img_uid);
	ck_assert_uint_eq(count, SUBIDS_SLOT);
	/* The parent's own ids never changed. */
	ck_assert_uint_ne(geteuid(), 0);
	assert_nothing_left(fds);
}
END_TEST

static int refuse(void *arg, char *msg, size_t size)
{
	*(int *)arg = 42; /* out comes back even when fn fails */
	snprintf(msg, size, "no %s here", "luck");
	return -ENOENT;
}

START_TEST(fails_with_message)
{
	char msg[64];
	int out = 0;
	struct subids_call c = call(refuse, &out, msg, sizeof(msg));
	enum subids_step step = SUBIDS_DIED;
	int fds;

	if (!become_user())
		return;
	fds = open_fds();
	c.out = &out;
	c.out_size = sizeof(out);
	ck_assert_int_eq(subids_run(&c, &step), -ENOENT);
	ck_assert_int_eq(step, SUBIDS_RAN);
	ck_assert_str_eq(msg, "no luck here");
	ck_assert_int_eq(out, 42);
	assert_nothing_left(fds);
}
END_TEST

/* Reports 1..limit bytes in turn until told to stop; out: how many reports it made. */
struct reports {
	int limit, made;
};

static int report(void *arg, char *msg, size_t size)
{
	struct reports *r = arg;

	for (r->made = 1; r->made <= r->limit; r->made++)
		if (subids_progress((uint64_t)r->made, NULL)) {
			snprintf(msg, size, "stopped after %d", r->made);
			return -ECANCELED;
		}
	r->made = r->limit;
	return 0;
}

struct heard {
	int calls, stop_at;
	uint64_t bytes;
};

static int hear(uint64_t bytes, void *payload)
{
	struct heard *h = payload;

	h->calls++;
	h->bytes += bytes;
	return h->stop_at && h->calls >= h->stop_at;
}

/* report run to limit reports, stop_at (0: never) answered with stop; what fn and the parent saw. */
static int run_reports(int limit, int stop_at, struct reports *r, struct heard *h, char *msg, size_t size)
{
	struct subids_call c = call(report, r, msg, size);
	enum subids_step step;
	int fds = open_fds(), rc;

	*r = (struct reports){ limit, 0 };
	*h = (struct heard){ 0, stop_at, 0 };
	c.out = r;
	c.out_size = sizeof(*r);
	c.progress = hear;
	c.payload = h;
	rc = subids_run(&c, &step);
	ck_assert_int_eq(step, SUBIDS_RAN);
	assert_nothing_left(fds);
	return rc;
}

START_TEST(progress_delivered)
{
	struct reports r;
	struct heard h;
	char msg[64];

	if (!become_user())
		return;
	ck_assert_int_eq(run_reports(5, 0, &r, &h, msg, sizeof(msg)), 0);
	ck_assert_int_eq(h.calls, 5);
	ck_assert_uint_eq(h.bytes, 1 + 2 + 3 + 4 + 5);
	ck_assert_int_eq(r.made, 5);
}
END_TEST

START_TEST(cancel_stops_child)
{
	struct reports r;
	struct heard h;
	char msg[64];

	if (!become_user())
		return;
	ck_assert_int_eq(run_reports(1000, 3, &r, &h, msg, sizeof(msg)), -ECANCELED);
	/* The third answer stopped it: no fourth report. */
	ck_assert_int_eq(h.calls, 3);
	ck_assert_int_eq(r.made, 3);
	ck_assert_str_eq(msg, "stopped after 3");
}
END_TEST

static int never(void *arg, char *msg, size_t size)
{
	(void)arg;
	snprintf(msg, size, "ran");
	return 0;
}

START_TEST(map_refused)
{
	/* Host uid 1 is not among `user`'s subordinate ids: newuidmap refuses, fn never runs. */
	const struct subids_line other[] = { { 0, 1, 1 } };
	char msg[64];
	struct subids_call c = call(never, NULL, msg, sizeof(msg));
	enum subids_step step;
	int fds;

	if (!become_user())
		return;
	fds = open_fds();
	c.uid_map = other;
	c.uid_lines = 1;
	ck_assert_int_eq(subids_run(&c, &step), -EPERM);
	ck_assert_int_eq(step, SUBIDS_MAP);
	ck_assert_str_eq(msg, "");
	assert_nothing_left(fds);
}
END_TEST

static int crash(void *arg, char *msg, size_t size)
{
	(void)arg;
	(void)msg;
	(void)size;
	raise(SIGKILL);
	return 0;
}

START_TEST(child_died)
{
	char msg[64];
	struct subids_call c = call(crash, NULL, msg, sizeof(msg));
	enum subids_step step;
	int fds;

	if (!become_user())
		return;
	fds = open_fds();
	ck_assert_int_eq(subids_run(&c, &step), -EIO);
	ck_assert_int_eq(step, SUBIDS_DIED);
	ck_assert_str_eq(msg, "");
	assert_nothing_left(fds);
}
END_TEST

/* Sends its pid up the pipe whose write end is arg, then waits to be killed. */
static int linger(void *arg, char *msg, size_t size)
{
	pid_t me = getpid();

	(void)msg;
	(void)size;
	if (write(*(int *)arg, &me, sizeof(me)) != sizeof(me))
		return -EIO;
	for (;;)
		pause();
}

/* The child dies with the process that ran subids_run; the test's timeout is the deadline. */
START_TEST(child_dies_with_parent)
{
	int p[2], status;
	pid_t middle, helper;

	if (!become_user())
		return;
	/* The orphaned helper is reparented here, so it can be waited for. */
	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	ck_assert_int_eq(pipe(p), 0);
	middle = fork();
	ck_assert_int_ge(middle, 0);
	if (middle == 0) {
		struct subids_call c = call(linger, &p[1], NULL, 0);
		enum subids_step step;

		close(p[0]);
		subids_run(&c, &step);
		_exit(1);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &helper, sizeof(helper)), (ssize_t)sizeof(helper));
	close(p[0]);
	ck_assert_int_eq(kill(middle, SIGKILL), 0);
	ck_assert_int_eq(waitpid(middle, &status, 0), middle);
	ck_assert_int_eq(waitpid(helper, &status, 0), helper);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}
END_TEST

/* Reports its own pid as progress, then waits to be told to stop. */
static int report_pid(void *arg, char *msg, size_t size)
{
	(void)arg;
	(void)msg;
	(void)size;
	subids_progress((uint64_t)getpid(), NULL);
	return 0;
}

/* Kills the child that reported its pid and waits until it is dead (not reaped): the answer goes nowhere. */
static int kill_reporter(uint64_t bytes, void *payload)
{
	siginfo_t si;

	(void)payload;
	ck_assert_int_eq(kill((pid_t)bytes, SIGKILL), 0);
	ck_assert_int_eq(waitid(P_PID, (id_t)bytes, &si, WEXITED | WNOWAIT), 0);
	return 0;
}

/* Answering a child that died meanwhile never raises SIGPIPE in the caller's process. */
START_TEST(answer_to_a_dead_child)
{
	char msg[64];
	struct subids_call c = call(report_pid, NULL, msg, sizeof(msg));
	enum subids_step step;
	int fds;

	if (!become_user())
		return;
	signal(SIGPIPE, SIG_DFL);
	fds = open_fds();
	c.progress = kill_reporter;
	ck_assert_int_eq(subids_run(&c, &step), -EIO);
	ck_assert_int_eq(step, SUBIDS_DIED);
	assert_nothing_left(fds);
}
END_TEST

START_TEST(progress_outside_a_child)
{
	/* Nothing to report to: never a stop. */
	ck_assert_int_eq(subids_progress(1, NULL), 0);
}
END_TEST

static Suite *subids_suite(void)
{
	Suite *s = suite_create("subids");
	TCase *tc = tcase_create("run");

	tcase_add_test(tc, ran_and_out_back);
	tcase_add_test(tc, fails_with_message);
	tcase_add_test(tc, progress_delivered);
	tcase_add_test(tc, cancel_stops_child);
	tcase_add_test(tc, map_refused);
	tcase_add_test(tc, child_died);
	tcase_add_test(tc, child_dies_with_parent);
	tcase_add_test(tc, answer_to_a_dead_child);
	tcase_add_test(tc, progress_outside_a_child);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(subids_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
