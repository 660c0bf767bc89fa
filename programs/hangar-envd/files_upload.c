/*
 * POST /files: uploads written to disk as the body arrives (raw, or
 * multipart with any number of files, optionally gzip-encoded), never held
 * whole in memory. An upload never follows a symbolic link in the final
 * component and never changes an existing file's owner.
 */
#define _GNU_SOURCE
#include "files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "creds.h"
#include "envd.h"
#include "files_common.h"
#include "multipart.h"

#define WRITE_BUF (64 * 1024)     /* upload bytes gathered before a write() */
#define INFLATE_BUF (32 * 1024)

/* One POST /files, from its headers to its answer. */
struct files_upload {
	struct envd_user user;
	unsigned status;              /* 0 while all is well, else the answer */
	char msg[PATH_MAX + 256];
	char *path_param;             /* ?path=, NULL when absent */
	int raw;                      /* octet-stream body, else multipart */
	struct multipart_parser *mp;
	int skip_part;                /* the current part is not named "file" */

	int gzip;                     /* Content-Encoding: gzip */
	int gz_member_done;           /* between gzip members (or at the end) */
	int gz_any;                   /* at least one member finished */
	z_stream zs;
	unsigned char *zout;

	int fd;                       /* the file being written, or -1 */
	char target[PATH_MAX];
	char *wbuf;
	size_t wlen;

	char **meta_keys, **meta_values;
	size_t meta_n, meta_cap;
	int meta_oom;

	cJSON *results;
};

static int upload_fail(struct files_upload *u, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Records the first error; everything after it is drained and ignored. */
static int upload_fail(struct files_upload *u, unsigned status, const char *fmt, ...)
{
	va_list ap;

	if (u->status)
		return -1;
	u->status = status;
	va_start(ap, fmt);
	vsnprintf(u->msg, sizeof(u->msg), fmt, ap);
	va_end(ap);
	return -1;
}

static int disk_full(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

/* Gives the thread the upload user's file credentials; -1 with the failure recorded when it cannot. */
static int upload_act_as(struct files_upload *u, struct envd_creds *creds)
{
	char msg[sizeof(u->msg)];
	unsigned status = files_act_as(&u->user, creds, msg, sizeof(msg));

	return status ? upload_fail(u, status, "%s", msg) : 0;
}

/* ---- metadata headers ---- */

static int meta_grow(struct files_upload *u)
{
	size_t cap = u->meta_cap ? u->meta_cap * 2 : 8;
	char **k = realloc(u->meta_keys, cap * sizeof(*k));

	if (!k)
		return -1;
	u->meta_keys = k;
	k = realloc(u->meta_values, cap * sizeof(*k));
	if (!k)
		return -1;
	u->meta_values = k;
	u->meta_cap = cap;
	return 0;
}

/* X-Metadata-<key> headers: key lower-cased, first value wins, empty key skipped. */
static enum MHD_Result collect_meta(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct files_upload *u = cls;
	char *k, *v;

	(void)kind;
	if (!key || strncasecmp(key, "X-Metadata-", 11) != 0 || !key[11])
		return MHD_YES;
	for (size_t i = 0; i < u->meta_n; i++)
		if (strcasecmp(u->meta_keys[i], key + 11) == 0)
			return MHD_YES;
	if (u->meta_n == u->meta_cap && meta_grow(u) < 0) {
		u->meta_oom = 1;
		return MHD_NO;
	}
	k = strdup(key + 11);
	v = strdup(value ? value : "");
	if (!k || !v) {
		free(k);
		free(v);
		u->meta_oom = 1;
		return MHD_NO;
	}
	for (char *p = k; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	u->meta_keys[u->meta_n] = k;
	u->meta_values[u->meta_n++] = v;
	return MHD_YES;
}

/* The metadata rules (envd_metadata_check), before any file is touched. */
static int validate_meta(struct files_upload *u)
{
	char msg[sizeof(u->msg)];

	if (envd_metadata_check((const char *const *)u->meta_keys, (const char *const *)u->meta_values, u->meta_n,
				msg, sizeof(msg)) < 0)
		return upload_fail(u, 400, "%s", msg);
	return 0;
}

static cJSON *meta_object(const struct files_upload *u)
{
	cJSON *o;

	if (u->meta_n == 0)
		return NULL;
	o = cJSON_CreateObject();
	for (size_t i = 0; o && i < u->meta_n; i++)
		cJSON_AddStringToObject(o, u->meta_keys[i], u->meta_values[i]);
	return o;
}

/* ---- one target file ---- */

/*
 * Writes go to the descriptor opened as the user, with the daemon's own
 * credentials: taking the user's costs tens of microseconds, a large share
 * of writing a 64 KiB block. The one thing a write does with credentials, clearing set-user-ID
 * and set-group-ID bits unless the writer has CAP_FSETID, was already done
 * as the user by the ftruncate in open_target_as_user().
 */
static int write_all(struct files_upload *u, const char *data, size_t len)
{
	while (len > 0) {
		ssize_t n = write(u->fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && disk_full(errno))
			return upload_fail(u, 507, "not enough disk space available");
		if (n <= 0)
			return upload_fail(u, 500, "error writing file: %s", n < 0 ? strerror(errno) : "short write");
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int flush_file(struct files_upload *u)
{
	int rc = write_all(u, u->wbuf, u->wlen);

	u->wlen = 0;
	return rc;
}

static int file_write(struct files_upload *u, const char *data, size_t len)
{
	if (u->fd < 0 || u->status)
		return u->status ? -1 : 0;
	if (u->wlen + len > WRITE_BUF) {
		if (flush_file(u) < 0)
			return -1;
		if (len >= WRITE_BUF)
			return write_all(u, data, len);
	}
	memcpy(u->wbuf + u->wlen, data, len);
	u->wlen += len;
	return 0;
}

static int ensure_parent(struct files_upload *u, const char *path)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int rc;

	if (n == 0)
		return 0; /* the root, or no directory part */
	memcpy(parent, path, n);
	parent[n] = '\0';
	rc = envd_ensure_dirs(parent);
	if (rc == -ENOTDIR)
		return upload_fail(u, 500, "error ensuring directories: path is a file");
	if (rc == -EACCES || rc == -EPERM)
		return upload_fail(u, 403, "permission denied: user '%s' cannot create '%s'", u->user.name, parent);
	if (rc < 0)
		return upload_fail(u, 500, "error ensuring directories: %s", strerror(-rc));
	return 0;
}

/* Refuses what is already at path unless it is a regular file. */
static int check_existing(struct files_upload *u, const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == EACCES || errno == EPERM)
			return upload_fail(u, 403, "permission denied: user '%s' cannot write '%s'", u->user.name, path);
		return upload_fail(u, 500, "error getting file info: %s", strerror(errno));
	}
	if (S_ISDIR(st.st_mode))
		return upload_fail(u, 400, "path is a directory: %s", path);
	if (S_ISLNK(st.st_mode))
		return upload_fail(u, 400, "path '%s' is a symbolic link: uploads never write through one", path);
	if (!S_ISREG(st.st_mode))
		return upload_fail(u, 400, "path '%s' is %s: only regular files can be read or written", path,
				   files_kind_name(st.st_mode));
	return 0;
}

/*
 * Creates missing parents and opens the target, as the user. The final
 * component is opened with O_NOFOLLOW and checked on the descriptor before
 * it is truncated; nothing is chowned: what the user creates is theirs, and
 * an existing file keeps its owner.
 */
static int open_target_as_user(struct files_upload *u, const char *path)
{
	struct stat st;
	char msg[PATH_MAX + 128];
	unsigned status;
	int fd;

	if (ensure_parent(u, path) < 0 || check_existing(u, path) < 0)
		return -1;
	fd = files_open_no_magic(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
	if (fd < 0) {
		int e = errno;

		if (disk_full(e))
			return upload_fail(u, 507, "not enough inodes available: %s", strerror(e));
		if (e == EACCES || e == EPERM)
			return upload_fail(u, 403, "permission denied: user '%s' cannot write '%s'", u->user.name,
					   path);
		if (e == ELOOP)
			return upload_fail(u, 400, "path '%s' is a symbolic link: uploads never write through one",
					   path);
		if (e == EISDIR)
			return upload_fail(u, 400, "path is a directory: %s", path);
		if (e == ENXIO || e == EWOULDBLOCK)
			return upload_fail(u, 400, "path '%s' is not a regular file: only regular files can be read "
					   "or written", path);
		return upload_fail(u, 500, "error opening file: %s", strerror(e));
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		return upload_fail(u, 500, "error opening file: %s", strerror(errno));
	}
	if ((status = files_refuse_kind(path, &st, fd, msg, sizeof(msg))) != 0) {
		close(fd);
		return upload_fail(u, status, "%s", msg);
	}
	if (ftruncate(fd, 0) < 0) {
		int e = errno;

		close(fd);
		if (e == EACCES || e == EPERM)
			return upload_fail(u, 403, "permission denied: user '%s' cannot write '%s'", u->user.name,
					   path);
		return upload_fail(u, 500, "error truncating file: %s", strerror(e));
	}
	u->fd = fd;
	return 0;
}

/* Whether this upload has already written path: a second file there is refused. */
static int already_written(struct files_upload *u, const char *path)
{
	const cJSON *e;

	cJSON_ArrayForEach(e, u->results) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "path");

		if (cJSON_IsString(p) && strcmp(p->valuestring, path) == 0)
			return 1;
	}
	return 0;
}

/*
 * Resolves requested (?path, or a part's filename) for the user and opens
 * it as the file the next body bytes go to.
 */
static int open_target(struct files_upload *u, const char *requested)
{
	struct rpc_error err = { 0 };
	struct envd_creds creds;
	char path[PATH_MAX];
	int rc;

	if (envd_resolve_path(&u->user, requested, path, sizeof(path), &err) != 0)
		return upload_fail(u, 400, "error resolving path: %s", err.message);
	if (already_written(u, path))
		return upload_fail(u, 400, "you cannot upload multiple files to the same path '%s' in one upload "
				   "request, only the first specified file was uploaded", path);
	if (upload_act_as(u, &creds) < 0)
		return -1;
	rc = open_target_as_user(u, path);
	envd_creds_leave(&creds);
	if (rc < 0)
		return -1;
	if (!u->wbuf && !(u->wbuf = malloc(WRITE_BUF)))
		return upload_fail(u, 500, "out of memory");
	snprintf(u->target, sizeof(u->target), "%s", path);
	u->wlen = 0;
	return 0;
}

/* Flushes and closes the current file, applies metadata, records the entry. */
static int close_target(struct files_upload *u)
{
	struct envd_creds creds;
	char base[NAME_MAX + 2];
	cJSON *entry, *meta;
	int rc;

	if (u->fd < 0)
		return 0;
	rc = flush_file(u);
	if (close(u->fd) < 0 && rc == 0)
		rc = disk_full(errno) ? upload_fail(u, 507, "not enough disk space available")
				      : upload_fail(u, 500, "error writing file: %s", strerror(errno));
	u->fd = -1;
	if (rc < 0)
		return -1;
	if (upload_act_as(u, &creds) < 0)
		return -1;
	rc = envd_metadata_write(u->target, (const char *const *)u->meta_keys,
				 (const char *const *)u->meta_values, u->meta_n);
	envd_creds_leave(&creds);
	if (rc == -EACCES || rc == -EPERM)
		return upload_fail(u, 403, "permission denied: user '%s' cannot set metadata on '%s'",
				   u->user.name, u->target);
	if (rc == -EINVAL)
		return upload_fail(u, 400, "invalid metadata for '%s'", u->target);
	if (rc < 0 && disk_full(-rc))
		return upload_fail(u, 507, "not enough disk space available for metadata");
	if (rc < 0)
		return upload_fail(u, 500, "error setting metadata: %s", strerror(-rc));
	envd_base_name(u->target, base, sizeof(base));
	entry = cJSON_CreateObject();
	if (!entry)
		return upload_fail(u, 500, "out of memory");
	cJSON_AddStringToObject(entry, "path", u->target);
	cJSON_AddStringToObject(entry, "name", base);
	cJSON_AddStringToObject(entry, "type", "file");
	meta = meta_object(u);
	if (meta)
		cJSON_AddItemToObject(entry, "metadata", meta);
	cJSON_AddItemToArray(u->results, entry);
	return 0;
}

/* ---- multipart callbacks ---- */

static int on_part_begin(void *ctx, const char *name, const char *filename)
{
	struct files_upload *u = ctx;
	const char *src = u->path_param ? u->path_param : filename;

	u->skip_part = !name || strcmp(name, "file") != 0;
	if (u->skip_part)
		return 0;
	if (!src)
		return upload_fail(u, 400, "error getting multipart custom part file name: "
				   "filename not found in Content-Disposition header");
	return open_target(u, src);
}

static int on_part_data(void *ctx, const char *data, size_t len)
{
	struct files_upload *u = ctx;

	if (u->skip_part)
		return 0;
	return file_write(u, data, len);
}

static int on_part_end(void *ctx)
{
	struct files_upload *u = ctx;

	if (u->skip_part) {
		u->skip_part = 0;
		return 0;
	}
	return close_target(u);
}

static const struct multipart_callbacks part_callbacks = {
	.part_begin = on_part_begin,
	.part_data = on_part_data,
	.part_end = on_part_end,
};

/* ---- body plumbing ---- */

/* Decoded body bytes, to the file or the multipart parser. */
static void body_bytes(struct files_upload *u, const char *data, size_t len)
{
	if (u->status || len == 0)
		return;
	if (u->raw) {
		file_write(u, data, len);
		return;
	}
	if (multipart_feed(u->mp, data, len) < 0 && !u->status)
		upload_fail(u, 400, "error reading form: %s", multipart_error(u->mp));
}

static void inflate_bytes(struct files_upload *u, const char *data, size_t len)
{
	u->zs.next_in = (unsigned char *)data;
	u->zs.avail_in = (uInt)len;
	do {
		int rc;

		if (u->gz_member_done) {
			/* More bytes after a complete member: another member follows. */
			inflateReset(&u->zs);
			u->gz_member_done = 0;
		}
		u->zs.next_out = u->zout;
		u->zs.avail_out = INFLATE_BUF;
		rc = inflate(&u->zs, Z_NO_FLUSH);
		body_bytes(u, (const char *)u->zout, INFLATE_BUF - u->zs.avail_out);
		if (rc == Z_STREAM_END) {
			u->gz_member_done = 1;
			u->gz_any = 1;
		} else if (rc == Z_BUF_ERROR) {
			break;
		} else if (rc != Z_OK) {
			upload_fail(u, 400, "error decompressing request body: %s",
				    u->zs.msg ? u->zs.msg : "invalid gzip data");
		}
	} while (!u->status && (u->zs.avail_in > 0 || (u->zs.avail_out == 0 && !u->gz_member_done)));
}

void files_upload_data(struct files_upload *u, const char *data, size_t len)
{
	if (!u || u->status)
		return;
	if (u->gzip) {
		/* zlib counts in uInt; hand very large chunks over in pieces. */
		while (len > 0 && !u->status) {
			size_t n = len > (1u << 30) ? (1u << 30) : len;

			inflate_bytes(u, data, n);
			data += n;
			len -= n;
		}
		return;
	}
	body_bytes(u, data, len);
}

/* ---- begin / finish ---- */

static int content_encoding_gzip(struct files_upload *u, const char *ce)
{
	size_t n;

	if (!ce || !*ce)
		return 0;
	while (*ce == ' ' || *ce == '\t')
		ce++;
	n = strcspn(ce, "; \t");
	if (n == 8 && strncasecmp(ce, "identity", 8) == 0)
		return 0;
	if (n == 4 && strncasecmp(ce, "gzip", 4) == 0)
		return 1;
	upload_fail(u, 400, "error decompressing request body: unsupported Content-Encoding: %s, "
		    "supported: [gzip]", ce);
	return -1;
}

/* The media type of a Content-Type, lower-cased, without parameters. */
static void media_type(const char *ct, char *out, size_t outsz)
{
	size_t n = 0;

	while (ct && (*ct == ' ' || *ct == '\t'))
		ct++;
	for (; ct && *ct && *ct != ';' && n + 1 < outsz; ct++)
		out[n++] = (char)tolower((unsigned char)*ct);
	while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '\t'))
		n--;
	out[n] = '\0';
}

static int setup_body(struct files_upload *u, struct envd_req *r)
{
	const char *ct = envd_req_header(r, "Content-Type");
	char mt[128];

	media_type(ct, mt, sizeof(mt));
	if (strcmp(mt, "application/octet-stream") == 0) {
		u->raw = 1;
		if (!u->path_param)
			return upload_fail(u, 400, "path query parameter is required for raw body upload");
		return open_target(u, u->path_param);
	}
	if (strncmp(mt, "multipart/", 10) == 0) {
		u->mp = multipart_new(ct, &part_callbacks, u);
		if (!u->mp)
			return upload_fail(u, 400, "error parsing multipart form: no multipart boundary param "
					   "in Content-Type");
		return 0;
	}
	return upload_fail(u, 400, "unsupported content type: %s, expected multipart/form-data or "
			   "application/octet-stream", ct ? ct : "");
}

static int setup_gzip(struct files_upload *u)
{
	u->zout = malloc(INFLATE_BUF);
	if (!u->zout || inflateInit2(&u->zs, 15 + 16) != Z_OK)
		return upload_fail(u, 500, "cannot set up gzip decoding");
	u->gzip = 1;
	return 0;
}

static int upload_prepare(struct files_upload *u, struct envd_req *r)
{
	const char *username = files_username(r);
	const char *path = envd_req_query(r, "path");
	char msg[sizeof(u->msg)];
	unsigned status;
	int gz;

	if (!username)
		return upload_fail(u, 400, "username not provided");
	gz = content_encoding_gzip(u, envd_req_header(r, "Content-Encoding"));
	if (gz < 0)
		return -1;
	if ((status = files_lookup_user(username, &u->user, msg, sizeof(msg))) != 0)
		return upload_fail(u, status, "%s", msg);
	if (path && !(u->path_param = strdup(path)))
		return upload_fail(u, 500, "out of memory");
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_meta, u);
	if (u->meta_oom)
		return upload_fail(u, 500, "out of memory");
	if (validate_meta(u) < 0)
		return -1;
	if (!(u->results = cJSON_CreateArray()))
		return upload_fail(u, 500, "out of memory");
	if (gz && setup_gzip(u) < 0)
		return -1;
	return setup_body(u, r);
}

/*
 * A refused upload is still returned: its sticky error drains the body and is
 * answered by files_upload_finish. Answering before the body is read would
 * have libmicrohttpd drop the connection without a response. Only running
 * out of memory refuses here.
 */
struct files_upload *files_upload_begin(struct envd_req *r, unsigned *status, struct MHD_Response **resp)
{
	struct files_upload *u = calloc(1, sizeof(*u));

	if (!u) {
		*status = 500;
		*resp = envd_rest_error(500, "out of memory");
		return NULL;
	}
	u->fd = -1;
	upload_prepare(u, r);
	return u;
}

unsigned files_upload_finish(struct files_upload *u, struct MHD_Response **resp)
{
	char *json;

	if (!u->status && u->gzip && (!u->gz_any || !u->gz_member_done))
		upload_fail(u, 400, "error decompressing request body: unexpected EOF");
	if (!u->status && u->raw)
		close_target(u);
	else if (!u->status && multipart_finish(u->mp) < 0)
		upload_fail(u, 400, "error reading form: %s", multipart_error(u->mp));
	if (u->status) {
		*resp = envd_rest_error((int)u->status, "%s", u->msg);
		return u->status;
	}
	json = cJSON_PrintUnformatted(u->results);
	if (!json) {
		*resp = envd_rest_error(500, "out of memory");
		return 500;
	}
	*resp = MHD_create_response_from_buffer(strlen(json), json, MHD_RESPMEM_MUST_FREE);
	if (!*resp) {
		free(json);
		*resp = envd_rest_error(500, "out of memory");
		return 500;
	}
	MHD_add_response_header(*resp, "Content-Type", "application/json");
	return 200;
}

void files_upload_free(struct files_upload *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	if (u->gzip)
		inflateEnd(&u->zs);
	free(u->zout);
	multipart_free(u->mp);
	free(u->wbuf);
	for (size_t i = 0; i < u->meta_n; i++) {
		free(u->meta_keys[i]);
		free(u->meta_values[i]);
	}
	free(u->meta_keys);
	free(u->meta_values);
	free(u->path_param);
	cJSON_Delete(u->results);
	free(u);
}
