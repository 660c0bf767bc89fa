/*
 * Environments (HANGAR_ENVIRONMENTS_FILE): what a create takes from the one it
 * names (tier, the template per provider the tier tries, variables merged
 * with the create's, lifetime, network), what the create's own options
 * override, how a broken file fails (at open, at set, at the next use after
 * an edit), and the listing. Two providers built from the fake's slots record
 * the options their create was called with; the second one's sandboxes are
 * real hangar-envd processes. Public API only.
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

static char tmpdir[] = "/tmp/hangar-envs-XXXXXX";
static struct fake full, fake;     /* "enva" is always full; "envb" creates */

/* What each provider's create saw. */
struct seen {
	int calls;
	char template_id[64];
	char env[512];                  /* the entries joined with ';' */
	int64_t timeout_sec;
	int32_t network;
};
static struct seen seen_a, seen_b;
static const struct hangar_provider_ops *base;

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static void record(struct seen *s, const struct hangar_create_opts *o)
{
	s->calls++;
	snprintf(s->template_id, sizeof(s->template_id), "%s", o->template_id ? o->template_id : "(none)");
	s->env[0] = '\0';
	for (const char *const *e = o->env; e && *e; e++) {
		strncat(s->env, *e, sizeof(s->env) - strlen(s->env) - 2);
		strcat(s->env, ";");
	}
	s->timeout_sec = o->timeout_sec;
	s->network = o->network;
}

static int create_a(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out)
{
	record(&seen_a, o);
	return base->create(state, o, out);
}

static int create_b(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out)
{
	record(&seen_b, o);
	return base->create(state, o, out);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

static char *path_of(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
	return buf[i];
}

static const char *const good =
	"{\n"
	"  \"py\": {\"description\": \"Python\", \"tier\": \"fast\",\n"
	"          \"templates\": {\"enva\": \"tmpl-a\", \"*\": \"tmpl-any\"},\n"
	"          \"env\": {\"A\": \"from-env\", \"B\": \"from-env\"},\n"
	"          \"timeout_sec\": 1234, \"network\": \"off\",\n"
	"          \"workspace\": \"/work\", \"user\": \"agent\"},\n"
	"  \"bare\": {}\n"
	"}\n";

static void setup(void)
{
	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-envs-XXXXXX")));
	memset(&fake, 0, sizeof(fake));
	memset(&full, 0, sizeof(full));
	memset(&seen_a, 0, sizeof(seen_a));
	memset(&seen_b, 0, sizeof(seen_b));
	snprintf(fake.dir, sizeof(fake.dir), "%s", tmpdir);
	snprintf(full.dir, sizeof(full.dir), "%s", tmpdir);
	fake.envd = full.envd = getenv("HANGAR_ENVD");
	ck_assert_msg(fake.envd, "HANGAR_ENVD must name the hangar-envd binary");
	full.create_fails = HANGAR_ECAPACITY;
	ck_assert_int_eq(setenv("HOME", tmpdir, 1), 0);
	ck_assert_int_eq(setenv("XDG_CONFIG_HOME", path_of("config"), 1), 0);
	base = fake_ops();
	write_file(path_of("envs.json"), good);
}

static void teardown(void)
{
	char cmd[300];

	fake_cleanup(&fake);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
	unsetenv("XDG_CONFIG_HOME");
}

/* A context with both providers, the fast tier listing them in order, and file (or none). */
static hangar_ctx *new_ctx(const char *file)
{
	static struct hangar_provider_ops ta, tb;
	hangar_ctx *ctx = NULL;

	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", path_of("state")), "state dir");
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\":[\"enva\",\"envb\"],\"default\":[\"envb\"]}"), "tiers");
	if (file)
		must(hangar_ctx_set(ctx, "HANGAR_ENVIRONMENTS_FILE", file), "environments file");
	ta = *base;
	ta.name = "enva";
	ta.create = create_a;
	tb = *base;
	tb.name = "envb";
	tb.create = create_b;
	must(hangar_provider_register(ctx, &ta, &full), "register enva");
	must(hangar_provider_register(ctx, &tb, &fake), "register envb");
	return ctx;
}

START_TEST(create_takes_what_the_environment_sets)
{
	hangar_ctx *ctx = new_ctx(path_of("envs.json"));
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	const char *env[] = { "B=from-create", "C=3", NULL };
	hangar_sandbox *sb = NULL;

	o.environment = "py";
	o.env = env;
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	/* The environment's tier: enva first (full), then envb, each with its template. */
	ck_assert_int_eq(seen_a.calls, 1);
	ck_assert_str_eq(seen_a.template_id, "tmpl-a");
	ck_assert_int_eq(seen_b.calls, 1);
	ck_assert_str_eq(seen_b.template_id, "tmpl-any");
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(sb)), "envb");
	/* Its variables first, the create's after, the create's B replacing its B. */
	ck_assert_str_eq(seen_b.env, "A=from-env;B=from-create;C=3;");
	ck_assert_int_eq(seen_b.timeout_sec, 1234);
	ck_assert_int_eq(seen_b.network, HANGAR_NETWORK_OFF);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(the_create_own_options_win)
{
	hangar_ctx *ctx = new_ctx(path_of("envs.json"));
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	o.environment = "py";
	o.tier = "default";
	o.template_id = "mine";
	o.timeout_sec = 77;
	o.network = HANGAR_NETWORK_ON;
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	ck_assert_int_eq(seen_a.calls, 0);     /* the default tier lists envb only */
	ck_assert_str_eq(seen_b.template_id, "mine");
	ck_assert_str_eq(seen_b.env, "A=from-env;B=from-env;");
	ck_assert_int_eq(seen_b.timeout_sec, 77);
	ck_assert_int_eq(seen_b.network, HANGAR_NETWORK_ON);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);

	/* An empty environment changes nothing; no environment at all neither. */
	o = (hangar_create_opts)HANGAR_CREATE_OPTS_INIT;
	o.environment = "bare";
	o.provider = "envb";
	must(hangar_sandbox_create(&sb, ctx, &o), "create bare");
	ck_assert_str_eq(seen_b.template_id, "(none)");
	ck_assert_str_eq(seen_b.env, "");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(a_version_1_caller_never_reads_an_environment)
{
	hangar_ctx *ctx = new_ctx(path_of("envs.json"));
	/* A version 1 struct followed by what looks like an environment pointer. */
	struct {
		hangar_create_opts o;
		const char *after;
	} v1;
	hangar_sandbox *sb = NULL;

	memset(&v1, 0, sizeof(v1));
	v1.o.version = 1;
	v1.o.size = (uint32_t)offsetof(hangar_create_opts, environment);
	v1.o.provider = "envb";
	v1.o.environment = "py";       /* past the caller's size: must not be read */
	v1.after = "py";
	must(hangar_sandbox_create(&sb, ctx, &v1.o), "create v1");
	ck_assert_str_eq(seen_b.template_id, "(none)");
	ck_assert_str_eq(seen_b.env, "");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(unknown_and_malformed_names)
{
	hangar_ctx *ctx = new_ctx(path_of("envs.json"));
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	o.environment = "nope";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ENOTFOUND);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "nope"));
	o.environment = "../etc";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EINVAL);
	ck_assert_ptr_null(sb);
	ck_assert_int_eq(seen_a.calls + seen_b.calls, 0);
	hangar_ctx_unref(ctx);
}
END_TEST

/* Each broken file fails hangar_ctx_set (explicit) with ECONFIG naming the variable and clue. */
static const struct {
	const char *text;
	const char *clue;
} broken[] = {
	{ "[1, 2]", "not a JSON object" },
	{ "{\"py\": ", "not strict JSON" },
	{ "{\"py\": {\"tier\": \"fastest\"}}", "tier" },
	{ "{\"py\": {\"gpu\": \"x\"}}", "unknown member \"gpu\"" },
	{ "{\"py\": {\"image\": \"a b\"}}", "image must be an image reference" },
	{ "{\"py\": {\"image\": \"\"}}", "image" },
	{ "{\"py\": {\"image\": 1}}", "image" },
	{ "{\"py\": {\"image\": \"/etc/passwd\"}}", "image" },
	{ "{\"py\": {\"templates\": [\"a\"]}}", "templates" },
	{ "{\"py\": {\"templates\": {\"Bad Name\": \"a\"}}}", "templates" },
	{ "{\"py\": {\"env\": {\"1A\": \"x\"}}}", "env" },
	{ "{\"py\": {\"env\": {\"A\": 1}}}", "env" },
	{ "{\"py\": {\"timeout_sec\": -1}}", "timeout_sec" },
	{ "{\"py\": {\"timeout_sec\": 1.5}}", "timeout_sec" },
	{ "{\"py\": {\"network\": true}}", "network" },
	{ "{\"py\": {\"workspace\": \"relative\"}}", "workspace" },
	{ "{\"py\": {\"user\": \"a/b\"}}", "user" },
	{ "{\"py\": {\"description\": \"two\\nlines\"}}", "description" },
	{ "{\"a b\": {}}", "environment name" },
	{ "{\"py\": {}, \"py\": {}}", "duplicate member \"py\"" },
	/* Strict JSON: which tier, which file? Nothing is guessed. */
	{ "{\"py\": {\"tier\": \"fast\", \"tier\": \"heavy\"}}", "duplicate member \"tier\"" },
	{ "{\"py\": {\"env\": {\"A\": \"1\", \"A\": \"2\"}}}", "at /py/env (byte" },
	{ "{\"py\": {}} {\"js\": {}}", "follows the value" },
	{ "{\"py\": {\"description\": \"caf\xc3\"}}", "UTF-8" },
	{ "{\"py\": {\"description\": \"\xed\xa0\x80\"}}", "UTF-8" },
	{ "{\"py\": 3}", "JSON object" },
};

START_TEST(a_broken_file_fails_naming_the_variable)
{
	hangar_ctx *ctx = new_ctx(NULL);
	const char *file = path_of("broken.json");
	char buf[256];

	write_file(file, broken[_i].text);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_ENVIRONMENTS_FILE", file), HANGAR_ECONFIG);
	snprintf(buf, sizeof(buf), "%s", hangar_error_last()->message);
	ck_assert_msg(strstr(buf, "HANGAR_ENVIRONMENTS_FILE") && strstr(buf, file), "%s", buf);
	ck_assert_msg(strstr(buf, broken[_i].clue), "\"%s\" lacks \"%s\"", buf, broken[_i].clue);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(the_file_is_checked_when_the_context_opens)
{
	hangar_ctx *ctx = NULL;
	char dir[300];

	/* Named explicitly but missing. */
	ck_assert_int_eq(setenv("HANGAR_ENVIRONMENTS_FILE", path_of("missing.json"), 1), 0);
	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_ENVIRONMENTS_FILE"));
	ck_assert_ptr_null(ctx);
	unsetenv("HANGAR_ENVIRONMENTS_FILE");

	/* Nothing at the default place is fine; something broken there is not. */
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "no default file");
	hangar_ctx_unref(ctx);
	snprintf(dir, sizeof(dir), "mkdir -p %s/hangar", path_of("config"));
	ck_assert_int_eq(system(dir), 0);
	write_file(path_of("config/hangar/environments.json"), "{\"x\": {\"tier\": 5}}");
	ck_assert_int_eq(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "environments.json"));

	/* And a good one there is what creates use. */
	write_file(path_of("config/hangar/environments.json"), "{\"x\": {\"templates\": {\"*\": \"dflt\"}}}");
	ctx = new_ctx(NULL);
	{
		hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
		hangar_sandbox *sb = NULL;

		o.environment = "x";
		o.provider = "envb";
		must(hangar_sandbox_create(&sb, ctx, &o), "create from the default file");
		ck_assert_str_eq(seen_b.template_id, "dflt");
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

struct names {
	char list[256];
	hangar_environment_info last;
	char templates[128], env[128];
};

static int collect(const hangar_environment_info *in, void *payload)
{
	struct names *n = payload;

	strncat(n->list, in->name, sizeof(n->list) - strlen(n->list) - 2);
	strcat(n->list, ",");
	n->last = *in;
	snprintf(n->templates, sizeof(n->templates), "%s", in->templates_json);
	snprintf(n->env, sizeof(n->env), "%s", in->env_json);
	return 0;
}

static int stop_at_first(const hangar_environment_info *in, void *payload)
{
	(void)in;
	(*(int *)payload)++;
	return 42;
}

START_TEST(list_get_and_edits)
{
	hangar_ctx *ctx = new_ctx(path_of("envs.json"));
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	struct names n = { 0 };
	int calls = 0;

	must(hangar_environment_list(ctx, collect, &n), "list");
	ck_assert_str_eq(n.list, "bare,py,");          /* sorted by name */
	memset(&n, 0, sizeof(n));
	must(hangar_environment_get(ctx, "py", collect, &n), "get");
	ck_assert_str_eq(n.list, "py,");
	ck_assert_int_eq(n.last.timeout_sec, 1234);
	ck_assert_int_eq(n.last.network, HANGAR_NETWORK_OFF);
	ck_assert_str_eq(n.templates, "{\"enva\":\"tmpl-a\",\"*\":\"tmpl-any\"}");
	ck_assert_str_eq(n.env, "{\"A\":\"from-env\",\"B\":\"from-env\"}");
	ck_assert_int_eq(hangar_environment_get(ctx, "nope", collect, &n), HANGAR_ENOTFOUND);
	ck_assert_int_eq(hangar_environment_list(ctx, stop_at_first, &calls), 42);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(hangar_environment_list(ctx, NULL, NULL), HANGAR_EINVAL);

	/* An edit applies without reopening; one that breaks the file fails the next use. */
	write_file(path_of("envs.json"), "{\"zeta\": {}}");
	memset(&n, 0, sizeof(n));
	must(hangar_environment_list(ctx, collect, &n), "list after the edit");
	ck_assert_str_eq(n.list, "zeta,");
	write_file(path_of("envs.json"), "{\"zeta\": {\"cpus\": 4}}");
	o.environment = "zeta";
	o.provider = "envb";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "cpus"));
	ck_assert_int_eq(seen_b.calls, 0);
	hangar_ctx_unref(ctx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("environments");
	TCase *tc = tcase_create("environments");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, create_takes_what_the_environment_sets);
	tcase_add_test(tc, the_create_own_options_win);
	tcase_add_test(tc, a_version_1_caller_never_reads_an_environment);
	tcase_add_test(tc, unknown_and_malformed_names);
	tcase_add_loop_test(tc, a_broken_file_fails_naming_the_variable, 0, (int)(sizeof(broken) / sizeof(broken[0])));
	tcase_add_test(tc, the_file_is_checked_when_the_context_opens);
	tcase_add_test(tc, list_get_and_edits);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
