#define _GNU_SOURCE
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/context.h"

/*
 * The schema is versioned with SQLite's user_version; each step migrates
 * from the version before it, inside one transaction, keeping every row.
 * Version 0 is a database made before the schema had a version (or a new
 * one): its tables are created when missing, as version 1 did.
 */
static const char *const migrations[] = {
	/* 0 -> 1: sandboxes and their sealed secrets */
	"CREATE TABLE IF NOT EXISTS sandboxes ("
	"  id TEXT PRIMARY KEY, provider TEXT NOT NULL, recorded_us INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS secrets ("
	"  id TEXT NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL, PRIMARY KEY (id, name));",
	/* 1 -> 2: the checkpoint index */
	"CREATE TABLE checkpoints ("
	"  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, parent_id TEXT NOT NULL, workspace TEXT NOT NULL,"
	"  selection TEXT NOT NULL, store_url TEXT NOT NULL, content_hash TEXT NOT NULL, labels_json TEXT NOT NULL,"
	"  created_us INTEGER NOT NULL, stored_bytes INTEGER NOT NULL, archive_bytes INTEGER NOT NULL,"
	"  files INTEGER NOT NULL, blob_bytes INTEGER NOT NULL);"
	"CREATE INDEX checkpoints_by_session ON checkpoints (session_id, created_us);",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

static int db_error(sqlite3 *db, const char *what)
{
	return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "state store: %s: %s", what, db ? sqlite3_errmsg(db) : "no database");
}

int store_make_dirs(const char *dir)
{
	char tmp[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(tmp))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
	memcpy(tmp, dir, len + 1);
	for (char *p = tmp + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		{
			char c = *p;

			*p = '\0';
			if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
				return herr_os(HANGAR_EOS, errno, "cannot create %s (HANGAR_STATE_DIR)", tmp);
			*p = c;
			if (!c)
				break;
		}
	}
	return 0;
}

static int user_version(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = -1;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Brings the schema to SCHEMA_VERSION; several processes may race to do it. */
static int migrate(sqlite3 *db, const char *path)
{
	char sql[64];
	int v;

	if (user_version(db) == SCHEMA_VERSION)
		return 0;
	/* IMMEDIATE: the write lock first, then the version read under it. */
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return db_error(db, "cannot set up hangar.db");
	v = user_version(db);
	if (v < 0 || v > SCHEMA_VERSION) {
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		if (v < 0)
			return db_error(db, "cannot read the schema version of hangar.db");
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "%s has schema version %d, newer than this library knows (%d): use a newer libhangar", path,
			    v, SCHEMA_VERSION);
	}
	for (; v < SCHEMA_VERSION; v++)
		if (sqlite3_exec(db, migrations[v], NULL, NULL, NULL) != SQLITE_OK) {
			int rc = db_error(db, "cannot migrate hangar.db");

			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return rc;
		}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SCHEMA_VERSION);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		int rc = db_error(db, "cannot migrate hangar.db");

		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	return 0;
}

/* The context's database, opened on first use. */
sqlite3 *store_db(hangar_ctx *ctx)
{
	const char *dir = hctx_str(ctx, HS_STATE_DIR);
	char path[PATH_MAX];
	sqlite3 *db = NULL;

	pthread_mutex_lock(&ctx->mu);
	if (ctx->db) {
		db = ctx->db;
		goto out;
	}
	if (store_make_dirs(dir) < 0)
		goto out;
	if (snprintf(path, sizeof(path), "%s/hangar.db", dir) >= (int)sizeof(path)) {
		herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
		goto out;
	}
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			    NULL) != SQLITE_OK) {
		db_error(db, "cannot open hangar.db");
		sqlite3_close(db);
		db = NULL;
		goto out;
	}
	chmod(path, 0600);
	/* Several processes share the file: wait for each other rather than fail. */
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL;", NULL, NULL, NULL) != SQLITE_OK) {
		db_error(db, "cannot set up hangar.db");
		sqlite3_close(db);
		db = NULL;
		goto out;
	}
	if (migrate(db, path) < 0) {
		sqlite3_close(db);
		db = NULL;
		goto out;
	}
	ctx->db = db;
out:
	pthread_mutex_unlock(&ctx->mu);
	return db;
}

void store_close(sqlite3 *db)
{
	sqlite3_close(db);
}

/* Runs one statement with text parameters (NULL ends the list). */
static int exec_text(sqlite3 *db, const char *sql, const char *const *params, int nparams)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	for (int i = 0; i < nparams; i++)
		sqlite3_bind_text(st, i + 1, params[i], -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_error(db, "write");
}

int store_record(hangar_ctx *ctx, const char *id, const char *provider)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db,
			       "INSERT INTO sandboxes (id, provider, recorded_us) VALUES (?1, ?2, ?3) "
			       "ON CONFLICT (id) DO UPDATE SET provider = ?2, recorded_us = ?3",
			       -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, provider, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, hnow_us());
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_error(db, "recording a sandbox");
}

int store_lookup(hangar_ctx *ctx, const char *id, char **provider)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	int rc;

	*provider = NULL;
	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db, "SELECT provider FROM sandboxes WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*provider = strdup((const char *)sqlite3_column_text(st, 0));
		rc = *provider ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	} else if (rc == SQLITE_DONE) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no record of sandbox %s", id);
	} else {
		rc = db_error(db, "looking a sandbox up");
	}
	sqlite3_finalize(st);
	return rc;
}

int store_forget(hangar_ctx *ctx, const char *id)
{
	sqlite3 *db = store_db(ctx);
	const char *p[] = { id };

	if (!db)
		return hangar_error_last()->code;
	if (exec_text(db, "DELETE FROM secrets WHERE id = ?1", p, 1) < 0)
		return hangar_error_last()->code;
	return exec_text(db, "DELETE FROM sandboxes WHERE id = ?1", p, 1);
}

int store_ids(hangar_ctx *ctx, const char *provider, size_t max, char ***ids)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	char **v;
	size_t n = 0;
	int rc;

	*ids = NULL;
	if (!db)
		return hangar_error_last()->code;
	v = calloc(max + 1, sizeof(*v));
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (sqlite3_prepare_v2(db, "SELECT id FROM sandboxes WHERE provider = ?1 ORDER BY recorded_us LIMIT ?2", -1,
			       &st, NULL) != SQLITE_OK) {
		free(v);
		return db_error(db, "prepare");
	}
	sqlite3_bind_text(st, 1, provider, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < max) {
		const char *id = (const char *)sqlite3_column_text(st, 0);

		if (id && !(v[n++] = strdup(id))) {
			rc = SQLITE_NOMEM;
			break;
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		store_ids_free(v);
		return rc == SQLITE_NOMEM ? herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory")
					  : db_error(db, "listing sandboxes");
	}
	*ids = v;
	return 0;
}

void store_ids_free(char **ids)
{
	for (char **p = ids; p && *p; p++)
		free(*p);
	free(ids);
}

/* The sealing key, derived from HANGAR_SECRET_KEY so the raw secret is never the key. */
static int seal_key(hangar_ctx *ctx, unsigned char key[crypto_secretbox_KEYBYTES], const char *id, const char *name)
{
	const char *secret = hctx_str(ctx, HS_SECRET_KEY);

	if (!*secret)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_SECRET_KEY is not set: it is needed to keep the %s of sandbox %s", name, id);
	return hkdf_secret(key, crypto_secretbox_KEYBYTES, secret, strlen(secret), "hangar store sealing key v1");
}

/* The sealed bytes are bound to (id, name): a value moved to another row does not open. */
static void bind_ad(unsigned char nonce[crypto_secretbox_NONCEBYTES], const char *id, const char *name,
		    unsigned char *mixed)
{
	crypto_generichash_state h;

	crypto_generichash_init(&h, nonce, crypto_secretbox_NONCEBYTES, crypto_secretbox_NONCEBYTES);
	crypto_generichash_update(&h, (const unsigned char *)id, strlen(id) + 1);
	crypto_generichash_update(&h, (const unsigned char *)name, strlen(name) + 1);
	crypto_generichash_final(&h, mixed, crypto_secretbox_NONCEBYTES);
}

int store_secret_put(hangar_ctx *ctx, const char *id, const char *name, const char *value)
{
	unsigned char key[crypto_secretbox_KEYBYTES], nonce[crypto_secretbox_NONCEBYTES], mixed[crypto_secretbox_NONCEBYTES];
	size_t vlen = strlen(value), blen = sizeof(nonce) + crypto_secretbox_MACBYTES + vlen;
	unsigned char *blob;
	sqlite3 *db;
	sqlite3_stmt *st = NULL;
	int rc = seal_key(ctx, key, id, name);

	if (rc)
		return rc;
	db = store_db(ctx);
	if (!db) {
		sodium_memzero(key, sizeof(key));
		return hangar_error_last()->code;
	}
	blob = malloc(blen);
	if (!blob) {
		sodium_memzero(key, sizeof(key));
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	randombytes_buf(nonce, sizeof(nonce));
	bind_ad(nonce, id, name, mixed);
	memcpy(blob, nonce, sizeof(nonce));
	crypto_secretbox_easy(blob + sizeof(nonce), (const unsigned char *)value, vlen, mixed, key);
	sodium_memzero(key, sizeof(key));
	if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO secrets (id, name, sealed) VALUES (?1, ?2, ?3)", -1, &st,
			       NULL) != SQLITE_OK) {
		free(blob);
		return db_error(db, "prepare");
	}
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, blob, (int)blen, SQLITE_STATIC);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	free(blob);
	return rc == SQLITE_DONE ? 0 : db_error(db, "keeping a secret");
}

int store_secret_get(hangar_ctx *ctx, const char *id, const char *name, char **value)
{
	unsigned char key[crypto_secretbox_KEYBYTES], mixed[crypto_secretbox_NONCEBYTES];
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	int rc;

	*value = NULL;
	db = store_db(ctx);
	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db, "SELECT sealed FROM secrets WHERE id = ?1 AND name = ?2", -1, &st, NULL) !=
	    SQLITE_OK)
		return db_error(db, "prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_finalize(st);
		return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no %s kept for sandbox %s", name, id);
	}
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_error(db, "reading a secret");
	}
	rc = seal_key(ctx, key, id, name);
	if (rc == 0) {
		const unsigned char *blob = sqlite3_column_blob(st, 0);
		int blen = sqlite3_column_bytes(st, 0);
		size_t plen;

		if (!blob || blen < (int)(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "the %s kept for sandbox %s is damaged", name, id);
		} else {
			plen = (size_t)blen - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES;
			*value = malloc(plen + 1);
			bind_ad((unsigned char *)blob, id, name, mixed);
			if (!*value) {
				rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			} else if (crypto_secretbox_open_easy((unsigned char *)*value, blob + crypto_secretbox_NONCEBYTES,
							      (size_t)blen - crypto_secretbox_NONCEBYTES, mixed, key) != 0) {
				free(*value);
				*value = NULL;
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS,
					  "the %s kept for sandbox %s does not open with HANGAR_SECRET_KEY", name, id);
			} else {
				(*value)[plen] = '\0';
			}
		}
		sodium_memzero(key, sizeof(key));
	}
	sqlite3_finalize(st);
	return rc;
}

/* ---- the provider-facing API (hangar/sys/provider.h) ---------------------------- */

static int valid_key_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-.") == n;
}

int hangar_sys_secret_put(hangar_ctx *ctx, const char *sandbox_id, const char *name, const char *value)
{
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(valid_key_name(name), "name must match [a-z0-9_.-]{1,64}");
	HCHECK_ARG(sandbox_id && *sandbox_id && strlen(sandbox_id) <= 64, "sandbox_id");
	HCHECK_ARG(value, "value is NULL");
	return store_secret_put(ctx, sandbox_id, name, value);
}

int hangar_sys_secret_get(hangar_buf *out, hangar_ctx *ctx, const char *sandbox_id, const char *name)
{
	char *v;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(valid_key_name(name), "name must match [a-z0-9_.-]{1,64}");
	HCHECK_ARG(sandbox_id && *sandbox_id, "sandbox_id");
	rc = store_secret_get(ctx, sandbox_id, name, &v);
	if (rc)
		return rc;
	hangar_buf_dispose(out);
	out->ptr = v;
	out->size = strlen(v);
	out->reserved = out->size + 1;
	return 0;
}
