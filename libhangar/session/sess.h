/*
 * Sessions (include/hangar/session.h): what session.c (handles, records,
 * leases), park.c (suspend, resume, the reaper) and fork.c share.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "core/internal.h"
#include "store/store.h"

struct hangar_session {
	atomic_int refs;
	hangar_ctx *ctx;                /* a reference */
	char *id;
	pthread_mutex_t mu;             /* row */
	struct store_session row;       /* what get_info read last */
};

/* ---- leases: one caller at a time changes a session ------------------------- */

struct sess_lease {
	hangar_ctx *ctx;
	const char *id;
	char holder[64];
	int64_t renewed_ms;             /* monotonic */
	int held;
};

/*
 * Takes id's lease, waiting (up to twice its lifetime) while another caller
 * holds it. wait 0: one try only, 0 returned with l->held 0 when taken.
 * HANGAR_ETIMEOUT when it stayed taken, HANGAR_ENOTFOUND without the session.
 */
int sess_lease_take(struct sess_lease *l, hangar_ctx *ctx, const char *id, int wait);
/* Extends a held lease when its last renewal is more than a few seconds old. */
void sess_lease_renew(struct sess_lease *l);
void sess_lease_give(struct sess_lease *l);
/* A checkpoint progress callback that renews the lease given as payload (may be NULL). */
int sess_renew_progress(uint64_t done, uint64_t total, void *payload);

/* ---- records ---------------------------------------------------------------- */

/* A generated id: "ses-" and 26 lowercase base32 characters. */
void sess_new_id(char out[32], const char *prefix);
/* Writes row (updated_us set now), logging nothing; 0 or the store's code. */
int sess_save(hangar_ctx *ctx, struct store_session *row);
/* Replaces the string *field with value (copied); HANGAR_ENOMEM. */
int sess_set(char **field, const char *value);
/* Forgets the sandbox and parking of row (state untouched). */
void sess_clear_sandbox(struct store_session *row);
/* Copies row into s's cached row, under its lock. */
void sess_cache(struct hangar_session *s, const struct store_session *row);
/* A new handle on the session whose row is given (taken over). */
int sess_handle_new(struct hangar_session **out, hangar_ctx *ctx, struct store_session *row);

/* The create options kept with a session, sealed to it. */
int sess_spec_seal(hangar_ctx *ctx, const char *id, const char *json, unsigned char **out, size_t *out_len);
int sess_spec_open(hangar_ctx *ctx, const char *id, const unsigned char *sealed, size_t len, char **json);
/*
 * Creates a sandbox the way row's spec says; template_id and provider, when
 * not NULL, replace the spec's (a fork from a snapshot).
 */
int sess_create_sandbox(hangar_ctx *ctx, const struct store_session *row, const char *provider,
			const char *template_id, hangar_sandbox **out);
/* The sandbox row holds (attach), or HANGAR_EGONE / the provider's code. */
int sess_attach(hangar_ctx *ctx, const struct store_session *row, hangar_sandbox **out);
/* Destroys row's sandbox, logging (not returning) a failure other than "gone". */
void sess_destroy_sandbox(hangar_ctx *ctx, const struct store_session *row, hangar_sandbox *sb, const char *why);
/* The session's newest checkpoint in the index, else row->checkpoint_id; "" when none (malloc'd). */
int sess_latest_checkpoint(hangar_ctx *ctx, const struct store_session *row, char **id);
/* Restores checkpoint_id into sb at row's workspace, renewing l meanwhile. */
int sess_restore(hangar_ctx *ctx, const struct store_session *row, const char *checkpoint_id, hangar_sandbox *sb,
		 struct sess_lease *l);
/* Calls the context's hook; 0 when there is none. */
int sess_hook(struct hangar_session *s, hangar_sandbox *sb, int hook);
/* Sends audit event name for row, with reason when not NULL. */
void sess_event(hangar_ctx *ctx, const char *name, const struct store_session *row, const char *reason);

/* ---- parking (park.c) --------------------------------------------------------- */

/*
 * Destroys the longest-parked sandbox of a session other than except (may be
 * NULL) that nobody else holds; its session becomes suspended. 1 when one
 * went, 0 when there was none to take, or a failure.
 */
int sess_evict_parked(hangar_ctx *ctx, const char *except, const char *why);

/* The session layer's per-context state: the caller's hook (core/module.h). */
struct hmodule;
extern const struct hmodule session_module;
