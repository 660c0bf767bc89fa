/*
 * Where sealed checkpoints are kept: named blobs in one store, chosen by a URL
 * (HANGAR_CHECKPOINT_STORE): file://DIR or s3://BUCKET/PREFIX. A blob is
 * written as a stream and becomes visible only when committed, whole; an
 * aborted or failed write leaves nothing, and a blob of the same name that
 * was there before stays as it was until the commit replaces it.
 */
#pragma once

#include <stddef.h>

#include "core/internal.h"

/* Receives a blob's bytes in order. Returns 0 or a negative code (herr set). */
typedef int (*blob_sink)(void *payload, const void *data, size_t len);

struct blobstore;
struct blob_writer;

/* Opens the store at url; NULL or "" means HANGAR_CHECKPOINT_STORE, whose
 * default is file://<state dir>/checkpoints. A malformed URL or missing
 * setting is HANGAR_ECONFIG naming the variable. */
int blobstore_open(struct blobstore **out, hangar_ctx *ctx, const char *url);
void blobstore_free(struct blobstore *bs);
/* The store's URL, without credentials (they never are in it). */
const char *blobstore_url(const struct blobstore *bs);

/* Blob names: 1 to 128 of [A-Za-z0-9._-], not starting with a dot. */
int blob_write_begin(struct blob_writer **out, struct blobstore *bs, const char *name);
int blob_write(struct blob_writer *w, const void *data, size_t len);
/* Makes the blob visible, whole, replacing one of the same name. Frees w,
 * whatever the outcome; on failure nothing is left. A writer whose earlier
 * write failed is refused here (and cleaned up). */
int blob_write_commit(struct blob_writer *w);
/* Drops what was written. Frees w. NULL is allowed. */
void blob_write_abort(struct blob_writer *w);

/* Streams a blob to sink. HANGAR_ENOTFOUND when there is none. */
int blob_read(struct blobstore *bs, const char *name, blob_sink sink, void *payload);
/* Removes a blob. HANGAR_ENOTFOUND when there is none. */
int blob_delete(struct blobstore *bs, const char *name);
/* 1 when the blob exists, 0 when not, or a negative code. */
int blob_exists(struct blobstore *bs, const char *name);

/* ---- for the store implementations ------------------------------------------ */

struct blob_ops {
	int (*write_begin)(struct blob_writer **out, struct blobstore *bs, const char *name);
	int (*write)(struct blob_writer *w, const void *data, size_t len);
	int (*commit)(struct blob_writer *w);
	void (*abort)(struct blob_writer *w);
	int (*read)(struct blobstore *bs, const char *name, blob_sink sink, void *payload);
	int (*del)(struct blobstore *bs, const char *name);
	int (*exists)(struct blobstore *bs, const char *name);
	void (*free)(struct blobstore *bs);
};

/* The first member of every store and every writer. */
struct blobstore {
	const struct blob_ops *ops;
	hangar_ctx *ctx;    /* a reference */
	char *url;
};
struct blob_writer {
	struct blobstore *bs;
	int failed;         /* a write failed: commit is refused */
};

/* file://DIR: DIR is absolute. */
int blobstore_file_open(struct blobstore **out, hangar_ctx *ctx, const char *dir);
/* s3://BUCKET/PREFIX with the HANGAR_S3_* settings. */
int blobstore_s3_open(struct blobstore **out, hangar_ctx *ctx, const char *bucket, const char *prefix);
/* The size of an S3 store's parts (5 MiB to 1 GiB; 8 MiB by default): blobs up
 * to one part go up in one PUT, larger ones as a multipart upload. Must be
 * set before a write begins (write_begin allocates a part's buffer). */
int blobstore_s3_set_part_size(struct blobstore *bs, size_t part_size);
/* How many unfinished uploads an S3 store asks for per listing when it sweeps
 * those of killed writers (1 to 1000; 100 by default): for tests of paging. */
int blobstore_s3_set_sweep_page(struct blobstore *bs, int uploads);
