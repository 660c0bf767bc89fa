/*
 * Files in a sandbox: whole reads and writes (reads capped, never cut),
 * streaming copies in and out, and the filesystem RPCs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/pjson.h"
#include "sandbox.h"
#include "core/versioned.h"

#define COPY_TIMEOUT_MAX 86400   /* as HANGAR_COPY_TIMEOUT_SECONDS */

/* Runs fn with a prepared call, classifying a failure against the sandbox's health. */
#define WITH_CALL(sb, call, st, v, body)                                  \
	do {                                                              \
		v = sandbox_begin(sb, &call, NULL);                        \
		if (!v)                                                   \
			return hangar_error_last()->code;                 \
		body;                                                     \
		sbview_put(v);                                            \
	} while (0)

static int finish(struct hangar_sandbox *sb, int rc, const struct envd_status *st, const char *what,
		  const char *path)
{
	if (rc == 0) {
		herr_clear();
		return 0;
	}
	rc = sandbox_classify_failure(sb, rc, st);
	if (rc != HANGAR_EGONE && rc != HANGAR_EPAUSED)
		herr_prefix("%s %s", what, path);
	return rc;
}

int hangar_sandbox_read_file(hangar_buf *out, hangar_sandbox *sb, const char *path)
{
	struct envd_status st = { 0 };
	struct hbuf b = HBUF_INIT;
	struct envd_call call;
	struct envd_client *c;
	struct sbview *v;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	WITH_CALL(sb, call, st, v,
		  rc = envd_file_read(c, &call, path, (size_t)hctx_int(sb->ctx, HS_READ_LIMIT), &b, &st));
	if (rc == 0) {
		hangar_buf_dispose(out);
		out->size = b.len;
		out->reserved = b.cap;
		out->ptr = hbuf_steal(&b);
		if (!out->ptr)
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	hbuf_free(&b);
	return finish(sb, rc, &st, "reading", path);
}

int hangar_sandbox_write_file(hangar_sandbox *sb, const char *path, const void *data, size_t len)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c;
	struct sbview *v;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	HCHECK_ARG(data || len == 0, "data is NULL");
	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	WITH_CALL(sb, call, st, v, rc = envd_file_write(c, &call, path, data ? data : "", len, &st));
	return finish(sb, rc, &st, "writing", path);
}

int hangar_sandbox_copy_in(hangar_sandbox *sb, const char *local_path, const char *remote_path)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c;
	struct sbview *v;
	int fd, rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(local_path && *local_path, "local_path is empty");
	HCHECK_ARG(remote_path && *remote_path, "remote_path is empty");
	HCHECK_TEXT(remote_path, "remote_path");
	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	fd = open(local_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot open %s", local_path);
	/* Big copies take as long as they take; only silence is bounded. */
	WITH_CALL(sb, call, st, v, call.stall_ms = call.deadline_ms; call.deadline_ms = 0;
		  rc = envd_file_upload(c, &call, remote_path, fd, &st));
	close(fd);
	return finish(sb, rc, &st, "copying to", remote_path);
}

int hangar_copy_opts_init(hangar_copy_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_copy_opts);
}

int hangar_sandbox_copy_out(hangar_sandbox *sb, const char *remote_path, const char *local_path,
			    const hangar_copy_opts *opts)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c;
	struct sbview *v;
	hangar_copy_opts o;
	char tmp[PATH_MAX];
	uint64_t limit;
	int64_t timeout;
	int fd, rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(remote_path && *remote_path, "remote_path is empty");
	HCHECK_TEXT(remote_path, "remote_path");
	HCHECK_ARG(local_path && *local_path, "local_path is empty");
	HCHECK_ARG(strlen(local_path) < sizeof(tmp) - 16, "local_path is too long");
	rc = HOPTS_COPY(o, opts, hv_copy_opts, "opts");
	if (rc)
		return rc;
	HCHECK_ARG(o.timeout_sec >= 0 && o.timeout_sec <= COPY_TIMEOUT_MAX, "opts->timeout_sec must be from 0 to 86400");
	limit = o.limit_bytes ? o.limit_bytes : (uint64_t)hctx_int(sb->ctx, HS_COPY_LIMIT);
	timeout = o.timeout_sec ? o.timeout_sec : hctx_int(sb->ctx, HS_COPY_TIMEOUT);
	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	/* Written aside and renamed, so the local path never holds half a file. */
	snprintf(tmp, sizeof(tmp), "%s.hangar-XXXXXX", local_path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot create %s", tmp);
	/* Silence is bounded by the request timeout, the whole copy by its own deadline. */
	v = sandbox_begin(sb, &call, NULL);
	if (!v) {
		rc = hangar_error_last()->code;
		close(fd);
		unlink(tmp);
		return rc;
	}
	call.stall_ms = call.deadline_ms;
	call.deadline_ms = timeout * 1000;
	call.cancel = o.cancel;
	call.cancel_arg = o.payload;
	rc = envd_file_download(c, &call, remote_path, fd, limit, &st);
	sbview_put(v);
	if (rc == ENVD_CANCELLED)
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the copy was cancelled");
	if (rc == HANGAR_ETIMEOUT && st.timed_out)
		herr_http(HANGAR_ETIMEOUT, HANGAR_ERRCAT_SANDBOX, 0, NULL,
			  "the copy did not finish within %lld s (HANGAR_COPY_TIMEOUT_SECONDS)", (long long)timeout);
	if (rc == 0 && fsync(fd) < 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot write %s", tmp);
	if (close(fd) < 0 && rc == 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot write %s", tmp);
	if (rc == 0 && rename(tmp, local_path) < 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot rename %s to %s", tmp, local_path);
	if (rc)
		unlink(tmp);
	if (rc == HANGAR_ETOOLARGE || rc == HANGAR_ECANCELED) {
		herr_prefix("copying from %s", remote_path);
		return rc; /* an answer, not a sign of a dead sandbox */
	}
	return finish(sb, rc, &st, "copying from", remote_path);
}

/* ---- filesystem RPCs ----------------------------------------------------------- */

static int rpc(struct hangar_sandbox *sb, const char *method, cJSON *req, cJSON **resp,
	       struct envd_status *st)
{
	struct envd_call call;
	struct envd_client *c = envd_client_of(sb->ctx);
	struct sbview *v;
	int rc;

	*resp = NULL;
	if (!c) {
		cJSON_Delete(req);
		return hangar_error_last()->code;
	}
	v = sandbox_begin(sb, &call, NULL);
	if (!v) {
		cJSON_Delete(req);
		return hangar_error_last()->code;
	}
	rc = envd_unary(c, &call, method, req, resp, st);
	sbview_put(v);
	cJSON_Delete(req);
	return rc;
}

static cJSON *path_req(const char *key, const char *path)
{
	cJSON *req = cJSON_CreateObject();

	cJSON_AddStringToObject(req, key, path);
	return req;
}

/* EntryInfo → hangar_file_info for the callback; strings point into e. */
static int report_entry(const cJSON *e, hangar_file_fn fn, void *payload)
{
	hangar_file_info info = { HANGAR_FILE_INFO_VERSION, sizeof(hangar_file_info) };
	static const char *const types[] = { "FILE_TYPE_UNSPECIFIED", "FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY",
					     "FILE_TYPE_SYMLINK" };
	static const int values[] = { 0, 1, 2, 3 };
	const char *mtime = NULL;
	int64_t size = 0;
	uint32_t mode = 0;
	int type = 0;

	pjson_string(e, "name", NULL, &info.name);
	pjson_string(e, "path", NULL, &info.path);
	pjson_string(e, "owner", NULL, &info.owner);
	pjson_string(e, "group", NULL, &info.group);
	pjson_string(e, "permissions", NULL, &info.permissions);
	pjson_string(e, "symlinkTarget", "symlink_target", &info.symlink_target);
	pjson_int64(e, "size", NULL, &size);
	pjson_uint32(e, "mode", NULL, &mode);
	pjson_enum(e, "type", NULL, types, values, 4, &type);
	if (!info.name || !info.path)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "directory entry without a name or path");
	info.type = type == 1 ? HANGAR_FILE_REGULAR : type == 2 ? HANGAR_FILE_DIRECTORY : HANGAR_FILE_OTHER;
	info.mode = mode & 07777;
	info.bytes = size > 0 ? (uint64_t)size : 0;
	if (pjson_string(e, "modifiedTime", "modified_time", &mtime) == 1) {
		int64_t sec;
		long nsec;

		if (pjson_parse_timestamp(mtime, &sec, &nsec) == 0)
			info.mtime_us = sec * 1000000 + nsec / 1000;
	}
	if (!info.owner)
		info.owner = "";
	if (!info.group)
		info.group = "";
	if (!info.permissions)
		info.permissions = "";
	return fn(&info, payload);
}

/* Connect not_found / invalid_argument on a path are file errors the caller can act on. */
static int file_error(int rc)
{
	if (rc == HANGAR_ENOTFOUND || rc == HANGAR_EINVAL)
		return herr_recode(HANGAR_EFILE);
	return rc;
}

int hangar_sandbox_list_files(hangar_sandbox *sb, const char *path, uint32_t depth, hangar_file_fn fn,
			      void *payload)
{
	struct envd_status st = { 0 };
	cJSON *req, *resp;
	const cJSON *entries;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	HCHECK_ARG(fn, "fn is NULL");
	req = path_req("path", path);
	cJSON_AddNumberToObject(req, "depth", depth ? depth : 1);
	rc = rpc(sb, "/filesystem.Filesystem/ListDir", req, &resp, &st);
	if (rc)
		return finish(sb, file_error(rc), &st, "listing", path);
	entries = pjson_field(resp, "entries", NULL);
	if (entries && !cJSON_IsArray(entries)) {
		cJSON_Delete(resp);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "listing %s: entries is not a list", path);
	}
	herr_clear();
	for (const cJSON *e = entries ? entries->child : NULL; e && rc == 0; e = e->next)
		rc = report_entry(e, fn, payload);
	cJSON_Delete(resp);
	return rc;
}

int hangar_sandbox_stat(hangar_sandbox *sb, const char *path, hangar_file_fn fn, void *payload)
{
	struct envd_status st = { 0 };
	cJSON *resp;
	const cJSON *e;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	HCHECK_ARG(fn, "fn is NULL");
	rc = rpc(sb, "/filesystem.Filesystem/Stat", path_req("path", path), &resp, &st);
	if (rc)
		return finish(sb, file_error(rc), &st, "stat", path);
	e = pjson_field(resp, "entry", NULL);
	herr_clear();
	rc = e ? report_entry(e, fn, payload)
	       : herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "stat %s: answer without an entry", path);
	cJSON_Delete(resp);
	return rc;
}

int hangar_sandbox_exists(hangar_sandbox *sb, const char *path)
{
	struct envd_status st = { 0 };
	cJSON *resp;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	rc = rpc(sb, "/filesystem.Filesystem/Stat", path_req("path", path), &resp, &st);
	cJSON_Delete(resp);
	if (rc == HANGAR_ENOTFOUND) {
		herr_clear();
		return 0;
	}
	if (rc)
		return finish(sb, rc, &st, "stat", path);
	herr_clear();
	return 1;
}

int hangar_sandbox_mkdir(hangar_sandbox *sb, const char *path)
{
	struct envd_status st = { 0 };
	cJSON *resp;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	rc = rpc(sb, "/filesystem.Filesystem/MakeDir", path_req("path", path), &resp, &st);
	cJSON_Delete(resp);
	if (rc == HANGAR_EEXISTS)
		return rc; /* a directory is there: the caller decides whether that is fine */
	return finish(sb, file_error(rc), &st, "making directory", path);
}

int hangar_sandbox_rename(hangar_sandbox *sb, const char *from, const char *to)
{
	struct envd_status st = { 0 };
	cJSON *req, *resp;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(from && *from, "from is empty");
	HCHECK_TEXT(from, "from");
	HCHECK_ARG(to && *to, "to is empty");
	HCHECK_TEXT(to, "to");
	req = path_req("source", from);
	cJSON_AddStringToObject(req, "destination", to);
	rc = rpc(sb, "/filesystem.Filesystem/Move", req, &resp, &st);
	cJSON_Delete(resp);
	return finish(sb, file_error(rc), &st, "renaming", from);
}

int hangar_sandbox_remove(hangar_sandbox *sb, const char *path)
{
	struct envd_status st = { 0 };
	cJSON *resp;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && *path, "path is empty");
	HCHECK_TEXT(path, "path");
	rc = rpc(sb, "/filesystem.Filesystem/Remove", path_req("path", path), &resp, &st);
	cJSON_Delete(resp);
	return finish(sb, file_error(rc), &st, "removing", path);
}
