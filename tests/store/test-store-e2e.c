/*
 * The library end to end with its store on PostgreSQL (pg-run.sh): a
 * local sandbox (a real bubblewrap jail running hangar-envd) is created,
 * runs a command, is checkpointed, restored into another and killed,
 * through the public API only; the database, read as an outside witness,
 * holds what the library recorded, and the state directory holds no
 * SQLite database.
 */
#define _GNU_SOURCE
#include <check.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "../checkpoints/helpers.h"

static char *dir;
static char url[2048];

static const char *env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set: run under tests/store/pg-run.sh", name);
	return v;
}

/* The number of rows sql counts, read straight from the database. */
static long count(const char *sql, const char *param)
{
	PGconn *c = PQconnectdb(url);
	PGresult *r;
	long n;

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "witness: %s", PQerrorMessage(c));
	r = PQexecParams(c, sql, param ? 1 : 0, NULL, param ? &param : NULL, NULL, NULL, 0);
	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return n;
}

static hangar_ctx *ctx_new(void)
{
	hangar_ctx *ctx = test_ctx(dir);

	must(hangar_ctx_set(ctx, "HANGAR_STORE", url), "HANGAR_STORE");
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "end to end store key, long enough 5kP"), "key");
	must(hangar_ctx_set(ctx, "HANGAR_ENVD_PATH", env("HANGAR_ENVD_PATH")), "envd");
	must(hangar_ctx_set(ctx, "HANGAR_JAIL_PATH", env("HANGAR_JAIL_PATH")), "jail");
	return ctx;
}

static char *run(hangar_sandbox *sb, const char *cmd)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	char *out;

	must(hangar_sandbox_exec(&r, sb, cmd, NULL), cmd);
	ck_assert_msg(r.exit_code == 0, "%s: exit %d: %s", cmd, r.exit_code, r.err.ptr ? r.err.ptr : "");
	out = strdup(r.out.ptr ? r.out.ptr : "");
	hangar_exec_result_dispose(&r);
	return out;
}

static int collect(hangar_checkpoint *cp, void *payload)
{
	strcat(payload, hangar_checkpoint_id(cp));
	strcat(payload, " ");
	return 0;
}

static void setup(void)
{
	dir = temp_dir();
}

static void teardown(void)
{
	rm_tree(dir);
	free(dir);
}

START_TEST(sandbox_and_checkpoint_on_postgres)
{
	hangar_ctx *ctx = ctx_new(), *other;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_checkpoint_opts ko = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_sandbox *a = NULL, *b = NULL, *again = NULL;
	hangar_checkpoint *cp = NULL, *found = NULL;
	char id[128], ckpt[64], listing[512] = "", path[4200], *out;

	co.provider = "local";
	co.timeout_sec = 600;
	must(hangar_sandbox_create(&a, ctx, &co), "create");
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(a));
	ck_assert_int_eq(count("SELECT count(*) FROM sandboxes WHERE id = $1 AND provider = 'local'", id), 1);
	out = run(a, "echo hello from $(id -un) > /workspace/note && cat /workspace/note");
	ck_assert_ptr_nonnull(strstr(out, "hello from"));
	free(out);

	/* another context (another connection, as another process would) finds it through the store */
	other = ctx_new();
	must(hangar_sandbox_attach(&again, other, NULL, id), "attach from another context");
	out = run(again, "cat /workspace/note");
	ck_assert_ptr_nonnull(strstr(out, "hello from"));
	free(out);
	hangar_sandbox_unref(again);

	ko.session_id = "e2e-session";
	ko.blob = "turn 1";
	ko.blob_len = 6;
	must(hangar_checkpoint_create(&cp, a, &ko), "checkpoint");
	snprintf(ckpt, sizeof(ckpt), "%s", hangar_checkpoint_id(cp));
	ck_assert_int_eq(count("SELECT count(*) FROM checkpoints WHERE id = $1 AND session_id = 'e2e-session'", ckpt),
			 1);
	must(hangar_checkpoint_list(other, "e2e-session", collect, listing), "list from the other context");
	ck_assert_str_eq(listing, strcat(strcpy(path, ckpt), " "));
	must(hangar_checkpoint_lookup(&found, other, ckpt), "lookup");

	must(hangar_sandbox_create(&b, other, &co), "create another");
	must(hangar_checkpoint_restore(b, found, NULL), "restore");
	out = run(b, "cat /workspace/note");
	ck_assert_ptr_nonnull(strstr(out, "hello from"));
	free(out);

	must(hangar_sandbox_kill(a), "kill");
	ck_assert_int_eq(count("SELECT count(*) FROM sandboxes WHERE id = $1", id), 0);
	must(hangar_sandbox_kill(b), "kill another");
	must(hangar_checkpoint_delete(found), "delete the checkpoint");
	ck_assert_int_eq(count("SELECT count(*) FROM checkpoints WHERE id = $1", ckpt), 0);

	/* nothing went to SQLite */
	snprintf(path, sizeof(path), "%s/hangar.db", dir);
	ck_assert_int_eq(access(path, F_OK), -1);

	hangar_checkpoint_unref(cp);
	hangar_checkpoint_unref(found);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(other);
	hangar_ctx_unref(ctx);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store end to end (postgres)");
	TCase *tc = tcase_create("e2e");
	SRunner *sr;
	int failed;

	const char *need[] = { "HANGAR_TEST_PG_USER", "HANGAR_TEST_PG_PASSWORD", "HANGAR_TEST_PG_HOST",
			       "HANGAR_TEST_PG_PORT", "HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH" };

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!getenv(need[i]) || !*getenv(need[i])) {
			fprintf(stderr, "%s is not set: run under tests/store/pg-run.sh from meson\n", need[i]);
			return 1;
		}
	snprintf(url, sizeof(url), "postgresql://%s:%s@/postgres?host=%s&port=%s", getenv("HANGAR_TEST_PG_USER"),
		 getenv("HANGAR_TEST_PG_PASSWORD"), getenv("HANGAR_TEST_PG_HOST"), getenv("HANGAR_TEST_PG_PORT"));
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, sandbox_and_checkpoint_on_postgres);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
