/*
 * The provider table across its versions: a provider built against the
 * layouts of versions 1, 2 and 3 each registers, is set up and runs a
 * command in a real hangar-envd; version 3's settings are declared,
 * validated when a context opens or the provider registers (naming the
 * variable), read back through the typed getters and listed per provider;
 * its capabilities come from get_capabilities; and every provider call
 * starts from a clear error. Public API only.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>

#include "fake-provider.h"

/* The table as a provider built against version 1's header has it. */
struct ops_v1 {
	uint32_t version, size;
	const char *name;
	uint64_t capabilities;
	int (*init)(void **, hangar_ctx *, void *);
	void (*fini)(void *);
	int (*create)(void *, const struct hangar_create_opts *, hangar_sys_sandbox *);
	int (*connect)(void *, const char *, hangar_sys_sandbox *);
	int (*kill)(void *, const char *);
	int (*pause)(void *, const char *);
	int (*resume)(void *, const char *, hangar_sys_sandbox *);
	int (*set_timeout)(void *, const char *, int64_t);
	int (*list)(void *, hangar_sys_list *);
};

/* And version 2's. */
struct ops_v2 {
	struct ops_v1 v1;
	int (*pause_filesystem)(void *, const char *);
	int (*snapshot)(void *, const char *, const char *, hangar_buf *);
	int (*template_build)(void *, const struct hangar_template_build_opts *, hangar_buf *);
	int (*template_list)(void *, int (*)(const struct hangar_template_info *, void *), void *);
	int (*fork)(void *, const char *, uint32_t, int64_t, hangar_sys_list *);
	int (*metrics)(void *, const char *, int (*)(const struct hangar_sandbox_metric *, void *), void *);
	int (*logs)(void *, const char *, int (*)(const struct hangar_sandbox_log_entry *, void *), void *);
};

static char tmpdir[] = "/tmp/hangar-versions-XXXXXX";
static struct fake fake;
static const struct hangar_provider_ops *base;   /* the fake's own slots */

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static void setup(void)
{
	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-versions-XXXXXX")));
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.dir, sizeof(fake.dir), "%s", tmpdir);
	fake.envd = getenv("HANGAR_ENVD");
	ck_assert_msg(fake.envd, "HANGAR_ENVD must name the hangar-envd binary");
	/* Commands run in login shells of this user: keep the host's profile
	 * (which may take seconds) out of what is measured here. */
	ck_assert_int_eq(setenv("HOME", tmpdir, 1), 0);
	base = fake_ops();
}

static void teardown(void)
{
	char cmd[300];

	fake_cleanup(&fake);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static hangar_ctx *new_ctx(void)
{
	hangar_ctx *ctx = NULL;
	char dir[200];

	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	snprintf(dir, sizeof(dir), "%s/state", tmpdir);
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", dir), "state dir");
	return ctx;
}

/* Creates a sandbox on provider name, runs a command in it, kills it. */
static void works(hangar_ctx *ctx, const char *name)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *sb = NULL;

	o.provider = name;
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(sb)), name);
	must(hangar_sandbox_exec(&r, sb, "echo version-ok", NULL), "exec");
	ck_assert_str_eq(r.out.ptr, "version-ok\n");
	ck_assert_int_eq(r.exit_code, 0);
	hangar_exec_result_dispose(&r);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
}

static struct ops_v1 v1_table(const char *name)
{
	struct ops_v1 t = { 1, sizeof(struct ops_v1), name, HANGAR_CAP_PTY, base->init, NULL, base->create,
			    base->connect, base->kill, base->pause, base->resume, NULL, base->list };

	return t;
}

START_TEST(version_1_loads_and_works)
{
	struct ops_v1 t = v1_table("old1");
	hangar_provider *p = NULL;
	hangar_ctx *ctx = new_ctx();

	must(hangar_provider_register(ctx, (const struct hangar_provider_ops *)&t, &fake), "register v1");
	must(hangar_provider_lookup(&p, ctx, "old1"), "lookup");
	ck_assert_uint_eq(hangar_provider_capabilities(p), HANGAR_CAP_PTY);
	hangar_provider_unref(p);
	works(ctx, "old1");
	/* A version 1 table declares no settings. */
	ck_assert_ptr_null(hangar_sys_ctx_setting(ctx, "HANGAR_VERSIONS_GREETING"));
	hangar_ctx_unref(ctx);
}
END_TEST

static int metric_calls;

static int one_metric(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *, void *),
		      void *payload)
{
	struct hangar_sandbox_metric m = { HANGAR_SANDBOX_METRIC_VERSION, sizeof(m), 0, 0, 0, 0, 0, 0, 0, 0 };

	(void)state;
	(void)id;
	metric_calls++;
	m.timestamp_us = 1;
	m.cpu_count = 2;
	return fn(&m, payload);
}

static int count_metric(const struct hangar_sandbox_metric *m, void *payload)
{
	ck_assert_int_eq(m->cpu_count, 2);
	(*(int *)payload)++;
	return 0;
}

START_TEST(version_2_loads_and_works)
{
	struct ops_v2 t = { v1_table("old2"), NULL, NULL, NULL, NULL, NULL, one_metric, NULL };
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = new_ctx();
	int seen = 0;

	t.v1.version = 2;
	t.v1.size = sizeof(t);
	must(hangar_provider_register(ctx, (const struct hangar_provider_ops *)&t, &fake), "register v2");
	works(ctx, "old2");
	/* Its version 2 slot is called. */
	o.provider = "old2";
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	must(hangar_sandbox_metrics(sb, count_metric, &seen), "metrics");
	ck_assert_int_eq(seen, 1);
	ck_assert_int_eq(metric_calls, 1);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
	/* The same layout claiming version 1 has no version 2 slot, whatever its size says. */
	t.v1.version = 1;
	t.v1.name = "old2as1";
	must(hangar_provider_register(ctx, (const struct hangar_provider_ops *)&t, &fake), "register");
	o.provider = "old2as1";
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	ck_assert_int_eq(hangar_sandbox_metrics(sb, count_metric, &seen), HANGAR_EUNSUPPORTED);
	ck_assert_int_eq(metric_calls, 1);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- version 3: settings and capabilities --------------------------------------------- */

static int v3_inits;
static char v3_greeting[64];
static int64_t v3_limit;
static int32_t v3_fast;

static int positive_even(const char *name, const char *value)
{
	long v = strtol(value, NULL, 10);

	if (v % 2)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "%s must be even, not %s", name, value);
	return 0;
}

static const struct hangar_setting_def v3_settings[] = {
	{ "HANGAR_VERSIONS_GREETING", HANGAR_SETTING_TYPE_STRING, 0, "hello", 0, 0, NULL, "a greeting", NULL },
	{ "HANGAR_VERSIONS_LIMIT", HANGAR_SETTING_TYPE_INT, HANGAR_SETTING_FIXED, "4", 2, 10, NULL, "an even limit",
	  positive_even },
	{ "HANGAR_VERSIONS_FAST", HANGAR_SETTING_TYPE_BOOL, 0, "off", 0, 0, NULL, NULL, NULL },
	{ "HANGAR_VERSIONS_MAP", HANGAR_SETTING_TYPE_JSON, 0, "{\"a\":1}", 0, 0, NULL, NULL, NULL },
	{ "HANGAR_VERSIONS_TOKEN", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, NULL,
	  0, 0, NULL, NULL, NULL },
	{ NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

static int v3_init(void **state, hangar_ctx *ctx, void *data)
{
	const char *g = NULL;

	v3_inits++;
	if (hangar_sys_ctx_setting_string(&g, ctx, "HANGAR_VERSIONS_GREETING") ||
	    hangar_sys_ctx_setting_int(&v3_limit, ctx, "HANGAR_VERSIONS_LIMIT") ||
	    hangar_sys_ctx_setting_bool(&v3_fast, ctx, "HANGAR_VERSIONS_FAST"))
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "v3: a setting cannot be read");
	snprintf(v3_greeting, sizeof(v3_greeting), "%s", g);
	return base->init(state, ctx, data);
}

static uint64_t v3_caps(void *state)
{
	(void)state;
	/* What it can do depends on a setting: only init's view counts. */
	return HANGAR_CAP_PTY | (v3_fast ? HANGAR_CAP_HOT_RESUME : 0);
}

static int silent_kill(void *state, const char *id)
{
	(void)state;
	(void)id;
	return HANGAR_EGONE;        /* fails without describing why */
}

static struct hangar_provider_ops v3_table(const char *name)
{
	struct hangar_provider_ops t = *base;

	t.version = 3;
	t.size = sizeof(t);
	t.name = name;
	t.capabilities = 0;
	t.init = v3_init;
	t.settings = v3_settings;
	t.get_capabilities = v3_caps;
	return t;
}

START_TEST(version_3_loads_and_works)
{
	struct hangar_provider_ops t = v3_table("new3");
	hangar_provider *p = NULL;
	hangar_ctx *ctx = new_ctx();
	const char *json = NULL;
	int64_t n = 0;
	int32_t b = -1;

	must(hangar_provider_register(ctx, &t, &fake), "register v3");
	/* Its settings exist before it is set up, with their one default. */
	ck_assert_str_eq(hangar_sys_ctx_setting(ctx, "HANGAR_VERSIONS_GREETING"), "hello");
	must(hangar_sys_ctx_setting_int(&n, ctx, "HANGAR_VERSIONS_LIMIT"), "int");
	ck_assert_int_eq(n, 4);
	must(hangar_sys_ctx_setting_bool(&b, ctx, "HANGAR_VERSIONS_FAST"), "bool");
	ck_assert_int_eq(b, 0);
	must(hangar_sys_ctx_setting_json(&json, ctx, "HANGAR_VERSIONS_MAP"), "json");
	ck_assert_str_eq(json, "{\"a\":1}");
	/* Typed getters refuse the wrong type and unknown names. */
	ck_assert_int_eq(hangar_sys_ctx_setting_int(&n, ctx, "HANGAR_VERSIONS_GREETING"), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sys_ctx_setting_bool(&b, ctx, "HANGAR_NO_SUCH_SETTING"), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sys_ctx_setting_json(NULL, ctx, "HANGAR_VERSIONS_MAP"), HANGAR_EINVAL);
	/* Validated by type, bounds and the provider's own validator, naming the variable. */
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_LIMIT", "11"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_LIMIT"));
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_LIMIT", "5"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "must be even"));
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_LIMIT", " 6"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_FAST", "maybe"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_MAP", "[1]"), HANGAR_ECONFIG);
	must(hangar_ctx_set(ctx, "HANGAR_VERSIONS_LIMIT", "6"), "limit");
	must(hangar_ctx_set(ctx, "HANGAR_VERSIONS_FAST", "on"), "fast");
	must(hangar_ctx_set(ctx, "HANGAR_VERSIONS_GREETING", "hi"), "greeting");
	/* Declared capabilities until set up, reported ones after. */
	ck_assert_int_eq(v3_inits, 0);
	must(hangar_provider_lookup(&p, ctx, "new3"), "lookup");
	ck_assert_int_eq(v3_inits, 1);
	ck_assert_str_eq(v3_greeting, "hi");
	ck_assert_int_eq(v3_limit, 6);
	ck_assert_uint_eq(hangar_provider_capabilities(p), HANGAR_CAP_PTY | HANGAR_CAP_HOT_RESUME);
	hangar_provider_unref(p);
	/* A setting read once at set-up cannot change once it is in use; others can. */
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_VERSIONS_LIMIT", "8"), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_LIMIT"));
	must(hangar_ctx_set(ctx, "HANGAR_VERSIONS_GREETING", "hey"), "greeting");
	works(ctx, "new3");
	hangar_ctx_unref(ctx);
}
END_TEST

struct listing {
	char names[4096];
	int secret_masked;
};

static int collect(const char *name, const char *value, int source, void *payload)
{
	struct listing *l = payload;
	size_t n = strlen(l->names);

	(void)source;
	snprintf(l->names + n, sizeof(l->names) - n, "%s ", name);
	if (!strcmp(name, "HANGAR_VERSIONS_TOKEN"))
		l->secret_masked = !strcmp(value, "********");
	return 0;
}

START_TEST(settings_listed_per_provider)
{
	struct hangar_provider_ops t = v3_table("new3");
	struct listing mine = { "", 0 }, core = { "", 0 }, all = { "", 0 };
	hangar_ctx *ctx = new_ctx();

	must(hangar_provider_register(ctx, &t, &fake), "register v3");
	must(hangar_ctx_set(ctx, "HANGAR_VERSIONS_TOKEN", "s3cret-value"), "token");
	must(hangar_ctx_foreach_setting_of(ctx, "new3", collect, &mine), "of new3");
	ck_assert_str_eq(mine.names, "HANGAR_VERSIONS_GREETING HANGAR_VERSIONS_LIMIT HANGAR_VERSIONS_FAST "
				     "HANGAR_VERSIONS_MAP HANGAR_VERSIONS_TOKEN ");
	ck_assert_int_eq(mine.secret_masked, 1);
	must(hangar_ctx_foreach_setting_of(ctx, NULL, collect, &core), "of the library");
	ck_assert_ptr_nonnull(strstr(core.names, "HANGAR_TIERS "));
	ck_assert_ptr_null(strstr(core.names, "HANGAR_VERSIONS_"));
	ck_assert_ptr_null(strstr(core.names, "HANGAR_E2B_"));
	ck_assert_ptr_null(strstr(core.names, "HANGAR_BWRAP_PATH"));
	/* The built-in providers declare theirs like anyone. */
	memset(&mine, 0, sizeof(mine));
	must(hangar_ctx_foreach_setting_of(ctx, "e2b", collect, &mine), "of e2b");
	ck_assert_ptr_nonnull(strstr(mine.names, "HANGAR_E2B_FLAVOR "));
	memset(&mine, 0, sizeof(mine));
	must(hangar_ctx_foreach_setting_of(ctx, "local", collect, &mine), "of local");
	ck_assert_ptr_nonnull(strstr(mine.names, "HANGAR_BWRAP_PATH "));
	ck_assert_int_eq(hangar_ctx_foreach_setting_of(ctx, "nosuch", collect, &mine), HANGAR_ENOTFOUND);
	must(hangar_ctx_foreach_setting(ctx, collect, &all), "all");
	ck_assert_ptr_nonnull(strstr(all.names, "HANGAR_VERSIONS_LIMIT"));
	ck_assert_ptr_nonnull(strstr(all.names, "HANGAR_E2B_API_KEY"));
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(bad_declarations_are_refused)
{
	static const struct hangar_setting_def lower[] = { { "hangar_lower", HANGAR_SETTING_TYPE_STRING, 0, "x", 0, 0,
							      NULL, NULL, NULL },
							    { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL } };
	static const struct hangar_setting_def taken[] = { { "HANGAR_TIERS", HANGAR_SETTING_TYPE_STRING, 0, "x", 0, 0,
							      NULL, NULL, NULL },
							    { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL } };
	static const struct hangar_setting_def bounds[] = { { "HANGAR_VERSIONS_B", HANGAR_SETTING_TYPE_INT, 0, "5", 9,
							       1, NULL, NULL, NULL },
							     { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL } };
	static const struct hangar_setting_def bad_default[] = { { "HANGAR_VERSIONS_D", HANGAR_SETTING_TYPE_INT, 0,
								    "50", 1, 9, NULL, NULL, NULL },
								  { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL } };
	const struct hangar_setting_def *cases[] = { lower, taken, bounds, bad_default };
	const int want[] = { HANGAR_EINVAL, HANGAR_EEXISTS, HANGAR_EINVAL, HANGAR_EINVAL };
	hangar_ctx *ctx = new_ctx();

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct hangar_provider_ops t = v3_table("bad");

		t.settings = cases[i];
		ck_assert_int_eq(hangar_provider_register(ctx, &t, &fake), want[i]);
	}
	/* Nothing of a refused table stays behind: the name and its settings are free. */
	{
		struct hangar_provider_ops t = v3_table("bad");

		must(hangar_provider_register(ctx, &t, &fake), "register after refusals");
		ck_assert_ptr_null(hangar_sys_ctx_setting(ctx, "HANGAR_VERSIONS_B"));
	}
	/* Two providers cannot declare the same setting. */
	{
		struct hangar_provider_ops t = v3_table("twin");

		ck_assert_int_eq(hangar_provider_register(ctx, &t, &fake), HANGAR_EEXISTS);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_GREETING"));
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* A provider registered process-wide has its settings validated when a context opens. */
START_TEST(third_party_setting_validated_at_open)
{
	struct hangar_provider_ops t = v3_table("thirdparty");
	hangar_provider *p = NULL;
	hangar_buf v = HANGAR_BUF_INIT;
	hangar_ctx *ctx = NULL;

	/* A malformed declaration is refused at once, not at every open. */
	{
		static const struct hangar_setting_def bad[] = { { "HANGAR_VERSIONS_X", HANGAR_SETTING_TYPE_INT, 0, "0",
								    5, 1, NULL, NULL, NULL },
								  { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL } };
		struct hangar_provider_ops b = v3_table("badglobal");

		b.settings = bad;
		ck_assert_int_eq(hangar_provider_register(NULL, &b, &fake), HANGAR_EINVAL);
		must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx after a refused registration");
		ctx = hangar_ctx_unref(ctx);
	}
	must(hangar_provider_register(NULL, &t, &fake), "register process-wide");
	ck_assert_int_eq(hangar_provider_register(NULL, &t, &fake), HANGAR_EEXISTS);
	ck_assert_int_eq(setenv("HANGAR_VERSIONS_LIMIT", "12", 1), 0);
	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), HANGAR_ECONFIG);
	ck_assert_ptr_null(ctx);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_LIMIT"));
	ck_assert_int_eq(setenv("HANGAR_VERSIONS_LIMIT", "7", 1), 0);
	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_LIMIT"));
	ck_assert_int_eq(setenv("HANGAR_VERSIONS_LIMIT", "8", 1), 0);
	must(hangar_ctx_new(&ctx, 0), "ctx");
	must(hangar_ctx_get(&v, ctx, "HANGAR_VERSIONS_LIMIT"), "get");
	ck_assert_str_eq(v.ptr, "8");
	hangar_buf_dispose(&v);
	must(hangar_provider_lookup(&p, ctx, "thirdparty"), "lookup");
	ck_assert_int_eq(v3_limit, 8);
	hangar_provider_unref(p);
	hangar_ctx_unref(ctx);
	/* Registered on an open context instead, the wrong value fails the registration. */
	ck_assert_int_eq(setenv("HANGAR_VERSIONS_LIMIT", "3", 1), 0);
	ctx = NULL;
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx without env");
	hangar_ctx_unref(ctx);
	unsetenv("HANGAR_VERSIONS_LIMIT");
}
END_TEST

START_TEST(registration_on_an_open_context_validates)
{
	struct hangar_provider_ops t = v3_table("late");
	hangar_ctx *ctx = NULL;

	ck_assert_int_eq(setenv("HANGAR_VERSIONS_FAST", "perhaps", 1), 0);
	must(hangar_ctx_new(&ctx, 0), "ctx");
	ck_assert_int_eq(hangar_provider_register(ctx, &t, &fake), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_VERSIONS_FAST"));
	unsetenv("HANGAR_VERSIONS_FAST");
	must(hangar_provider_register(ctx, &t, &fake), "register");
	hangar_ctx_unref(ctx);
}
END_TEST

/* The thread's error is cleared before every provider call: a provider that
 * fails without a word never inherits an earlier message or field. */
START_TEST(every_call_starts_from_a_clear_error)
{
	struct hangar_provider_ops t = v3_table("quiet");
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = new_ctx();
	const hangar_error *e;

	t.kill = silent_kill;
	must(hangar_provider_register(ctx, &t, &fake), "register");
	o.provider = "quiet";
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	/* A stale error with the same code, a Retry-After and a flag. */
	hangar_sys_error(HANGAR_EGONE, 503, 0, "stale words");
	hangar_sys_error_retry_after(40);
	hangar_sys_error_flags(HANGAR_ERROR_UNREACHABLE);
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 40);
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
	e = hangar_error_last();
	ck_assert_ptr_null(strstr(e->message, "stale"));
	ck_assert_ptr_nonnull(strstr(e->message, "quiet"));
	ck_assert_int_eq(e->retry_after_s, 0);
	ck_assert_uint_eq(e->flags, 0);
	ck_assert_int_eq(e->http_status, 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(retry_after_is_bounded)
{
	hangar_sys_error(HANGAR_ECAPACITY, 429, 0, "full");
	hangar_sys_error_retry_after(-5);
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 0);
	hangar_sys_error_retry_after(1000000);
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 86400);
	/* A new error starts without one. */
	hangar_sys_error(HANGAR_ECAPACITY, 429, 0, "full again");
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("provider-versions");
	TCase *tc = tcase_create("versions");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, version_1_loads_and_works);
	tcase_add_test(tc, version_2_loads_and_works);
	tcase_add_test(tc, version_3_loads_and_works);
	tcase_add_test(tc, settings_listed_per_provider);
	tcase_add_test(tc, bad_declarations_are_refused);
	tcase_add_test(tc, third_party_setting_validated_at_open);
	tcase_add_test(tc, registration_on_an_open_context_validates);
	tcase_add_test(tc, every_call_starts_from_a_clear_error);
	tcase_add_test(tc, retry_after_is_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
