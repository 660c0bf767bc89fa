/*
 * GET and PUT /v1/sandboxes/{id}/files?path=P: whole files, streamed
 * through temporary files in hangard's private directory, so neither side
 * is held in memory. Downloads go through hangar_sandbox_copy_out() (its
 * size limit and deadline: HANGAR_COPY_LIMIT_BYTES, over it 413); uploads
 * are written to disk as they arrive, refused past HANGARD_MAX_UPLOAD_BYTES
 * (413), then go in with hangar_sandbox_copy_in().
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "hangard.h"

static int cancel_on_stop(void *payload)
{
	(void)payload;
	return hangard->stopping == 2;
}

static const char *want_path(struct request *r)
{
	const char *p = request_query(r, "path");
	if (!p || !p[0]) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "the query needs path=");
		return NULL;
	}
	return p;
}

void h_file_get(struct request *r)
{
	const char *path = want_path(r);
	hangar_copy_opts opts = HANGAR_COPY_OPTS_INIT;
	hangar_sandbox *sb;
	char local[4096];
	struct stat st;
	int fd, rc;

	if (!path)
		return;
	sb = sandbox_open(r);
	if (!sb)
		return;
	snprintf(local, sizeof(local), "%s/download-%p", hangard->cfg->tmpdir, (void *)r);
	opts.cancel = cancel_on_stop;
	rc = hangar_sandbox_copy_out(sb, path, local, &opts);
	hangar_sandbox_unref(sb);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return;
	}
	/* The open descriptor keeps the bytes; the name goes at once. */
	fd = open(local, O_RDONLY | O_CLOEXEC);
	unlink(local);
	if (fd < 0 || fstat(fd, &st) < 0) {
		reply_error(r, 500, "os", HANGAR_EOS, "cannot read the copy: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	struct MHD_Response *resp = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
	if (!resp) {
		close(fd);
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		return;
	}
	MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
	reply_response(r, 200, resp);
}

void h_file_put(struct request *r)
{
	const char *path = want_path(r);
	const char *local;
	hangar_sandbox *sb;
	uint64_t len;
	int rc;

	if (!path)
		return;
	local = request_upload_path(r, &len);
	sb = sandbox_open(r);
	if (!sb)
		return;
	rc = hangar_sandbox_copy_in(sb, local, path);
	hangar_sandbox_unref(sb);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return;
	}
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "path", path);
	sjson_add_int64(o, "bytes", (int64_t)len);
	reply_json(r, 200, o);
}
