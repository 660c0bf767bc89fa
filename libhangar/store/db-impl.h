/* The query layer's engines (db-sqlite.c, db-postgres.c) behind db.h. */
#pragma once

#include <pthread.h>

#include "db.h"

/*
 * 1 when libpq is loaded (loading it now if need be), else 0 with *why set
 * (pq-dl.c: libpq is not linked, see util/dl.h). Thread-safe.
 */
int pq_loaded(const char **why);

/* The most parameters one statement may have ($1 .. $DB_MAX_PARAMS). */
#define DB_MAX_PARAMS 32

struct db_ops {
	int engine;
	void (*close)(struct db *db);
	int (*exec)(struct db *db, const char *sql);
	int (*prepare)(struct db *db, struct db_stmt **out, const char *sql);
	/* type: 't' text (NULL: SQL NULL), 'i' int64, 'b' blob */
	int (*bind)(struct db_stmt *st, int i, int type, const char *text, int64_t num, const void *blob, size_t len);
	int (*step)(struct db_stmt *st);
	const char *(*column_text)(struct db_stmt *st, int i);
	int64_t (*column_int64)(struct db_stmt *st, int i);
	const void *(*column_blob)(struct db_stmt *st, int i, size_t *len);
	int64_t (*changes)(struct db_stmt *st);
	void (*reset)(struct db_stmt *st);
	void (*finalize)(struct db_stmt *st);
	/* Migrations: made ready outside a transaction (the version's table), then
	 * inside one: locked against other migrators, version read and written. */
	int (*migrate_setup)(struct db *db);
	int (*migrate_lock)(struct db *db);
	int (*version_get)(struct db *db);
	int (*version_set)(struct db *db, int v);
	/* What the engine can check about the connection beyond a query; NULL: nothing. */
	int (*ping)(struct db *db);
	/* BEGIN as the engine does it best for a writer. */
	const char *begin_sql;
};

struct db {
	const struct db_ops *ops;
	pthread_mutex_t mu;       /* recursive: a statement in progress, a transaction */
	int in_tx;                /* a transaction is open (its thread holds mu) */
	char name[512];           /* for messages: never a password */
};

struct db_stmt {
	struct db *db;
	int locked;               /* holds db->mu (between its first step and done) */
	int err;                  /* a binding that failed, reported by db_step */
};

/* Common set-up of a new connection's header. */
void db_init(struct db *db, const struct db_ops *ops, const char *name);
void db_fini(struct db *db);

/* Turns a message into one line (newlines and tabs become spaces, trailing blanks go). */
void db_one_line(char *s);

extern const struct db_ops db_sqlite_ops;
extern const struct db_ops db_postgres_ops;
