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
#include <sys/wait.h>
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

/* Sessions on PostgreSQL: park, a hot resume from another context, a cold one
 * raced by two processes (one sandbox), delete. */
START_TEST(session_on_postgres)
{
	hangar_ctx *ctx = ctx_new(), *other = ctx_new();
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_suspend_opts no_park = HANGAR_SUSPEND_OPTS_INIT;
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	hangar_session *s = NULL, *o = NULL;
	hangar_sandbox *sb = NULL, *back = NULL;
	char sid[64], first[128], got[2][128], *out;
	int pfd[2][2];
	pid_t kid[2];

	co.provider = "local";
	co.timeout_sec = 600;
	so.create = &co;
	must(hangar_session_create(&s, ctx, &so), "session");
	snprintf(sid, sizeof(sid), "%s", hangar_session_id(s));
	must(hangar_session_sandbox(&sb, s), "its sandbox");
	snprintf(first, sizeof(first), "%s", hangar_sandbox_id(sb));
	out = run(sb, "echo kept > /workspace/k && cat /workspace/k");
	free(out);
	must(hangar_session_suspend(s, NULL), "suspend");
	ck_assert_int_eq(count("SELECT count(*) FROM sessions WHERE id = $1 AND state = 3", sid), 1);

	must(hangar_session_open(&o, other, sid), "open from another context");
	must(hangar_session_resume(o, &back), "hot resume");
	ck_assert_str_eq(hangar_sandbox_id(back), first);
	must(hangar_session_get_info(&info, o), "info");
	ck_assert_int_eq(info.last_resume, HANGAR_RESUME_HOT);
	hangar_sandbox_unref(back);

	no_park.flags = HANGAR_SUSPEND_NO_PARK;
	must(hangar_session_suspend(o, &no_park), "suspend without parking");
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(pipe(pfd[k]), 0);
		kid[k] = fork();
		ck_assert_int_ge(kid[k], 0);
		if (kid[k] == 0) {
			hangar_ctx *c = ctx_new();
			hangar_session *mine = NULL;
			hangar_sandbox *x = NULL;
			char line[160];
			int n;

			if (hangar_session_open(&mine, c, sid) != 0 || hangar_session_resume(mine, &x) != 0)
				_exit(1);
			n = snprintf(line, sizeof(line), "%s", hangar_sandbox_id(x));
			_exit(write(pfd[k][1], line, (size_t)n) == n ? 0 : 2);
		}
		close(pfd[k][1]);
	}
	for (int k = 0; k < 2; k++) {
		int status = 0;
		ssize_t n = read(pfd[k][0], got[k], sizeof(got[k]) - 1);

		ck_assert_int_gt(n, 0);
		got[k][n] = '\0';
		close(pfd[k][0]);
		ck_assert_int_eq(waitpid(kid[k], &status, 0), kid[k]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	ck_assert_str_eq(got[0], got[1]);
	ck_assert_str_ne(got[0], first);
	ck_assert_int_eq(count("SELECT count(*) FROM sessions WHERE id = $1 AND state = 1", sid), 1);
	hangar_sandbox_unref(sb);
	must(hangar_session_sandbox(&sb, s), "the restored sandbox");
	out = run(sb, "cat /workspace/k");
	ck_assert_str_eq(out, "kept\n");
	free(out);
	must(hangar_session_delete(s), "delete");
	ck_assert_int_eq(count("SELECT count(*) FROM sessions WHERE id = $1", sid), 0);
	ck_assert_int_eq(count("SELECT count(*) FROM checkpoints WHERE session_id = $1", sid), 0);
	hangar_sandbox_unref(sb);
	hangar_session_unref(o);
	hangar_session_unref(s);
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
	tcase_add_test(tc, session_on_postgres);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
