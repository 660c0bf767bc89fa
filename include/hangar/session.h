/*
 * libhangar: sessions.
 *
 * A session is an agent's machine across turns. It holds at most one sandbox
 * at a time and a chain of checkpoints (hangar/checkpoint.h) whose session id
 * is the session's. Sessions live in the state store, so any process sharing
 * it can open one by id.
 *
 * States:
 *   active     a running sandbox serves the session;
 *   suspended  no sandbox: the next use restores the latest checkpoint into
 *              a new one (cold);
 *   parked     the sandbox is paused with its memory (hot resume): the next
 *              use resumes that same machine, unless it cannot be trusted;
 *   archived   done: no sandbox, the checkpoints are kept, nothing resumes.
 *
 * Suspend checkpoints first, always. Then, where the provider declares
 * HANGAR_CAP_HOT_RESUME and HANGAR_SESSION_HOT_RESUME_MINUTES is not 0, the
 * sandbox is paused and parked instead of destroyed, within these bounds:
 * at most HANGAR_SESSION_HOT_RESUME_MAX are parked (the longest-parked is
 * destroyed to make room), nothing is parked while the sandboxes the store
 * records reach three quarters of HANGAR_MAX_SANDBOXES, and a session
 * created with HANGAR_SESSION_EXCLUSIVE_CREDENTIAL is never parked.
 *
 * Resume takes the parked sandbox back when it is still the latest state:
 * it is resumed, and a command must answer within
 * HANGAR_SESSION_CHECK_SECONDS. It restores the latest checkpoint into a new
 * sandbox instead, destroying the parked one, when a newer checkpoint of the
 * session exists, the sandbox is gone, resuming it fails, the command fails,
 * or the wake hook fails. No checkpoint is ever deleted by a suspend, a
 * resume or the reaper. hangar_session_get_info() says which path the last
 * resume took and why.
 *
 * Every call that changes a session takes its lease in the store first, so
 * two processes resuming one session end with one sandbox: the second waits
 * and finds the session active. Every call on a session that was deleted
 * meanwhile fails with HANGAR_ENOTFOUND.
 */
#ifndef HANGAR_SESSION_H
#define HANGAR_SESSION_H

#include "buffer.h"
#include "common.h"
#include "sandbox.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** An opaque, reference-counted session handle. */
typedef struct hangar_session hangar_session;

#define HANGAR_SESSION_ACTIVE    1
#define HANGAR_SESSION_SUSPENDED 2
#define HANGAR_SESSION_PARKED    3
#define HANGAR_SESSION_ARCHIVED  4

/** How the session came to its current sandbox. */
#define HANGAR_RESUME_NONE  0   /**< created with it; never resumed */
#define HANGAR_RESUME_HOT   1   /**< the parked sandbox, resumed */
#define HANGAR_RESUME_COLD  2   /**< a new sandbox with the latest checkpoint restored */
#define HANGAR_RESUME_FRESH 3   /**< a new sandbox, empty: the session had no checkpoint */

/** The sandbox holds an exclusive, rotating credential: never park it. */
#define HANGAR_SESSION_EXCLUSIVE_CREDENTIAL (1u << 0)

/** Options for hangar_session_create(). Zero means default for every field. */
typedef struct hangar_session_opts {
	uint32_t version;
	uint32_t size;
	const char *id;                   /**< 1 to 128 of [A-Za-z0-9._-], not starting with '.';
	                                       NULL: generated */
	const char *environment;          /**< an environment (hangar/environment.h), or NULL;
	                                       create->environment wins when both are set */
	const hangar_create_opts *create; /**< how the session's sandboxes are made; NULL: defaults */
	const char *workspace;            /**< absolute; NULL: the environment's, else HANGAR_WORKSPACE */
	const char *user;                 /**< checkpoints run as; NULL: the environment's, else the
	                                       sandbox's default user */
	const char *const *labels;        /**< NULL-terminated "key=value", as checkpoint labels */
	uint32_t flags;                   /**< HANGAR_SESSION_EXCLUSIVE_CREDENTIAL */
	uint32_t reserved0;
	/* Version 2. */
	hangar_sandbox *sandbox;          /**< a running sandbox the session takes as its first instead
	                                       of making one; create then says how its later sandboxes
	                                       are made; NULL: one is made */
} hangar_session_opts;

#define HANGAR_SESSION_OPTS_VERSION 2
#define HANGAR_SESSION_OPTS_INIT HANGAR_STRUCT_INIT(hangar_session_opts, HANGAR_SESSION_OPTS_VERSION)

/** @param version HANGAR_SESSION_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_session_opts_init(hangar_session_opts *opts, uint32_t version);

/**
 * Creates a session and its first sandbox (as hangar_sandbox_create() with
 * opts->create and the environment), and records both in the state store.
 * The create options are kept, sealed, for the sandboxes made on later
 * resumes.
 *
 * @param out  receives the session, active; NULL on failure.
 * @param ctx  the context.
 * @param opts options, or NULL for all defaults.
 * With opts->sandbox the session takes that sandbox instead (a sandbox made
 * earlier without a session, which becomes one later): it is recorded as
 * the session's, active, and nothing is created. It must be running and
 * held by no other session.
 *
 * @return 0, HANGAR_EINVAL (also: a bad id or label, or opts->sandbox
 *         paused or another session's), HANGAR_EBUSY (another create
 *         is taking opts->sandbox at this moment; Retry-After 1 second),
 *         HANGAR_EEXISTS (the id is taken),
 *         HANGAR_EGONE (opts->sandbox is gone), HANGAR_EOS (the state
 *         store), or what hangar_sandbox_create() returns; on a failure no
 *         session is left behind, and no sandbox but opts->sandbox, which
 *         stays the caller's as it was.
 * **Ownership:** *out is the caller's (hangar_session_unref()); opts is copied.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_session_create(hangar_session **out, hangar_ctx *ctx, const hangar_session_opts *opts);

/**
 * Opens a session by id, in any process that shares the state store.
 * Nothing about its sandbox changes.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND or HANGAR_EOS.
 * **Ownership:** *out is the caller's. **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_session_open(hangar_session **out, hangar_ctx *ctx, const char *id);

/** Takes a reference. @return s. **Thread safety:** safe from any thread. */
HANGAR_EXTERN(hangar_session *) hangar_session_ref(hangar_session *s);
/**
 * Drops a reference; the last one frees the handle (never the session or its
 * sandbox). NULL is allowed. @return NULL.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(hangar_session *) hangar_session_unref(hangar_session *s);

/** The session's id. **Ownership:** valid while s is. */
HANGAR_EXTERN(const char *) hangar_session_id(const hangar_session *s);

/**
 * The session's live sandbox: the one it holds when active, else it resumes
 * the session first (hangar_session_resume()).
 * @param out receives a new reference to the sandbox.
 * @return 0, HANGAR_EINVAL, HANGAR_EGONE (archived), or what
 *         hangar_session_resume() returns.
 * **Ownership:** *out is the caller's (hangar_sandbox_unref()).
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_session_sandbox(hangar_sandbox **out, hangar_session *s);

#define HANGAR_SUSPEND_NO_PARK (1u << 0) /**< destroy the sandbox even where it could be parked */

/** Options for hangar_session_suspend(). Zero means default for every field. */
typedef struct hangar_suspend_opts {
	uint32_t version;
	uint32_t size;
	const void *blob;             /**< the caller's bytes (e.g. the conversation), sealed into
	                                   the checkpoint; NULL: none */
	size_t blob_len;
	const char *const *labels;    /**< the checkpoint's, added to the session's; NULL: none */
	uint32_t flags;               /**< HANGAR_SUSPEND_* */
	uint32_t reserved0;
	int64_t timeout_sec;          /**< the checkpoint; 0: HANGAR_CHECKPOINT_TIMEOUT_SECONDS */
	/* Version 2. */
	hangar_cancel_fn cancel;      /**< polled during the checkpoint; non-zero gives the suspend up
	                                   (HANGAR_ECANCELED): nothing is stored, the session stays
	                                   active; NULL: never */
	void *cancel_payload;
} hangar_suspend_opts;

#define HANGAR_SUSPEND_OPTS_VERSION 2
#define HANGAR_SUSPEND_OPTS_INIT HANGAR_STRUCT_INIT(hangar_suspend_opts, HANGAR_SUSPEND_OPTS_VERSION)

/** @param version HANGAR_SUSPEND_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_suspend_opts_init(hangar_suspend_opts *opts, uint32_t version);

/**
 * Suspends an active session: checkpoints its workspace (with the blob),
 * then parks the sandbox where the rules above allow (running the park
 * hook first), else destroys it. When the checkpoint fails and the session
 * has no earlier one, the sandbox is kept running, the session stays
 * active and the checkpoint's failure is returned. When it fails but an
 * earlier checkpoint exists, the suspend goes on and the next resume
 * restores that one. A session already suspended or parked is left as it is.
 *
 * An active session whose sandbox is gone becomes suspended (nothing is
 * left to checkpoint) and HANGAR_EGONE says so.
 *
 * @return 0, HANGAR_EINVAL (also: a malformed label, refused before
 *         anything happens), HANGAR_EGONE (archived, or the sandbox was
 *         gone), HANGAR_EBUSY (another caller held the session's lease
 *         past HANGAR_SESSION_BUSY_WAIT_SECONDS), HANGAR_ECANCELED
 *         (opts->cancel: nothing stored, the session stays active),
 *         HANGAR_ENOTFOUND, HANGAR_EOS, or what hangar_checkpoint_create()
 *         returns (the session is then active).
 * **Thread safety:** safe from any thread; the session's lease serialises
 * calls on one session across threads and processes.
 */
HANGAR_EXTERN(int) hangar_session_suspend(hangar_session *s, const hangar_suspend_opts *opts);

/**
 * Brings a suspended or parked session back to active: hot when the parked
 * sandbox can be trusted, otherwise cold (see above). An active session is
 * left as it is, unless its sandbox is gone: then it is restored as a
 * suspended one. A session with no checkpoint gets a new, empty sandbox
 * (HANGAR_RESUME_FRESH).
 *
 * @param out receives a reference to the sandbox, or NULL when not wanted.
 * @return 0, HANGAR_EINVAL, HANGAR_EGONE (archived), HANGAR_EBUSY,
 *         HANGAR_ENOTFOUND, HANGAR_EOS, HANGAR_EREFUSED (the COLD hook
 *         failed, or the kept create options do not open under the secret
 *         keys), or what hangar_sandbox_create() or
 *         hangar_checkpoint_restore() return for the new sandbox (the
 *         session then stays suspended, and no sandbox is left behind).
 * **Ownership:** *out is the caller's. **Thread safety:** as suspend.
 */
HANGAR_EXTERN(int) hangar_session_resume(hangar_session *s, hangar_sandbox **out);

/**
 * Archives a session: destroys its sandbox, running or parked, and keeps
 * its record and checkpoints. An archived session cannot be resumed.
 * @return 0, HANGAR_EINVAL, HANGAR_EBUSY or HANGAR_EOS. Archiving twice
 *         is not an error. A sandbox that cannot be destroyed (its provider
 *         unreachable) is logged and left to expire.
 * **Thread safety:** as suspend.
 */
HANGAR_EXTERN(int) hangar_session_archive(hangar_session *s);

/**
 * Deletes a session: destroys its sandbox, deletes every checkpoint whose
 * session id is the session's except those another session builds on (a
 * fork's base), and removes its record. The handle stays
 * valid; calls on it then fail with HANGAR_ENOTFOUND.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND, HANGAR_EBUSY, HANGAR_EOS,
 *         or what hangar_checkpoint_delete() returns (the record is then
 *         kept, so the call can be repeated).
 * **Thread safety:** as suspend.
 */
HANGAR_EXTERN(int) hangar_session_delete(hangar_session *s);

/** What the store says about a session. */
typedef struct hangar_session_info {
	uint32_t version;
	uint32_t size;
	const char *id;
	int32_t state;                /**< HANGAR_SESSION_* */
	int32_t last_resume;          /**< HANGAR_RESUME_* */
	const char *last_resume_reason; /**< why the last resume was cold or fresh; "" when hot or none */
	const char *suspend_reason;   /**< why the last suspend did not park; "" when it did or none */
	const char *environment;      /**< "" when none */
	const char *workspace;
	const char *provider;         /**< the sandbox's, "" when none */
	const char *sandbox_id;       /**< running or parked; "" when none */
	const char *checkpoint_id;    /**< the latest, "" when none */
	const char *parent_id;        /**< the session it was forked from, "" when none */
	const char *fork_group;       /**< shared by the sessions of one fork, "" when none */
	const char *labels_json;      /**< {"key":"value",...} */
	uint32_t flags;               /**< HANGAR_SESSION_EXCLUSIVE_CREDENTIAL */
	uint32_t reserved0;
	int64_t created_at_us;        /**< microseconds since the epoch */
	int64_t updated_at_us;
	int64_t parked_since_us;      /**< 0 unless parked */
} hangar_session_info;

#define HANGAR_SESSION_INFO_VERSION 1
#define HANGAR_SESSION_INFO_INIT HANGAR_STRUCT_INIT(hangar_session_info, HANGAR_SESSION_INFO_VERSION)

/**
 * Reads the session's record again and describes it.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (deleted) or HANGAR_EOS.
 * **Ownership:** the strings are valid until the next call on s.
 * **Thread safety:** safe; concurrent calls on one handle are serialised.
 */
HANGAR_EXTERN(int) hangar_session_get_info(hangar_session_info *out, hangar_session *s);

/** Called per session; return non-zero to stop. info is valid during the call only. */
typedef int (*hangar_session_list_fn)(const hangar_session_info *info, void *payload);

/**
 * Lists the sessions of the state store, oldest first.
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL or HANGAR_EOS.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_session_list(hangar_ctx *ctx, hangar_session_list_fn fn, void *payload);

/* ---- hooks ------------------------------------------------------------------ */

#define HANGAR_SESSION_HOOK_PARK 1 /**< before the pause: revoke what the sandbox holds */
#define HANGAR_SESSION_HOOK_WAKE 2 /**< after a hot resume: hand it a new grant */
#define HANGAR_SESSION_HOOK_COLD 3 /**< after a new sandbox was made and restored (or fresh) */

/**
 * A session hook. Return 0 to go on. A PARK hook that fails makes the
 * suspend destroy the sandbox instead of parking it; a WAKE hook that fails
 * makes the resume restore the checkpoint into a new sandbox instead; a
 * COLD hook that fails fails the resume (HANGAR_EREFUSED) and destroys the
 * new sandbox.
 */
typedef int (*hangar_session_hook_fn)(hangar_session *s, hangar_sandbox *sb, int hook, void *payload);

/**
 * Sets the context's session hook (NULL: none), called for every session
 * of the context on the thread that suspends or resumes it.
 * **Thread safety:** set it before sessions are used from other threads.
 */
HANGAR_EXTERN(void) hangar_session_set_hook(hangar_ctx *ctx, hangar_session_hook_fn fn, void *payload);

/* ---- the reaper ---------------------------------------------------------------- */

/**
 * Destroys parked sandboxes parked longer than HANGAR_SESSION_HOT_RESUME_
 * MINUTES (all of them when it is 0) and the longest-parked past
 * HANGAR_SESSION_HOT_RESUME_MAX; their sessions become suspended and
 * resume from their checkpoints. A session another caller holds is skipped
 * this time. Also destroys the sandboxes a resume or eviction gave up but
 * could not destroy then, because their supervisor did not answer: each is
 * recorded in the state store until it is gone.
 * @param reaped receives how many were destroyed, or NULL.
 * @return 0, HANGAR_EINVAL or HANGAR_EOS.
 * **Thread safety:** safe from any thread and any number of processes.
 */
HANGAR_EXTERN(int) hangar_session_reap(hangar_ctx *ctx, uint32_t *reaped);

/* ---- forks --------------------------------------------------------------------- */

#define HANGAR_FORK_NATIVE     1 /**< the provider's own fork (HANGAR_CAP_FORK) */
#define HANGAR_FORK_SNAPSHOT   2 /**< a snapshot, and a sandbox created from it per fork */
#define HANGAR_FORK_CHECKPOINT 3 /**< a checkpoint restored into a new sandbox per fork */

/** One forked session, as hangar_session_fork() reports it. */
typedef struct hangar_session_fork_result {
	uint32_t version;
	uint32_t size;
	uint32_t index;               /**< 0 to count - 1 */
	int32_t error;                /**< 0, or the HANGAR_E* code of this fork's failure */
	int32_t method;               /**< HANGAR_FORK_* */
	int32_t reserved0;
	hangar_session *session;      /**< the new session when error is 0, else NULL; borrowed */
	const char *message;          /**< why this fork failed; "" when it did not */
} hangar_session_fork_result;

#define HANGAR_SESSION_FORK_RESULT_VERSION 1

/** Receives one fork's result on the calling thread; take a reference to keep it. */
typedef void (*hangar_session_fork_fn)(const hangar_session_fork_result *result, void *payload);

/**
 * Forks count (1 to 100) new sessions from the session's current state,
 * each active with its own sandbox, its parent recorded, and all of them
 * sharing a fork group: natively where the provider forks, else from a
 * snapshot where it has them, else from a checkpoint (taken now). A
 * suspended or parked session is resumed first. Each fork has its own
 * sandbox and so its own envd and traffic tokens; none is its parent's. A
 * fork by snapshot leaves the snapshot with the provider (it is the forks'
 * template); a fork by checkpoint keeps the checkpoint, under the parent's
 * session id.
 *
 * @return 0 when fn has been called count times (any entry may report an
 *         error); otherwise nothing was forked: HANGAR_EINVAL, HANGAR_EGONE,
 *         or the failure of the resume, the snapshot or the checkpoint.
 * **Ownership:** the sessions fn receives are borrowed.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_session_fork(hangar_session *s, uint32_t count, hangar_session_fork_fn fn, void *payload);

/** Options for hangar_session_fork_ext(). Zero means default for every field. */
typedef struct hangar_session_fork_opts {
	uint32_t version;
	uint32_t size;
	hangar_cancel_fn cancel;      /**< polled while the fork runs; non-zero gives it up
	                                   (HANGAR_ECANCELED): nothing is kept; NULL: never */
	void *cancel_payload;
} hangar_session_fork_opts;

#define HANGAR_SESSION_FORK_OPTS_VERSION 1
#define HANGAR_SESSION_FORK_OPTS_INIT \
	HANGAR_STRUCT_INIT(hangar_session_fork_opts, HANGAR_SESSION_FORK_OPTS_VERSION)

/** @param version HANGAR_SESSION_FORK_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_session_fork_opts_init(hangar_session_fork_opts *opts, uint32_t version);

/**
 * hangar_session_fork() with options: opts->cancel stops a fork that is
 * under way. A cancelled fork keeps nothing: the sandboxes already made
 * for it are destroyed, the checkpoint taken for it is deleted, no session
 * is recorded, fn is never called, and the parent's lease is free when the
 * call returns. The parent stays active. (A snapshot the provider finished
 * before the cancel stays with it, as every fork's snapshot does.)
 *
 * @param opts NULL: as hangar_session_fork().
 * @return as hangar_session_fork(), and HANGAR_ECANCELED.
 * **Ownership:** the sessions fn receives are borrowed; opts is not kept.
 * **Thread safety:** safe; fn and cancel run on the calling thread.
 */
HANGAR_EXTERN(int) hangar_session_fork_ext(hangar_session *s, uint32_t count, const hangar_session_fork_opts *opts,
					   hangar_session_fork_fn fn, void *payload);

/**
 * Keeps one session of a fork and archives every other session of its
 * fork group (the parent is not in the group and stays as it is).
 * @param archived receives how many were archived, or NULL.
 * @return 0, HANGAR_EINVAL (also: s is not a fork), HANGAR_EOS, or the
 *         first failure of an archive (the others are still tried).
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_session_keep(hangar_session *s, uint32_t *archived);

HANGAR_END_DECL

#endif
