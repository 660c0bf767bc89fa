/* The checkpoint index: one row per checkpoint in the state store (store.h). */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define COLUMNS                                                                                        \
	"id, session_id, parent_id, workspace, selection, store_url, content_hash, labels_json, created_us, " \
	"stored_bytes, archive_bytes, files, blob_bytes"

static int db_error(sqlite3 *db, const char *what)
{
	return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "state store: %s: %s", what, sqlite3_errmsg(db));
}

int store_ckpt_put(hangar_ctx *ctx, const struct store_ckpt *c)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	const char *text[] = { c->id, c->session_id, c->parent_id, c->workspace,
			       c->selection, c->store_url, c->content_hash, c->labels_json };
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db, "INSERT INTO checkpoints (" COLUMNS ") VALUES "
				   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
			       -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	for (int i = 0; i < 8; i++)
		sqlite3_bind_text(st, i + 1, text[i] ? text[i] : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 9, c->created_us);
	sqlite3_bind_int64(st, 10, (sqlite3_int64)c->stored_bytes);
	sqlite3_bind_int64(st, 11, (sqlite3_int64)c->archive_bytes);
	sqlite3_bind_int64(st, 12, (sqlite3_int64)c->files);
	sqlite3_bind_int64(st, 13, (sqlite3_int64)c->blob_bytes);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc == SQLITE_CONSTRAINT)
		return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "checkpoint %s is already indexed", c->id);
	return rc == SQLITE_DONE ? 0 : db_error(db, "indexing a checkpoint");
}

void store_ckpt_free(struct store_ckpt *c)
{
	char **s[] = { &c->id, &c->session_id, &c->parent_id, &c->workspace,
		       &c->selection, &c->store_url, &c->content_hash, &c->labels_json };

	for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
		free(*s[i]);
	memset(c, 0, sizeof(*c));
}

/* Fills c from the current row: strings copied. */
static int row(sqlite3_stmt *st, struct store_ckpt *c)
{
	char **s[] = { &c->id, &c->session_id, &c->parent_id, &c->workspace,
		       &c->selection, &c->store_url, &c->content_hash, &c->labels_json };

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < 8; i++) {
		const char *v = (const char *)sqlite3_column_text(st, i);

		if (!(*s[i] = strdup(v ? v : ""))) {
			store_ckpt_free(c);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	}
	c->created_us = sqlite3_column_int64(st, 8);
	c->stored_bytes = (uint64_t)sqlite3_column_int64(st, 9);
	c->archive_bytes = (uint64_t)sqlite3_column_int64(st, 10);
	c->files = (uint64_t)sqlite3_column_int64(st, 11);
	c->blob_bytes = (uint64_t)sqlite3_column_int64(st, 12);
	return 0;
}

int store_ckpt_get(hangar_ctx *ctx, const char *id, struct store_ckpt *out)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db, "SELECT " COLUMNS " FROM checkpoints WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = row(st, out);
	else if (rc == SQLITE_DONE)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s", id);
	else
		rc = db_error(db, "looking a checkpoint up");
	sqlite3_finalize(st);
	return rc;
}

int store_ckpt_list(hangar_ctx *ctx, const char *session_id, int (*fn)(const struct store_ckpt *c, void *payload),
		    void *payload)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db,
			       session_id ? "SELECT " COLUMNS " FROM checkpoints WHERE session_id = ?1 "
					    "ORDER BY created_us, rowid"
					  : "SELECT " COLUMNS " FROM checkpoints ORDER BY created_us, rowid",
			       -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	if (session_id)
		sqlite3_bind_text(st, 1, session_id, -1, SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_ckpt c;
		int r = row(st, &c);

		if (r == 0) {
			r = fn(&c, payload);
			store_ckpt_free(&c);
		}
		if (r) {
			sqlite3_finalize(st);
			return r;
		}
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : db_error(db, "listing checkpoints");
}

int store_ckpt_delete(hangar_ctx *ctx, const char *id)
{
	sqlite3 *db = store_db(ctx);
	sqlite3_stmt *st = NULL;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if (sqlite3_prepare_v2(db, "DELETE FROM checkpoints WHERE id = ?1 RETURNING id", -1, &st, NULL) != SQLITE_OK)
		return db_error(db, "prepare");
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	/* RETURNING: whether a row went, without asking the shared connection afterwards. */
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_error(db, "deleting a checkpoint");
	else if (rc == SQLITE_DONE)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s", id);
	else
		rc = db_error(db, "deleting a checkpoint");
	sqlite3_finalize(st);
	return rc;
}
