/* Sessions in the state store: one row per session, with its lease (store.h). */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "store.h"

#define TEXT_COLUMNS                                                                                 \
	"id, environment, workspace, user_name, labels_json, parent_id, fork_group, provider, sandbox_id, " \
	"checkpoint_id, parked_checkpoint_id, last_reason, suspend_reason"
#define COLUMNS TEXT_COLUMNS ", state, last_resume, flags, created_us, updated_us, parked_us, spec"
#define NTEXT 13

/* The text columns of s, in TEXT_COLUMNS order. */
#define TEXT_FIELDS(s)                                                                                      \
	{ &(s)->id, &(s)->environment, &(s)->workspace, &(s)->user, &(s)->labels_json, &(s)->parent_id,     \
	  &(s)->fork_group, &(s)->provider, &(s)->sandbox_id, &(s)->checkpoint_id, &(s)->parked_checkpoint_id, \
	  &(s)->last_reason, &(s)->suspend_reason }

/* Binds s's columns as $1..$20 in COLUMNS order. */
static void bind_row(struct db_stmt *st, const struct store_session *s)
{
	char *const *text[NTEXT] = TEXT_FIELDS(s);

	for (int i = 0; i < NTEXT; i++)
		db_bind_text(st, i + 1, *text[i] ? *text[i] : "");
	db_bind_int64(st, NTEXT + 1, s->state);
	db_bind_int64(st, NTEXT + 2, s->last_resume);
	db_bind_int64(st, NTEXT + 3, s->flags);
	db_bind_int64(st, NTEXT + 4, s->created_us);
	db_bind_int64(st, NTEXT + 5, s->updated_us);
	db_bind_int64(st, NTEXT + 6, s->parked_us);
	db_bind_blob(st, NTEXT + 7, s->spec ? (const void *)s->spec : "", s->spec_len);
}

int store_session_put(hangar_ctx *ctx, const struct store_session *s)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"INSERT INTO sessions (" COLUMNS ", lease_holder, lease_expires_us) VALUES "
			"($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, '', 0)");
	if (rc)
		return rc;
	bind_row(st, s);
	rc = db_step(st);
	db_finalize(st);
	if (rc == HANGAR_EEXISTS)
		return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "session %s exists", s->id);
	return rc < 0 ? rc : 0;
}

/* Every column of a row but id, created_us and the lease. */
#define UPDATE_ROW                                                                                            \
	"UPDATE sessions SET environment = $2, workspace = $3, user_name = $4, labels_json = $5,"               \
	" parent_id = $6, fork_group = $7, provider = $8, sandbox_id = $9, checkpoint_id = $10,"                \
	" parked_checkpoint_id = $11, last_reason = $12, suspend_reason = $13, state = $14,"                   \
	" last_resume = $15, flags = $16, updated_us = $18, parked_us = $19, spec = $20"

/* store_session_update, and with holder its lease given up in the same statement. */
static int update_row(hangar_ctx *ctx, const struct store_session *s, const char *holder)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	/* SET's expressions all read the row as it was, so the lease's two
	 * columns test the same holder. */
	rc = db_prepare(db, &st,
			holder ? UPDATE_ROW ", lease_holder = CASE WHEN lease_holder = $21 THEN '' ELSE lease_holder END,"
					    " lease_expires_us = CASE WHEN lease_holder = $21 THEN 0 ELSE lease_expires_us END"
					    " WHERE id = $1 AND created_us = $17"
			       : UPDATE_ROW " WHERE id = $1 AND created_us = $17");
	if (rc)
		return rc;
	bind_row(st, s);
	if (holder)
		db_bind_text(st, NTEXT + 8, holder);
	rc = db_step(st);
	if (rc == DB_DONE && db_changes(st) == 0)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no session %s", s->id);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_session_update(hangar_ctx *ctx, const struct store_session *s)
{
	return update_row(ctx, s, NULL);
}

int store_session_update_unlease(hangar_ctx *ctx, const struct store_session *s, const char *holder)
{
	return update_row(ctx, s, holder);
}

void store_session_free(struct store_session *s)
{
	char **text[NTEXT] = TEXT_FIELDS(s);

	for (int i = 0; i < NTEXT; i++)
		free(*text[i]);
	free(s->spec);
	memset(s, 0, sizeof(*s));
}

/* Fills s from the current row: strings copied. */
static int row(struct db_stmt *st, struct store_session *s)
{
	char **text[NTEXT] = TEXT_FIELDS(s);

	memset(s, 0, sizeof(*s));
	for (int i = 0; i < NTEXT; i++) {
		const char *v = db_column_text(st, i);

		if (!(*text[i] = strdup(v ? v : ""))) {
			store_session_free(s);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	}
	s->state = (int)db_column_int64(st, NTEXT);
	s->last_resume = (int)db_column_int64(st, NTEXT + 1);
	s->flags = (uint32_t)db_column_int64(st, NTEXT + 2);
	s->created_us = db_column_int64(st, NTEXT + 3);
	s->updated_us = db_column_int64(st, NTEXT + 4);
	s->parked_us = db_column_int64(st, NTEXT + 5);
	{
		size_t len = 0;
		const void *spec = db_column_blob(st, NTEXT + 6, &len);

		s->spec_len = len;
		if (!(s->spec = malloc(s->spec_len + 1))) {
			store_session_free(s);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		if (s->spec_len)
			memcpy(s->spec, spec, s->spec_len);
	}
	return 0;
}

int store_session_get(hangar_ctx *ctx, const char *id, struct store_session *out)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT " COLUMNS " FROM sessions WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_ROW)
		rc = row(st, out);
	else if (rc == DB_DONE)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no session %s", id);
	db_finalize(st);
	return rc;
}

int store_session_list(hangar_ctx *ctx, int state, int (*fn)(const struct store_session *s, void *payload),
		       void *payload)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			state > 0 ? "SELECT " COLUMNS " FROM sessions WHERE state = $1 ORDER BY parked_us, created_us, id"
				  : "SELECT " COLUMNS " FROM sessions ORDER BY created_us, id");
	if (rc)
		return rc;
	if (state > 0)
		db_bind_int64(st, 1, state);
	while ((rc = db_step(st)) == DB_ROW) {
		struct store_session s;
		int r = row(st, &s);

		if (r == 0) {
			r = fn(&s, payload);
			store_session_free(&s);
		}
		if (r) {
			db_finalize(st);
			return r;
		}
	}
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_session_fork_group(hangar_ctx *ctx, const char *group, char ***ids)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	size_t n = 0, cap = 8;
	char **v;
	int rc;

	*ids = NULL;
	if (!db)
		return hangar_error_last()->code;
	if (!(v = calloc(cap + 1, sizeof(*v))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((rc = db_prepare(db, &st, "SELECT id FROM sessions WHERE fork_group = $1 ORDER BY created_us, id")) != 0) {
		free(v);
		return rc;
	}
	db_bind_text(st, 1, group);
	while ((rc = db_step(st)) == DB_ROW) {
		const char *id = db_column_text(st, 0);

		if (n == cap) {
			char **nv = realloc(v, (cap * 2 + 1) * sizeof(*v));

			if (!nv) {
				rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
				break;
			}
			v = nv;
			cap *= 2;
		}
		if (!(v[n] = strdup(id ? id : ""))) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			break;
		}
		v[++n] = NULL;
	}
	db_finalize(st);
	if (rc < 0) {
		store_ids_free(v);
		return rc;
	}
	*ids = v;
	return 0;
}

int store_session_delete(hangar_ctx *ctx, const char *id)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "DELETE FROM sessions WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_DONE && db_changes(st) == 0)
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no session %s", id);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

/* One integer a query answers (its first column of its first row); bind < 0: no parameter. */
static int count(hangar_ctx *ctx, const char *sql, int bind, uint64_t *n)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	*n = 0;
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, sql)) != 0)
		return rc;
	if (bind >= 0)
		db_bind_int64(st, 1, bind);
	rc = db_step(st);
	if (rc == DB_ROW)
		*n = (uint64_t)db_column_int64(st, 0);
	db_finalize(st);
	if (rc == DB_DONE)
		rc = herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "state store: a count answered no row");
	return rc < 0 ? rc : 0;
}

int store_session_count(hangar_ctx *ctx, int state, uint64_t *n)
{
	return count(ctx, "SELECT COUNT(*) FROM sessions WHERE state = $1", state, n);
}

int store_sandbox_count(hangar_ctx *ctx, uint64_t *n)
{
	return count(ctx, "SELECT COUNT(*) FROM sandboxes", -1, n);
}

/* Who holds id's lease and until when: 0, or HANGAR_ENOTFOUND when there is no such session. */
static int lease_holder(hangar_ctx *ctx, struct db *db, const char *id, char **holder, int64_t *expires_us)
{
	struct db_stmt *st;
	int rc;

	if ((rc = db_prepare(db, &st, "SELECT lease_holder, lease_expires_us FROM sessions WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_ROW) {
		const char *h = db_column_text(st, 0);

		if (expires_us)
			*expires_us = db_column_int64(st, 1);
		rc = 0;
		if (holder && !(*holder = strdup(h ? h : "")))
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	} else if (rc == DB_DONE) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no session %s", id);
	}
	db_finalize(st);
	return rc;
}

int store_session_lease(hangar_ctx *ctx, const char *id, const char *holder, int64_t ttl_us, const char *dead,
			char **other, int64_t *expires_us)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int64_t now = clock_wall_us();
	int rc;

	if (other)
		*other = NULL;
	if (expires_us)
		*expires_us = 0;
	if (!db)
		return hangar_error_last()->code;
	/* One conditional UPDATE: whichever caller writes first takes it. */
	rc = db_prepare(db, &st,
			"UPDATE sessions SET lease_holder = $2, lease_expires_us = $3 WHERE id = $1 AND"
			" (lease_holder = '' OR lease_holder = $2 OR lease_expires_us < $4 OR lease_holder = $5)");
	if (rc)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, holder);
	db_bind_int64(st, 3, now + ttl_us);
	db_bind_int64(st, 4, now);
	db_bind_text(st, 5, dead && *dead ? dead : holder);
	rc = db_step(st);
	if (rc == DB_DONE)
		rc = db_changes(st) > 0 ? 1 : 0;
	db_finalize(st);
	/* Held by another (who, until when), or no such session? */
	if (rc == 0 && (rc = lease_holder(ctx, db, id, other, expires_us)) == 0)
		rc = 0;
	return rc;
}

int store_session_lease_renew(hangar_ctx *ctx, const char *id, const char *holder, int64_t ttl_us)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st, "UPDATE sessions SET lease_expires_us = $3 WHERE id = $1 AND lease_holder = $2");
	if (rc)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, holder);
	db_bind_int64(st, 3, clock_wall_us() + ttl_us);
	rc = db_step(st);
	if (rc == DB_DONE)
		rc = db_changes(st) > 0 ? 1 : 0;
	db_finalize(st);
	return rc;
}

int store_session_unlease(hangar_ctx *ctx, const char *id, const char *holder)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"UPDATE sessions SET lease_holder = '', lease_expires_us = 0 WHERE id = $1 AND lease_holder = $2");
	if (rc)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, holder);
	rc = db_step(st);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_session_ckpt_in_use(hangar_ctx *ctx, const char *checkpoint_id, const char *except)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"SELECT 1 FROM sessions WHERE id <> $2 AND (checkpoint_id = $1 OR parked_checkpoint_id = $1)"
			" LIMIT 1");
	if (rc)
		return rc;
	db_bind_text(st, 1, checkpoint_id);
	db_bind_text(st, 2, except);
	rc = db_step(st);
	db_finalize(st);
	return rc;   /* DB_ROW (1): in use; DB_DONE (0): not */
}

/* ---- sandboxes to destroy later ------------------------------------------------- */

int store_doomed_add(hangar_ctx *ctx, const char *id, const char *provider, const char *reason)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"INSERT INTO doomed (id, provider, reason, since_us) VALUES ($1, $2, $3, $4) "
			"ON CONFLICT (id) DO UPDATE SET reason = excluded.reason");
	if (rc)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, provider ? provider : "");
	db_bind_text(st, 3, reason ? reason : "");
	db_bind_int64(st, 4, clock_wall_us());
	rc = db_step(st);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_doomed_remove(hangar_ctx *ctx, const char *id)
{
	struct db *db = store_db(ctx);

	return db ? db_exec_text(db, "DELETE FROM doomed WHERE id = $1", &id, 1) : hangar_error_last()->code;
}

int store_doomed_list(hangar_ctx *ctx, size_t max, char ***ids, char ***providers)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	size_t n = 0;
	int rc;

	*ids = calloc(max + 1, sizeof(char *));
	*providers = calloc(max + 1, sizeof(char *));
	if (!*ids || !*providers) {
		store_ids_free(*ids);
		store_ids_free(*providers);
		*ids = *providers = NULL;
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT id, provider FROM doomed ORDER BY since_us")) != 0)
		return rc;
	while ((rc = db_step(st)) == DB_ROW) {
		const char *id = db_column_text(st, 0), *p = db_column_text(st, 1);

		if (n == max)
			continue;
		(*ids)[n] = strdup(id ? id : "");
		(*providers)[n] = strdup(p ? p : "");
		if (!(*ids)[n] || !(*providers)[n]) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			break;
		}
		n++;
	}
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

/* ---- templates built from images -------------------------------------------------- */

/* Runs sql (two parameters) and takes the first row's two columns (the second may be NULL). */
static int image_template_query(hangar_ctx *ctx, const char *sql, const char *a, const char *b, char **one,
				char **two, const char *what)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	*one = NULL;
	if (two)
		*two = NULL;
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, sql)) != 0)
		return rc;
	db_bind_text(st, 1, a);
	db_bind_text(st, 2, b);
	rc = db_step(st);
	if (rc == DB_ROW) {
		const char *c0 = db_column_text(st, 0), *c1 = two ? db_column_text(st, 1) : NULL;

		*one = strdup(c0 ? c0 : "");
		if (two)
			*two = strdup(c1 ? c1 : "");
		rc = !*one || (two && !*two) ? herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory") : 0;
	} else if (rc == DB_DONE) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no template of provider %s for %s", a, what);
	}
	db_finalize(st);
	if (rc) {
		free(*one);
		*one = NULL;
		if (two) {
			free(*two);
			*two = NULL;
		}
	}
	return rc;
}

int store_image_template_get(hangar_ctx *ctx, const char *provider, const char *reference, char **template_id,
			     char **digest)
{
	return image_template_query(ctx,
				    "SELECT template_id, digest FROM image_templates WHERE provider = $1 AND reference = $2",
				    provider, reference, template_id, digest, reference);
}

int store_image_template_by_digest(hangar_ctx *ctx, const char *provider, const char *digest, char **template_id)
{
	return image_template_query(ctx,
				    "SELECT template_id FROM image_templates WHERE provider = $1 AND digest = $2 "
				    "ORDER BY created_us DESC",
				    provider, digest, template_id, NULL, digest);
}

int store_image_template_put(hangar_ctx *ctx, const char *provider, const char *reference, const char *digest,
			     const char *template_id)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"INSERT INTO image_templates (provider, reference, digest, template_id, created_us) "
			"VALUES ($1, $2, $3, $4, $5) ON CONFLICT (provider, reference) DO UPDATE SET "
			"digest = excluded.digest, template_id = excluded.template_id, created_us = excluded.created_us");
	if (rc)
		return rc;
	db_bind_text(st, 1, provider);
	db_bind_text(st, 2, reference);
	db_bind_text(st, 3, digest ? digest : "");
	db_bind_text(st, 4, template_id);
	db_bind_int64(st, 5, clock_wall_us());
	rc = db_step(st);
	db_finalize(st);
	return rc < 0 ? rc : 0;
}
