/*
 * The state store on the engine the environment names: SQLite (the
 * default) or, with HANGAR_TEST_STORE=postgres under pg-run.sh, a real
 * PostgreSQL server, each test on a database of its own. The same tests
 * run on both: the query layer, sandbox records, sealed secrets, the
 * checkpoint index, migrations, leases and threads. The PostgreSQL-only
 * tests break the connection and the credentials on purpose.
 */
#define _GNU_SOURCE
#include <check.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "../checkpoints/helpers.h"
#include "store/db.h"
#include "store/store.h"

#define SECRET_KEY "store test key: long and random enough 7fQ2xL"

static int pg;                 /* the tests run on PostgreSQL */
static char *dir;              /* the state directory of one test */
static char url[2048];         /* the PostgreSQL database of one test */
static char dbname[64];

static const char *env(const char *name)
{
	const char *v = getenv(name);

	ck_assert_msg(v && *v, "%s is not set: run under tests/store/pg-run.sh", name);
	return v;
}

/* A URL for database db as user:password (NULL: the server's). */
static void pg_url(char *out, size_t n, const char *db, const char *user, const char *password)
{
	snprintf(out, n, "postgresql://%s:%s@/%s?host=%s&port=%s", user ? user : env("HANGAR_TEST_PG_USER"),
		 password ? password : env("HANGAR_TEST_PG_PASSWORD"), db, env("HANGAR_TEST_PG_HOST"),
		 env("HANGAR_TEST_PG_PORT"));
}

/* Runs sql as the server's superuser on database db (an outside witness). */
static void admin(const char *db, const char *sql)
{
	char u[2048];
	PGconn *c;
	PGresult *r;

	pg_url(u, sizeof(u), db, NULL, NULL);
	c = PQconnectdb(u);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "admin connection: %s", PQerrorMessage(c));
	r = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK, "%s: %s", sql,
		      PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

static void setup(void)
{
	static int n;
	char sql[128];

	dir = temp_dir();
	if (pg) {
		snprintf(dbname, sizeof(dbname), "t_%d_%d", (int)getpid(), n++);
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", dbname);
		admin("postgres", sql);
		pg_url(url, sizeof(url), dbname, NULL, NULL);
	}
}

static void teardown(void)
{
	char sql[128];

	rm_tree(dir);
	free(dir);
	if (pg) {
		snprintf(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)", dbname);
		admin("postgres", sql);
	}
}

static hangar_ctx *ctx_new(void)
{
	hangar_ctx *ctx = test_ctx(dir);

	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", SECRET_KEY), "key");
	if (pg)
		must(hangar_ctx_set(ctx, "HANGAR_STORE", url), "HANGAR_STORE");
	return ctx;
}

static struct db *db_of(hangar_ctx *ctx)
{
	struct db *db = store_db(ctx);

	ck_assert_msg(db != NULL, "store: %s", hangar_error_last()->message);
	ck_assert_int_eq(db_engine(db), pg ? DB_POSTGRES : DB_SQLITE);
	return db;
}

/* ---- the query layer ------------------------------------------------------------ */

START_TEST(layer_types_and_parameters)
{
	hangar_ctx *ctx = ctx_new();
	struct db *db = db_of(ctx);
	struct db_stmt *st;
	static const unsigned char bytes[] = { 0, 1, 2, 0, 255, '\'', '\\', 'x', 0 };
	char sql[256];
	const void *b;
	size_t len;

	snprintf(sql, sizeof(sql), "CREATE TABLE t (a TEXT, n BIGINT, b %s)", pg ? "BYTEA" : "BLOB");
	must(db_exec(db, sql), "create");
	/* Parameters out of order: SQLite must bind $N by name, not by position. */
	must(db_prepare(db, &st, "INSERT INTO t (n, a, b) VALUES ($3, $1, $2)"), "prepare");
	db_bind_text(st, 1, "h\xc3\xa9llo 'quoted' $1");
	db_bind_blob(st, 2, bytes, sizeof(bytes));
	db_bind_int64(st, 3, INT64_MIN);
	ck_assert_int_eq(db_step(st), DB_DONE);
	ck_assert_int_eq(db_changes(st), 1);
	/* the same statement again with other values */
	db_reset(st);
	db_bind_text(st, 1, NULL);
	db_bind_blob(st, 2, "", 0);
	db_bind_int64(st, 3, INT64_MAX);
	ck_assert_int_eq(db_step(st), DB_DONE);
	db_finalize(st);

	/* $1 twice, and a parameter used before a lower one */
	must(db_prepare(db, &st, "SELECT a, n, b FROM t WHERE n = $2 OR (a = $1 AND a = $1) ORDER BY n"), "select");
	db_bind_text(st, 1, "h\xc3\xa9llo 'quoted' $1");
	db_bind_int64(st, 2, INT64_MAX);
	ck_assert_int_eq(db_step(st), DB_ROW);
	ck_assert_str_eq(db_column_text(st, 0), "h\xc3\xa9llo 'quoted' $1");
	ck_assert(db_column_int64(st, 1) == INT64_MIN);
	b = db_column_blob(st, 2, &len);
	ck_assert_uint_eq(len, sizeof(bytes));
	ck_assert(memcmp(b, bytes, len) == 0);
	ck_assert_int_eq(db_step(st), DB_ROW);
	ck_assert_ptr_null(db_column_text(st, 0));
	ck_assert(db_column_int64(st, 1) == INT64_MAX);
	db_column_blob(st, 2, &len);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(db_step(st), DB_DONE);
	db_finalize(st);

	/* changes counts what an UPDATE touched */
	must(db_prepare(db, &st, "UPDATE t SET a = $1"), "update");
	db_bind_text(st, 1, "x");
	ck_assert_int_eq(db_step(st), DB_DONE);
	ck_assert_int_eq(db_changes(st), 2);
	db_finalize(st);

	/* a parameter the statement does not have fails at the step, with a message */
	must(db_prepare(db, &st, "SELECT a FROM t WHERE a = $1"), "prepare");
	db_bind_text(st, 1, "x");
	db_bind_text(st, 2, "nothing");
	ck_assert_int_eq(db_step(st), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "$2"));
	db_finalize(st);

	/* broken SQL: an error naming the database, one line */
	ck_assert_int_eq(db_exec(db, "SELEC nonsense"), HANGAR_EOS);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, db_name(db)));
	ck_assert_ptr_null(strchr(hangar_error_last()->message, '\n'));
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(layer_conflicts_and_transactions)
{
	hangar_ctx *ctx = ctx_new();
	struct db *db = db_of(ctx);
	struct db_stmt *st;
	int n = -1;

	must(db_exec(db, "CREATE TABLE k (id TEXT PRIMARY KEY, v TEXT NOT NULL)"), "create");
	must(db_exec(db, "INSERT INTO k VALUES ('a', '1')"), "insert");
	ck_assert_int_eq(db_exec(db, "INSERT INTO k VALUES ('a', '2')"), HANGAR_EEXISTS);
	/* a NOT NULL failure is not "exists" */
	ck_assert_int_eq(db_exec(db, "INSERT INTO k VALUES ('b', NULL)"), HANGAR_EOS);

	/* rolled back: nothing stays; committed: it does */
	must(db_begin(db), "begin");
	ck_assert_int_eq(db_begin(db), HANGAR_EINVAL); /* no nesting */
	must(db_exec(db, "INSERT INTO k VALUES ('b', '1')"), "in tx");
	db_rollback(db);
	must(db_begin(db), "begin");
	must(db_exec(db, "INSERT INTO k VALUES ('c', '1')"), "in tx");
	must(db_commit(db), "commit");
	must(db_prepare(db, &st, "SELECT count(*) FROM k"), "count");
	ck_assert_int_eq(db_step(st), DB_ROW);
	n = (int)db_column_int64(st, 0);
	db_finalize(st);
	ck_assert_int_eq(n, 2);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- records, secrets, the checkpoint index ------------------------------------- */

START_TEST(records)
{
	hangar_ctx *ctx = ctx_new();
	char *p = NULL, **ids = NULL;

	must(store_record(ctx, "sb-1", "local"), "record");
	must(store_record(ctx, "sb-2", "e2b"), "record");
	must(store_record(ctx, "sb-3", "local"), "record");
	must(store_lookup(ctx, "sb-2", &p), "lookup");
	ck_assert_str_eq(p, "e2b");
	free(p);
	/* recording again moves it */
	must(store_record(ctx, "sb-2", "local"), "again");
	must(store_lookup(ctx, "sb-2", &p), "lookup");
	ck_assert_str_eq(p, "local");
	free(p);
	ck_assert_int_eq(store_lookup(ctx, "sb-none", &p), HANGAR_ENOTFOUND);
	ck_assert_ptr_null(p);

	must(store_ids(ctx, "local", 10, &ids), "ids");
	ck_assert_str_eq(ids[0], "sb-1");
	ck_assert_str_eq(ids[1], "sb-3");
	ck_assert_str_eq(ids[2], "sb-2");
	ck_assert_ptr_null(ids[3]);
	store_ids_free(ids);
	must(store_ids(ctx, "local", 2, &ids), "ids");
	ck_assert_ptr_nonnull(ids[1]);
	ck_assert_ptr_null(ids[2]);
	store_ids_free(ids);
	must(store_ids(ctx, "cube", 5, &ids), "ids");
	ck_assert_ptr_null(ids[0]);
	store_ids_free(ids);

	must(store_secret_put(ctx, "sb-1", "token", "t"), "secret");
	must(store_forget(ctx, "sb-1"), "forget");
	must(store_forget(ctx, "sb-never"), "forget what was never recorded");
	ck_assert_int_eq(store_lookup(ctx, "sb-1", &p), HANGAR_ENOTFOUND);
	ck_assert_int_eq(store_secret_get(ctx, "sb-1", "token", &p), HANGAR_ENOTFOUND);
	hangar_ctx_unref(ctx);

	/* another context (another connection) sees the same rows */
	ctx = ctx_new();
	must(store_lookup(ctx, "sb-3", &p), "lookup after reopening");
	ck_assert_str_eq(p, "local");
	free(p);
	hangar_ctx_unref(ctx);
}
END_TEST

/* store_holder() answers from memory what this context recorded or looked up;
 * store_lookup() always asks the database, and corrects the memory. */
START_TEST(holders_remembered)
{
	hangar_ctx *a = ctx_new(), *b = ctx_new();
	static const char *const providers[] = { "local", "cloud", "cube" };
	char *p = NULL, id[32];
	int remembered = -1;

	must(store_record(a, "sb-m", "local"), "record");
	must(store_holder(a, "sb-m", &p, &remembered), "holder");
	ck_assert_str_eq(p, "local");
	ck_assert_int_eq(remembered, 1);
	free(p);
	/* Another process forgets the id and records it under another provider:
	 * a's memory is stale (as documented), the store is not. */
	must(store_forget(b, "sb-m"), "forget in b");
	must(store_record(b, "sb-m", "cloud"), "record in b");
	must(store_holder(a, "sb-m", &p, &remembered), "stale holder");
	ck_assert_str_eq(p, "local");
	ck_assert_int_eq(remembered, 1);
	free(p);
	must(store_lookup(a, "sb-m", &p), "lookup");
	ck_assert_str_eq(p, "cloud");
	free(p);
	must(store_holder(a, "sb-m", &p, &remembered), "holder after the lookup");
	ck_assert_str_eq(p, "cloud");
	ck_assert_int_eq(remembered, 1);
	free(p);
	/* What b never recorded nor looked up comes from the store. */
	must(store_record(a, "sb-n", "cube"), "record sb-n");
	must(store_holder(b, "sb-n", &p, &remembered), "holder in b");
	ck_assert_str_eq(p, "cube");
	ck_assert_int_eq(remembered, 0);
	free(p);
	/* A lookup that finds no row forgets what was remembered. */
	must(store_forget(b, "sb-m"), "forget in b again");
	ck_assert_int_eq(store_lookup(a, "sb-m", &p), HANGAR_ENOTFOUND);
	ck_assert_int_eq(store_holder(a, "sb-m", &p, &remembered), HANGAR_ENOTFOUND);
	ck_assert_int_eq(remembered, 0);
	ck_assert_ptr_null(p);
	/* Forgetting here forgets the memory too. */
	must(store_record(a, "sb-o", "local"), "record sb-o");
	must(store_forget(a, "sb-o"), "forget sb-o");
	ck_assert_int_eq(store_holder(a, "sb-o", &p, &remembered), HANGAR_ENOTFOUND);
	/* More ids than the memory has slots: every answer is still the id's own. */
	for (int i = 0; i < 600; i++) {
		snprintf(id, sizeof(id), "sb-many-%d", i);
		must(store_record(a, id, providers[i % 3]), "record many");
	}
	for (int i = 599; i >= 0; i--) {
		snprintf(id, sizeof(id), "sb-many-%d", i);
		must(store_holder(a, id, &p, &remembered), "holder of many");
		ck_assert_str_eq(p, providers[i % 3]);
		free(p);
	}
	hangar_ctx_unref(a);
	hangar_ctx_unref(b);
}
END_TEST

/*
 * Two providers, "p1" that has nothing and "p2" that has every sandbox
 * asked for, for attach across a stale memory of the holder.
 */
static int moved_connects[2];
static const char providers_p1[] = "p1", providers_p2[] = "p2";

static int moved_init(void **state, hangar_ctx *c, void *data)
{
	(void)c;
	*state = data;
	return 0;
}

static int moved_create(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out)
{
	(void)state;
	(void)o;
	(void)out;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 503, 0, "no creates here");
}

static int moved_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	int which = state == (void *)providers_p2;

	moved_connects[which]++;
	if (!which)
		return hangar_sys_error(HANGAR_EGONE, 404, 0, "p1 has no sandbox %s", id);
	if (hangar_sys_sandbox_set_id(out, id) || hangar_sys_sandbox_set_envd_url(out, "http://127.0.0.1:9"))
		return hangar_sys_error(HANGAR_ENOMEM, 0, 0, "out of memory");
	return 0;
}

static int moved_kill(void *state, const char *id)
{
	(void)state;
	(void)id;
	return 0;
}

START_TEST(attach_past_a_stale_holder)
{
	static const struct hangar_provider_ops p1 = {
		.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "p1",
		.init = moved_init, .create = moved_create, .connect = moved_connect, .kill = moved_kill,
	};
	static const struct hangar_provider_ops p2 = {
		.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "p2",
		.init = moved_init, .create = moved_create, .connect = moved_connect, .kill = moved_kill,
	};
	hangar_ctx *a = ctx_new(), *b = ctx_new();
	hangar_sandbox *sb = NULL;
	char *p = NULL;

	must(hangar_provider_register(a, &p1, (void *)providers_p1), "register p1");
	must(hangar_provider_register(a, &p2, (void *)providers_p2), "register p2");
	/* a remembers p1; then the store says p2 (another process recorded it so). */
	must(store_record(a, "sb-moved", "p1"), "record");
	must(store_record(b, "sb-moved", "p2"), "record in b");
	memset(moved_connects, 0, sizeof(moved_connects));
	must(hangar_sandbox_attach(&sb, a, NULL, "sb-moved"), "attach");
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(sb)), "p2");
	ck_assert_int_eq(moved_connects[0], 1); /* the remembered one, which said gone */
	ck_assert_int_eq(moved_connects[1], 1); /* then the store's */
	hangar_sandbox_unref(sb);
	/* p1's "gone" did not make a forget the row p2 holds. */
	must(store_lookup(b, "sb-moved", &p), "lookup in b");
	ck_assert_str_eq(p, "p2");
	free(p);
	/* And now a remembers p2: one connect, to p2. */
	memset(moved_connects, 0, sizeof(moved_connects));
	must(hangar_sandbox_attach(&sb, a, NULL, "sb-moved"), "attach again");
	ck_assert_int_eq(moved_connects[0], 0);
	ck_assert_int_eq(moved_connects[1], 1);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(a);
	hangar_ctx_unref(b);
}
END_TEST

START_TEST(secrets)
{
	hangar_ctx *ctx = ctx_new();
	struct db *db = db_of(ctx);
	struct db_stmt *st;
	char *v = NULL, value[300];
	const void *b;
	size_t len;

	for (int i = 0; i < 255; i++)
		value[i] = (char)(i + 1);
	value[255] = '\0';
	must(store_secret_put(ctx, "sb-1", "token", value), "put");
	must(store_secret_get(ctx, "sb-1", "token", &v), "get");
	ck_assert_str_eq(v, value);
	free(v);
	must(store_secret_put(ctx, "sb-1", "token", "second"), "overwrite");
	must(store_secret_get(ctx, "sb-1", "token", &v), "get");
	ck_assert_str_eq(v, "second");
	free(v);

	/* what the database holds is sealed: not the value */
	must(db_prepare(db, &st, "SELECT sealed FROM secrets WHERE id = $1"), "raw");
	db_bind_text(st, 1, "sb-1");
	ck_assert_int_eq(db_step(st), DB_ROW);
	b = db_column_blob(st, 0, &len);
	ck_assert_uint_gt(len, strlen("second"));
	ck_assert_ptr_null(memmem(b, len, "second", 6));
	db_finalize(st);

	/* another key does not open it; no key cannot keep one */
	hangar_ctx_unref(ctx);
	ctx = ctx_new();
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "another deployment's key 0192837465"), "key");
	ck_assert_int_eq(store_secret_get(ctx, "sb-1", "token", &v), HANGAR_EREFUSED);
	ck_assert_ptr_null(v);
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", ""), "no key");
	ck_assert_int_eq(store_secret_put(ctx, "sb-1", "token", "x"), HANGAR_ECONFIG);
	hangar_ctx_unref(ctx);
}
END_TEST

static int collect(const struct store_ckpt *c, void *payload)
{
	char *s = payload;

	strcat(s, c->id);
	strcat(s, " ");
	return 0;
}

static int stop_at_two(const struct store_ckpt *c, void *payload)
{
	int *n = payload;

	(void)c;
	return ++*n == 2 ? 42 : 0;
}

struct nested {
	hangar_ctx *ctx;
	int seen;
};

/* A listing's callback may use the store itself (the same thread, the same connection). */
static int nested_lookup(const struct store_ckpt *c, void *payload)
{
	struct nested *n = payload;
	struct store_ckpt again;

	must(store_ckpt_get(n->ctx, c->id, &again), "get inside a listing");
	ck_assert_str_eq(again.session_id, c->session_id);
	store_ckpt_free(&again);
	must(store_record(n->ctx, c->id, "written-inside"), "write inside a listing");
	n->seen++;
	return 0;
}

START_TEST(checkpoint_index)
{
	hangar_ctx *ctx = ctx_new();
	struct store_ckpt c = { 0 }, got;
	char ids[8][16], listing[256] = "";
	struct nested nest = { ctx, 0 };
	int n = 0;

	for (int i = 0; i < 5; i++) {
		snprintf(ids[i], sizeof(ids[i]), "ckpt-%c", "qzamb"[i]);
		c.id = ids[i];
		c.session_id = i < 3 ? "s1" : "s2";
		c.parent_id = i ? ids[i - 1] : NULL;
		c.workspace = "/workspace";
		c.selection = "git";
		c.store_url = "file:///x";
		c.content_hash = "blake2b-256:00";
		c.labels_json = "{\"a\":\"b\"}";
		/* one microsecond for all: the order is the order they came in */
		c.created_us = 1700000000000000;
		c.stored_bytes = (uint64_t)INT64_MAX;
		c.archive_bytes = 1ULL << 40;
		c.files = (uint64_t)i;
		c.blob_bytes = 0;
		must(store_ckpt_put(ctx, &c), "put");
	}
	c.id = ids[0];
	ck_assert_int_eq(store_ckpt_put(ctx, &c), HANGAR_EEXISTS);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "ckpt-q"));

	must(store_ckpt_get(ctx, "ckpt-m", &got), "get");
	ck_assert_str_eq(got.session_id, "s2");
	ck_assert_str_eq(got.parent_id, "ckpt-a");
	ck_assert_str_eq(got.labels_json, "{\"a\":\"b\"}");
	ck_assert(got.created_us == 1700000000000000);
	ck_assert(got.stored_bytes == (uint64_t)INT64_MAX);
	ck_assert(got.archive_bytes == 1ULL << 40);
	ck_assert(got.files == 3);
	store_ckpt_free(&got);
	must(store_ckpt_get(ctx, "ckpt-q", &got), "get");
	ck_assert_str_eq(got.parent_id, "");
	store_ckpt_free(&got);
	ck_assert_int_eq(store_ckpt_get(ctx, "ckpt-none", &got), HANGAR_ENOTFOUND);

	must(store_ckpt_list(ctx, NULL, collect, listing), "list");
	ck_assert_str_eq(listing, "ckpt-q ckpt-z ckpt-a ckpt-m ckpt-b ");
	listing[0] = '\0';
	must(store_ckpt_list(ctx, "s2", collect, listing), "list s2");
	ck_assert_str_eq(listing, "ckpt-m ckpt-b ");
	ck_assert_int_eq(store_ckpt_list(ctx, NULL, stop_at_two, &n), 42);
	ck_assert_int_eq(n, 2);
	must(store_ckpt_list(ctx, "s1", nested_lookup, &nest), "nested");
	ck_assert_int_eq(nest.seen, 3);

	must(store_ckpt_delete(ctx, "ckpt-z"), "delete");
	ck_assert_int_eq(store_ckpt_delete(ctx, "ckpt-z"), HANGAR_ENOTFOUND);
	listing[0] = '\0';
	must(store_ckpt_list(ctx, "s1", collect, listing), "list s1");
	ck_assert_str_eq(listing, "ckpt-q ckpt-a ");
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- migrations ------------------------------------------------------------------ */

static int version_of(hangar_ctx *ctx)
{
	return db_schema_version(db_of(ctx));
}

START_TEST(migrations_from_empty_and_again)
{
	hangar_ctx *ctx = ctx_new();
	char *p = NULL;

	ck_assert_int_eq(version_of(ctx), store_schema_version());
	must(store_record(ctx, "sb-1", "local"), "record");
	hangar_ctx_unref(ctx);
	/* opening again migrates nothing and keeps the rows */
	for (int i = 0; i < 2; i++) {
		ctx = ctx_new();
		ck_assert_int_eq(version_of(ctx), store_schema_version());
		must(store_lookup(ctx, "sb-1", &p), "lookup");
		ck_assert_str_eq(p, "local");
		free(p);
		hangar_ctx_unref(ctx);
	}
}
END_TEST

/* A database at schema version 1 (before the checkpoint index) keeps its rows and gains the rest. */
START_TEST(migrations_from_version_1)
{
	hangar_ctx *ctx;
	struct db *db;
	char path[4200], *p = NULL;
	int n = 0;

	if (pg) {
		db_open_postgres(&db, url);
	} else {
		snprintf(path, sizeof(path), "%s/hangar.db", dir);
		must(db_open_sqlite(&db, path), "open");
	}
	ck_assert_ptr_nonnull(db);
	must(db_exec(db, pg ? "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, provider TEXT NOT NULL, recorded_us BIGINT NOT NULL);"
			      "CREATE TABLE secrets (id TEXT NOT NULL, name TEXT NOT NULL, sealed BYTEA NOT NULL, "
			      "PRIMARY KEY (id, name));"
			      "CREATE TABLE schema_version (version BIGINT NOT NULL);"
			      "INSERT INTO schema_version VALUES (1);"
			    : "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, provider TEXT NOT NULL, recorded_us INTEGER NOT NULL);"
			      "CREATE TABLE secrets (id TEXT NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL, "
			      "PRIMARY KEY (id, name));"
			      "PRAGMA user_version = 1;"),
	     "version 1");
	must(db_exec(db, "INSERT INTO sandboxes VALUES ('sb-old', 'local', 1)"), "old row");
	ck_assert_int_eq(db_schema_version(db), 1);
	db_close(db);

	ctx = ctx_new();
	ck_assert_int_eq(version_of(ctx), store_schema_version());
	must(store_lookup(ctx, "sb-old", &p), "the old row");
	ck_assert_str_eq(p, "local");
	free(p);
	must(store_ckpt_list(ctx, NULL, stop_at_two, &n), "the index is there");
	must(store_lease_acquire(ctx, "reaper", "a", 1, 10, &n), "the leases are there");
	hangar_ctx_unref(ctx);
}
END_TEST

/* A newer schema than this library knows is refused, not damaged. */
START_TEST(migrations_refuse_newer)
{
	hangar_ctx *ctx = ctx_new();
	char *p = NULL;

	must(store_record(ctx, "sb-1", "local"), "record");
	must(db_exec(db_of(ctx), pg ? "UPDATE schema_version SET version = 99" : "PRAGMA user_version = 99"), "99");
	hangar_ctx_unref(ctx);
	ctx = ctx_new();
	ck_assert_int_eq(store_lookup(ctx, "sb-1", &p), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "newer"));
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "99"));
	/* still refused on the next call: the failed open is not kept */
	ck_assert_int_eq(store_lookup(ctx, "sb-1", &p), HANGAR_ECONFIG);
	hangar_ctx_unref(ctx);
}
END_TEST

static pthread_barrier_t barrier;

static void *open_racer(void *arg)
{
	hangar_ctx *ctx = arg;
	char id[32];
	intptr_t rc;

	snprintf(id, sizeof(id), "sb-%p", arg);
	pthread_barrier_wait(&barrier);
	rc = store_record(ctx, id, "local");
	return (void *)rc;
}

/* Several processes (here: contexts) meeting a new database at once: one migrates, all work. */
START_TEST(migrations_race)
{
	enum { N = 4 };
	hangar_ctx *ctx[N];
	pthread_t t[N];
	char **ids = NULL;
	int n = 0;

	pthread_barrier_init(&barrier, NULL, N);
	for (int i = 0; i < N; i++)
		ctx[i] = ctx_new();
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, open_racer, ctx[i]), 0);
	for (int i = 0; i < N; i++) {
		void *rc;

		pthread_join(t[i], &rc);
		ck_assert_msg((intptr_t)rc == 0, "racer %d: %d", i, (int)(intptr_t)rc);
	}
	must(store_ids(ctx[0], "local", 10, &ids), "ids");
	while (ids[n])
		n++;
	ck_assert_int_eq(n, N);
	store_ids_free(ids);
	ck_assert_int_eq(version_of(ctx[0]), store_schema_version());
	for (int i = 0; i < N; i++)
		hangar_ctx_unref(ctx[i]);
	pthread_barrier_destroy(&barrier);
}
END_TEST

/* ---- leases ---------------------------------------------------------------------- */

START_TEST(lease_rules)
{
	hangar_ctx *ctx = ctx_new();
	int held = -1, released = -1;
	char *holder = NULL;
	int64_t exp = 0, t = 1000000;

	ck_assert_int_eq(store_lease_get(ctx, "reaper", &holder, &exp), HANGAR_ENOTFOUND);
	must(store_lease_acquire(ctx, "reaper", "a", t, 30, &held), "a takes it");
	ck_assert_int_eq(held, 1);
	must(store_lease_acquire(ctx, "reaper", "b", t + 10, 30, &held), "b tries");
	ck_assert_int_eq(held, 0);
	must(store_lease_get(ctx, "reaper", &holder, &exp), "get");
	ck_assert_str_eq(holder, "a");
	ck_assert(exp == t + 30);
	free(holder);
	/* a renews: the expiry moves; b still cannot take it before then */
	must(store_lease_acquire(ctx, "reaper", "a", t + 20, 30, &held), "a renews");
	ck_assert_int_eq(held, 1);
	must(store_lease_acquire(ctx, "reaper", "b", t + 40, 30, &held), "b tries again");
	ck_assert_int_eq(held, 0);
	/* other names are other leases */
	must(store_lease_acquire(ctx, "other", "b", t + 40, 30, &held), "b, another name");
	ck_assert_int_eq(held, 1);
	/* run out: b takes it over, and a no longer holds it */
	must(store_lease_acquire(ctx, "reaper", "b", t + 50, 30, &held), "b after expiry");
	ck_assert_int_eq(held, 1);
	must(store_lease_acquire(ctx, "reaper", "a", t + 51, 30, &held), "a, too late");
	ck_assert_int_eq(held, 0);
	/* only the holder releases */
	must(store_lease_release(ctx, "reaper", "a", &released), "a releases what it lost");
	ck_assert_int_eq(released, 0);
	must(store_lease_get(ctx, "reaper", &holder, &exp), "get");
	ck_assert_str_eq(holder, "b");
	free(holder);
	must(store_lease_release(ctx, "reaper", "b", &released), "b releases");
	ck_assert_int_eq(released, 1);
	must(store_lease_acquire(ctx, "reaper", "a", t + 52, 30, &held), "a, once released");
	ck_assert_int_eq(held, 1);
	ck_assert_int_eq(store_lease_acquire(ctx, "reaper", "a", t, 0, &held), HANGAR_EINVAL);
	ck_assert_int_eq(store_lease_acquire(ctx, "reaper", "a", INT64_MAX, 1, &held), HANGAR_EINVAL);
	hangar_ctx_unref(ctx);
}
END_TEST

enum { RACERS = 4, ROUNDS = 60 };

struct racer {
	hangar_ctx *ctx;
	char name[16];
	int wins[ROUNDS];
	int rc;
	char why[1024];
};

static void *lease_racer(void *arg)
{
	struct racer *r = arg;

	/* Every round to the end, failed or not: the others wait at the barrier. */
	for (int round = 0; round < ROUNDS; round++) {
		char lease[32];
		int rc;

		snprintf(lease, sizeof(lease), "lease-%d", round / 2);
		pthread_barrier_wait(&barrier);
		/* odd rounds: the lease exists and has run out, so every racer may take it over */
		rc = store_lease_acquire(r->ctx, lease, r->name, 1000000 + round * 100, 50, &r->wins[round]);
		if (rc && !r->rc) {
			r->rc = rc;
			snprintf(r->why, sizeof(r->why), "round %d: %s", round, hangar_error_last()->message);
		}
	}
	return NULL;
}

/* Contexts (connections) racing for one lease: each round, exactly one wins. */
START_TEST(lease_race)
{
	hangar_ctx *ctx[2];
	struct racer r[RACERS];
	pthread_t t[RACERS];
	int total[RACERS] = { 0 };

	pthread_barrier_init(&barrier, NULL, RACERS);
	ctx[0] = ctx_new();
	ctx[1] = ctx_new();
	for (int i = 0; i < RACERS; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].ctx = ctx[i % 2];
		snprintf(r[i].name, sizeof(r[i].name), "replica-%d", i);
		ck_assert_int_eq(pthread_create(&t[i], NULL, lease_racer, &r[i]), 0);
	}
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < RACERS; i++)
		ck_assert_msg(r[i].rc == 0, "%s: %d %s", r[i].name, r[i].rc, r[i].why);
	for (int round = 0; round < ROUNDS; round++) {
		int winners = 0;

		for (int i = 0; i < RACERS; i++) {
			winners += r[i].wins[round];
			total[i] += r[i].wins[round];
		}
		ck_assert_msg(winners == 1, "round %d: %d winners", round, winners);
	}
	/* the database agrees with the last winner */
	for (int i = 0; i < RACERS; i++)
		if (r[i].wins[ROUNDS - 1]) {
			char *holder = NULL, lease[32];
			int64_t exp;

			snprintf(lease, sizeof(lease), "lease-%d", (ROUNDS - 1) / 2);
			must(store_lease_get(ctx[0], lease, &holder, &exp), "get");
			ck_assert_str_eq(holder, r[i].name);
			free(holder);
		}
	hangar_ctx_unref(ctx[0]);
	hangar_ctx_unref(ctx[1]);
	pthread_barrier_destroy(&barrier);
}
END_TEST

/* ---- threads sharing one context --------------------------------------------------- */

struct worker {
	hangar_ctx *ctx;
	int n, rc;
	char why[1024];
};

static void *worker(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 100 && !w->rc; i++) {
		char id[32], *p = NULL, **ids = NULL;

		snprintf(id, sizeof(id), "sb-%d-%d", w->n, i);
		if ((w->rc = store_record(w->ctx, id, "local")) != 0)
			break;
		if ((w->rc = store_lookup(w->ctx, id, &p)) != 0)
			break;
		if (strcmp(p, "local"))
			w->rc = -1000;
		free(p);
		if ((w->rc = store_ids(w->ctx, "local", 5, &ids)) != 0)
			break;
		store_ids_free(ids);
		if (i % 3 == 0)
			w->rc = store_forget(w->ctx, id);
	}
	if (w->rc)
		snprintf(w->why, sizeof(w->why), "%s", hangar_error_last()->message);
	return NULL;
}

START_TEST(threads_share_a_context)
{
	enum { N = 6 };
	hangar_ctx *ctx = ctx_new();
	struct worker w[N];
	pthread_t t[N];
	char **ids = NULL;
	int n = 0;

	for (int i = 0; i < N; i++) {
		w[i] = (struct worker){ ctx, i, 0, "" };
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &w[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ck_assert_msg(w[i].rc == 0, "worker %d: %d %s", i, w[i].rc, w[i].why);
	}
	must(store_ids(ctx, "local", 10000, &ids), "ids");
	while (ids[n])
		n++;
	store_ids_free(ids);
	ck_assert_int_eq(n, N * (100 - 34));
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- PostgreSQL: broken connections and credentials --------------------------------- */

/* ---- readiness ------------------------------------------------------------------- */

/* hangar_ctx_ping_store() opens the store when nothing has yet, and answers. */
START_TEST(ping_opens_and_answers)
{
	hangar_ctx *ctx = ctx_new();
	char *p = NULL;

	ck_assert_int_eq(hangar_ctx_ping_store(NULL), HANGAR_EINVAL);
	must(hangar_ctx_ping_store(ctx), "ping a store nothing opened yet");
	ck_assert_int_eq(version_of(ctx), store_schema_version());
	must(store_record(ctx, "sb-1", "local"), "record");
	must(hangar_ctx_ping_store(ctx), "ping again");
	must(store_lookup(ctx, "sb-1", &p), "the ping changed nothing");
	ck_assert_str_eq(p, "local");
	free(p);
	hangar_ctx_unref(ctx);
}
END_TEST

/* Copies path to path.new and renames it over path: same bytes, another file. */
static void replace_file(const char *path)
{
	char tmp[4200], buf[65536];
	FILE *in = fopen(path, "rb"), *out;
	size_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	ck_assert_ptr_nonnull(in);
	out = fopen(tmp, "wb");
	ck_assert_ptr_nonnull(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* A database file replaced or deleted under the open connection still
 * answers queries, from the old file: the ping must not call that ready. */
START_TEST(ping_sqlite_file_replaced_or_deleted)
{
	hangar_ctx *ctx = ctx_new();
	char path[4200];
	const hangar_error *e;

	snprintf(path, sizeof(path), "%s/hangar.db", dir);
	must(store_record(ctx, "sb-1", "local"), "record");
	must(hangar_ctx_ping_store(ctx), "ping");
	replace_file(path);
	ck_assert_int_eq(hangar_ctx_ping_store(ctx), HANGAR_EOS);
	e = hangar_error_last();
	ck_assert_ptr_nonnull(strstr(e->message, "moved, replaced or deleted"));
	ck_assert_ptr_nonnull(strstr(e->message, path));
	hangar_ctx_unref(ctx);

	/* a new context opens the file that is there now, and is ready */
	ctx = ctx_new();
	must(hangar_ctx_ping_store(ctx), "ping the replacement");
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(hangar_ctx_ping_store(ctx), HANGAR_EOS);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A file that is not a database (overwritten in place) fails a new context's ping. */
START_TEST(ping_sqlite_not_a_database)
{
	hangar_ctx *ctx = ctx_new();
	char path[4200], junk[8192];
	FILE *f;

	snprintf(path, sizeof(path), "%s/hangar.db", dir);
	must(hangar_ctx_ping_store(ctx), "ping");
	hangar_ctx_unref(ctx);
	memset(junk, 'x', sizeof(junk));
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(junk, 1, sizeof(junk), f), sizeof(junk));
	ck_assert_int_eq(fclose(f), 0);
	ctx = ctx_new();
	ck_assert_int_eq(hangar_ctx_ping_store(ctx), HANGAR_EOS);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "state store"));
	hangar_ctx_unref(ctx);
}
END_TEST

static int backend_pid(hangar_ctx *ctx)
{
	struct db_stmt *st;
	int pid;

	must(db_prepare(db_of(ctx), &st, "SELECT pg_backend_pid()"), "pid");
	ck_assert_int_eq(db_step(st), DB_ROW);
	pid = (int)db_column_int64(st, 0);
	db_finalize(st);
	return pid;
}

static void kill_connections(void)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
		 "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '%s' AND pid <> pg_backend_pid()",
		 dbname);
	admin("postgres", sql);
}

START_TEST(pg_reconnects_once)
{
	hangar_ctx *ctx = ctx_new();
	struct db *db;
	char *p = NULL;
	int pid;

	must(store_record(ctx, "sb-1", "local"), "record");
	pid = backend_pid(ctx);
	kill_connections();
	/* the next call finds the connection dead and makes a new one */
	must(store_lookup(ctx, "sb-1", &p), "lookup after the server dropped us");
	ck_assert_str_eq(p, "local");
	free(p);
	ck_assert_int_ne(backend_pid(ctx), pid);

	/* inside a transaction, a broken connection fails the transaction, then the store recovers */
	db = db_of(ctx);
	must(db_begin(db), "begin");
	must(db_exec(db, "INSERT INTO sandboxes VALUES ('sb-tx', 'local', 1)"), "in tx");
	kill_connections();
	ck_assert_int_eq(db_exec(db, "INSERT INTO sandboxes VALUES ('sb-tx2', 'local', 1)"), HANGAR_EUNAVAILABLE);
	db_rollback(db);
	ck_assert_int_eq(store_lookup(ctx, "sb-tx", &p), HANGAR_ENOTFOUND);
	must(store_lookup(ctx, "sb-1", &p), "lookup after the failed transaction");
	free(p);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The server restarts under a context: the next call reconnects. */
START_TEST(pg_server_restart)
{
	hangar_ctx *ctx = ctx_new();
	char cmd[4200], *p = NULL;

	must(store_record(ctx, "sb-1", "local"), "record");
	snprintf(cmd, sizeof(cmd), "%s restart -m fast >/dev/null", env("HANGAR_TEST_PG_CTL"));
	ck_assert_int_eq(system(cmd), 0);
	must(store_lookup(ctx, "sb-1", &p), "lookup after a restart");
	ck_assert_str_eq(p, "local");
	free(p);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The server stops: the ping says unavailable; it starts again: the ping reconnects. */
START_TEST(pg_ping_follows_the_server)
{
	hangar_ctx *ctx = ctx_new();
	char cmd[4200], msg[1024];
	int rc;

	must(hangar_ctx_ping_store(ctx), "ping");
	kill_connections();
	must(hangar_ctx_ping_store(ctx), "ping after the server dropped us");
	snprintf(cmd, sizeof(cmd), "%s stop -m immediate >/dev/null", env("HANGAR_TEST_PG_CTL"));
	ck_assert_int_eq(system(cmd), 0);
	rc = hangar_ctx_ping_store(ctx);
	snprintf(msg, sizeof(msg), "%s", hangar_error_last()->message);
	/* the server first, so that a failure here does not fail the tests after */
	/* start (unlike restart) does not reuse the options pg-run.sh gave: the same again */
	snprintf(cmd, sizeof(cmd), "%s start -o '-k %s -c listen_addresses= -p %s -c fsync=off' >/dev/null",
		 env("HANGAR_TEST_PG_CTL"), env("HANGAR_TEST_PG_HOST"), env("HANGAR_TEST_PG_PORT"));
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(rc == HANGAR_EUNAVAILABLE, "ping with the server stopped: %d %s", rc, msg);
	ck_assert_ptr_null(strstr(msg, env("HANGAR_TEST_PG_PASSWORD")));
	must(hangar_ctx_ping_store(ctx), "ping after the server came back");
	hangar_ctx_unref(ctx);
}
END_TEST

/* Whether msg names where the store is: its database, user, host, socket directory or port. */
static void assert_says_not_where(const char *msg, const char *const *also)
{
	const char *where[] = { dbname, env("HANGAR_TEST_PG_USER"), env("HANGAR_TEST_PG_HOST"),
				env("HANGAR_TEST_PG_PORT"), "127.0.0.1", "localhost", ".s.PGSQL", "postgresql://" };

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		ck_assert_msg(!strstr(msg, where[i]), "the message names \"%s\": %s", where[i], msg);
	for (; also && *also; also++)
		ck_assert_msg(!strstr(msg, *also), "the message names \"%s\": %s", *also, msg);
}

/* What the caller gets when the store cannot be used: the kind, and a message without the password. */
static const char *const *fails_also; /* more that the next assert_fails() message must not name */

static void assert_fails(const char *u, int code, int unreachable, const char *secret)
{
	hangar_ctx *ctx = test_ctx(dir);
	const hangar_error *e;
	char *p = NULL;
	int rc = hangar_ctx_set(ctx, "HANGAR_STORE", u);

	if (rc == 0)
		rc = store_lookup(ctx, "sb-1", &p);
	e = hangar_error_last();
	ck_assert_msg(rc == code, "%s: %d %s", u, rc, e->message);
	ck_assert_ptr_null(strstr(e->message, secret));
	ck_assert_ptr_null(strchr(e->message, '\n'));
	ck_assert_msg(!!(e->flags & HANGAR_ERROR_UNREACHABLE) == unreachable, "%s: flags %u", e->message, e->flags);
	if (code == HANGAR_ECONFIG) {
		ck_assert_ptr_nonnull(strstr(e->message, "HANGAR_STORE"));
	} else {
		ck_assert_ptr_nonnull(strstr(e->message, "state store postgresql: "));
		assert_says_not_where(e->message, fails_also);
	}
	/* a second call tries again and fails the same way */
	if (code != HANGAR_ECONFIG)
		ck_assert_int_eq(store_lookup(ctx, "sb-1", &p), code);
	hangar_ctx_unref(ctx);
}

static int show_store(const char *name, const char *value, int source, void *payload)
{
	(void)source;
	if (!strcmp(name, "HANGAR_STORE"))
		snprintf(payload, 512, "%s", value);
	return 0;
}

START_TEST(pg_errors_never_show_the_password)
{
	char u[8400], nowhere[4200];
	hangar_ctx *ctx;
	const char *pw = env("HANGAR_TEST_PG_PASSWORD");
	int fd;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	/* the wrong password: reached, refused */
	pg_url(u, sizeof(u), dbname, NULL, "Wr0ngPassw0rd-sEcReT");
	assert_fails(u, HANGAR_EUNAVAILABLE, 0, "Wr0ngPassw0rd-sEcReT");
	/* a user that does not exist: the same, and its name is not shown either */
	pg_url(u, sizeof(u), dbname, "nobody_here", "Wr0ngPassw0rd-sEcReT");
	fails_also = (const char *const[]){ "nobody_here", NULL };
	assert_fails(u, HANGAR_EUNAVAILABLE, 0, "Wr0ngPassw0rd-sEcReT");
	/* no server behind the socket directory: unreachable */
	snprintf(nowhere, sizeof(nowhere), "%s/no-server", dir);
	ck_assert_int_eq(mkdir(nowhere, 0700), 0);
	snprintf(u, sizeof(u), "postgresql://hangar:%s@/%s?host=%s&port=5432", pw, dbname, nowhere);
	fails_also = (const char *const[]){ nowhere, "5432", NULL };
	assert_fails(u, HANGAR_EUNAVAILABLE, 1, pw);
	/* a loopback port nothing listens on: unreachable */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(u, sizeof(u), "postgresql://hangar:%s@127.0.0.1:%d/%s?connect_timeout=5", pw, ntohs(sa.sin_port),
		 dbname);
	{
		char port[16];

		snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
		fails_also = (const char *const[]){ port, NULL };
		assert_fails(u, HANGAR_EUNAVAILABLE, 1, pw);
	}
	fails_also = NULL;
	close(fd);
	/* URLs libpq cannot read: a configuration error, still without the password */
	snprintf(u, sizeof(u), "postgresql://hangar:%s@localhost:notaport/%s", pw, dbname);
	assert_fails(u, HANGAR_ECONFIG, 0, pw);
	assert_fails("postgresql://hangar:s3cr%zzEt-pw@localhost/db", HANGAR_ECONFIG, 0, "s3cr");
	assert_fails("postgresql://localhost/db?password=qu3ry-s3cret&bogus=1", HANGAR_ECONFIG, 0, "qu3ry-s3cret");
	assert_fails("mysql://root:hunter2-secret@localhost/db", HANGAR_ECONFIG, 0, "hunter2-secret");

	/* the setting is a secret: listings mask it */
	ctx = ctx_new();
	{
		char shown[512] = "";

		must(hangar_ctx_foreach_setting(ctx, show_store, shown), "settings");
		ck_assert_str_eq(shown, "********");
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* A password with every character a URL reserves, percent-encoded, signs in. */
START_TEST(pg_password_with_reserved_characters)
{
	hangar_ctx *ctx;
	char u[4200], *p = NULL;

	admin(dbname, "CREATE ROLE odd LOGIN PASSWORD 'p@ss:w/rd?&=%#'' x'; GRANT ALL ON SCHEMA public TO odd");
	snprintf(u, sizeof(u), "postgresql://odd:%s@/%s?host=%s&port=%s", "p%40ss%3Aw%2Frd%3F%26%3D%25%23%27%20x",
		 dbname, env("HANGAR_TEST_PG_HOST"), env("HANGAR_TEST_PG_PORT"));
	ctx = test_ctx(dir);
	must(hangar_ctx_set(ctx, "HANGAR_STORE", u), "HANGAR_STORE");
	must(store_record(ctx, "sb-1", "local"), "record as odd");
	must(store_lookup(ctx, "sb-1", &p), "lookup as odd");
	free(p);
	hangar_ctx_unref(ctx);
	admin(dbname, "DROP OWNED BY odd; DROP ROLE odd");
	/* and a wrong one is cut out of messages in both its spellings */
	snprintf(u, sizeof(u), "postgresql://hangar:%s@/%s?host=%s&port=%s", "Zq%2FWr0ng%40pw", dbname,
		 env("HANGAR_TEST_PG_HOST"), env("HANGAR_TEST_PG_PORT"));
	assert_fails(u, HANGAR_EUNAVAILABLE, 0, "Wr0ng");
}
END_TEST

/*
 * A value PostgreSQL refuses for what it is (bytes its UTF8 encoding
 * refuses) is the caller's mistake: HANGAR_EINVAL, nothing stored, and the
 * message names neither where the store is nor the bytes.
 */
START_TEST(pg_bad_input_is_einval)
{
	hangar_ctx *ctx = ctx_new();
	char *p = NULL;
	int rc = store_record(ctx, "sb-\xff\xfe", "local");
	const char *msg = hangar_error_last()->message;

	ck_assert_msg(rc == HANGAR_EINVAL, "%d %s", rc, msg);
	ck_assert_ptr_null(strstr(msg, "\xff"));
	ck_assert_ptr_nonnull(strstr(msg, "state store postgresql: "));
	assert_says_not_where(msg, NULL);
	ck_assert_int_eq(store_lookup(ctx, "sb-", &p), HANGAR_ENOTFOUND);
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create(pg ? "store (postgres)" : "store (sqlite)");
	TCase *tc = tcase_create("store");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, layer_types_and_parameters);
	tcase_add_test(tc, layer_conflicts_and_transactions);
	tcase_add_test(tc, records);
	tcase_add_test(tc, holders_remembered);
	tcase_add_test(tc, attach_past_a_stale_holder);
	tcase_add_test(tc, secrets);
	tcase_add_test(tc, checkpoint_index);
	tcase_add_test(tc, migrations_from_empty_and_again);
	tcase_add_test(tc, migrations_from_version_1);
	tcase_add_test(tc, migrations_refuse_newer);
	tcase_add_test(tc, migrations_race);
	tcase_add_test(tc, lease_rules);
	tcase_add_test(tc, lease_race);
	tcase_add_test(tc, threads_share_a_context);
	tcase_add_test(tc, ping_opens_and_answers);
	if (!pg) {
		tcase_add_test(tc, ping_sqlite_file_replaced_or_deleted);
		tcase_add_test(tc, ping_sqlite_not_a_database);
	}
	if (pg) {
		tcase_add_test(tc, pg_ping_follows_the_server);
		tcase_add_test(tc, pg_reconnects_once);
		tcase_add_test(tc, pg_server_restart);
		tcase_add_test(tc, pg_errors_never_show_the_password);
		tcase_add_test(tc, pg_password_with_reserved_characters);
		tcase_add_test(tc, pg_bad_input_is_einval);
	}
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	const char *engine = getenv("HANGAR_TEST_STORE");
	SRunner *sr;
	int failed;

	pg = engine && !strcmp(engine, "postgres");
	sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
