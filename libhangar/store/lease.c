/* Leases: one holder at a time per name, as rows with an expiry (store.h). */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "store.h"

int store_lease_acquire(hangar_ctx *ctx, const char *name, const char *holder, int64_t now_us, int64_t ttl_us,
			int *held)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	*held = 0;
	if (!db)
		return hangar_error_last()->code;
	if (ttl_us <= 0 || now_us > INT64_MAX - ttl_us)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: a lease's time to live");
	/*
	 * One statement decides: a new row, or the existing one taken over only
	 * when it is ours or has run out. Both engines evaluate the condition on
	 * the row as the winner of a race left it, so of two racers one gets a
	 * row back and the other none.
	 */
	rc = db_prepare(db, &st,
			"INSERT INTO leases (name, holder, expires_us) VALUES ($1, $2, $3) "
			"ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_us = excluded.expires_us "
			"WHERE leases.holder = excluded.holder OR leases.expires_us <= $4 "
			"RETURNING holder");
	if (rc)
		return rc;
	db_bind_text(st, 1, name);
	db_bind_text(st, 2, holder);
	db_bind_int64(st, 3, now_us + ttl_us);
	db_bind_int64(st, 4, now_us);
	rc = db_step(st);
	if (rc == DB_ROW) {
		const char *h = db_column_text(st, 0);

		*held = h && !strcmp(h, holder);
		while ((rc = db_step(st)) == DB_ROW)
			;
	}
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_lease_release(hangar_ctx *ctx, const char *name, const char *holder, int *released)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	*released = 0;
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "DELETE FROM leases WHERE name = $1 AND holder = $2")) != 0)
		return rc;
	db_bind_text(st, 1, name);
	db_bind_text(st, 2, holder);
	rc = db_step(st);
	if (rc == DB_DONE)
		*released = db_changes(st) > 0;
	db_finalize(st);
	return rc < 0 ? rc : 0;
}

int store_lease_get(hangar_ctx *ctx, const char *name, char **holder, int64_t *expires_us)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	*holder = NULL;
	*expires_us = 0;
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT holder, expires_us FROM leases WHERE name = $1")) != 0)
		return rc;
	db_bind_text(st, 1, name);
	rc = db_step(st);
	if (rc == DB_ROW) {
		const char *h = db_column_text(st, 0);

		*expires_us = db_column_int64(st, 1);
		*holder = strdup(h ? h : "");
		rc = *holder ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	} else if (rc == DB_DONE) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no lease %s", name);
	}
	db_finalize(st);
	return rc;
}
