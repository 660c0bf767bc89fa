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

enum e2b_paused { E2B_NOT_PAUSED, E2B_PAUSED_MEMORY, E2B_PAUSED_FILESYSTEM };

struct e2b_record {
	char *template_id;      /* the templateID asked for */
	cJSON *metadata;        /* an object of strings */
	int64_t generation;     /* of the tokens: one up on every restore */
	enum e2b_paused paused; /* how /pause left it */
	/* autoPause: when its lifetime as E2B sees it ends (pause_at_us), the
	 * sandbox is paused instead of killed, with its memory or not. */
	int auto_pause, auto_pause_memory;
	int64_t pause_at_us;    /* 0: not due (paused, or no autoPause) */
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
/* Forgets the records older than before_s (seconds since the epoch) of the
 * sandboxes alive() does not know: those that expired, or were killed
 * outside /e2b. */
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
