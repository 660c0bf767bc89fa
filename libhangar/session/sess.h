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

/* ---- leases (lease.c) ---------------------------------------------------------- */

#define LEASE_TTL_US (30LL * 1000000)   /* a lease runs out this long after its holder stopped */
#define LEASE_RENEW_MS 10000             /* how often a holder renews it */

struct sess_lease {
	hangar_ctx *ctx;
	const char *id;
	char holder[96];                /* hproc_identity() */
	int held;
	struct renewer *renewer;        /* the thread renewing it while held */
};

/*
 * Takes id's lease: at once when it is free, has run out, or its holder is
 * found dead; else waits up to HANGAR_SESSION_BUSY_WAIT_SECONDS for it, then
 * fails with HANGAR_EBUSY (retry_after_s: how long it still runs). wait 0:
 * no waiting, 0 returned with l->held 0 when another holds it. While held,
 * a thread renews it.
 */
int sess_lease_take(struct sess_lease *l, hangar_ctx *ctx, const char *id, int wait);
/* Stops renewing and gives the lease up (nothing when not held), keeping the thread's error. */
void sess_lease_give(struct sess_lease *l);
/*
 * sess_save() of the row's last change under l, giving l up in the same
 * write, so that a caller who sees the new state finds the session free
 * (a suspend seen done, then a resume, must not meet the suspend's lease).
 * On failure l is still held; sess_lease_give() stays the caller's either way.
 */
int sess_save_give(struct sess_lease *l, struct store_session *row);

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
/* Restores checkpoint_id into sb at row's workspace; cancel (or NULL) is polled throughout. */
int sess_restore(hangar_ctx *ctx, const struct store_session *row, const char *checkpoint_id, hangar_sandbox *sb,
		 hangar_cancel_fn cancel, void *cancel_payload);
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
