/*
 * The E2B-compatible API's own state (e2b-records.c), shared by its
 * handlers (e2b.c).
 */
#ifndef HANGARD_E2B_H
#define HANGARD_E2B_H

#include <stdint.h>

#include "hangard.h"

/* What hangar-envd implements of envd's protocol, as E2B's answers say it:
 * the SDKs turn features on by it (the e2b-api suite checks it against
 * `hangar-envd -version`). */
#define E2B_ENVD_VERSION "0.6.4"

/* Hex characters of an envd or traffic token. */
#define E2B_TOKEN_LEN 64

/* How /pause (or autoPause) left a sandbox. E2B_PAUSED_SESSION: its
 * session suspended (e2b-sessions.c): its state is a checkpoint, and the
 * sandbox is parked (paused with its memory) or destroyed. */
enum e2b_paused { E2B_NOT_PAUSED, E2B_PAUSED_MEMORY, E2B_PAUSED_FILESYSTEM, E2B_PAUSED_SESSION };

/* The longest hangar sandbox id a record keeps. */
#define E2B_SANDBOX_ID_MAX 256

/*
 * One E2B sandbox, keyed by the sandboxID its creator got. That id stays the
 * SDK's for the sandbox's whole life; the hangar sandbox behind it changes
 * when a suspended session is restored into a new one (sandbox_id).
 */
struct e2b_record {
	char *template_id;      /* the templateID asked for */
	cJSON *metadata;        /* an object of strings */
	int64_t generation;     /* of the tokens: one up on every restore */
	enum e2b_paused paused; /* how /pause left it */
	/* autoPause: when its lifetime as E2B sees it ends (pause_at_us), the
	 * sandbox is paused instead of killed, with its memory or not. */
	int auto_pause, auto_pause_memory;
	int64_t pause_at_us;    /* 0: not due (paused, or no autoPause) */
	char *sandbox_id;       /* the hangar sandbox now; NULL: the E2B id's own */
	char *session_id;       /* the session that suspends it, once one does; NULL: none */
	char *provider;         /* the provider's name, for the listing of a suspended one */
	char *env_sealed;       /* envVars of the create, sealed (e2b_env_seal); NULL: none */
	int network;            /* allow_internet_access: -1 unset, 0 off, 1 on */
	int64_t created_us;     /* when the E2B sandbox was made; 0: not known */
};

/* An autoPause sandbox's lifetime in the library runs this much past the
 * pause it is due: the pause's own margin, and the end of a sandbox whose
 * pause nobody made (hangard down), so that none outlives it for long. */
#define E2B_AUTOPAUSE_GRACE_S 60

/* The thread that pauses autoPause sandboxes when they are due
 * (e2b-autopause.c); stop waits for the pass in progress. */
int e2b_autopause_start(void);
void e2b_autopause_stop(void);
/* Calls fn with each sandbox id that has a record, until fn returns
 * non-zero; that value or 0. */
int e2b_records_walk(int (*fn)(const char *id, void *payload), void *payload);

/* us (µs since the epoch) as E2B writes times: RFC 3339, UTC, milliseconds. */
void e2b_iso_time(char out[80], int64_t us);
/* A sandbox id fit for a path: 1 to 64 of [A-Za-z0-9_-]. */
int e2b_id_ok(const char *id);
/* The sandbox's envd and traffic tokens of a generation. */
void e2b_tokens(const char *id, int64_t generation, char envd[E2B_TOKEN_LEN + 1], char traffic[E2B_TOKEN_LEN + 1]);

/* Around a read, change and write of one record. */
void e2b_lock(void);
void e2b_unlock(void);
/* 0 with *out filled, 1 when there is none (out empty), -1 when unreadable. */
int e2b_record_get(const char *id, struct e2b_record *out);
/* Replaces the record whole (written aside, then renamed); 0 or -1. */
int e2b_record_put(const char *id, const struct e2b_record *rec);
void e2b_record_delete(const char *id);
void e2b_record_dispose(struct e2b_record *rec);
/* Waits at most ms for a record to change in this process (a put or a
 * delete); without the lock held. Changes by another replica are seen
 * only by looking again. */
void e2b_record_wait(int ms);
/* Wakes every e2b_record_wait(). */
void e2b_record_wake(void);
/* Whether this process is suspending e2b_id now (e2b_session_suspend). */
int e2b_suspending(const char *e2b_id);
/* The hangar sandbox the record of e2b_id names now. */
const char *e2b_record_sandbox(const struct e2b_record *rec, const char *e2b_id);

/*
 * The one way from an E2B id to what serves it now: reads its record (an
 * empty one for a sandbox made without /e2b) and attaches the current
 * sandbox. 0 with *sb; 1 when the sandbox is suspended and none serves it
 * (*sb NULL); else a HANGAR_E* code (HANGAR_EOS: the record is unreadable).
 * rec may be NULL; *rec is the caller's to dispose of either way.
 */
int e2b_resolve(const char *e2b_id, struct e2b_record *rec, hangar_sandbox **sb);
/* Whether the library holds session_id suspended or parked; then its provider into provider (NULL: not asked). */
int e2b_session_put_away(const char *session_id, char *provider, size_t size);
/*
 * A suspend's last step for e2b_id, when its session (session_id) is put
 * away and its record still says running: the record says suspended, as
 * the suspend would have written it (a hangard killed between the two, or
 * another replica about to write the same). 1 when the record was
 * settled, 0 when nothing was to be done, HANGAR_EOS.
 */
int e2b_session_settle(const char *e2b_id, const char *session_id);
/* The same from a record already read (the edge reads it once, for the
 * token and the forwarding alike). */
int e2b_resolve_record(const char *e2b_id, const struct e2b_record *rec, hangar_sandbox **sb);

/* The E2B id of the sandbox whose current hangar sandbox is sandbox_id: a
 * table built by walking the records (e2b_ids_load), for listings. */
struct e2b_ids {
	struct e2b_id_entry {
		char *e2b_id;
		struct e2b_record rec;
	} *v;
	size_t n;
};
int e2b_ids_load(struct e2b_ids *t);
/* The entry whose current sandbox is sandbox_id, or NULL. */
struct e2b_id_entry *e2b_ids_find(struct e2b_ids *t, const char *sandbox_id);
void e2b_ids_free(struct e2b_ids *t);

/* envVars ({"K":"V"}) sealed under a key of HANGAR_SECRET_KEY, for a
 * restore to make the new sandbox with them: a malloc'd string or NULL. */
char *e2b_env_seal(const cJSON *vars);
/* The sealed envVars as "K=V" (env_free()): 0, or -1 when they do not open
 * (sealed by a hangard with another key). */
int e2b_env_open(const char *sealed, char ***env);

/* ---- sessions (e2b-sessions.c) ---- */

/* Whether memory:false can suspend a session here: 1, or 0 with why (the
 * setting to make) in msg. */
int e2b_can_suspend(char *msg, size_t cap);
/*
 * Suspends the sandbox of e2b_id (sb, running) as a session: makes it one
 * the first time, checkpoints it, parks or destroys it, and records it
 * E2B_PAUSED_SESSION. cancel may be NULL. 0, or a HANGAR_E* code with why
 * the message when it is hangard's own (else why is empty and
 * hangar_error_last() says it).
 */
int e2b_session_suspend(const char *e2b_id, hangar_sandbox *sb, hangar_cancel_fn cancel, void *cancel_payload,
			char *why, size_t cap);
/*
 * Resumes a suspended one: *out its sandbox, the record updated (its
 * sandbox, and new tokens when a new sandbox took over) and given in *rec.
 * Connects at once resume once and all get the same sandbox and tokens.
 * 0, or a code as e2b_session_suspend's.
 */
int e2b_session_resume(const char *e2b_id, hangar_sandbox **out, struct e2b_record *rec, char *why, size_t cap);
/* Deletes the session of a record (its sandbox, parked or running, and its
 * checkpoints); 0 or a HANGAR_E* code (HANGAR_ENOTFOUND counts as done). */
int e2b_session_delete(const char *session_id);
/* Forgets the records older than before_s (seconds since the epoch) of the
 * sandboxes alive() does not know: those that expired, or were killed
 * outside /e2b; and the sessions of those records, after the records'
 * lock is let go. */
void e2b_records_sweep(int64_t before_s, int (*alive)(const char *id, void *payload), void *payload);

/* The snapshots taken through /e2b: recorded with who took them, from which
 * sandbox, its name (or NULL) and when; 0 or -1. */
int e2b_snapshot_note(const char *caller, const char *sandbox_id, const char *snapshot_id, const char *name,
		      int64_t created_us);
/* Calls fn with each recorded snapshot, an object of snapshotID, names,
 * sandboxID, caller and createdUs, until fn returns non-zero; that value,
 * 0, or -1 when they cannot be read. */
int e2b_snapshot_walk(int (*fn)(cJSON *snap, void *payload), void *payload);

/* Idempotency-Key (e2b-idempotency.c). */
enum {
	E2B_IDEM_NEW = 0,          /* create, then e2b_idem_finish() */
	E2B_IDEM_DONE = 1,         /* made before: *id is its sandbox (free() it) */
	E2B_IDEM_RUNNING = -1,     /* a create with this key runs now */
	E2B_IDEM_OTHER_BODY = -2,  /* the key came with another body */
	E2B_IDEM_FULL = -3,        /* no room (every entry's create runs) */
};
int e2b_idem_begin(const char *caller, const char *key, const void *body, size_t len, char **id);
/* The create of a key ended: id the sandbox it made, or NULL when it failed
 * (the key may be used again). */
void e2b_idem_finish(const char *caller, const char *key, const char *id);

#endif
