/* The image store's public calls (hangar/image.h): arguments checked here, the work in this directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/versioned.h"
#include "image/img.h"

int hangar_image_opts_init(hangar_image_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_image_opts);
}

int hangar_image_import(hangar_buf *out_digest, hangar_ctx *ctx, const char *path, const hangar_image_opts *opts)
{
	hangar_image_opts o;
	int rc;

	HCHECK_ARG(out_digest, "out_digest is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(path && *path, "path is required");
	HCHECK_TEXT(path, "path");
	if ((rc = HOPTS_COPY(o, opts, hv_image_opts, "opts")) != 0)
		return rc;
	HCHECK_TEXT(o.name, "opts->name");
	if (o.name && !*o.name)
		o.name = NULL;
	rc = img_import(out_digest, ctx, path, &o);
	if (!rc) {
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "imported image %s from %s", out_digest->ptr, path);
		herr_clear();
	}
	return rc;
}

int hangar_image_pull(hangar_buf *out_digest, hangar_ctx *ctx, const char *reference, const hangar_image_opts *opts)
{
	hangar_image_opts o;
	int rc;

	HCHECK_ARG(out_digest, "out_digest is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(reference && *reference, "reference is required");
	HCHECK_TEXT(reference, "reference");
	if ((rc = HOPTS_COPY(o, opts, hv_image_opts, "opts")) != 0)
		return rc;
	rc = img_pull(out_digest, ctx, reference, &o);
	if (!rc) {
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "pulled image %s as %s", reference, out_digest->ptr);
		herr_clear();
	}
	return rc;
}

/* One record as the public struct, for the length of one callback. */
static int report_one(struct img_store *s, const char *hex, hangar_image_fn fn, void *payload)
{
	struct img_record r;
	hangar_image_info info;
	int rc;

	if ((rc = img_record_read(s, hex, &r)) != 0)
		return rc;
	memset(&info, 0, sizeof(info));
	info.version = HANGAR_IMAGE_INFO_VERSION;
	info.size = sizeof(info);
	info.digest = r.digest;
	info.names = (const char *const *)r.names;
	info.config_digest = r.config_digest;
	info.os = r.os;
	info.architecture = r.architecture;
	info.size_bytes = r.size;
	info.layer_count = (uint32_t)r.n_layers;
	info.layers = (const char *const *)r.layers;
	info.env = (const char *const *)r.env;
	info.workdir = r.workdir;
	info.user = r.user;
	info.created_us = r.created_us;
	info.in_use = img_in_use(s, hex, NULL);
	rc = fn(&info, payload);
	img_record_free(&r);
	return rc;
}

struct listing {
	struct img_dated *v;
	size_t n, cap;
	struct img_store *s;
};

static int collect(const char *hex, void *payload)
{
	struct listing *l = payload;
	struct img_record r;

	if (img_record_read(l->s, hex, &r) != 0) {
		herr_clear(); /* removed meanwhile, or damaged: not listed */
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v) {
			img_record_free(&r);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		l->v = v;
		l->cap = cap;
	}
	strcpy(l->v[l->n].hex, hex);
	l->v[l->n++].created_us = r.created_us;
	img_record_free(&r);
	return 0;
}

int hangar_image_list(hangar_ctx *ctx, hangar_image_fn fn, void *payload)
{
	struct img_store s;
	struct listing l = { 0 };
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	if ((rc = img_store_open(&s, ctx)) != 0)
		return rc;
	l.s = &s;
	rc = img_record_each(&s, collect, &l);
	if (!rc && l.n)
		qsort(l.v, l.n, sizeof(*l.v), img_dated_oldest_first);
	for (size_t i = l.n; !rc && i-- > 0;) {
		rc = report_one(&s, l.v[i].hex, fn, payload);
		if (rc == HANGAR_ENOTFOUND) {
			herr_clear(); /* removed since it was listed */
			rc = 0;
		}
	}
	free(l.v);
	img_store_close(&s);
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_image_inspect(hangar_ctx *ctx, const char *ref, hangar_image_fn fn, void *payload)
{
	struct img_store s;
	char hex[IMG_HEX_LEN + 1];
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(ref && *ref, "ref is required");
	HCHECK_ARG(fn, "fn is NULL");
	HCHECK_TEXT(ref, "ref");
	if ((rc = img_store_open(&s, ctx)) != 0)
		return rc;
	rc = img_find(&s, ref, hex);
	if (!rc)
		rc = report_one(&s, hex, fn, payload);
	img_store_close(&s);
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_image_remove(hangar_ctx *ctx, const char *ref)
{
	struct img_store s;
	struct img_record r;
	char hex[IMG_HEX_LEN + 1], path[128];
	uint64_t freed = 0;
	int rc, use_fd = -1;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(ref && *ref, "ref is required");
	HCHECK_TEXT(ref, "ref");
	if ((rc = img_store_open(&s, ctx)) != 0)
		return rc;
	if ((rc = img_store_lock(&s)) != 0 || (rc = img_find(&s, ref, hex)) != 0)
		goto out;
	if (img_in_use(&s, hex, &use_fd)) {
		rc = herr(HANGAR_EBUSY, HANGAR_ERRCAT_ARGUMENT, "image %s (sha256:%s) is used by a sandbox", ref, hex);
		goto out;
	}
	if ((rc = img_record_read(&s, hex, &r)) != 0)
		goto out;
	snprintf(path, sizeof(path), "images/%s.json", hex);
	if (unlinkat(s.dirfd, path, 0) < 0 && errno != ENOENT) {
		rc = herr_os(HANGAR_EOS, errno, "cannot remove %s/%s", s.dir, path);
		img_record_free(&r);
		goto out;
	}
	/* Its layers and blobs, where no other image has them. */
	img_drop_unused(&s, &r, &freed);
	img_record_free(&r);
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "removed image sha256:%s", hex);
	herr_clear();
out:
	if (use_fd >= 0)
		close(use_fd);
	img_store_close(&s);
	return rc;
}

int hangar_image_gc(uint64_t *out_freed, hangar_ctx *ctx, uint64_t max_bytes)
{
	uint64_t freed = 0;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	rc = img_gc(&freed, ctx, max_bytes);
	if (out_freed)
		*out_freed = freed;
	if (!rc)
		herr_clear();
	return rc;
}
