/* The query layer on SQLite: one database file, shared by every process of a state directory. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "db-impl.h"

struct lite {
	struct db base;
	sqlite3 *h;
};

struct lite_stmt {
	struct db_stmt base;
	sqlite3_stmt *st;
	int64_t changes;
};

#define LITE(db) ((struct lite *)(db))
#define LSTMT(s) ((struct lite_stmt *)(s))

static int fail(struct db *db, int rc, const char *what)
{
	int code = HANGAR_EOS;

	/* Only key conflicts: NOT NULL or CHECK failures are the caller's bugs, not "exists". */
	if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
		code = HANGAR_EEXISTS;
	return herr(code, code == HANGAR_EEXISTS ? HANGAR_ERRCAT_ARGUMENT : HANGAR_ERRCAT_OS, "state store %s: %s: %s",
		    db->name, what, LITE(db)->h ? sqlite3_errmsg(LITE(db)->h) : sqlite3_errstr(rc));
}

/* The journal mode a connection reports ("wal", "delete"), lower case, into mode. */
static int journal_mode(sqlite3 *h, char mode[16])
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);

	mode[0] = '\0';
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		snprintf(mode, 16, "%s", (const char *)sqlite3_column_text(st, 0));
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/*
 * Puts the database in WAL mode, once for all its users. Switching needs
 * the database to itself and SQLite does not wait for that (no busy
 * handler): connections opening a new database together see SQLITE_BUSY,
 * look again, and find it switched by another, or try again a little
 * later, within the busy timeout.
 */
static int wal(sqlite3 *h)
{
	char mode[16];
	int rc = SQLITE_OK;

	for (int waited_ms = 0; waited_ms <= 5000; waited_ms += 10) {
		if ((rc = journal_mode(h, mode)) == SQLITE_OK && !strcasecmp(mode, "wal"))
			return SQLITE_OK;
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(h, "PRAGMA journal_mode=WAL;", NULL, NULL, NULL);
		if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED && (rc & 0xff) != SQLITE_BUSY)
			return rc;
		sqlite3_sleep(10);
	}
	return rc;
}

int db_open_sqlite(struct db **out, const char *path)
{
	struct lite *l = calloc(1, sizeof(*l));
	int rc;

	*out = NULL;
	if (!l)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	db_init(&l->base, &db_sqlite_ops, path);
	rc = sqlite3_open_v2(path, &l->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rc = fail(&l->base, rc, "cannot open");
		db_close(&l->base);
		return rc;
	}
	/* sqlite3_extended_result_codes: constraint failures say which kind. */
	sqlite3_extended_result_codes(l->h, 1);
	chmod(path, 0600);
	/* Several processes share the file: wait for each other rather than fail. */
	sqlite3_busy_timeout(l->h, 5000);
	if ((rc = wal(l->h)) != SQLITE_OK) {
		rc = fail(&l->base, rc, "cannot set up");
		db_close(&l->base);
		return rc;
	}
	*out = &l->base;
	return 0;
}

static void lite_close(struct db *db)
{
	sqlite3_close(LITE(db)->h);
	db_fini(db);
	free(db);
}

static int lite_exec(struct db *db, const char *sql)
{
	int rc = sqlite3_exec(LITE(db)->h, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : fail(db, rc, "exec");
}

static int lite_prepare(struct db *db, struct db_stmt **out, const char *sql)
{
	struct lite_stmt *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	rc = sqlite3_prepare_v2(LITE(db)->h, sql, -1, &s->st, NULL);
	if (rc != SQLITE_OK) {
		free(s);
		return fail(db, rc, "prepare");
	}
	s->base.db = db;
	*out = &s->base;
	return 0;
}

static int lite_bind(struct db_stmt *st, int i, int type, const char *text, int64_t num, const void *blob, size_t len)
{
	char name[16];
	int idx, rc;

	/* $N by name: SQLite numbers parameters by first appearance, whatever N says. */
	snprintf(name, sizeof(name), "$%d", i);
	idx = sqlite3_bind_parameter_index(LSTMT(st)->st, name);
	if (!idx)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "state store: the statement has no parameter %s",
			    name);
	if (type == 'i')
		rc = sqlite3_bind_int64(LSTMT(st)->st, idx, num);
	else if (type == 'b')
		rc = sqlite3_bind_blob64(LSTMT(st)->st, idx, blob ? blob : "", len, SQLITE_TRANSIENT);
	else if (text)
		rc = sqlite3_bind_text(LSTMT(st)->st, idx, text, -1, SQLITE_TRANSIENT);
	else
		rc = sqlite3_bind_null(LSTMT(st)->st, idx);
	return rc == SQLITE_OK ? 0 : fail(st->db, rc, "bind");
}

static int lite_step(struct db_stmt *st)
{
	int rc = sqlite3_step(LSTMT(st)->st);

	if (rc == SQLITE_ROW)
		return DB_ROW;
	if (rc == SQLITE_DONE) {
		/* Read while the statement still holds the connection. */
		LSTMT(st)->changes = sqlite3_changes64(LITE(st->db)->h);
		return DB_DONE;
	}
	rc = fail(st->db, rc, "query");
	sqlite3_reset(LSTMT(st)->st);
	return rc;
}

static const char *lite_column_text(struct db_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(LSTMT(st)->st, i);
}

static int64_t lite_column_int64(struct db_stmt *st, int i)
{
	return sqlite3_column_int64(LSTMT(st)->st, i);
}

static const void *lite_column_blob(struct db_stmt *st, int i, size_t *len)
{
	const void *p = sqlite3_column_blob(LSTMT(st)->st, i);

	*len = (size_t)sqlite3_column_bytes(LSTMT(st)->st, i);
	return p;
}

static int64_t lite_changes(struct db_stmt *st)
{
	return LSTMT(st)->changes;
}

static void lite_reset(struct db_stmt *st)
{
	sqlite3_reset(LSTMT(st)->st);
}

static void lite_finalize(struct db_stmt *st)
{
	sqlite3_finalize(LSTMT(st)->st);
	free(st);
}

static int lite_migrate_setup(struct db *db)
{
	return 0;
}

/* BEGIN IMMEDIATE took the write lock already. */
static int lite_migrate_lock(struct db *db)
{
	return 0;
}

static int lite_version_get(struct db *db)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(LITE(db)->h, "PRAGMA user_version", -1, &st, NULL), v;

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	else
		v = fail(db, rc, "cannot read the schema version");
	sqlite3_finalize(st);
	return v;
}

static int lite_version_set(struct db *db, int v)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v);
	return lite_exec(db, sql);
}

/*
 * A database file renamed, replaced or deleted under an open connection
 * still answers, from the old inode: everything written from then on is
 * lost to every other process. SQLite can tell (SQLITE_FCNTL_HAS_MOVED).
 */
static int lite_ping(struct db *db)
{
	int moved = 0;
	int rc = sqlite3_file_control(LITE(db)->h, "main", SQLITE_FCNTL_HAS_MOVED, &moved);

	if (rc != SQLITE_OK)
		return fail(db, rc, "check");
	if (moved)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS,
			    "state store %s: the file was moved, replaced or deleted since it was opened; "
			    "what is written now would be lost",
			    db->name);
	return 0;
}

const struct db_ops db_sqlite_ops = {
	.engine = DB_SQLITE,
	.close = lite_close,
	.exec = lite_exec,
	.prepare = lite_prepare,
	.bind = lite_bind,
	.step = lite_step,
	.column_text = lite_column_text,
	.column_int64 = lite_column_int64,
	.column_blob = lite_column_blob,
	.changes = lite_changes,
	.reset = lite_reset,
	.finalize = lite_finalize,
	.migrate_setup = lite_migrate_setup,
	.migrate_lock = lite_migrate_lock,
	.version_get = lite_version_get,
	.version_set = lite_version_set,
	.ping = lite_ping,
	/* IMMEDIATE: the write lock first, so reads in the transaction see what it will write over. */
	.begin_sql = "BEGIN IMMEDIATE",
};
