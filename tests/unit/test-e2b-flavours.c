/*
 * The e2b provider's flavour tables (libhangar/providers/e2b/{cloud,
 * selfhosted,cube}.c): every flavour fills every hook, since the provider
 * calls them without asking which flavour runs, and each hook gives its
 * platform's shape of a route or body. The suites e2b and tiers drive the
 * same hooks against the fake control planes.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/e2b/e2b.h"

static const char *const names[] = { "cloud", "selfhosted", "cube" };

START_TEST(every_hook_set)
{
	const struct e2b_flavour *fl = e2b_flavour_named(names[_i]);

	ck_assert_ptr_nonnull(fl);
	ck_assert_str_eq(fl->name, names[_i]);
	ck_assert_ptr_nonnull(fl->sandboxes_path);
	ck_assert_int_ne(fl->no_limit_timeout, 0);
	ck_assert_ptr_nonnull(fl->resolve_template);
	ck_assert_ptr_nonnull(fl->connect_body);
	ck_assert_ptr_nonnull(fl->pause_body);
	ck_assert_ptr_nonnull(fl->template_build);
	ck_assert_ptr_nonnull(fl->build_status_path);
	ck_assert_ptr_nonnull(fl->template_list_path);
}
END_TEST

START_TEST(unknown_flavour)
{
	ck_assert_ptr_null(e2b_flavour_named("Cube"));
	ck_assert_ptr_null(e2b_flavour_named(""));
	ck_assert_ptr_null(e2b_flavour_named(NULL));
}
END_TEST

/* The connect body's timeout as JSON text, "" when there is none. */
static void connect_timeout(const struct e2b_flavour *fl, int64_t timeout, int running, char *out, size_t size)
{
	cJSON *body = cJSON_CreateObject();
	const cJSON *t;

	ck_assert_ptr_nonnull(body);
	fl->connect_body(body, timeout, running);
	t = cJSON_GetObjectItemCaseSensitive(body, "timeout");
	if (t)
		snprintf(out, size, "%.0f", t->valuedouble);
	else
		snprintf(out, size, "%s", "");
	ck_assert_int_eq(cJSON_GetArraySize(body), t ? 1 : 0);
	cJSON_Delete(body);
}

/* E2B requires a timeout on connect; CubeAPI ignores one on a running sandbox and spells "no limit" -1. */
START_TEST(connect_bodies)
{
	char t[32], max[32];

	snprintf(max, sizeof(max), "%lld", (long long)E2B_MAX_TIMEOUT);
	for (int i = 0; i < 2; i++) {
		const struct e2b_flavour *fl = e2b_flavour_named(names[i]);

		connect_timeout(fl, 300, 0, t, sizeof(t));
		ck_assert_str_eq(t, "300");
		connect_timeout(fl, 300, 1, t, sizeof(t));
		ck_assert_str_eq(t, "300");
		connect_timeout(fl, 0, 1, t, sizeof(t));
		ck_assert_str_eq(t, max);
		connect_timeout(fl, -1, 0, t, sizeof(t));
		ck_assert_str_eq(t, max);
		ck_assert_int_eq(fl->no_limit_timeout, E2B_MAX_TIMEOUT);
	}
	connect_timeout(&e2b_flavour_cube, 300, 0, t, sizeof(t));
	ck_assert_str_eq(t, "300");
	connect_timeout(&e2b_flavour_cube, 300, 1, t, sizeof(t));
	ck_assert_str_eq(t, "");
	connect_timeout(&e2b_flavour_cube, -1, 0, t, sizeof(t));
	ck_assert_str_eq(t, "-1");
	connect_timeout(&e2b_flavour_cube, 0, 0, t, sizeof(t));
	ck_assert_str_eq(t, "");
	ck_assert_int_eq(e2b_flavour_cube.no_limit_timeout, -1);
}
END_TEST

/* E2B's pause says whether memory is kept; CubeAPI's takes no body and always keeps it. */
START_TEST(pause_bodies)
{
	cJSON *b = NULL;
	char *text;

	ck_assert_int_eq(e2b_flavour_cloud.pause_body(&b, 0), 0);
	text = cJSON_PrintUnformatted(b);
	ck_assert_str_eq(text, "{\"memory\":false}");
	cJSON_free(text);
	cJSON_Delete(b);
	ck_assert_int_eq(e2b_flavour_selfhosted.pause_body(&b, 1), 0);
	text = cJSON_PrintUnformatted(b);
	ck_assert_str_eq(text, "{\"memory\":true}");
	cJSON_free(text);
	cJSON_Delete(b);
	b = (cJSON *)1;
	ck_assert_int_eq(e2b_flavour_cube.pause_body(&b, 0), 0);
	ck_assert_ptr_null(b);
	ck_assert(!(e2b_flavour_cube.capabilities & HANGAR_CAP_FS_PAUSE));
	ck_assert(e2b_flavour_cloud.capabilities & HANGAR_CAP_FS_PAUSE);
}
END_TEST

START_TEST(paths)
{
	char p[256];

	e2b_flavour_cloud.build_status_path(p, sizeof(p), "tpl1", "b2", 7);
	ck_assert_str_eq(p, "/templates/tpl1/builds/b2/status?logsOffset=7");
	e2b_flavour_cube.build_status_path(p, sizeof(p), "tpl1", "b2", 7);
	ck_assert_str_eq(p, "/templates/tpl1/builds/b2/status");
	e2b_flavour_selfhosted.template_list_path(p, sizeof(p), "");
	ck_assert_str_eq(p, "/v2/templates?limit=100");
	e2b_flavour_selfhosted.template_list_path(p, sizeof(p), "a%2Fb");
	ck_assert_str_eq(p, "/v2/templates?limit=100&nextToken=a%2Fb");
	e2b_flavour_cube.template_list_path(p, sizeof(p), "a%2Fb");
	ck_assert_str_eq(p, "/templates");
	ck_assert_str_eq(e2b_flavour_cloud.sandboxes_path, "/v2/sandboxes");
	ck_assert_str_eq(e2b_flavour_cube.sandboxes_path, "/sandboxes");
	ck_assert(e2b_flavour_cloud.pages && e2b_flavour_selfhosted.pages && !e2b_flavour_cube.pages);
}
END_TEST

/* Only CubeAPI names templates by an alias that must be looked up; E2B's create takes names as they are. */
START_TEST(names_pass_on_e2b)
{
	char out[64];

	ck_assert_int_eq(e2b_flavour_cloud.resolve_template(NULL, "my-alias", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "my-alias");
	ck_assert_int_eq(e2b_flavour_cube.resolve_template(NULL, "tpl-0123", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "tpl-0123");
}
END_TEST

static Suite *flavour_suite(void)
{
	Suite *s = suite_create("e2b-flavours");
	TCase *tc = tcase_create("tables");

	tcase_add_loop_test(tc, every_hook_set, 0, (int)(sizeof(names) / sizeof(names[0])));
	tcase_add_test(tc, unknown_flavour);
	tcase_add_test(tc, connect_bodies);
	tcase_add_test(tc, pause_bodies);
	tcase_add_test(tc, paths);
	tcase_add_test(tc, names_pass_on_e2b);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(flavour_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
