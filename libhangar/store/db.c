/*
 * The query layer's engine-neutral half: who holds the connection, and
 * migrations. The engines (db-sqlite.c, db-postgres.c) only translate.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "db-impl.h"

void db_init(struct db *db, const struct db_ops *ops, const char *name)
{
	pthread_mutexattr_t a;

	db->ops = ops;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&db->mu, &a);
	pthread_mutexattr_destroy(&a);
	snprintf(db->name, sizeof(db->name), "%s", name);
}

void db_fini(struct db *db)
{
	pthread_mutex_destroy(&db->mu);
}

void db_one_line(char *s)
{
	size_t n;

	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	n = strlen(s);
	while (n && s[n - 1] == ' ')
		s[--n] = '\0';
}

void db_close(struct db *db)
{
	if (db)
		db->ops->close(db);
}

int db_engine(const struct db *db)
{
	return db->ops->engine;
}

const char *db_name(const struct db *db)
{
	return db->name;
}

int db_exec(struct db *db, const char *sql)
{
	int rc;

	pthread_mutex_lock(&db->mu);
	rc = db->ops->exec(db, sql);
	pthread_mutex_unlock(&db->mu);
	return rc;
}

int db_ping(struct db *db)
{
	struct db_stmt *st;
	int rc = 0;

	if (db->ops->ping) {
		pthread_mutex_lock(&db->mu);
		rc = db->ops->ping(db);
		pthread_mutex_unlock(&db->mu);
		if (rc)
			return rc;
	}
	/* leases: a table of the schema's (so the schema is there) that stays small. */
	if ((rc = db_prepare(db, &st, "SELECT count(*) FROM leases")) != 0)
		return rc;
	rc = db_step(st);
	db_finalize(st);
	if (rc == DB_ROW)
		return 0;
	if (rc < 0)
		return rc;
	return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "state store %s: a count answered no row", db->name);
}

int db_begin(struct db *db)
{
	int rc;

	pthread_mutex_lock(&db->mu);
	if (db->in_tx) {
		pthread_mutex_unlock(&db->mu);
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "state store: a transaction is already open");
	}
	rc = db->ops->exec(db, db->ops->begin_sql);
	if (rc) {
		pthread_mutex_unlock(&db->mu);
		return rc;
	}
	db->in_tx = 1;
	return 0;
}

static void end_tx(struct db *db)
{
	db->in_tx = 0;
	pthread_mutex_unlock(&db->mu);
}

int db_commit(struct db *db)
{
	int rc = db->ops->exec(db, "COMMIT");

	if (rc) {
		hangar_sys_saved_error e;

		hangar_sys_error_save(&e);
		db->ops->exec(db, "ROLLBACK");
		hangar_sys_error_restore(&e);
	}
	end_tx(db);
	return rc;
}

void db_rollback(struct db *db)
{
	hangar_sys_saved_error e;

	hangar_sys_error_save(&e);
	db->ops->exec(db, "ROLLBACK");
	hangar_sys_error_restore(&e);
	end_tx(db);
}

int db_prepare(struct db *db, struct db_stmt **out, const char *sql)
{
	int rc;

	*out = NULL;
	pthread_mutex_lock(&db->mu);
	rc = db->ops->prepare(db, out, sql);
	pthread_mutex_unlock(&db->mu);
	if (rc == 0)
		(*out)->db = db;
	return rc;
}

static void bind(struct db_stmt *st, int i, int type, const char *text, int64_t num, const void *blob, size_t len)
{
	int rc;

	if (st->err)
		return;
	if (i < 1 || i > DB_MAX_PARAMS) {
		st->err = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "state store: no parameter $%d", i);
		return;
	}
	rc = st->db->ops->bind(st, i, type, text, num, blob, len);
	if (rc)
		st->err = rc;
}

void db_bind_text(struct db_stmt *st, int i, const char *v)
{
	bind(st, i, 't', v, 0, NULL, 0);
}

void db_bind_int64(struct db_stmt *st, int i, int64_t v)
{
	bind(st, i, 'i', NULL, v, NULL, 0);
}

void db_bind_blob(struct db_stmt *st, int i, const void *p, size_t len)
{
	bind(st, i, 'b', NULL, 0, p, len);
}

static void release(struct db_stmt *st)
{
	if (st->locked) {
		st->locked = 0;
		pthread_mutex_unlock(&st->db->mu);
	}
}

int db_step(struct db_stmt *st)
{
	int rc;

	if (st->err)
		return st->err;
	if (!st->locked) {
		pthread_mutex_lock(&st->db->mu);
		st->locked = 1;
	}
	rc = st->db->ops->step(st);
	if (rc != DB_ROW)
		release(st);
	return rc;
}

const char *db_column_text(struct db_stmt *st, int i)
{
	return st->db->ops->column_text(st, i);
}

int64_t db_column_int64(struct db_stmt *st, int i)
{
	return st->db->ops->column_int64(st, i);
}

const void *db_column_blob(struct db_stmt *st, int i, size_t *len)
{
	return st->db->ops->column_blob(st, i, len);
}

int64_t db_changes(struct db_stmt *st)
{
	return st->db->ops->changes(st);
}

void db_reset(struct db_stmt *st)
{
	st->db->ops->reset(st);
	release(st);
}

void db_finalize(struct db_stmt *st)
{
	if (!st)
		return;
	/* The engine's reset first: a SQLite statement stops reading under the lock. */
	st->db->ops->reset(st);
	release(st);
	st->db->ops->finalize(st);
}

int db_schema_version(struct db *db)
{
	int v;

	pthread_mutex_lock(&db->mu);
	v = db->ops->version_get(db);
	pthread_mutex_unlock(&db->mu);
	return v;
}

static int ident_char(int c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Whether word (any case) stands at p as a whole word of sql. */
static int word_at(const char *sql, const char *p, const char *word)
{
	size_t n = strlen(word);

	return strncasecmp(p, word, n) == 0 && !(p > sql && ident_char(p[-1])) && !ident_char(p[n]);
}

/* A migration for PostgreSQL: INTEGER -> BIGINT, BLOB -> BYTEA outside quotes (malloc'd). */
static char *postgres_ddl(const char *sql)
{
	size_t n = strlen(sql);
	char *out = malloc(n * 2 + 1), *o = out;
	char quote = 0;

	if (!out)
		return NULL;
	for (const char *p = sql; *p;) {
		if (quote) {
			if (*p == quote)
				quote = 0;
			*o++ = *p++;
		} else if (*p == '\'' || *p == '"') {
			quote = *p;
			*o++ = *p++;
		} else if (word_at(sql, p, "INTEGER")) {
			o = stpcpy(o, "BIGINT");
			p += 7;
		} else if (word_at(sql, p, "BLOB")) {
			o = stpcpy(o, "BYTEA");
			p += 4;
		} else {
			*o++ = *p++;
		}
	}
	*o = '\0';
	return out;
}

int db_migrate(struct db *db, const struct db_migration *steps, int n)
{
	int v = db_schema_version(db), rc;

	if (v == n)
		return 0;
	if ((rc = db->ops->migrate_setup(db)) != 0)
		return rc;
	if ((rc = db_begin(db)) != 0)
		return rc;
	if ((rc = db->ops->migrate_lock(db)) != 0) {
		db_rollback(db);
		return rc;
	}
	/* Read again under the lock: another process may have migrated meanwhile. */
	v = db->ops->version_get(db);
	if (v < 0 || v > n) {
		if (v > n)
			v = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				 "the state store %s has schema version %d, newer than this library knows (%d): "
				 "use a newer libhangar",
				 db->name, v, n);
		db_rollback(db);
		return v;
	}
	for (rc = 0; v < n && rc == 0; v++) {
		const char *sql = steps[v].sql;
		char *ddl = NULL;

		if (db->ops->engine == DB_POSTGRES) {
			ddl = postgres_ddl(steps[v].postgres ? steps[v].postgres : sql);
			if (!ddl) {
				rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
				break;
			}
			sql = ddl;
		}
		rc = db->ops->exec(db, sql);
		if (rc)
			herr_prefix("migrating %s to schema version %d", db->name, v + 1);
		free(ddl);
	}
	if (rc == 0)
		rc = db->ops->version_set(db, n);
	if (rc) {
		db_rollback(db);
		return rc;
	}
	return db_commit(db);
}

/* Runs one statement with text parameters $1..$n. */
int db_exec_text(struct db *db, const char *sql, const char *const *params, int nparams)
{
	struct db_stmt *st;
	int rc = db_prepare(db, &st, sql);

	if (rc)
		return rc;
	for (int i = 0; i < nparams; i++)
		db_bind_text(st, i + 1, params[i]);
	rc = db_step(st);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}
