/*
 * Checkpoint handles, the index, and what capture and restore share:
 * deadlines and progress, zstd streaming, the caps, the native-path probe.
 * Reading back (the blob, an export) is here too: it is a restore without a
 * sandbox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "blobstore.h"
#include "ckpt.h"
#include "seal.h"

/* ---- handles -------------------------------------------------------------------- */

int ckpt_handle_new(hangar_checkpoint **out, hangar_ctx *ctx, struct store_ckpt *row)
{
	hangar_checkpoint *cp = calloc(1, sizeof(*cp));

	*out = NULL;
	if (!cp) {
		store_ckpt_free(row);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	atomic_init(&cp->refs, 1);
	cp->ctx = hangar_ctx_ref(ctx);
	cp->row = *row;
	memset(row, 0, sizeof(*row));
	*out = cp;
	return 0;
}

hangar_checkpoint *hangar_checkpoint_ref(hangar_checkpoint *cp)
{
	if (cp)
		atomic_fetch_add(&cp->refs, 1);
	return cp;
}

hangar_checkpoint *hangar_checkpoint_unref(hangar_checkpoint *cp)
{
	if (cp && atomic_fetch_sub(&cp->refs, 1) == 1) {
		store_ckpt_free(&cp->row);
		hangar_ctx_unref(cp->ctx);
		free(cp);
	}
	return NULL;
}

const char *hangar_checkpoint_id(const hangar_checkpoint *cp)
{
	return cp ? cp->row.id : NULL;
}

int hangar_checkpoint_get_info(hangar_checkpoint_info *out, const hangar_checkpoint *cp)
{
	hangar_checkpoint_info i;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(cp, "cp is NULL");
	if ((rc = hversioned_check(out, &hv_checkpoint_info, "out")) != 0)
		return rc;
	memset(&i, 0, sizeof(i));
	i.id = cp->row.id;
	i.session_id = cp->row.session_id;
	i.parent_id = cp->row.parent_id;
	i.workspace = cp->row.workspace;
	i.selection = cp->row.selection;
	i.store_url = cp->row.store_url;
	i.content_hash = cp->row.content_hash;
	i.labels_json = cp->row.labels_json;
	i.created_at_us = cp->row.created_us;
	i.stored_bytes = cp->row.stored_bytes;
	i.archive_bytes = cp->row.archive_bytes;
	i.files = cp->row.files;
	i.blob_bytes = cp->row.blob_bytes;
	hresult_store(out, &i, sizeof(i));
	return 0;
}

static int valid_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 0 && n <= 128 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
	       id[0] != '.';
}

int hangar_checkpoint_lookup(hangar_checkpoint **out, hangar_ctx *ctx, const char *id)
{
	struct store_ckpt row;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(valid_id(id), "id is not a checkpoint id");
	if ((rc = store_ckpt_get(ctx, id, &row)) != 0)
		return rc;
	rc = ckpt_handle_new(out, ctx, &row);
	if (rc == 0)
		herr_clear();
	return rc;
}

struct list_walk {
	hangar_ctx *ctx;
	hangar_checkpoint_list_fn fn;
	void *payload;
};

static int list_one(const struct store_ckpt *c, void *payload)
{
	struct list_walk *w = payload;
	struct store_ckpt copy = { 0 };
	hangar_checkpoint *cp;
	char **dst[] = { &copy.id, &copy.session_id, &copy.parent_id, &copy.workspace,
			 &copy.selection, &copy.store_url, &copy.content_hash, &copy.labels_json };
	char *const src[] = { c->id, c->session_id, c->parent_id, c->workspace,
			      c->selection, c->store_url, c->content_hash, c->labels_json };
	int rc;

	/* A handle of its own, so a reference the callback takes outlives the listing. */
	copy.created_us = c->created_us;
	copy.stored_bytes = c->stored_bytes;
	copy.archive_bytes = c->archive_bytes;
	copy.files = c->files;
	copy.blob_bytes = c->blob_bytes;
	for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
		if (!(*dst[i] = strdup(src[i]))) {
			store_ckpt_free(&copy);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	if ((rc = ckpt_handle_new(&cp, w->ctx, &copy)) != 0)
		return rc;
	rc = w->fn(cp, w->payload);
	hangar_checkpoint_unref(cp);
	return rc;
}

int hangar_checkpoint_list(hangar_ctx *ctx, const char *session_id, hangar_checkpoint_list_fn fn, void *payload)
{
	struct list_walk w = { ctx, fn, payload };

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	HCHECK_ARG(!session_id || valid_id(session_id), "session_id is not a session id");
	return store_ckpt_list(ctx, session_id, list_one, &w);
}

void ckpt_archive_name(char out[CKPT_NAME_MAX], const char *id)
{
	snprintf(out, CKPT_NAME_MAX, "%s.tar.zst.sealed", id);
}

void ckpt_blob_name(char out[CKPT_NAME_MAX], const char *id)
{
	snprintf(out, CKPT_NAME_MAX, "%s.blob.sealed", id);
}

void ckpt_blob_seal_id(char out[CKPT_NAME_MAX], const char *id)
{
	snprintf(out, CKPT_NAME_MAX, "%s/blob", id);
}

int hangar_checkpoint_delete(hangar_checkpoint *cp)
{
	struct blobstore *bs;
	char name[CKPT_NAME_MAX];
	int rc;

	HCHECK_ARG(cp, "cp is NULL");
	if ((rc = blobstore_open(&bs, cp->ctx, cp->row.store_url)) != 0)
		return rc;
	/* Objects first: an index row without objects is seen and can be deleted
	 * again; objects without a row would be lost from sight. */
	ckpt_blob_name(name, cp->row.id);
	rc = blob_delete(bs, name);
	if (rc == 0 || rc == HANGAR_ENOTFOUND) {
		ckpt_archive_name(name, cp->row.id);
		rc = blob_delete(bs, name);
	}
	blobstore_free(bs);
	if (rc != 0 && rc != HANGAR_ENOTFOUND)
		return rc;
	rc = store_ckpt_delete(cp->ctx, cp->row.id);
	if (rc == 0) {
		hangar_sys_log(cp->ctx, HANGAR_LOG_INFO, "checkpoint %s deleted", cp->row.id);
		herr_clear();
	}
	return rc;
}

/* ---- caps, deadlines, progress --------------------------------------------------- */

void ckpt_tar_limits(hangar_ctx *ctx, struct tarcheck_limits *lim)
{
	uint64_t max = (uint64_t)hctx_int(ctx, HS_CHECKPOINT_MAX_BYTES), cap;

	cap = max > UINT64_MAX / 8 ? UINT64_MAX : max * 8;
	if (cap < (1ull << 30))
		cap = 1ull << 30;
	memset(lim, 0, sizeof(*lim));
	lim->max_members = TARCHECK_MAX_MEMBERS;
	lim->max_name = TARCHECK_MAX_NAME;
	lim->max_total = cap;
	lim->max_member = cap;
}

void ckpt_run_init(struct ckpt_run *r, hangar_ctx *ctx, const char *what, int64_t timeout_sec,
		   hangar_cancel_fn cancel, void *cancel_payload, hangar_progress_fn progress, void *progress_payload,
		   uint64_t total)
{
	memset(r, 0, sizeof(*r));
	r->what = what;
	r->timeout_sec = timeout_sec > 0 ? timeout_sec : hctx_int(ctx, HS_CHECKPOINT_TIMEOUT);
	r->deadline_ms = clock_mono_ms() + r->timeout_sec * 1000;
	r->cancel = cancel;
	r->cancel_payload = cancel_payload;
	r->progress = progress;
	r->progress_payload = progress_payload;
	r->total = total;
}

int ckpt_run_step(struct ckpt_run *r, uint64_t n)
{
	r->done += n;
	if (r->cancel && r->cancel(r->cancel_payload))
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the checkpoint %s was cancelled", r->what);
	if (clock_mono_ms() > r->deadline_ms)
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_SANDBOX,
			    "the checkpoint %s did not finish within %lld s (HANGAR_CHECKPOINT_TIMEOUT_SECONDS)", r->what,
			    (long long)r->timeout_sec);
	if (n && r->progress && r->progress(r->done, r->total, r->progress_payload))
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the checkpoint %s was cancelled by its progress "
			    "callback", r->what);
	return 0;
}

int64_t ckpt_run_left_ms(const struct ckpt_run *r)
{
	int64_t left = r->deadline_ms - clock_mono_ms();

	return left > 0 ? left : 1;
}

void ckpt_random_suffix(char out[17])
{
	unsigned char raw[8];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(out, 17, raw, sizeof(raw));
}

/* ---- zstd ------------------------------------------------------------------------ */

struct ckpt_zdec {
	ZSTD_DCtx *z;
	ckpt_sink sink;
	void *payload;
	size_t last;                /* ZSTD_decompressStream's last answer: 0 at a frame's end */
	int fed;
	unsigned char out[1 << 17];
};

int ckpt_zdec_new(struct ckpt_zdec **out, ckpt_sink sink, void *payload)
{
	struct ckpt_zdec *z = calloc(1, sizeof(*z));

	*out = NULL;
	if (!z || !(z->z = ZSTD_createDCtx())) {
		free(z);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	/* A window over 128 MiB is not ours (level 1 uses far less): refuse it rather than allocate. */
	ZSTD_DCtx_setParameter(z->z, ZSTD_d_windowLogMax, 27);
	z->sink = sink;
	z->payload = payload;
	*out = z;
	return 0;
}

int ckpt_zdec_feed(struct ckpt_zdec *z, const void *data, size_t len)
{
	ZSTD_inBuffer in = { data, len, 0 };
	int full = 0;

	if (len)
		z->fed = 1;
	/* Until the input is used up and the decoder holds nothing back (its output did not fill). */
	while (in.pos < in.size || full) {
		ZSTD_outBuffer o = { z->out, sizeof(z->out), 0 };
		size_t r = ZSTD_decompressStream(z->z, &o, &in);
		int rc;

		if (ZSTD_isError(r))
			return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_SANDBOX, "the archive is not valid zstd: %s",
				    ZSTD_getErrorName(r));
		z->last = r;
		full = o.pos == o.size;
		if (o.pos && (rc = z->sink(z->payload, z->out, o.pos)) != 0)
			return rc;
	}
	return 0;
}

int ckpt_zdec_finish(struct ckpt_zdec *z)
{
	if (!z->fed || z->last != 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_SANDBOX, "the archive is truncated: its zstd frame does not end");
	return 0;
}

void ckpt_zdec_free(struct ckpt_zdec *z)
{
	if (!z)
		return;
	ZSTD_freeDCtx(z->z);
	free(z);
}

struct ckpt_zenc {
	ZSTD_CCtx *z;
	ckpt_sink sink;
	void *payload;
	unsigned char out[1 << 17];
};

int ckpt_zenc_new(struct ckpt_zenc **out, int level, ckpt_sink sink, void *payload)
{
	struct ckpt_zenc *z = calloc(1, sizeof(*z));

	*out = NULL;
	if (!z || !(z->z = ZSTD_createCCtx())) {
		free(z);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	ZSTD_CCtx_setParameter(z->z, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(z->z, ZSTD_c_checksumFlag, 1);
	z->sink = sink;
	z->payload = payload;
	*out = z;
	return 0;
}

static int zenc_run(struct ckpt_zenc *z, const void *data, size_t len, ZSTD_EndDirective how)
{
	ZSTD_inBuffer in = { data, len, 0 };

	for (;;) {
		ZSTD_outBuffer o = { z->out, sizeof(z->out), 0 };
		size_t r = ZSTD_compressStream2(z->z, &o, &in, how);
		int rc;

		if (ZSTD_isError(r))
			return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "zstd: %s", ZSTD_getErrorName(r));
		if (o.pos && (rc = z->sink(z->payload, z->out, o.pos)) != 0)
			return rc;
		if (how == ZSTD_e_continue ? in.pos == in.size : r == 0)
			return 0;
	}
}

int ckpt_zenc_write(struct ckpt_zenc *z, const void *data, size_t len)
{
	return zenc_run(z, data, len, ZSTD_e_continue);
}

int ckpt_zenc_finish(struct ckpt_zenc *z)
{
	return zenc_run(z, NULL, 0, ZSTD_e_end);
}

void ckpt_zenc_free(struct ckpt_zenc *z)
{
	if (!z)
		return;
	ZSTD_freeCCtx(z->z);
	free(z);
}

/* ---- the native path ----------------------------------------------------------------- */

int ckpt_native(hangar_sandbox *sb, const char *user)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c;
	struct sbview *v;
	int known = atomic_load(&sb->archive_api), version = 0, rc;

	if (known)
		return known > 0;
	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	v = sandbox_begin(sb, &call, user);
	if (!v)
		return hangar_error_last()->code;
	rc = envd_hangar_info(c, &call, &version, &st);
	sbview_put(v);
	if (rc != 0)
		return sandbox_classify_failure(sb, rc, &st);
	atomic_store(&sb->archive_api, version >= 1 ? 1 : -1);
	hangar_sys_log(sb->ctx, HANGAR_LOG_DEBUG, "sandbox %s: %s", sb->id,
	     version >= 1 ? "envd has the archive endpoint" : "envd lacks the archive endpoint: checkpoints use tar");
	return version >= 1;
}

/* ---- reading back: the blob and exports ---------------------------------------------- */

struct opened {
	struct ckpt_run *run;
	struct seal_reader *r;
	ckpt_sink sink;
	void *payload;
};

static int opened_feed(void *payload, const void *data, size_t len)
{
	struct opened *o = payload;
	int rc;

	if (o->run && (rc = ckpt_run_step(o->run, len)) != 0)
		return rc;
	return seal_reader_feed(o->r, data, len);
}

/* Streams object name of cp, opened (sealed for seal_id), to sink; 0 only when its FINAL tag checked out. */
static int read_object(hangar_checkpoint *cp, const char *name, const char *seal_id, struct ckpt_run *run,
		       ckpt_sink sink, void *payload)
{
	struct seal_keyring kr;
	struct blobstore *bs = NULL;
	struct opened o = { run, NULL, sink, payload };
	int rc;

	if ((rc = seal_keyring_load(&kr, cp->ctx)) != 0)
		return rc;
	rc = seal_reader_new(&o.r, &kr, seal_id, cp->row.session_id, sink, payload);
	seal_keyring_wipe(&kr);
	if (rc == 0)
		rc = blobstore_open(&bs, cp->ctx, cp->row.store_url);
	if (rc == 0)
		rc = blob_read(bs, name, opened_feed, &o);
	if (rc == HANGAR_ENOTFOUND)
		herr_prefix("checkpoint %s", cp->row.id);
	if (rc == 0)
		rc = seal_reader_finish(o.r);
	seal_reader_free(o.r);
	blobstore_free(bs);
	return rc;
}

static int to_hbuf(void *payload, const void *data, size_t len)
{
	hangar_buf *b = payload;
	char *p;

	if (b->size + len + 1 > b->reserved) {
		size_t cap = b->reserved ? b->reserved : 4096;

		while (cap < b->size + len + 1)
			cap *= 2;
		if (!(p = realloc(b->ptr, cap)))
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		b->ptr = p;
		b->reserved = cap;
	}
	memcpy(b->ptr + b->size, data, len);
	b->size += len;
	b->ptr[b->size] = '\0';
	return 0;
}

int hangar_checkpoint_read_blob(hangar_buf *out, hangar_checkpoint *cp)
{
	hangar_buf b = { NULL, 0, 0 };
	char name[CKPT_NAME_MAX], seal_id[CKPT_NAME_MAX];
	int rc;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(cp, "cp is NULL");
	if (!cp->row.blob_bytes) {
		rc = to_hbuf(&b, "", 0);
	} else {
		ckpt_blob_name(name, cp->row.id);
		ckpt_blob_seal_id(seal_id, cp->row.id);
		rc = read_object(cp, name, seal_id, NULL, to_hbuf, &b);
		if (rc == 0 && b.size != cp->row.blob_bytes)
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "checkpoint %s refused: its blob is %zu bytes, the "
				  "index says %llu", cp->row.id, b.size, (unsigned long long)cp->row.blob_bytes);
	}
	if (rc != 0) {
		if (b.ptr)
			sodium_memzero(b.ptr, b.reserved);
		free(b.ptr);
		return rc;
	}
	hangar_buf_dispose(out);
	*out = b;
	herr_clear();
	return 0;
}

struct export_out {
	int fd;
	const char *path;
	crypto_generichash_state hash;
	uint64_t bytes;
};

static int export_write(void *payload, const void *data, size_t len)
{
	struct export_out *e = payload;
	const char *p = data;

	crypto_generichash_update(&e->hash, data, len);
	e->bytes += len;
	while (len) {
		ssize_t n = write(e->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return herr_os(HANGAR_EOS, errno, "cannot write %s", e->path);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ckpt_hash_text(char out[80], const unsigned char digest[32])
{
	char hex[65];

	sodium_bin2hex(hex, sizeof(hex), digest, 32);
	return snprintf(out, 80, "blake2b-256:%s", hex);
}

int hangar_checkpoint_export(hangar_checkpoint *cp, const char *local_path, const hangar_restore_opts *opts)
{
	hangar_restore_opts o;
	struct export_out e = { -1, local_path, { { 0 } }, 0 };
	struct ckpt_run run;
	char tmp[PATH_MAX], name[CKPT_NAME_MAX], hash[80];
	unsigned char digest[32];
	int rc;

	HCHECK_ARG(cp, "cp is NULL");
	HCHECK_ARG(local_path && *local_path, "local_path is empty");
	HCHECK_ARG(strlen(local_path) < sizeof(tmp) - 32, "local_path is too long");
	if ((rc = HOPTS_COPY(o, opts, hv_restore_opts, "opts")) != 0)
		return rc;
	HCHECK_ARG(o.timeout_sec >= 0 && o.timeout_sec <= 86400, "opts->timeout_sec must be from 0 to 86400");
	ckpt_run_init(&run, cp->ctx, "export", o.timeout_sec, o.cancel, o.cancel_payload, o.progress,
		      o.progress_payload, cp->row.stored_bytes);
	snprintf(tmp, sizeof(tmp), "%s.hangar-XXXXXX", local_path);
	e.fd = mkostemp(tmp, O_CLOEXEC);
	if (e.fd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot create %s", tmp);
	crypto_generichash_init(&e.hash, NULL, 0, sizeof(digest));
	ckpt_archive_name(name, cp->row.id);
	rc = read_object(cp, name, cp->row.id, &run, export_write, &e);
	if (rc == 0) {
		crypto_generichash_final(&e.hash, digest, sizeof(digest));
		ckpt_hash_text(hash, digest);
		if (strcmp(hash, cp->row.content_hash) != 0 || e.bytes != cp->row.archive_bytes)
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS,
				  "checkpoint %s refused: its archive does not match the index (%s)", cp->row.id, hash);
	}
	if (rc == 0 && fsync(e.fd) < 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot write %s", tmp);
	if (close(e.fd) < 0 && rc == 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot write %s", tmp);
	if (rc == 0 && rename(tmp, local_path) < 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot rename %s to %s", tmp, local_path);
	if (rc != 0) {
		unlink(tmp);
		return rc;
	}
	herr_clear();
	return 0;
}

int hangar_checkpoint_opts_init(hangar_checkpoint_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_checkpoint_opts);
}

int hangar_restore_opts_init(hangar_restore_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_restore_opts);
}
