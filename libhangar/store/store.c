#define _GNU_SOURCE
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/module.h"
#include "db.h"

/*
 * Which provider holds a sandbox does not change once it is recorded, and
 * attach, which a server does on every request, asks it every time: the
 * answers are remembered, one direct-mapped slot per hash of the id, so a
 * busy id costs no query (with PostgreSQL, no round trip). A slot another
 * id takes is simply asked again.
 */
#define MEMO_SLOTS 256
#define MEMO_ID_MAX 64
#define MEMO_PROVIDER_MAX 31

struct holder_memo {
	pthread_mutex_t mu;
	struct {
		char id[MEMO_ID_MAX + 1];
		char provider[MEMO_PROVIDER_MAX + 1];
	} slot[MEMO_SLOTS];
};

/* The store's per-context state (core/module.h). */
struct store_state {
	pthread_mutex_t mu;               /* db */
	pthread_mutex_t open_mu;          /* held by the one thread opening db */
	struct db *db;                    /* opened on first use */
	struct holder_memo memo;          /* which provider holds which sandbox */
};

/*
 * The schema, one step per version, each migrating from the version before
 * it inside one transaction and keeping every row (db_migrate). Steps are
 * only appended. Version 0 is a database made before the schema had a
 * version (or a new one): its tables are created when missing, as version 1
 * did. The SQL runs on SQLite and PostgreSQL alike (db.h), except where a
 * step says otherwise for PostgreSQL.
 */
static const struct db_migration migrations[] = {
	/* 0 -> 1: sandboxes and their sealed secrets */
	{ "CREATE TABLE IF NOT EXISTS sandboxes ("
	  "  id TEXT PRIMARY KEY, provider TEXT NOT NULL, recorded_us INTEGER NOT NULL);"
	  "CREATE TABLE IF NOT EXISTS secrets ("
	  "  id TEXT NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL, PRIMARY KEY (id, name));",
	  NULL },
	/* 1 -> 2: the checkpoint index. Listings order by (created_us, rowid): SQLite has
	 * rowid; on PostgreSQL a column of that name numbers the rows in the same order. */
	{ "CREATE TABLE checkpoints ("
	  "  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, parent_id TEXT NOT NULL, workspace TEXT NOT NULL,"
	  "  selection TEXT NOT NULL, store_url TEXT NOT NULL, content_hash TEXT NOT NULL, labels_json TEXT NOT NULL,"
	  "  created_us INTEGER NOT NULL, stored_bytes INTEGER NOT NULL, archive_bytes INTEGER NOT NULL,"
	  "  files INTEGER NOT NULL, blob_bytes INTEGER NOT NULL);"
	  "CREATE INDEX checkpoints_by_session ON checkpoints (session_id, created_us);",
	  "CREATE TABLE checkpoints ("
	  "  id TEXT PRIMARY KEY, session_id TEXT NOT NULL, parent_id TEXT NOT NULL, workspace TEXT NOT NULL,"
	  "  selection TEXT NOT NULL, store_url TEXT NOT NULL, content_hash TEXT NOT NULL, labels_json TEXT NOT NULL,"
	  "  created_us BIGINT NOT NULL, stored_bytes BIGINT NOT NULL, archive_bytes BIGINT NOT NULL,"
	  "  files BIGINT NOT NULL, blob_bytes BIGINT NOT NULL, rowid BIGINT GENERATED ALWAYS AS IDENTITY);"
	  "CREATE INDEX checkpoints_by_session ON checkpoints (session_id, created_us);" },
	/* 2 -> 3: leases (store/lease.c) */
	{ "CREATE TABLE leases ("
	  "  name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_us INTEGER NOT NULL);",
	  NULL },
	/* 3 -> 4: sessions, with the sandbox each one holds or has parked, and its lease */
	{ "CREATE TABLE sessions ("
	  "  id TEXT PRIMARY KEY, state INTEGER NOT NULL, flags INTEGER NOT NULL, environment TEXT NOT NULL,"
	  "  workspace TEXT NOT NULL, user_name TEXT NOT NULL, labels_json TEXT NOT NULL, parent_id TEXT NOT NULL,"
	  "  fork_group TEXT NOT NULL, provider TEXT NOT NULL, sandbox_id TEXT NOT NULL, checkpoint_id TEXT NOT NULL,"
	  "  parked_checkpoint_id TEXT NOT NULL, parked_us INTEGER NOT NULL, last_resume INTEGER NOT NULL,"
	  "  last_reason TEXT NOT NULL, suspend_reason TEXT NOT NULL, created_us INTEGER NOT NULL,"
	  "  updated_us INTEGER NOT NULL, spec BLOB NOT NULL, lease_holder TEXT NOT NULL,"
	  "  lease_expires_us INTEGER NOT NULL);"
	  "CREATE INDEX sessions_by_state ON sessions (state, parked_us);"
	  "CREATE INDEX sessions_by_fork ON sessions (fork_group);",
	  NULL },
	/* 4 -> 5: sandboxes to destroy that could not be when they were given up */
	{ "CREATE TABLE doomed ("
	  "  id TEXT PRIMARY KEY, provider TEXT NOT NULL, reason TEXT NOT NULL, since_us INTEGER NOT NULL);",
	  NULL },
	/* 5 -> 6: templates built from an environment's image, per provider */
	{ "CREATE TABLE image_templates ("
	  "  provider TEXT NOT NULL, reference TEXT NOT NULL, digest TEXT NOT NULL, template_id TEXT NOT NULL,"
	  "  created_us INTEGER NOT NULL, PRIMARY KEY (provider, reference));"
	  "CREATE INDEX image_templates_by_digest ON image_templates (provider, digest);",
	  "CREATE TABLE image_templates ("
	  "  provider TEXT NOT NULL, reference TEXT NOT NULL, digest TEXT NOT NULL, template_id TEXT NOT NULL,"
	  "  created_us BIGINT NOT NULL, PRIMARY KEY (provider, reference));"
	  "CREATE INDEX image_templates_by_digest ON image_templates (provider, digest);" },
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

/* The database HANGAR_STORE names, or hangar.db in the state directory. */
static int open_db(hangar_ctx *ctx, struct db **out)
{
	const char *url = hctx_str(ctx, HS_STORE), *dir;
	char path[PATH_MAX];
	int rc;

	if (*url)
		rc = db_open_postgres(out, url);
	else {
		dir = hctx_str(ctx, HS_STATE_DIR);
		if ((rc = hmkdirs(dir, "HANGAR_STATE_DIR")) != 0)
			return rc;
		if (snprintf(path, sizeof(path), "%s/hangar.db", dir) >= (int)sizeof(path))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
		rc = db_open_sqlite(out, path);
	}
	if (rc == 0 && (rc = db_migrate(*out, migrations, SCHEMA_VERSION)) != 0) {
		db_close(*out);
		*out = NULL;
	}
	return rc;
}

/*
 * The context's database, opened on first use (again after a failed open).
 * One thread opens it while the context's other first users wait for that
 * thread: they need the database anyway, and racing each other with a
 * connection apiece only makes them queue for SQLite's file lock, where the
 * busy timeout, not the work, decides who fails. Users after the first read
 * it under the short lock alone. Other processes still race to migrate;
 * migrations tolerate that.
 */
struct db *store_db(hangar_ctx *ctx)
{
	struct store_state *st = hctx_module(ctx, &store_module);
	struct db *db;

	pthread_mutex_lock(&st->mu);
	db = st->db;
	pthread_mutex_unlock(&st->mu);
	if (db)
		return db;
	pthread_mutex_lock(&st->open_mu);
	pthread_mutex_lock(&st->mu);
	db = st->db;
	pthread_mutex_unlock(&st->mu);
	if (!db && open_db(ctx, &db) == 0) {
		pthread_mutex_lock(&st->mu);
		st->db = db;
		pthread_mutex_unlock(&st->mu);
	}
	pthread_mutex_unlock(&st->open_mu);
	return db;
}

int hangar_ctx_ping_store(hangar_ctx *ctx)
{
	struct db *db;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	if (!(db = store_db(ctx)))
		return hangar_error_last()->code;
	if ((rc = db_ping(db)) == 0)
		herr_clear();
	return rc;
}

int store_schema_version(void)
{
	return SCHEMA_VERSION;
}

static size_t memo_slot(const char *id)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const unsigned char *c = (const unsigned char *)id; *c; c++)
		h = (h ^ *c) * 16777619u;
	return h % MEMO_SLOTS;
}

static int store_module_open(hangar_ctx *ctx, void *state)
{
	struct store_state *st = state;

	(void)ctx;
	pthread_mutex_init(&st->mu, NULL);
	pthread_mutex_init(&st->open_mu, NULL);
	pthread_mutex_init(&st->memo.mu, NULL);
	return 0;
}

static void store_module_close(hangar_ctx *ctx, void *state)
{
	struct store_state *st = state;

	(void)ctx;
	db_close(st->db);
	pthread_mutex_destroy(&st->memo.mu);
	pthread_mutex_destroy(&st->open_mu);
	pthread_mutex_destroy(&st->mu);
}

static int store_check_setting(const char *name, const char *value)
{
	return strcmp(name, "HANGAR_STORE") == 0 ? db_check_store_url(name, value) : 0;
}

const struct hmodule store_module = { "store", sizeof(struct store_state), store_module_open, store_module_close,
				      store_check_setting };

/* Remembers provider for id, or (provider NULL) forgets what was remembered. */
static void memo_set(hangar_ctx *ctx, const char *id, const char *provider)
{
	struct holder_memo *m = &((struct store_state *)hctx_module(ctx, &store_module))->memo;
	size_t i = memo_slot(id);

	pthread_mutex_lock(&m->mu);
	if (provider && strlen(id) <= MEMO_ID_MAX && strlen(provider) <= MEMO_PROVIDER_MAX) {
		strcpy(m->slot[i].id, id);
		strcpy(m->slot[i].provider, provider);
	} else if (strcmp(m->slot[i].id, id) == 0) {
		m->slot[i].id[0] = '\0';
	}
	pthread_mutex_unlock(&m->mu);
}

/* The provider remembered for id (malloc'd), or NULL. */
static char *memo_find(hangar_ctx *ctx, const char *id)
{
	struct holder_memo *m = &((struct store_state *)hctx_module(ctx, &store_module))->memo;
	size_t i = memo_slot(id);
	char *found = NULL;

	pthread_mutex_lock(&m->mu);
	if (m->slot[i].id[0] && strcmp(m->slot[i].id, id) == 0)
		found = strdup(m->slot[i].provider);
	pthread_mutex_unlock(&m->mu);
	return found;
}

int store_record(hangar_ctx *ctx, const char *id, const char *provider)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	int rc;

	if (!db)
		return hangar_error_last()->code;
	rc = db_prepare(db, &st,
			"INSERT INTO sandboxes (id, provider, recorded_us) VALUES ($1, $2, $3) "
			"ON CONFLICT (id) DO UPDATE SET provider = excluded.provider, recorded_us = excluded.recorded_us");
	if (rc)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, provider);
	db_bind_int64(st, 3, clock_wall_us());
	rc = db_step(st);
	db_finalize(st);
	if (rc < 0)
		return rc;
	memo_set(ctx, id, provider);
	return 0;
}

int store_holder(hangar_ctx *ctx, const char *id, char **provider, int *remembered)
{
	*remembered = 0;
	if ((*provider = memo_find(ctx, id)) != NULL) {
		*remembered = 1;
		return 0;
	}
	return store_lookup(ctx, id, provider);
}

int store_lookup(hangar_ctx *ctx, const char *id, char **provider)
{
	struct db *db;
	struct db_stmt *st;
	int rc;

	*provider = NULL;
	memo_set(ctx, id, NULL);
	db = store_db(ctx);
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT provider FROM sandboxes WHERE id = $1")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	rc = db_step(st);
	if (rc == DB_ROW) {
		const char *v = db_column_text(st, 0);

		*provider = strdup(v ? v : "");
		rc = *provider ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	} else if (rc == DB_DONE) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no record of sandbox %s", id);
	}
	db_finalize(st);
	if (rc == 0)
		memo_set(ctx, id, *provider);
	return rc;
}

int store_forget(hangar_ctx *ctx, const char *id)
{
	struct db *db = store_db(ctx);
	const char *p[] = { id };
	int rc;

	memo_set(ctx, id, NULL);
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_exec_text(db, "DELETE FROM secrets WHERE id = $1", p, 1)) != 0)
		return rc;
	return db_exec_text(db, "DELETE FROM sandboxes WHERE id = $1", p, 1);
}

int store_ids(hangar_ctx *ctx, const char *provider, size_t max, char ***ids)
{
	struct db *db = store_db(ctx);
	struct db_stmt *st;
	char **v;
	size_t n = 0;
	int rc;

	*ids = NULL;
	if (!db)
		return hangar_error_last()->code;
	v = calloc(max + 1, sizeof(*v));
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((rc = db_prepare(db, &st, "SELECT id FROM sandboxes WHERE provider = $1 ORDER BY recorded_us, id LIMIT $2")) !=
	    0) {
		free(v);
		return rc;
	}
	db_bind_text(st, 1, provider);
	db_bind_int64(st, 2, max > INT64_MAX ? INT64_MAX : (int64_t)max);
	while ((rc = db_step(st)) == DB_ROW && n < max) {
		const char *id = db_column_text(st, 0);

		if (id && !(v[n++] = strdup(id))) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			break;
		}
	}
	db_finalize(st);
	if (rc < 0) {
		store_ids_free(v);
		return rc;
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
	struct db *db;
	struct db_stmt *st;
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
	rc = db_prepare(db, &st,
			"INSERT INTO secrets (id, name, sealed) VALUES ($1, $2, $3) "
			"ON CONFLICT (id, name) DO UPDATE SET sealed = excluded.sealed");
	if (rc == 0) {
		db_bind_text(st, 1, id);
		db_bind_text(st, 2, name);
		db_bind_blob(st, 3, blob, blen);
		rc = db_step(st);
		db_finalize(st);
	}
	free(blob);
	return rc < 0 ? rc : 0;
}

int store_secret_get(hangar_ctx *ctx, const char *id, const char *name, char **value)
{
	unsigned char key[crypto_secretbox_KEYBYTES], mixed[crypto_secretbox_NONCEBYTES];
	struct db_stmt *st;
	struct db *db;
	int rc;

	*value = NULL;
	db = store_db(ctx);
	if (!db)
		return hangar_error_last()->code;
	if ((rc = db_prepare(db, &st, "SELECT sealed FROM secrets WHERE id = $1 AND name = $2")) != 0)
		return rc;
	db_bind_text(st, 1, id);
	db_bind_text(st, 2, name);
	rc = db_step(st);
	if (rc != DB_ROW) {
		db_finalize(st);
		return rc < 0 ? rc : herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no %s kept for sandbox %s", name, id);
	}
	rc = seal_key(ctx, key, id, name);
	if (rc == 0) {
		size_t blen;
		const unsigned char *blob = db_column_blob(st, 0, &blen);
		size_t plen;

		if (!blob || blen < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "the %s kept for sandbox %s is damaged", name, id);
		} else {
			plen = blen - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES;
			*value = malloc(plen + 1);
			bind_ad((unsigned char *)blob, id, name, mixed);
			if (!*value) {
				rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			} else if (crypto_secretbox_open_easy((unsigned char *)*value, blob + crypto_secretbox_NONCEBYTES,
							      blen - crypto_secretbox_NONCEBYTES, mixed, key) != 0) {
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
	db_finalize(st);
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
