/* The store chosen by URL, and the checks every store shares. */
#define _GNU_SOURCE
#include "blobstore.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int valid_name(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	return n > 0 && n <= 128 && name[0] != '.' &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

#define CHECK_NAME(name)                                                                                   \
	do {                                                                                               \
		if (!valid_name(name))                                                                     \
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,                                 \
				    "invalid argument: a blob name is 1 to 128 of [A-Za-z0-9._-], not starting " \
				    "with a dot");                                                         \
	} while (0)

/* s3://BUCKET[/PREFIX]: bucket names as S3 allows them (DNS-like, 3..63). */
static int open_s3(struct blobstore **out, hangar_ctx *ctx, const char *rest)
{
	char bucket[64];
	size_t n = strcspn(rest, "/");
	const char *prefix = rest[n] == '/' ? rest + n + 1 : "";

	if (n < 3 || n > 63 || strspn(rest, "abcdefghijklmnopqrstuvwxyz0123456789.-") < n)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_CHECKPOINT_STORE: the bucket of an s3:// store is 3 to 63 of [a-z0-9.-]");
	if (strlen(prefix) > 512 || strspn(prefix, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-/") <
					    strlen(prefix) ||
	    strstr(prefix, "//") || strstr(prefix, "./") || prefix[0] == '/')
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_CHECKPOINT_STORE: the prefix of an s3:// store is made of [A-Za-z0-9._-] segments "
			    "separated by single slashes");
	memcpy(bucket, rest, n);
	bucket[n] = '\0';
	return blobstore_s3_open(out, ctx, bucket, prefix);
}

int blobstore_open(struct blobstore **out, hangar_ctx *ctx, const char *url)
{
	char dflt[PATH_MAX];

	*out = NULL;
	if (!url || !*url)
		url = hctx_str(ctx, HS_CHECKPOINT_STORE);
	if (!*url) {
		if (snprintf(dflt, sizeof(dflt), "%s/checkpoints", hctx_str(ctx, HS_STATE_DIR)) >= (int)sizeof(dflt))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
		return blobstore_file_open(out, ctx, dflt);
	}
	if (!strncmp(url, "file://", 7)) {
		if (url[7] != '/')
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "HANGAR_CHECKPOINT_STORE: a file:// store names an absolute directory (file:///path)");
		return blobstore_file_open(out, ctx, url + 7);
	}
	if (!strncmp(url, "s3://", 5))
		return open_s3(out, ctx, url + 5);
	return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
		    "HANGAR_CHECKPOINT_STORE must be file://DIR or s3://BUCKET/PREFIX");
}

void blobstore_free(struct blobstore *bs)
{
	if (bs)
		bs->ops->free(bs);
}

const char *blobstore_url(const struct blobstore *bs)
{
	return bs->url;
}

int blob_write_begin(struct blob_writer **out, struct blobstore *bs, const char *name)
{
	*out = NULL;
	CHECK_NAME(name);
	return bs->ops->write_begin(out, bs, name);
}

int blob_write(struct blob_writer *w, const void *data, size_t len)
{
	int rc;

	if (w->failed)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: an earlier write to this blob failed");
	rc = w->bs->ops->write(w, data, len);
	if (rc < 0)
		w->failed = 1;
	return rc;
}

int blob_write_commit(struct blob_writer *w)
{
	if (w->failed) {
		hangar_sys_saved_error saved;

		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
		     "invalid argument: an earlier write to this blob failed; nothing was kept");
		hangar_sys_error_save(&saved);
		w->bs->ops->abort(w);
		return hangar_sys_error_restore(&saved);
	}
	return w->bs->ops->commit(w);
}

void blob_write_abort(struct blob_writer *w)
{
	if (w)
		w->bs->ops->abort(w);
}

int blob_read(struct blobstore *bs, const char *name, blob_sink sink, void *payload)
{
	CHECK_NAME(name);
	return bs->ops->read(bs, name, sink, payload);
}

int blob_delete(struct blobstore *bs, const char *name)
{
	CHECK_NAME(name);
	return bs->ops->del(bs, name);
}

int blob_exists(struct blobstore *bs, const char *name)
{
	CHECK_NAME(name);
	return bs->ops->exists(bs, name);
}
