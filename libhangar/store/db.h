/*
 * The state store's one query layer: the SQL call sites of libhangar/store
 * speak to this, never to SQLite or libpq, so one statement text runs on
 * either engine. Write SQL both accept:
 *   - parameters as $1, $2, ... (SQLite binds them by name, PostgreSQL by
 *     number), each bound with its type: text, int64 (BIGINT) or blob
 *     (BLOB on SQLite, BYTEA on PostgreSQL);
 *   - upserts as INSERT ... ON CONFLICT (...) DO UPDATE SET ... = excluded...;
 *   - RETURNING to learn which rows a write touched;
 *   - no rowid, no INSERT OR REPLACE, no engine-specific functions.
 * Migrations may say INTEGER and BLOB: on PostgreSQL they become BIGINT and
 * BYTEA (db_migrate).
 *
 * Threads: one connection per context, shared by its threads. A statement
 * holds the connection from its first db_step() until it is done (the last
 * row read, db_reset() or db_finalize()); a transaction holds it from
 * db_begin() to db_commit()/db_rollback(). The same thread may nest
 * statements (a listing's callback may query); other threads wait.
 *
 * Every failing function sets the thread's error (herr) and returns its
 * code: HANGAR_EUNAVAILABLE when the database cannot be reached or refuses
 * our credentials, HANGAR_EEXISTS for a unique-key conflict, HANGAR_ECONFIG
 * for an unusable HANGAR_STORE, HANGAR_EOS for the rest. Messages name the
 * database without its password.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct db;
struct db_stmt;

enum db_engine { DB_SQLITE = 1, DB_POSTGRES = 2 };

/* db_step(): a row is there to read / the statement is done. Failures are negative. */
enum { DB_DONE = 0, DB_ROW = 1 };

/* Opens (creating) the SQLite database file path, mode 0600. */
int db_open_sqlite(struct db **out, const char *path);
/* Connects to a postgresql:// (or postgres://) URL. */
int db_open_postgres(struct db **out, const char *url);
/* Whether url names a PostgreSQL database (postgresql:// or postgres://). */
int db_url_is_postgres(const char *url);
/* Checks a HANGAR_STORE value (named setting) without connecting: HANGAR_ECONFIG. */
int db_check_store_url(const char *setting, const char *value);
void db_close(struct db *db);
int db_engine(const struct db *db);
/* The database for messages: the file, or the URL without its password. */
const char *db_name(const struct db *db);

/*
 * Migrations: step i brings the schema from version i to i + 1. sql runs on
 * both engines; postgres, when not NULL, runs instead of it on PostgreSQL.
 */
struct db_migration {
	const char *sql;
	const char *postgres;
};
/*
 * Brings the schema to version n, each missing step and the new version in
 * one transaction; several processes may race to do it, one does. The
 * version lives in SQLite's user_version, and in table schema_version on
 * PostgreSQL. A database newer than n is HANGAR_ECONFIG, left as it is.
 */
int db_migrate(struct db *db, const struct db_migration *steps, int n);
/* The schema version (0: none yet), or a negative code. */
int db_schema_version(struct db *db);

/*
 * Whether the database answers now: a read of one of the schema's tables,
 * after what the engine can tell beyond it (SQLite: the file at its path is
 * still the one opened). 0, or the failure's code.
 */
int db_ping(struct db *db);

/* Runs sql (one statement or several, no parameters, no rows wanted). */
int db_exec(struct db *db, const char *sql);

/* A transaction: db_begin() holds the connection for this thread until
 * db_commit() or db_rollback(). No nesting. */
int db_begin(struct db *db);
int db_commit(struct db *db);
void db_rollback(struct db *db);

/* Prepares sql; *out is NULL on failure. */
int db_prepare(struct db *db, struct db_stmt **out, const char *sql);
/* Binds $i (from 1), copying the value; NULL text binds SQL NULL. Errors
 * (no such parameter, memory) surface at the next db_step(). */
void db_bind_text(struct db_stmt *st, int i, const char *v);
void db_bind_int64(struct db_stmt *st, int i, int64_t v);
void db_bind_blob(struct db_stmt *st, int i, const void *p, size_t len);
/* Runs the statement or moves to its next row: DB_ROW, DB_DONE or a negative code. */
int db_step(struct db_stmt *st);
/* Column i (from 0) of the current row: text (NULL for SQL NULL), valid until the
 * next step; int64; blob bytes (*len set; NULL for SQL NULL). */
const char *db_column_text(struct db_stmt *st, int i);
int64_t db_column_int64(struct db_stmt *st, int i);
const void *db_column_blob(struct db_stmt *st, int i, size_t *len);
/* The rows the statement inserted, updated or deleted (once done). */
int64_t db_changes(struct db_stmt *st);
/* Makes the statement runnable again, keeping its bindings. */
void db_reset(struct db_stmt *st);
void db_finalize(struct db_stmt *st);
/* Prepares, binds text parameters $1..$nparams, steps once and finalizes: 0 or a failure. */
int db_exec_text(struct db *db, const char *sql, const char *const *params, int nparams);
