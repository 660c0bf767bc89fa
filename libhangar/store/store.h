/*
 * The durable store: which provider holds each sandbox, secrets that must
 * outlive the process (sealed with a key derived from HANGAR_SECRET_KEY),
 * the checkpoint index and leases. One SQLite database per state
 * directory, $HANGAR_STATE_DIR/hangar.db, or the PostgreSQL database
 * HANGAR_STORE names, which several processes and machines may share.
 * Every SQL call goes through the query layer (db.h); every function
 * reports through herr().
 */
#pragma once

#include "core/internal.h"

struct hmodule;

/* The store's per-context state: its connection, what it remembers (core/module.h). */
extern const struct hmodule store_module;

/* Records (or updates) the provider holding sandbox id. */
int store_record(hangar_ctx *ctx, const char *id, const char *provider);
/* The provider recorded for id (*provider malloc'd), or HANGAR_ENOTFOUND. */
int store_lookup(hangar_ctx *ctx, const char *id, char **provider);
/*
 * store_lookup(), answered from memory for what this context has recorded
 * or looked up before (*remembered then set to 1). Such an answer may be
 * stale: another process may have forgotten the sandbox or, in theory,
 * recorded its id under another provider. A caller that finds the sandbox
 * gone on a remembered provider asks store_lookup().
 */
int store_holder(hangar_ctx *ctx, const char *id, char **provider, int *remembered);
/* Forgets a sandbox and its secrets. A sandbox never recorded is not an error. */
int store_forget(hangar_ctx *ctx, const char *id);
/*
 * The ids recorded for provider, as a NULL-terminated malloc'd array of
 * malloc'd strings (free with store_ids_free), at most max of them, oldest
 * first. An empty store gives an empty array.
 */
int store_ids(hangar_ctx *ctx, const char *provider, size_t max, char ***ids);
void store_ids_free(char **ids);

/* Seals value and keeps it under (id, name). HANGAR_ECONFIG without a secret key. */
int store_secret_put(hangar_ctx *ctx, const char *id, const char *name, const char *value);
/* Unseals the value under (id, name) into *value (malloc'd), or HANGAR_ENOTFOUND. A
 * value that does not unseal (another key, tampering) is HANGAR_EREFUSED. */
int store_secret_get(hangar_ctx *ctx, const char *id, const char *name, char **value);

struct db;
/* The context's database (opened and migrated on first use), or NULL (herr set). */
struct db *store_db(hangar_ctx *ctx);
/* The schema version this library writes. */
int store_schema_version(void);

/* ---- leases (store/lease.c) --------------------------------------------------
 * A named role that one holder at a time plays (the reaper among several
 * replicas), kept as a plain row with an expiry: no session or advisory
 * lock, so it works through any connection pooler and survives a holder
 * that died (its lease runs out). Holders compare times from their own
 * clocks: keep ttl_us well above the clocks' skew. */

/* Takes name for holder until now_us + ttl_us if it is free, expired, or
 * holder's already (a renewal). *held is 1 when holder has it now, 0 when
 * another holder does. */
int store_lease_acquire(hangar_ctx *ctx, const char *name, const char *holder, int64_t now_us, int64_t ttl_us,
			int *held);
/* Gives name up if holder has it; *released says whether it did. */
int store_lease_release(hangar_ctx *ctx, const char *name, const char *holder, int *released);
/* Who holds name (*holder malloc'd) and until when, expired or not; HANGAR_ENOTFOUND if nobody ever did. */
int store_lease_get(hangar_ctx *ctx, const char *name, char **holder, int64_t *expires_us);

/* ---- the checkpoint index (store/checkpoints.c) ---------------------------- */

struct store_ckpt {
	char *id, *session_id, *parent_id, *workspace, *selection, *store_url, *content_hash, *labels_json;
	int64_t created_us;
	uint64_t stored_bytes, archive_bytes, files, blob_bytes;
};

/* Adds a checkpoint's row; HANGAR_EEXISTS when the id is taken. */
int store_ckpt_put(hangar_ctx *ctx, const struct store_ckpt *c);
/* The row of id (strings malloc'd: store_ckpt_free), or HANGAR_ENOTFOUND. */
int store_ckpt_get(hangar_ctx *ctx, const char *id, struct store_ckpt *out);
/* Every row (of session_id when not NULL), oldest first; fn's non-zero return stops
 * the listing and is returned. The row is valid during the call only. */
int store_ckpt_list(hangar_ctx *ctx, const char *session_id, int (*fn)(const struct store_ckpt *c, void *payload),
		    void *payload);
/* Removes the row of id; HANGAR_ENOTFOUND when there is none. */
int store_ckpt_delete(hangar_ctx *ctx, const char *id);
void store_ckpt_free(struct store_ckpt *c);

/* ---- sessions (store/sessions.c) -------------------------------------------- */

/* A session's row. State and last_resume take the HANGAR_SESSION_* and
 * HANGAR_RESUME_* values of hangar/session.h. */
struct store_session {
	char *id, *environment, *workspace, *user, *labels_json, *parent_id, *fork_group;
	char *provider, *sandbox_id, *checkpoint_id, *parked_checkpoint_id, *last_reason, *suspend_reason;
	int state, last_resume;
	uint32_t flags;
	int64_t created_us, updated_us, parked_us;
	unsigned char *spec;   /* how its sandboxes are made, sealed (session/) */
	size_t spec_len;
};

/* Adds a session's row; HANGAR_EEXISTS when the id is taken. */
int store_session_put(hangar_ctx *ctx, const struct store_session *s);
/* Writes every column of s's row but id, created_us and the lease; HANGAR_ENOTFOUND
 * when the row is gone. */
int store_session_update(hangar_ctx *ctx, const struct store_session *s);
/* The same, and gives the lease up if holder holds it, in the same write:
 * nobody sees the row's new state while the lease is still held. */
int store_session_update_unlease(hangar_ctx *ctx, const struct store_session *s, const char *holder);
/* The row of id (strings malloc'd: store_session_free), or HANGAR_ENOTFOUND. */
int store_session_get(hangar_ctx *ctx, const char *id, struct store_session *out);
/*
 * Every row, oldest first; with state > 0 only rows in that state, ordered by
 * parked_us then (longest-parked first). fn's non-zero return stops the
 * listing and is returned; the row is valid during the call only.
 */
int store_session_list(hangar_ctx *ctx, int state, int (*fn)(const struct store_session *s, void *payload),
		       void *payload);
/* The ids of the rows of one fork group (malloc'd, NULL-terminated: store_ids_free). */
int store_session_fork_group(hangar_ctx *ctx, const char *group, char ***ids);
/* Removes the row of id; HANGAR_ENOTFOUND when there is none. */
int store_session_delete(hangar_ctx *ctx, const char *id);
void store_session_free(struct store_session *s);
/* How many sessions are in state. */
int store_session_count(hangar_ctx *ctx, int state, uint64_t *n);
/*
 * Takes id's lease for holder for ttl_us when it is free, has run out, is
 * holder's already, or is held by dead (a holder known to be dead; NULL:
 * none). 1 when taken; 0 when another holds it, who (*other, malloc'd) and
 * until when (*expires_us, wall clock) then said where not NULL; a failure
 * (negative), HANGAR_ENOTFOUND when there is no such session.
 */
int store_session_lease(hangar_ctx *ctx, const char *id, const char *holder, int64_t ttl_us, const char *dead,
			char **other, int64_t *expires_us);
/* Extends id's lease by ttl_us from now if holder still holds it: 1 when it did, 0 when not, or a failure. */
int store_session_lease_renew(hangar_ctx *ctx, const char *id, const char *holder, int64_t ttl_us);
/* Gives id's lease up if holder holds it. */
int store_session_unlease(hangar_ctx *ctx, const char *id, const char *holder);

/*
 * Sandboxes given up that could not be destroyed then (their supervisor did
 * not answer): kept until the reaper destroys them. add records (or
 * updates the reason of) one; list gives at most max, oldest first, as
 * NULL-terminated arrays to free with store_ids_free (also on failure);
 * remove forgets one.
 */
int store_doomed_add(hangar_ctx *ctx, const char *id, const char *provider, const char *reason);
int store_doomed_list(hangar_ctx *ctx, size_t max, char ***ids, char ***providers);
int store_doomed_remove(hangar_ctx *ctx, const char *id);

/*
 * Templates built from images for an environment (hangar_environment_publish),
 * one per provider and image reference, with the image's digest ("" when it
 * could not be resolved). get finds one by reference, by_digest one of the
 * same image under any reference (a build not to repeat): each gives
 * malloc'd strings, or HANGAR_ENOTFOUND. put records or replaces one.
 */
int store_image_template_get(hangar_ctx *ctx, const char *provider, const char *reference, char **template_id,
			     char **digest);
int store_image_template_by_digest(hangar_ctx *ctx, const char *provider, const char *digest, char **template_id);
int store_image_template_put(hangar_ctx *ctx, const char *provider, const char *reference, const char *digest,
			     const char *template_id);

/* 1 when a session other than except builds on checkpoint_id (a fork's base), else 0. */
int store_session_ckpt_in_use(hangar_ctx *ctx, const char *checkpoint_id, const char *except);

/* How many sandboxes the store records, on every provider. */
int store_sandbox_count(hangar_ctx *ctx, uint64_t *n);
