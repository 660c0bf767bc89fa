/*
 * One rule for text at the public API: ids, paths, commands, names, labels,
 * env entries and setting values that are not valid UTF-8 are refused with
 * HANGAR_EINVAL naming the argument, before anything is sent or stored, and
 * the message never carries the bad bytes. Each kind of text is tried with
 * three invalid sequences: bytes that are never UTF-8 (FF FE), an overlong
 * '/' (C0 AF) and an encoded surrogate (ED A0 80). The sandboxes are real
 * hangar-envd processes behind the fake provider, so a string the library
 * let through would reach a real daemon and leave a trace the tests look for.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake-provider.h"

static char tmpdir[] = "/tmp/hangar-text-XXXXXX";
static struct fake fake;
static hangar_ctx *ctx;
static hangar_sandbox *sb;

static const char *const bad[] = { "\xff\xfe", "\xc0\xaf", "\xed\xa0\x80" };
#define NBAD (sizeof(bad) / sizeof(bad[0]))

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static void setup(void)
{
	char state[200];

	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-text-XXXXXX")));
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.dir, sizeof(fake.dir), "%s", tmpdir);
	fake.envd = getenv("HANGAR_ENVD");
	ck_assert_msg(fake.envd, "HANGAR_ENVD must name the hangar-envd binary");
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(fake_register(ctx, &fake), "register");
	must(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "fake"), "set provider");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state), "set state dir");
	must(hangar_sandbox_create(&sb, ctx, NULL), "create");
}

static void teardown(void)
{
	char cmd[300];

	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	fake_cleanup(&fake);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* tmpdir/<name><bad>, a path a library that cut at the bad bytes would turn into tmpdir/<name>. */
static const char *bad_path(const char *name, size_t i)
{
	static char p[2][300];
	static int n;

	n = !n;
	snprintf(p[n], sizeof(p[n]), "%s/%s%s", tmpdir, name, bad[i]);
	return p[n];
}

static const char *good_path(const char *name)
{
	static char p[300];

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	return p;
}

/* What every refusal must be: HANGAR_EINVAL whose message names what and is plain printable ASCII. */
static void refused(int rc, const char *what, const char *call)
{
	const char *m = hangar_error_last()->message;

	ck_assert_msg(rc == HANGAR_EINVAL, "%s: %s (%s)", call, hangar_error_name(rc), m);
	ck_assert_msg(strstr(m, what) != NULL, "%s: the message does not name %s: %s", call, what, m);
	ck_assert_msg(strstr(m, "UTF-8") != NULL, "%s: the message does not say why: %s", call, m);
	for (const char *p = m; *p; p++)
		ck_assert_msg((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
			      "%s: the message carries byte 0x%02x", call, (unsigned char)*p);
}

static int exists_on_host(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

START_TEST(paths)
{
	size_t i = (size_t)_i;
	hangar_buf got = HANGAR_BUF_INIT;
	const char *p = bad_path("f", i);

	refused(hangar_sandbox_write_file(sb, p, "x", 1), "path", "write_file");
	ck_assert(!exists_on_host(good_path("f")));
	refused(hangar_sandbox_mkdir(sb, p), "path", "mkdir");
	ck_assert(!exists_on_host(good_path("f")));
	refused(hangar_sandbox_read_file(&got, sb, p), "path", "read_file");
	refused(hangar_sandbox_exists(sb, p), "path", "exists");
	refused(hangar_sandbox_remove(sb, p), "path", "remove");

	/* A good file must survive a remove or rename with a bad path. */
	must(hangar_sandbox_write_file(sb, good_path("keep"), "k", 1), "write good");
	refused(hangar_sandbox_rename(sb, good_path("keep"), bad_path("moved", i)), "to", "rename to");
	refused(hangar_sandbox_rename(sb, bad_path("keep", i), good_path("moved")), "from", "rename from");
	ck_assert(exists_on_host(good_path("keep")));
	ck_assert(!exists_on_host(good_path("moved")));
	refused(hangar_sandbox_copy_in(sb, good_path("keep"), bad_path("copy", i)), "remote_path", "copy_in");
	ck_assert(!exists_on_host(good_path("copy")));
	refused(hangar_sandbox_copy_out(sb, bad_path("keep", i), good_path("out"), NULL), "remote_path",
		"copy_out");
	ck_assert(!exists_on_host(good_path("out")));
	hangar_buf_dispose(&got);
}
END_TEST

/* Valid UTF-8 of every length passes: the rule refuses only what is broken. */
START_TEST(valid_text_passes)
{
	hangar_buf got = HANGAR_BUF_INIT;
	const char *p = good_path("d\xc3\xa9j\xc3\xa0 \xe2\x9c\x93 \xf0\x9f\x98\x80");

	must(hangar_sandbox_write_file(sb, p, "ok", 2), "write");
	must(hangar_sandbox_read_file(&got, sb, p), "read");
	ck_assert_int_eq(got.size, 2);
	ck_assert(exists_on_host(p));
	must(hangar_ctx_set(ctx, "HANGAR_WORKSPACE", "/w\xc3\xa9"), "set a UTF-8 value");
	hangar_buf_dispose(&got);
}
END_TEST

START_TEST(processes)
{
	size_t i = (size_t)_i;
	char cmd[300], cwd[300], env[300], *envv[] = { env, NULL };
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p = NULL;

	snprintf(cmd, sizeof(cmd), "touch %s", bad_path("ran", i));
	refused(hangar_process_start(&p, sb, cmd, NULL), "command", "process command");
	ck_assert_ptr_null(p);
	snprintf(cwd, sizeof(cwd), "/tmp%s", bad[i]);
	o.cwd = cwd;
	refused(hangar_process_start(&p, sb, "true", &o), "opts->cwd", "process cwd");
	o.cwd = NULL;
	o.user = bad[i];
	refused(hangar_process_start(&p, sb, "true", &o), "opts->user", "process user");
	o.user = NULL;
	snprintf(env, sizeof(env), "K=v%s", bad[i]);
	o.env = (const char *const *)envv;
	refused(hangar_process_start(&p, sb, "true", &o), "opts->env[0]", "process env");
	ck_assert_ptr_null(p);
	ck_assert(!exists_on_host(good_path("ran")));
}
END_TEST

/*
 * A whole command: refused before it is sent, so nothing of it runs (its
 * first half would create a file). The envd request is where the command,
 * its directory and environment are checked; the user is named.
 */
START_TEST(execs)
{
	size_t i = (size_t)_i;
	char cmd[400], cwd[300], env[300], *envv[] = { env, NULL };
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	snprintf(cmd, sizeof(cmd), "touch %s; echo %s", good_path("ran"), bad[i]);
	refused(hangar_sandbox_exec(&r, sb, cmd, NULL), "request", "exec command");
	snprintf(cmd, sizeof(cmd), "touch %s", good_path("ran"));
	snprintf(cwd, sizeof(cwd), "/tmp%s", bad[i]);
	o.cwd = cwd;
	refused(hangar_sandbox_exec(&r, sb, cmd, &o), "request", "exec cwd");
	o.cwd = NULL;
	snprintf(env, sizeof(env), "K=v%s", bad[i]);
	o.env = (const char *const *)envv;
	refused(hangar_sandbox_exec(&r, sb, cmd, &o), "request", "exec env");
	o.env = NULL;
	o.user = bad[i];
	refused(hangar_sandbox_exec(&r, sb, cmd, &o), "user name", "exec user");
	ck_assert(!exists_on_host(good_path("ran")));
	/* The same command with nothing wrong runs. */
	o.user = NULL;
	must(hangar_sandbox_exec(&r, sb, cmd, &o), "exec");
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert(exists_on_host(good_path("ran")));
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(creates)
{
	size_t i = (size_t)_i;
	char v[64], env[64], *envv[] = { env, NULL };
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *other = NULL;
	int before = fake.next_id;

	snprintf(v, sizeof(v), "base%s", bad[i]);
	o.template_id = v;
	refused(hangar_sandbox_create(&other, ctx, &o), "opts->template_id", "create template");
	o.template_id = NULL;
	o.tier = v;
	refused(hangar_sandbox_create(&other, ctx, &o), "opts->tier", "create tier");
	o.tier = NULL;
	o.environment = v;
	refused(hangar_sandbox_create(&other, ctx, &o), "opts->environment", "create environment");
	o.environment = NULL;
	o.provider = v;
	refused(hangar_sandbox_create(&other, ctx, &o), "opts->provider", "create provider");
	o.provider = NULL;
	snprintf(env, sizeof(env), "K%s=v", bad[i]);
	o.env = (const char *const *)envv;
	refused(hangar_sandbox_create(&other, ctx, &o), "opts->env[0]", "create env");
	ck_assert_ptr_null(other);
	ck_assert_int_eq(fake.next_id, before);
}
END_TEST

static int never(const hangar_sandbox_info *info, void *payload)
{
	(void)info;
	(void)payload;
	return 0;
}

static int never_setting(const char *name, const char *value, int source, void *payload)
{
	(void)name;
	(void)value;
	(void)source;
	(void)payload;
	return 0;
}

START_TEST(names_and_settings)
{
	size_t i = (size_t)_i;
	char v[64];
	hangar_buf got = HANGAR_BUF_INIT, id = HANGAR_BUF_INIT;
	hangar_provider *p = NULL;
	hangar_template_build_opts t = HANGAR_TEMPLATE_BUILD_OPTS_INIT;

	snprintf(v, sizeof(v), "/w%s", bad[i]);
	refused(hangar_ctx_set(ctx, "HANGAR_WORKSPACE", v), "the value of HANGAR_WORKSPACE", "ctx_set value");
	must(hangar_ctx_get(&got, ctx, "HANGAR_WORKSPACE"), "get");
	ck_assert_str_eq(got.ptr, "/workspace");
	snprintf(v, sizeof(v), "HANGAR_X%s", bad[i]);
	refused(hangar_ctx_set(ctx, v, "1"), "name", "ctx_set name");
	refused(hangar_ctx_get(&got, ctx, v), "name", "ctx_get name");
	snprintf(v, sizeof(v), "fake%s", bad[i]);
	refused(hangar_provider_lookup(&p, ctx, v), "provider name", "provider_lookup");
	ck_assert_ptr_null(p);
	refused(hangar_sandbox_list(ctx, v, never, NULL), "provider name", "sandbox_list");
	refused(hangar_ctx_foreach_setting_of(ctx, v, never_setting, NULL), "provider", "foreach_setting_of");
	t.name = v;
	t.image = "debian:12";
	refused(hangar_template_build(&id, ctx, "fake", &t), "opts->name", "template_build name");
	t.name = "base";
	t.image = v;
	refused(hangar_template_build(&id, ctx, "fake", &t), "opts->image", "template_build image");
	refused(hangar_sandbox_snapshot(&id, sb, v), "name", "snapshot name");
	ck_assert_ptr_null(id.ptr);
	hangar_buf_dispose(&got);
}
END_TEST

/* A session's environment, workspace and user: refused before anything is made. */
START_TEST(sessions)
{
	size_t i = (size_t)_i;
	hangar_session_opts o = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;
	char ws[64];

	o.environment = bad[i];
	refused(hangar_session_create(&s, ctx, &o), "opts->environment", "session environment");
	o.environment = NULL;
	snprintf(ws, sizeof(ws), "/workspace%s", bad[i]);
	o.workspace = ws;
	refused(hangar_session_create(&s, ctx, &o), "opts->workspace", "session workspace");
	o.workspace = NULL;
	o.user = bad[i];
	refused(hangar_session_create(&s, ctx, &o), "opts->user", "session user");
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(checkpoints)
{
	size_t i = (size_t)_i;
	char label[64], ws[64], *labels[] = { "turn=1", label, NULL };
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	char dir[300];

	snprintf(label, sizeof(label), "note=a%s", bad[i]);
	o.labels = (const char *const *)labels;
	refused(hangar_checkpoint_create(&cp, sb, &o), "opts->labels[1]", "checkpoint labels");
	o.labels = NULL;
	snprintf(ws, sizeof(ws), "/workspace%s", bad[i]);
	o.workspace = ws;
	refused(hangar_checkpoint_create(&cp, sb, &o), "workspace", "checkpoint workspace");
	o.workspace = NULL;
	o.user = bad[i];
	refused(hangar_checkpoint_create(&cp, sb, &o), "opts->user", "checkpoint user");
	ck_assert_ptr_null(cp);
	/* Nothing was sealed into the store. */
	snprintf(dir, sizeof(dir), "%s/state/checkpoints", tmpdir);
	if (exists_on_host(dir)) {
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "test -z \"$(find %s -type f)\"", dir);
		ck_assert_int_eq(system(cmd), 0);
	}
}
END_TEST

/*
 * JSON settings are strict: a tier listed twice or a value after the
 * object is HANGAR_ECONFIG naming the variable, whether it comes from
 * hangar_ctx_set() or from the environment when a context opens; the value
 * before it stays. Text that is not UTF-8 is an argument hangar_ctx_set()
 * refuses (HANGAR_EINVAL), and a wrong configuration at open.
 */
START_TEST(json_settings_are_strict)
{
	static const struct {
		const char *name, *value, *clue;
		int set_code;
	} cases[] = {
		{ "HANGAR_TIERS", "{\"fast\":[\"fake\"],\"fast\":[\"e2b\"]}", "duplicate member \"fast\"", HANGAR_ECONFIG },
		{ "HANGAR_TIERS", "{\"fast\":[\"fake\"]} {\"heavy\":[]}", "follows the value", HANGAR_ECONFIG },
		{ "HANGAR_TIERS", "{\"fast\":[\"fa\xc0\xafke\"]}", "UTF-8", HANGAR_EINVAL },
		{ "HANGAR_TIER_HEDGE", "{\"fast\":100,\"fast\":200}", "duplicate member \"fast\"", HANGAR_ECONFIG },
		{ "HANGAR_E2B_ENVIRONMENT_TEMPLATES", "{\"py\":\"a\",\"py\":\"b\"}", "duplicate member \"py\"", HANGAR_ECONFIG },
		{ "HANGAR_WORKSPACE", "/w\xed\xa0\x80", "UTF-8", HANGAR_EINVAL },
	};
	hangar_buf before = HANGAR_BUF_INIT, after = HANGAR_BUF_INIT;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *m;
		hangar_ctx *fresh = NULL;

		must(hangar_ctx_get(&before, ctx, cases[i].name), "get before");
		ck_assert_int_eq(hangar_ctx_set(ctx, cases[i].name, cases[i].value), cases[i].set_code);
		m = hangar_error_last()->message;
		ck_assert_msg(strstr(m, cases[i].set_code == HANGAR_EINVAL ? "value" : cases[i].name) &&
				      strstr(m, cases[i].clue),
			      "%zu: %s", i, m);
		must(hangar_ctx_get(&after, ctx, cases[i].name), "get after");
		ck_assert_str_eq(after.ptr, before.ptr);

		ck_assert_int_eq(setenv(cases[i].name, cases[i].value, 1), 0);
		ck_assert_int_eq(hangar_ctx_new(&fresh, 0), HANGAR_ECONFIG);
		m = hangar_error_last()->message;
		ck_assert_msg(strstr(m, cases[i].name) && strstr(m, cases[i].clue), "%zu at open: %s", i, m);
		ck_assert_ptr_null(fresh);
		ck_assert_int_eq(unsetenv(cases[i].name), 0);
	}
	hangar_buf_dispose(&before);
	hangar_buf_dispose(&after);
}
END_TEST

/*
 * A message that quotes a peer (a provider passing on what its platform
 * said) is one line of valid UTF-8: control bytes and bytes that are not
 * part of a character are written as \xNN; valid characters stay as they are.
 */
START_TEST(messages_quote_peers_as_utf8)
{
	ck_assert_int_eq(hangar_sys_error(HANGAR_EPROTOCOL, 502, 0, "the platform said %s",
					  "caf\xc3\xa9 \xff\xfe ok\xc0\xaf \xed\xa0\x80\n\xe2\x9c\x93"),
			 HANGAR_EPROTOCOL);
	ck_assert_str_eq(hangar_error_last()->message,
			 "the platform said caf\xc3\xa9 \\xff\\xfe ok\\xc0\\xaf \\xed\\xa0\\x80\\x0a\xe2\x9c\x93");
	/* A character cut by the end of the text is escaped too, never left half. */
	hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "cut %s", "\xe2\x9c");
	ck_assert_str_eq(hangar_error_last()->message, "cut \\xe2\\x9c");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("text");
	TCase *t = tcase_create("utf8");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_loop_test(t, paths, 0, (int)NBAD);
	tcase_add_test(t, valid_text_passes);
	tcase_add_loop_test(t, processes, 0, (int)NBAD);
	tcase_add_loop_test(t, execs, 0, (int)NBAD);
	tcase_add_loop_test(t, creates, 0, (int)NBAD);
	tcase_add_loop_test(t, names_and_settings, 0, (int)NBAD);
	tcase_add_loop_test(t, checkpoints, 0, (int)NBAD);
	tcase_add_loop_test(t, sessions, 0, (int)NBAD);
	tcase_add_test(t, json_settings_are_strict);
	tcase_add_test(t, messages_quote_peers_as_utf8);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
