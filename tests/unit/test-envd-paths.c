/*
 * hangar-envd path resolution, the last element of a path, child
 * environments and directory creation (user.c).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "creds.h"
#include "envd.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

static struct envd_user alice;

static void setup(void)
{
	memset(&envd_cfg, 0, sizeof(envd_cfg));
	memset(&alice, 0, sizeof(alice));
	snprintf(alice.name, sizeof(alice.name), "alice");
	snprintf(alice.home, sizeof(alice.home), "/home/alice");
	alice.uid = 1234;
	alice.gid = 1234;
}

static void teardown(void)
{
	memset(&envd_cfg, 0, sizeof(envd_cfg));
}

/*
 * The output buffer starts full of stale text (as a reused stack buffer
 * would be), so a resolver that reads past its own terminator shows up.
 */
static void stale_fill(char *buf, size_t sz)
{
	for (size_t i = 0; i + 1 < sz; i++)
		buf[i] = "/stale"[i % 6];
	buf[sz - 1] = '\0';
}

/* Resolves in and checks the result. */
static void resolves(const struct envd_user *u, const char *in, const char *want)
{
	char out[PATH_MAX];
	struct rpc_error err = { 0 };
	int rc;

	stale_fill(out, sizeof(out));
	rc = envd_resolve_path(u, in, out, sizeof(out), &err);

	ck_assert_msg(rc == 0, "\"%s\" refused: %s", in ? in : "(null)", err.message);
	ck_assert_msg(strcmp(out, want) == 0, "\"%s\" → \"%.200s\", want \"%s\"", in ? in : "(null)", out, want);
}

static void refused(const struct envd_user *u, const char *in)
{
	char out[PATH_MAX];
	struct rpc_error err = { 0 };

	int rc = envd_resolve_path(u, in, out, sizeof(out), &err);

	/* envd.h: "Returns 0, or -1 with err set"; callers test for < 0. */
	ck_assert_msg(rc == -1, "\"%s\": returned %d", in, rc);
	ck_assert_int_eq(err.code, CONNECT_INVALID_ARGUMENT);
	ck_assert_msg(err.message[0] != '\0', "no message for \"%s\"", in);
}

/* ---- envd_resolve_path ---------------------------------------------------- */

START_TEST(empty_is_home_without_workdir)
{
	resolves(&alice, "", "/home/alice");
	resolves(&alice, NULL, "/home/alice");
}
END_TEST

START_TEST(empty_is_default_workdir)
{
	static char wd[] = "/srv/work";

	envd_cfg.default_workdir = wd;
	resolves(&alice, "", "/srv/work");
	resolves(&alice, NULL, "/srv/work");
	/* Relative paths still join the home, not the workdir. */
	resolves(&alice, "x", "/home/alice/x");
	resolves(&alice, "~", "/home/alice");
}
END_TEST

START_TEST(tilde)
{
	resolves(&alice, "~", "/home/alice");
	resolves(&alice, "~/", "/home/alice");
	resolves(&alice, "~/x", "/home/alice/x");
	resolves(&alice, "~/a/b/c.txt", "/home/alice/a/b/c.txt");
	resolves(&alice, "~/a/../b", "/home/alice/b");
	resolves(&alice, "~//a/./b/", "/home/alice/a/b");
}
END_TEST

START_TEST(tilde_user_refused)
{
	refused(&alice, "~bob");
	refused(&alice, "~bob/x");
	refused(&alice, "~alice");
	refused(&alice, "~.");
}
END_TEST

START_TEST(absolute_untouched)
{
	resolves(&alice, "/", "/");
	resolves(&alice, "/etc/passwd", "/etc/passwd");
	/* Upstream uses absolute paths as given, without cleaning. */
	resolves(&alice, "/a/../b", "/a/../b");
	resolves(&alice, "/a//b/./c/", "/a//b/./c/");
	resolves(&alice, "/~", "/~");
}
END_TEST

START_TEST(relative_joined_and_cleaned)
{
	resolves(&alice, "x", "/home/alice/x");
	resolves(&alice, "a/b", "/home/alice/a/b");
	resolves(&alice, "./a/./b/", "/home/alice/a/b");
	resolves(&alice, "a//b", "/home/alice/a/b");
	resolves(&alice, ".", "/home/alice");
	resolves(&alice, "a/..", "/home/alice");
	resolves(&alice, "..", "/home");
	resolves(&alice, "../bob/x", "/home/bob/x");
	resolves(&alice, "x~", "/home/alice/x~");
	/* ".." never climbs above the root. */
	resolves(&alice, "../../..", "/");
	resolves(&alice, "../../../../../etc/passwd", "/etc/passwd");
	/* Names that merely start with dots are names. */
	resolves(&alice, "...", "/home/alice/...");
	resolves(&alice, "..x/.y", "/home/alice/..x/.y");
}
END_TEST

START_TEST(home_is_root)
{
	struct envd_user r = alice;

	snprintf(r.home, sizeof(r.home), "/");
	resolves(&r, "", "/");
	resolves(&r, "~", "/");
	resolves(&r, "~/x", "/x");
	resolves(&r, "x", "/x");
	resolves(&r, "../x", "/x");
}
END_TEST

START_TEST(home_with_trailing_slash)
{
	struct envd_user r = alice;

	snprintf(r.home, sizeof(r.home), "/home/alice/");
	resolves(&r, "x", "/home/alice/x");
	resolves(&r, "~/x", "/home/alice/x");
}
END_TEST

START_TEST(too_long_refused)
{
	char out[32];
	struct rpc_error err = { 0 };

	ck_assert_int_ne(envd_resolve_path(&alice, "a-rather-long-relative-name-here", out, sizeof(out), &err), 0);
	ck_assert_int_eq(err.code, CONNECT_INVALID_ARGUMENT);
	err.code = CONNECT_OK;
	ck_assert_int_ne(envd_resolve_path(&alice, "/an/absolute/path/that/is/too/long", out, sizeof(out), &err), 0);
	ck_assert_int_eq(err.code, CONNECT_INVALID_ARGUMENT);
	/* Exactly fitting is fine: "/home/alice/abc" is 15 bytes + NUL. */
	stale_fill(out, sizeof(out));
	ck_assert_int_eq(envd_resolve_path(&alice, "abc", out, 16, &err), 0);
	ck_assert_str_eq(out, "/home/alice/abc");
}
END_TEST

/* ---- envd_build_env -------------------------------------------------------- */

static size_t env_count(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	return n;
}

static ssize_t env_index(char **env, const char *key)
{
	size_t klen = strlen(key);

	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], key, klen) == 0 && env[i][klen] == '=')
			return (ssize_t)i;
	return -1;
}

static const char *env_value(char **env, const char *key)
{
	ssize_t i = env_index(env, key);

	return i < 0 ? NULL : env[i] + strlen(key) + 1;
}

/* No key appears twice. */
static void env_unique(char **env)
{
	for (size_t i = 0; env[i]; i++) {
		size_t klen = strcspn(env[i], "=");

		for (size_t j = i + 1; env[j]; j++)
			ck_assert_msg(!(strncmp(env[i], env[j], klen) == 0 && env[j][klen] == '='),
				      "duplicate %.*s", (int)klen, env[i]);
	}
}

START_TEST(env_minimal)
{
	char **env;

	ck_assert_int_eq(setenv("PATH", "/test/bin:/usr/bin", 1), 0);
	ck_assert_int_eq(setenv("NOT_INHERITED", "1", 1), 0);
	env = envd_build_env(&alice, NULL);
	ck_assert_ptr_nonnull(env);
	ck_assert_uint_eq(env_count(env), 4);
	ck_assert_str_eq(env[0], "PATH=/test/bin:/usr/bin");
	ck_assert_str_eq(env[1], "HOME=/home/alice");
	ck_assert_str_eq(env[2], "USER=alice");
	ck_assert_str_eq(env[3], "LOGNAME=alice");
	ck_assert_ptr_null(env_value(env, "NOT_INHERITED"));
	free(env);
}
END_TEST

START_TEST(env_without_daemon_path)
{
	char *saved = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
	char **env;

	unsetenv("PATH");
	env = envd_build_env(&alice, NULL);
	ck_assert_ptr_nonnull(env);
	/* Some PATH is always given, so exec of a bare name can work. */
	ck_assert_ptr_nonnull(env_value(env, "PATH"));
	ck_assert_int_ne(strlen(env_value(env, "PATH")), 0);
	free(env);
	if (saved)
		setenv("PATH", saved, 1);
	free(saved);
}
END_TEST

START_TEST(env_order_and_override)
{
	static char d1[] = "E2B_SANDBOX=true", d2[] = "SHARED=default", d3[] = "HOME=/default-home",
		    d4[] = "NOEQUALS", d5[] = "AB=from-default";
	char *defaults[] = { d1, d2, d3, d4, d5, NULL };
	char *const extra[] = { "SHARED=request", "FOO=bar", "USER=mallory", "A=short", "EMPTY=",
				"FOO=bar2", NULL };
	char **env;

	ck_assert_int_eq(setenv("PATH", "/daemon/bin", 1), 0);
	envd_cfg.default_env = defaults;
	env = envd_build_env(&alice, extra);
	ck_assert_ptr_nonnull(env);
	env_unique(env);
	/* The four fixed variables come first, in this order. */
	ck_assert_int_eq(env_index(env, "PATH"), 0);
	ck_assert_int_eq(env_index(env, "HOME"), 1);
	ck_assert_int_eq(env_index(env, "USER"), 2);
	ck_assert_int_eq(env_index(env, "LOGNAME"), 3);
	/* Default env overrides the fixed ones; request envs override both. */
	ck_assert_str_eq(env_value(env, "PATH"), "/daemon/bin");
	ck_assert_str_eq(env_value(env, "HOME"), "/default-home");
	ck_assert_str_eq(env_value(env, "USER"), "mallory");
	ck_assert_str_eq(env_value(env, "LOGNAME"), "alice");
	ck_assert_str_eq(env_value(env, "E2B_SANDBOX"), "true");
	ck_assert_str_eq(env_value(env, "SHARED"), "request");
	/* Later entries of the same list win too. */
	ck_assert_str_eq(env_value(env, "FOO"), "bar2");
	ck_assert_str_eq(env_value(env, "EMPTY"), "");
	/* A key that is a prefix of another is a different key. */
	ck_assert_str_eq(env_value(env, "A"), "short");
	ck_assert_str_eq(env_value(env, "AB"), "from-default");
	/* Entries without '=' are not variables. */
	ck_assert_int_eq(env_index(env, "NOEQUALS"), -1);
	for (size_t i = 0; env[i]; i++)
		ck_assert_ptr_nonnull(strchr(env[i], '='));
	/* Defaults before request-only keys. */
	ck_assert_int_lt(env_index(env, "E2B_SANDBOX"), env_index(env, "FOO"));
	ck_assert_uint_eq(env_count(env), 4 + 3 + 3);
	free(env);
}
END_TEST

START_TEST(env_request_overrides_path)
{
	char *const extra[] = { "PATH=/only/mine", NULL };
	char **env = envd_build_env(&alice, extra);

	ck_assert_ptr_nonnull(env);
	ck_assert_str_eq(env_value(env, "PATH"), "/only/mine");
	ck_assert_uint_eq(env_count(env), 4);
	free(env);
}
END_TEST

/* ---- envd_ensure_dirs ----------------------------------------------------- */

static char tmpdir[PATH_MAX];

static void fs_setup(void)
{
	setup();
	snprintf(tmpdir, sizeof(tmpdir), "%s/envd-paths-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	umask(022);
}

static void fs_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	teardown();
}

static void path_in_tmp(char *out, size_t sz, const char *rel)
{
	int n = snprintf(out, sz, "%s/%s", tmpdir, rel);

	ck_assert(n > 0 && (size_t)n < sz);
}

START_TEST(ensure_nested)
{
	char p[PATH_MAX];
	struct stat st;

	path_in_tmp(p, sizeof(p), "a/b/c/d");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	path_in_tmp(p, sizeof(p), "a/b");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* Again: everything exists, nothing to do. */
	path_in_tmp(p, sizeof(p), "a/b/c/d");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
}
END_TEST

START_TEST(ensure_trailing_slash)
{
	char p[PATH_MAX];
	struct stat st;

	path_in_tmp(p, sizeof(p), "t/u/");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
	path_in_tmp(p, sizeof(p), "t/u");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
}
END_TEST

START_TEST(ensure_existing_untouched)
{
	char p[PATH_MAX];
	struct stat st;

	path_in_tmp(p, sizeof(p), "keep");
	ck_assert_int_eq(mkdir(p, 0700), 0);
	path_in_tmp(p, sizeof(p), "keep/new");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
	path_in_tmp(p, sizeof(p), "keep");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_uint_eq(st.st_uid, geteuid());
}
END_TEST

START_TEST(ensure_file_component_fails)
{
	char p[PATH_MAX];
	struct stat st;
	int fd;

	path_in_tmp(p, sizeof(p), "file");
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	path_in_tmp(p, sizeof(p), "file/sub/dir");
	ck_assert_int_lt(envd_ensure_dirs(p), 0);
	path_in_tmp(p, sizeof(p), "file");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	/* The final component being a file is refused as well. */
	ck_assert_int_lt(envd_ensure_dirs(p), 0);
}
END_TEST

/*
 * Directories are made with the calling thread's file credentials: in a
 * user's envd_creds_enter() scope they are the user's, and where the user
 * may not write nothing is made at all.
 */
START_TEST(ensure_owned_by_user)
{
	char p[PATH_MAX];
	struct stat st;
	struct envd_creds creds;

	if (geteuid() != 0)
		return; /* only root can act as another user */
	envd_cfg.is_root = 1;
	ck_assert_int_eq(chmod(tmpdir, 0755), 0);
	path_in_tmp(p, sizeof(p), "open");
	ck_assert_int_eq(mkdir(p, 0777), 0);
	ck_assert_int_eq(chmod(p, 0777), 0);
	path_in_tmp(p, sizeof(p), "closed");
	ck_assert_int_eq(mkdir(p, 0755), 0);

	ck_assert_int_eq(envd_creds_enter(&alice, &creds), 0);
	path_in_tmp(p, sizeof(p), "open/by/alice");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
	path_in_tmp(p, sizeof(p), "closed/by/alice");
	ck_assert_int_eq(envd_ensure_dirs(p), -EACCES);
	envd_creds_leave(&creds);

	path_in_tmp(p, sizeof(p), "open/by/alice");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1234);
	ck_assert_uint_eq(st.st_gid, 1234);
	path_in_tmp(p, sizeof(p), "open/by");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_uid, 1234);
	/* The directories that were there keep their owner. */
	path_in_tmp(p, sizeof(p), "open");
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_uint_eq(st.st_uid, 0);
	path_in_tmp(p, sizeof(p), "closed/by");
	ck_assert_int_eq(stat(p, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	/* And the thread is root again. */
	path_in_tmp(p, sizeof(p), "closed/by/root");
	ck_assert_int_eq(envd_ensure_dirs(p), 0);
}
END_TEST

/* ---- envd_base_name -------------------------------------------------------- */

static void base_is(const char *path, const char *want)
{
	char out[64];

	stale_fill(out, sizeof(out));
	envd_base_name(path, out, sizeof(out));
	ck_assert_msg(strcmp(out, want) == 0, "\"%s\" → \"%s\", want \"%s\"", path, out, want);
}

START_TEST(base_name_as_go)
{
	base_is("/home/alice/report.pdf", "report.pdf");
	base_is("report.pdf", "report.pdf");
	base_is("a/b", "b");
	/* Trailing slashes are not an element. */
	base_is("/home/alice/dir/", "dir");
	base_is("/a//", "a");
	/* The root is "/" however it is written; nothing at all is ".". */
	base_is("/", "/");
	base_is("///", "/");
	base_is("", ".");
	base_is(".", ".");
	base_is("/a/..", "..");
}
END_TEST

START_TEST(base_name_truncated_to_the_buffer)
{
	char out[4];

	envd_base_name("/x/abcdef", out, sizeof(out));
	ck_assert_str_eq(out, "abc");
	envd_base_name("", out, 1);
	ck_assert_str_eq(out, "");
}
END_TEST

static Suite *paths_suite(void)
{
	Suite *s = suite_create("envd-paths");
	TCase *tc;

	tc = tcase_create("resolve");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, empty_is_home_without_workdir);
	tcase_add_test(tc, empty_is_default_workdir);
	tcase_add_test(tc, tilde);
	tcase_add_test(tc, tilde_user_refused);
	tcase_add_test(tc, absolute_untouched);
	tcase_add_test(tc, relative_joined_and_cleaned);
	tcase_add_test(tc, home_is_root);
	tcase_add_test(tc, home_with_trailing_slash);
	tcase_add_test(tc, too_long_refused);
	tcase_add_test(tc, base_name_as_go);
	tcase_add_test(tc, base_name_truncated_to_the_buffer);
	suite_add_tcase(s, tc);

	tc = tcase_create("env");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, env_minimal);
	tcase_add_test(tc, env_without_daemon_path);
	tcase_add_test(tc, env_order_and_override);
	tcase_add_test(tc, env_request_overrides_path);
	suite_add_tcase(s, tc);

	tc = tcase_create("ensure_dirs");
	tcase_add_checked_fixture(tc, fs_setup, fs_teardown);
	tcase_add_test(tc, ensure_nested);
	tcase_add_test(tc, ensure_trailing_slash);
	tcase_add_test(tc, ensure_existing_untouched);
	tcase_add_test(tc, ensure_file_component_fails);
	tcase_add_test(tc, ensure_owned_by_user);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(paths_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
