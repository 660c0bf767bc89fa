/*
 * libhangar: checkpoints.
 *
 * A checkpoint is a sandbox's workspace captured as a tar.zst stream, sealed
 * (libsodium secretstream, 64 KiB chunks, under a key derived from
 * HANGAR_SECRET_KEY and bound to the checkpoint id and session id), stored in
 * the checkpoint store (HANGAR_CHECKPOINT_STORE: file://DIR or
 * s3://BUCKET/PREFIX) and indexed in the state store. It can be restored into
 * any sandbox on any provider. An altered, truncated, swapped or foreign
 * checkpoint is refused (HANGAR_EREFUSED) before anything reaches the
 * sandbox, and every member of the archive is checked before it is handed
 * on: no absolute names, no "..", no devices, hard links or setuid bits, no
 * member written through a symbolic link, caps on sizes and counts.
 *
 * Capture and restore use hangar-envd's archive endpoint when the sandbox's
 * envd has it (GET /hangar/v1/info), and otherwise run GNU tar in the sandbox
 * and move the archive through /files: both give the same format.
 * Nothing deletes a checkpoint but hangar_checkpoint_delete().
 */
#ifndef HANGAR_CHECKPOINT_H
#define HANGAR_CHECKPOINT_H

#include "buffer.h"
#include "common.h"
#include "sandbox.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** An opaque, reference-counted checkpoint (its index entry). */
typedef struct hangar_checkpoint hangar_checkpoint;

/**
 * Progress of a capture, restore or export, from the thread doing it: done is
 * the stored (sealed) bytes so far, total the whole when known, 0 when not.
 * Return non-zero to cancel (the call then fails with HANGAR_ECANCELED).
 */
typedef int (*hangar_progress_fn)(uint64_t done, uint64_t total, void *payload);

#define HANGAR_CHECKPOINT_SELECT_AUTO 0  /**< a git repository keeps .git, tracked and untracked
                                              files that are not ignored; otherwise everything */
#define HANGAR_CHECKPOINT_SELECT_ALL  1  /**< the whole workspace */

#define HANGAR_CHECKPOINT_NO_NATIVE (1u << 0) /**< never use hangar-envd's archive endpoint */

/** Options for hangar_checkpoint_create(). Zero means default for every field. */
typedef struct hangar_checkpoint_opts {
	uint32_t version;
	uint32_t size;
	const char *workspace;        /**< absolute; NULL: HANGAR_WORKSPACE (default "/workspace") */
	int32_t select;               /**< HANGAR_CHECKPOINT_SELECT_* */
	uint32_t flags;               /**< HANGAR_CHECKPOINT_NO_NATIVE */
	const char *session_id;       /**< NULL: none; else 1 to 128 of [A-Za-z0-9._-] */
	const char *parent_id;        /**< NULL: none; else a checkpoint that exists */
	const void *blob;             /**< the caller's bytes (e.g. a conversation), sealed too; NULL: none */
	size_t blob_len;
	const char *const *labels;    /**< NULL-terminated "key=value" (key 1 to 64 of [A-Za-z0-9._-],
	                                   value printable, under 1024 bytes), or NULL */
	const char *user;             /**< NULL: the sandbox's default user */
	int64_t timeout_sec;          /**< the whole capture; 0: HANGAR_CHECKPOINT_TIMEOUT_SECONDS */
	hangar_cancel_fn cancel;      /**< polled; non-zero gives up (HANGAR_ECANCELED); NULL: never */
	void *cancel_payload;
	hangar_progress_fn progress;  /**< NULL: none */
	void *progress_payload;
} hangar_checkpoint_opts;

#define HANGAR_CHECKPOINT_OPTS_VERSION 1
#define HANGAR_CHECKPOINT_OPTS_INIT HANGAR_STRUCT_INIT(hangar_checkpoint_opts, HANGAR_CHECKPOINT_OPTS_VERSION)

/** @param version HANGAR_CHECKPOINT_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_checkpoint_opts_init(hangar_checkpoint_opts *opts, uint32_t version);

/**
 * Captures a sandbox's workspace, seals it, stores it and indexes it. On any
 * failure nothing is stored and nothing is indexed; checkpoints made before
 * are untouched.
 *
 * @param out  the new checkpoint.
 * @param sb   the sandbox.
 * @param opts options, or NULL for defaults.
 * @return 0, HANGAR_EINVAL (also a bad session id, label or workspace),
 *         HANGAR_ENOTFOUND (the parent, or the workspace in the sandbox),
 *         HANGAR_ETOOLARGE (over HANGAR_CHECKPOINT_MAX_BYTES), HANGAR_EREFUSED
 *         (the sandbox sent an archive the checker refuses), HANGAR_ETIMEOUT,
 *         HANGAR_ECANCELED, HANGAR_ECONFIG (the store or the secret key),
 *         HANGAR_EGONE, HANGAR_EPAUSED, HANGAR_EUNAVAILABLE, HANGAR_EPROTOCOL,
 *         HANGAR_EOS (the store: e.g. a full disk).
 * **Ownership:** *out is the caller's (hangar_checkpoint_unref()); on failure
 * *out is NULL. opts and everything it points to are copied or used during
 * the call only.
 * **Thread safety:** safe; callbacks run on the calling thread.
 */
HANGAR_EXTERN(int) hangar_checkpoint_create(hangar_checkpoint **out, hangar_sandbox *sb,
					    const hangar_checkpoint_opts *opts);

/**
 * Takes a reference. @return cp (NULL allowed).
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(hangar_checkpoint *) hangar_checkpoint_ref(hangar_checkpoint *cp);

/**
 * Drops a reference; the last one frees the handle (the checkpoint stays
 * stored). @return NULL. NULL allowed.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(hangar_checkpoint *) hangar_checkpoint_unref(hangar_checkpoint *cp);

/**
 * The checkpoint's id ("ckpt-" and 26 lowercase base32 characters).
 * @return the id, or NULL when cp is NULL.
 * **Ownership:** borrowed, valid as long as cp.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(const char *) hangar_checkpoint_id(const hangar_checkpoint *cp);

/** What the index says about a checkpoint. */
typedef struct hangar_checkpoint_info {
	uint32_t version;
	uint32_t size;
	const char *id;
	const char *session_id;       /**< "" when none */
	const char *parent_id;        /**< "" when none */
	const char *workspace;
	const char *selection;        /**< "git" or "all" */
	const char *store_url;        /**< without credentials */
	const char *content_hash;     /**< "blake2b-256:<hex>" of the plain tar.zst */
	const char *labels_json;      /**< {"key":"value",...} */
	int64_t created_at_us;        /**< microseconds since the epoch */
	uint64_t stored_bytes;        /**< the sealed archive object */
	uint64_t archive_bytes;       /**< the plain tar.zst */
	uint64_t files;               /**< regular files and symbolic links in the archive */
	uint64_t blob_bytes;          /**< the caller's blob, 0 when none */
} hangar_checkpoint_info;

#define HANGAR_CHECKPOINT_INFO_VERSION 1
#define HANGAR_CHECKPOINT_INFO_INIT HANGAR_STRUCT_INIT(hangar_checkpoint_info, HANGAR_CHECKPOINT_INFO_VERSION)

/**
 * @param out caller-initialised (HANGAR_CHECKPOINT_INFO_INIT); never written
 *            past out->size.
 * @param cp  the checkpoint.
 * @return 0 or HANGAR_EINVAL.
 * **Ownership:** the strings are borrowed, valid as long as cp.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_checkpoint_get_info(hangar_checkpoint_info *out, const hangar_checkpoint *cp);

/**
 * Finds a checkpoint in the index.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND, HANGAR_EOS (the state store).
 * **Ownership:** *out is the caller's; NULL on failure.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_checkpoint_lookup(hangar_checkpoint **out, hangar_ctx *ctx, const char *id);

/** Called once per checkpoint; return non-zero to stop the listing. */
typedef int (*hangar_checkpoint_list_fn)(hangar_checkpoint *cp, void *payload);

/**
 * Lists the index, oldest first.
 * @param ctx        the context.
 * @param session_id only this session's checkpoints; NULL: all.
 * @param fn         called with each checkpoint.
 * @param payload    passed to fn.
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL, HANGAR_EOS.
 * **Ownership:** cp is borrowed during the callback (take a reference to
 * keep it).
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_checkpoint_list(hangar_ctx *ctx, const char *session_id, hangar_checkpoint_list_fn fn,
					  void *payload);

/**
 * Reads the caller's blob back, opened and verified whole before it is
 * returned.
 * @return 0 (an empty buffer when the checkpoint has none), HANGAR_EINVAL,
 *         HANGAR_EREFUSED (altered, truncated, swapped or another key),
 *         HANGAR_ENOTFOUND (the object is missing), HANGAR_EOS, HANGAR_ECONFIG.
 * **Ownership:** out is the caller's (hangar_buf_dispose()).
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_checkpoint_read_blob(hangar_buf *out, hangar_checkpoint *cp);

/**
 * Deletes a checkpoint: its stored objects, then its index entry. A
 * checkpoint whose objects are already gone is still removed from the index.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (not in the index), HANGAR_EOS,
 *         HANGAR_EUNAVAILABLE (the store), HANGAR_ECONFIG.
 * **Ownership:** cp stays the caller's to release.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_checkpoint_delete(hangar_checkpoint *cp);

#define HANGAR_RESTORE_MERGE     (1u << 0) /**< merge into the workspace instead of replacing its contents */
#define HANGAR_RESTORE_NO_NATIVE (1u << 1) /**< never use hangar-envd's archive endpoint */

/** Options for hangar_checkpoint_restore() and hangar_checkpoint_export(). */
typedef struct hangar_restore_opts {
	uint32_t version;
	uint32_t size;
	const char *workspace;        /**< absolute; NULL: the checkpoint's workspace */
	uint32_t flags;               /**< HANGAR_RESTORE_* */
	uint32_t reserved0;
	const char *user;             /**< NULL: the sandbox's default user */
	int64_t timeout_sec;          /**< the whole call; 0: HANGAR_CHECKPOINT_TIMEOUT_SECONDS */
	hangar_cancel_fn cancel;      /**< polled; non-zero gives up (HANGAR_ECANCELED) */
	void *cancel_payload;
	hangar_progress_fn progress;
	void *progress_payload;
} hangar_restore_opts;

#define HANGAR_RESTORE_OPTS_VERSION 1
#define HANGAR_RESTORE_OPTS_INIT HANGAR_STRUCT_INIT(hangar_restore_opts, HANGAR_RESTORE_OPTS_VERSION)

/** @param version HANGAR_RESTORE_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_restore_opts_init(hangar_restore_opts *opts, uint32_t version);

/**
 * Restores a checkpoint into a sandbox (any provider), as opts->user. The
 * workspace is created when missing; its contents are replaced (or merged
 * with HANGAR_RESTORE_MERGE) only once the whole checkpoint has been opened,
 * verified and checked: a failed restore leaves the workspace as it was.
 *
 * @return 0, HANGAR_EINVAL, HANGAR_EREFUSED (the checkpoint is altered,
 *         truncated, swapped or sealed with another key, or a member is
 *         refused: the message names it), HANGAR_ENOTFOUND (the object is
 *         missing), HANGAR_ETOOLARGE (over a cap), HANGAR_ECAPACITY (the
 *         sandbox is out of space), HANGAR_ETIMEOUT, HANGAR_ECANCELED,
 *         HANGAR_EGONE, HANGAR_EPAUSED, HANGAR_EUNAVAILABLE, HANGAR_EPROTOCOL,
 *         HANGAR_EFILE (the workspace cannot be written), HANGAR_ECONFIG.
 * **Ownership:** opts is used during the call only.
 * **Thread safety:** safe; callbacks run on threads of the call.
 */
HANGAR_EXTERN(int) hangar_checkpoint_restore(hangar_sandbox *sb, hangar_checkpoint *cp,
					     const hangar_restore_opts *opts);

/**
 * Writes the checkpoint as a plain tar.zst to a local file, for inspection.
 * The file is written under a temporary name and renamed only once the
 * seal's final tag checked out, so local_path never holds a partial or
 * unverified archive.
 *
 * @param opts timeout, cancel and progress only; NULL for defaults.
 * @return 0, HANGAR_EINVAL, HANGAR_EREFUSED, HANGAR_ENOTFOUND, HANGAR_EOS,
 *         HANGAR_ETIMEOUT, HANGAR_ECANCELED, HANGAR_ECONFIG.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_checkpoint_export(hangar_checkpoint *cp, const char *local_path,
					    const hangar_restore_opts *opts);

HANGAR_END_DECL

#endif
