/*
 * Checkpoints (include/hangar/checkpoint.h): what capture.c, restore.c and
 * checkpoint.c share. The pipeline of a capture is
 *   sandbox -> tar.zst -> (hash, count) -> seal_writer -> blob_writer
 * and of a restore
 *   blob_read -> seal_reader -> zstd -> tarcheck -> sandbox,
 * everything streamed, nothing whole in memory.
 */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "core/internal.h"
#include "store/store.h"
#include "tarcheck.h"

struct hangar_checkpoint {
	atomic_int refs;
	hangar_ctx *ctx;            /* a reference */
	struct store_ckpt row;
};

/* A handle on row (taken over, whatever the outcome). */
int ckpt_handle_new(hangar_checkpoint **out, hangar_ctx *ctx, struct store_ckpt *row);

/* labels ("key=value", NULL-terminated; later keys win) as a JSON object (malloc'd);
 * HANGAR_EINVAL for a malformed label. */
int ckpt_labels_json(char **out, const char *const *labels);

/* Store object names: the archive, and the caller's blob. */
#define CKPT_NAME_MAX 192
void ckpt_archive_name(char out[CKPT_NAME_MAX], const char *id);
void ckpt_blob_name(char out[CKPT_NAME_MAX], const char *id);
/* The checkpoint id the blob is sealed for, so archive and blob cannot be swapped. */
void ckpt_blob_seal_id(char out[CKPT_NAME_MAX], const char *id);

/* The caps the tar checker applies (CKPT.md): HANGAR_CHECKPOINT_MAX_BYTES x 8, at least 1 GiB. */
void ckpt_tar_limits(hangar_ctx *ctx, struct tarcheck_limits *lim);

/* Deadline, cancel and progress of one call. */
struct ckpt_run {
	const char *what;           /* "capture", "restore", "export" */
	int64_t deadline_ms;        /* monotonic */
	int64_t timeout_sec;
	hangar_cancel_fn cancel;
	void *cancel_payload;
	hangar_progress_fn progress;
	void *progress_payload;
	uint64_t done, total;
};
void ckpt_run_init(struct ckpt_run *r, hangar_ctx *ctx, const char *what, int64_t timeout_sec,
		   hangar_cancel_fn cancel, void *cancel_payload, hangar_progress_fn progress,
		   void *progress_payload, uint64_t total);
/* Adds n done bytes; checks cancel and the deadline, reports progress. 0 or a reported code. */
int ckpt_run_step(struct ckpt_run *r, uint64_t n);
/* Milliseconds left (at least 1), for the calls made on the way. */
int64_t ckpt_run_left_ms(const struct ckpt_run *r);

/* zstd, streamed: a decompressor and a compressor handing their output to a sink. */
typedef int (*ckpt_sink)(void *payload, const void *data, size_t len);
struct ckpt_zdec;
int ckpt_zdec_new(struct ckpt_zdec **out, ckpt_sink sink, void *payload);
int ckpt_zdec_feed(struct ckpt_zdec *z, const void *data, size_t len);
/* The input ended: 0 only at the end of a frame. */
int ckpt_zdec_finish(struct ckpt_zdec *z);
void ckpt_zdec_free(struct ckpt_zdec *z);
struct ckpt_zenc;
int ckpt_zenc_new(struct ckpt_zenc **out, int level, ckpt_sink sink, void *payload);
int ckpt_zenc_write(struct ckpt_zenc *z, const void *data, size_t len);
int ckpt_zenc_finish(struct ckpt_zenc *z);
void ckpt_zenc_free(struct ckpt_zenc *z);

/* Whether the sandbox's envd has the archive endpoint (asked once per handle). */
int ckpt_native(hangar_sandbox *sb, const char *user);

/* A random suffix for temporary names in a sandbox: 16 lowercase hex characters. */
void ckpt_random_suffix(char out[17]);

/* "blake2b-256:<hex>" of a 32-byte digest. */
int ckpt_hash_text(char out[80], const unsigned char digest[32]);

/* An absolute path of printable characters, under 4096 bytes. */
int ckpt_valid_workspace(const char *ws);
/* Runs a bash script in the sandbox as user, with env, within run's deadline
 * and cancel. res is the caller's to dispose; a timed-out script is HANGAR_ETIMEOUT. */
int ckpt_run_script(hangar_exec_result *res, hangar_sandbox *sb, const char *script, const char *const *env,
		    const char *user, struct ckpt_run *run);
/* The last line of res's stderr, printable, for a message. */
void ckpt_stderr_tail(char *out, size_t cap, const hangar_exec_result *res);
/* Removes a temporary file in the sandbox (also after failures: keeps the thread's error). */
void ckpt_remove_temp(hangar_sandbox *sb, const char *path, const char *user, struct ckpt_run *run);
