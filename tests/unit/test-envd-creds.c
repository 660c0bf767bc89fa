/*
 * hangar-envd's per-thread user credentials (creds.c): inside a scope the
 * thread can do on files only what the user can, other threads keep the
 * daemon's rights, and leaving gives everything back. Needs root; as
 * another user every case passes vacuously, as the daemon cannot switch.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "creds.h"
#include "envd.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

static struct envd_user alice;
static char tmpdir[PATH_MAX - 64];
static char secret[PATH_MAX]; /* root's, mode 0600 */

static void setup(void)
{
	int fd;

	memset(&envd_cfg, 0, sizeof(envd_cfg));
	envd_cfg.is_root = geteuid() == 0;
	memset(&alice, 0, sizeof(alice));
	snprintf(alice.name, sizeof(alice.name), "alice");
	snprintf(alice.home, sizeof(alice.home), "/");
	alice.uid = 1234;
	alice.gid = 1234;
	snprintf(tmpdir, sizeof(tmpdir), "%s/envd-creds-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
	snprintf(secret, sizeof(secret), "%s/secret", tmpdir);
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "s", 1), 1);
	close(fd);
}

static void teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

static int can_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static uint32_t effective_caps(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));

	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	return d[0].effective | d[1].effective;
}

/* A root process that waits until its pipe closes: /proc/<pid>/environ is root's to read. */
static pid_t root_process(int *keep)
{
	int fds[2];
	pid_t pid;

	ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char c;

		close(fds[1]);
		_exit(read(fds[0], &c, 1) < 0);
	}
	close(fds[0]);
	*keep = fds[1];
	return pid;
}

START_TEST(scope_is_the_user)
{
	struct envd_creds creds;
	char made[PATH_MAX], environ_path[64];
	struct stat st;
	int keep;
	pid_t pid;

	if (!envd_cfg.is_root)
		return;
	pid = root_process(&keep);
	snprintf(environ_path, sizeof(environ_path), "/proc/%d/environ", (int)pid);
	ck_assert(can_open(environ_path, O_RDONLY));
	ck_assert(can_open(secret, O_RDONLY));
	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	ck_assert_int_eq(creds.active, 1);
	ck_assert(!can_open(secret, O_RDONLY));
	ck_assert_int_eq(errno, EACCES);
	/* Not even through /proc: CAP_SYS_PTRACE is gone with the others. */
	ck_assert(!can_open(environ_path, O_RDONLY));
	ck_assert_uint_eq(effective_caps(), 0);
	/* A root-owned 0755 directory takes no new entries from the user. */
	snprintf(made, sizeof(made), "%s/by-alice", tmpdir);
	ck_assert_int_eq(mkdir(made, 0755), -1);
	ck_assert_int_eq(errno, EACCES);
	envd_creds_leave(&creds);

	ck_assert(can_open(secret, O_RDONLY));
	ck_assert(can_open(environ_path, O_RDONLY));
	close(keep);
	waitpid(pid, NULL, 0);
	ck_assert_uint_ne(effective_caps(), 0);
	ck_assert_int_eq(mkdir(made, 0755), 0);
	ck_assert_int_eq(stat(made, &st), 0);
	ck_assert_uint_eq(st.st_uid, 0);
}
END_TEST

START_TEST(files_made_are_the_users)
{
	struct envd_creds creds;
	char p[PATH_MAX];
	struct stat st;
	int fd;

	if (!envd_cfg.is_root)
		return;
	ck_assert_int_eq(chmod(tmpdir, 0777), 0);
	snprintf(p, sizeof(p), "%s/new", tmpdir);
	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	envd_creds_leave(&creds);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	close(fd);
	ck_assert_uint_eq(st.st_uid, 1234);
	ck_assert_uint_eq(st.st_gid, 1234);
}
END_TEST

/* ---- other threads ---- */

struct probe {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int step;           /* 1: main is in its scope; 2: the probe has looked; 3: done */
	int could_read;
	unsigned fsuid;
};

static void wait_step(struct probe *p, int step)
{
	pthread_mutex_lock(&p->mu);
	while (p->step < step)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

static void set_step(struct probe *p, int step)
{
	pthread_mutex_lock(&p->mu);
	p->step = step;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void *bystander(void *arg)
{
	struct probe *p = arg;

	wait_step(p, 1);
	p->could_read = can_open(secret, O_RDONLY);
	p->fsuid = (unsigned)setfsuid((uid_t)-1);
	set_step(p, 2);
	return NULL;
}

START_TEST(other_threads_keep_their_rights)
{
	struct probe p = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
	struct envd_creds creds;
	pthread_t t;

	if (!envd_cfg.is_root)
		return;
	ck_assert_int_eq(pthread_create(&t, NULL, bystander, &p), 0);
	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	set_step(&p, 1);
	wait_step(&p, 2);
	ck_assert(!can_open(secret, O_RDONLY));
	envd_creds_leave(&creds);
	pthread_join(t, NULL);
	ck_assert_int_eq(p.could_read, 1);
	ck_assert_uint_eq(p.fsuid, 0);
}
END_TEST

static void *child_of_scope(void *arg)
{
	struct probe *p = arg;
	struct envd_creds creds;

	/* Born inside the scope: already the user, and it can take the user again. */
	p->fsuid = (unsigned)setfsuid((uid_t)-1);
	p->could_read = can_open(secret, O_RDONLY);
	if (envd_creds_enter(&alice, &creds) == 0 && !can_open(secret, O_RDONLY))
		p->step = 3;
	return NULL;
}

START_TEST(threads_started_in_a_scope_inherit_it)
{
	struct probe p = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 1, 0 };
	struct envd_creds creds;
	pthread_t t;

	if (!envd_cfg.is_root)
		return;
	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, child_of_scope, &p), 0);
	envd_creds_leave(&creds);
	pthread_join(t, NULL);
	ck_assert_uint_eq(p.fsuid, 1234);
	ck_assert_int_eq(p.could_read, 0);
	ck_assert_int_eq(p.step, 3);
	ck_assert(can_open(secret, O_RDONLY));
}
END_TEST

START_TEST(no_switch_for_root_or_an_unprivileged_daemon)
{
	struct envd_user root = alice;
	struct envd_creds creds;

	root.uid = 0;
	root.gid = 0;
	ck_assert_int_eq(envd_creds_enter(&root, &creds), 0);
	ck_assert_int_eq(creds.active, 0);
	envd_creds_leave(&creds);
	envd_cfg.is_root = 0;
	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	ck_assert_int_eq(creds.active, 0);
	ck_assert_uint_eq((unsigned)setfsuid((uid_t)-1), geteuid());
	envd_creds_leave(&creds);
}
END_TEST

static Suite *creds_suite(void)
{
	Suite *s = suite_create("envd-creds");
	TCase *tc = tcase_create("creds");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, scope_is_the_user);
	tcase_add_test(tc, files_made_are_the_users);
	tcase_add_test(tc, other_threads_keep_their_rights);
	tcase_add_test(tc, threads_started_in_a_scope_inherit_it);
	tcase_add_test(tc, no_switch_for_root_or_an_unprivileged_daemon);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(creds_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
