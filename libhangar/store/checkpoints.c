/* The checkpoint index: one row per checkpoint in the state store (store.h). */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "store.h"

#define COLUMNS                                                                                        \
	"id, session_id, parent_id, workspace, selection, store_url, content_hash, labels_json, created_us, " \
	"stored_bytes, archive_bytes, files, blob_bytes"

int store_ckpt_put(hangar_ctx *ctx, const struct store_ckpt *c)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	const char *text[] = { c->id, c->session_id, c->parent_id, c->workspace,
			       c->selection, c->store_url, c->content_hash, c->labels_json };
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"INSERT INTO checkpoints (" COLUMNS ") VALUES "
			"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)");
	if (rc)
		return rc;
	for (int i = 0; i < 8; i++)
		db_bind_text(st, i + 1, text[i] ? text[i] : "");
	db_bind_int64(st, 9, c->created_us);
	db_bind_int64(st, 10, (int64_t)c->stored_bytes);
	db_bind_int64(st, 11, (int64_t)c->archive_bytes);
	db_bind_int64(st, 12, (int64_t)c->files);
	db_bind_int64(st, 13, (int64_t)c->blob_bytes);
	rc = db_step(st);
	db_finalize(st);
	if (rc == HANGAR_EEXISTS)
		return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "checkpoint %s is already indexed", c->id);
	return rc < 0 ? rc : 0;
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
static int row(struct db_stmt *st, struct store_ckpt *c)
{
	char **s[] = { &c->id, &c->session_id, &c->parent_id, &c->workspace,
		       &c->selection, &c->store_url, &c->content_hash, &c->labels_json };

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < 8; i++) {
		const char *v = db_column_text(st, i);

		if (!(*s[i] = strdup(v ? v : ""))) {
			store_ckpt_free(c);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	}
	c->created_us = db_column_int64(st, 8);
	c->stored_bytes = (uint64_t)db_column_int64(st, 9);
	c->archive_bytes = (uint64_t)db_column_int64(st, 10);
	c->files = (uint64_t)db_column_int64(st, 11);
	c->blob_bytes = (uint64_t)db_column_int64(st, 12);
	return 0;
}

int store_ckpt_get(hangar_ctx *ctx, const char *id, struct store_ckpt *out)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT " COLUMNS " FROM checkpoints WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_ROW)
		rc = row(st, out);
	else if (rc == DB_DONE)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s", id);
	db_finalize(st);
	return rc;
}

int store_ckpt_list(hangar_ctx *ctx, const char *session_id, int (*fn)(const struct store_ckpt *c, void *payload),
		    void *payload)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	/* rowid: the order rows came in, for rows of one microsecond (store.c's schema). */
	rc = db_prepare(db, &st,
			session_id ? "SELECT " COLUMNS " FROM checkpoints WHERE session_id = $1 ORDER BY created_us, rowid"
				   : "SELECT " COLUMNS " FROM checkpoints ORDER BY created_us, rowid");
	if (rc)
		return rc;
	if (session_id)
		db_bind_text(st, 1, session_id);
	while ((rc = db_step(st)) == DB_ROW) {
		struct store_ckpt c;
		int r = row(st, &c);

		if (r == 0) {
			r = fn(&c, payload);
			store_ckpt_free(&c);
		}
		if (r) {
			db_finalize(st);
			return r;
		}
	}
	db_finalize(st);
	return rc;
}

int store_ckpt_delete(hangar_ctx *ctx, const char *id)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "DELETE FROM checkpoints WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_DONE && db_changes(st) == 0)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s", id);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}
