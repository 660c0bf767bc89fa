/*
 * GET /files: a regular file served from its descriptor (whole, one range,
 * or a conditional 304), or gzip-compressed on the fly; never held whole in
 * memory. The file is opened with the request user's credentials.
 */
#define _GNU_SOURCE
#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "creds.h"
#include "envd.h"
#include "files_common.h"

#define READ_BLOCK (32 * 1024)    /* bytes per content-reader call */
/* Downloads are compressed for a client on the other end of a socket, often
 * loopback: speed matters more than ratio, so the fastest level. */
#define GZIP_LEVEL 1

static const struct {
	const char *ext;
	const char *type;
} mime_types[] = {
	{ "avif", "image/avif" },
	{ "css", "text/css; charset=utf-8" },
	{ "csv", "text/csv; charset=utf-8" },
	{ "gif", "image/gif" },
	{ "gz", "application/gzip" },
	{ "htm", "text/html; charset=utf-8" },
	{ "html", "text/html; charset=utf-8" },
	{ "ico", "image/vnd.microsoft.icon" },
	{ "jpeg", "image/jpeg" },
	{ "jpg", "image/jpeg" },
	{ "js", "text/javascript; charset=utf-8" },
	{ "json", "application/json" },
	{ "md", "text/markdown; charset=utf-8" },
	{ "mjs", "text/javascript; charset=utf-8" },
	{ "mp3", "audio/mpeg" },
	{ "mp4", "video/mp4" },
	{ "pdf", "application/pdf" },
	{ "png", "image/png" },
	{ "svg", "image/svg+xml" },
	{ "tar", "application/x-tar" },
	{ "txt", "text/plain; charset=utf-8" },
	{ "wasm", "application/wasm" },
	{ "webm", "video/webm" },
	{ "webp", "image/webp" },
	{ "xml", "text/xml; charset=utf-8" },
	{ "yaml", "application/yaml" },
	{ "yml", "application/yaml" },
	{ "zip", "application/zip" },
};

/* By the extension of the path as the client wrote it (as upstream does). */
static const char *content_type_for(const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *dot = strrchr(slash ? slash : path, '.');

	if (dot)
		for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++)
			if (strcasecmp(dot + 1, mime_types[i].ext) == 0)
				return mime_types[i].type;
	return "application/octet-stream";
}

static void http_date(time_t t, char *out, size_t outsz)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, outsz, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* IMF-fixdate, RFC 850 or asctime; -1 when none fits. */
static time_t parse_http_date(const char *s)
{
	static const char *const formats[] = {
		"%a, %d %b %Y %H:%M:%S GMT",
		"%A, %d-%b-%y %H:%M:%S GMT",
		"%a %b %e %H:%M:%S %Y",
	};

	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		struct tm tm = { 0 };
		const char *end = strptime(s, formats[i], &tm);

		if (end && *end == '\0')
			return timegm(&tm);
	}
	return (time_t)-1;
}

/* ---- download bodies ----------------------------------------------------- */

struct file_reader {
	int fd;
	uint64_t left;            /* bytes still to read: the size when opened */
	int gzip;
	int in_eof;
	int finished;
	z_stream zs;
	unsigned char in[READ_BLOCK];
};

static ssize_t read_retry(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

static ssize_t gzip_read(struct file_reader *fr, char *buf, size_t max)
{
	size_t produced;

	fr->zs.next_out = (unsigned char *)buf;
	fr->zs.avail_out = (uInt)max;
	while (fr->zs.avail_out > 0 && !fr->finished) {
		int rc;

		if (fr->zs.avail_in == 0 && !fr->in_eof) {
			size_t want = fr->left < sizeof(fr->in) ? (size_t)fr->left : sizeof(fr->in);
			ssize_t n = want ? read_retry(fr->fd, fr->in, want) : 0;

			if (n < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			fr->left -= (uint64_t)n;
			fr->in_eof = n == 0;
			fr->zs.next_in = fr->in;
			fr->zs.avail_in = (uInt)n;
		}
		rc = deflate(&fr->zs, fr->in_eof ? Z_FINISH : Z_NO_FLUSH);
		if (rc == Z_STREAM_END)
			fr->finished = 1;
		else if (rc != Z_OK && rc != Z_BUF_ERROR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	produced = max - fr->zs.avail_out;
	if (produced == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)produced;
}

static ssize_t reader_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	return gzip_read(cls, buf, max);
}

static void reader_free(void *cls)
{
	struct file_reader *fr = cls;

	if (fr->gzip)
		deflateEnd(&fr->zs);
	close(fr->fd);
	free(fr);
}

/*
 * A gzip-compressed chunked body read from fd (which it takes): the size
 * bytes it had when opened, so a file that keeps growing still ends.
 */
static struct MHD_Response *gzip_response(int fd, uint64_t size)
{
	struct file_reader *fr = calloc(1, sizeof(*fr));
	struct MHD_Response *resp;

	if (!fr) {
		close(fd);
		return NULL;
	}
	fr->fd = fd;
	fr->left = size;
	/* windowBits 15 + 16: a gzip wrapper rather than zlib's. */
	if (deflateInit2(&fr->zs, GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		close(fd);
		free(fr);
		return NULL;
	}
	fr->gzip = 1;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, READ_BLOCK, reader_cb, fr, reader_free);
	if (!resp)
		reader_free(fr);
	else
		MHD_add_response_header(resp, "Content-Encoding", "gzip");
	return resp;
}

static struct MHD_Response *empty_body(void)
{
	return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}

/*
 * Conditional request handling for identity downloads, the parts of Go's
 * ServeContent clients use: If-None-Match (we have no ETag, so only "*"
 * matches), If-Modified-Since, and If-Range deciding whether Range applies.
 */
static int not_modified(struct envd_req *r, time_t mtime)
{
	const char *inm = envd_req_header(r, "If-None-Match");
	const char *ims = envd_req_header(r, "If-Modified-Since");

	if (inm) {
		while (*inm == ' ')
			inm++;
		return inm[0] == '*';
	}
	if (ims && mtime > 0) {
		time_t t = parse_http_date(ims);

		return t != (time_t)-1 && mtime <= t;
	}
	return 0;
}

static int range_applies(struct envd_req *r, time_t mtime)
{
	const char *ir = envd_req_header(r, "If-Range");

	if (!ir)
		return 1;
	if (ir[0] == '"' || strncmp(ir, "W/", 2) == 0)
		return 0; /* an entity tag: we never issue one, so it cannot match */
	return parse_http_date(ir) == mtime;
}

/* Whole file, one range, 304 or 416, from a regular file of known size. */
static unsigned identity_response(struct envd_req *r, int fd, const struct stat *st,
				  struct MHD_Response **resp)
{
	uint64_t size = (uint64_t)st->st_size, start = 0, len = size;
	const char *range = envd_req_header(r, "Range");
	enum files_range rr = FILES_RANGE_NONE;
	char lm[64], cr[96];
	unsigned status = 200;

	http_date(st->st_mtime, lm, sizeof(lm));
	if (not_modified(r, st->st_mtime)) {
		close(fd);
		*resp = empty_body();
		if (*resp)
			MHD_add_response_header(*resp, "Last-Modified", lm);
		return 304;
	}
	if (range && range_applies(r, st->st_mtime))
		rr = files_parse_range(range, size, &start, &len);
	if (rr == FILES_RANGE_UNSATISFIABLE) {
		static const char msg[] = "invalid range: failed to overlap\n";

		close(fd);
		*resp = MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
		snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
		if (*resp) {
			MHD_add_response_header(*resp, "Content-Range", cr);
			MHD_add_response_header(*resp, "Content-Type", "text/plain; charset=utf-8");
		}
		return 416;
	}
	if (rr == FILES_RANGE_ONE) {
		status = 206;
		snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
			 (unsigned long long)(start + len - 1), (unsigned long long)size);
	}
	if (len == 0) {
		close(fd);
		*resp = empty_body();
	} else {
		*resp = MHD_create_response_from_fd_at_offset64(len, fd, start);
		if (!*resp)
			close(fd);
	}
	if (*resp) {
		MHD_add_response_header(*resp, "Last-Modified", lm);
		MHD_add_response_header(*resp, "Accept-Ranges", "bytes");
		if (status == 206)
			MHD_add_response_header(*resp, "Content-Range", cr);
	}
	return status;
}

static unsigned fail_response(struct MHD_Response **resp, unsigned status, const char *msg)
{
	*resp = envd_rest_error((int)status, "%s", msg);
	return status;
}

/*
 * Opens a download as the user: checked before the open (so a device or a
 * FIFO is never opened) and after it (a path swapped in between). Returns
 * the descriptor, or -1 with *status and msg set.
 */
static int open_download(const char *path, struct stat *st, unsigned *status, char *msg, size_t msgsz)
{
	int fd, fl, e;

	if (stat(path, st) < 0) {
		e = errno;
		if (e == ENOENT) {
			snprintf(msg, msgsz, "path '%s' does not exist", path);
			*status = 404;
		} else if (e == EACCES || e == EPERM) {
			snprintf(msg, msgsz, "permission denied: cannot read '%s'", path);
			*status = 403;
		} else {
			snprintf(msg, msgsz, "error checking if path exists '%s': %s", path, strerror(e));
			*status = 500;
		}
		return -1;
	}
	if ((*status = files_refuse_kind(path, st, -1, msg, msgsz)) != 0)
		return -1;
	fd = files_open_no_magic(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
	if (fd < 0) {
		e = errno;
		if (e == EACCES || e == EPERM) {
			snprintf(msg, msgsz, "permission denied: cannot read '%s'", path);
			*status = 403;
		} else if (e == ELOOP) {
			snprintf(msg, msgsz, "path '%s' goes through a /proc link or too many symbolic links", path);
			*status = 400;
		} else if (e == ENOENT) {
			snprintf(msg, msgsz, "path '%s' does not exist", path);
			*status = 404;
		} else {
			snprintf(msg, msgsz, "error opening file '%s': %s", path, strerror(e));
			*status = 500;
		}
		return -1;
	}
	if (fstat(fd, st) < 0) {
		snprintf(msg, msgsz, "error opening file '%s': %s", path, strerror(errno));
		*status = 500;
		close(fd);
		return -1;
	}
	if ((*status = files_refuse_kind(path, st, fd, msg, msgsz)) != 0) {
		close(fd);
		return -1;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/*
 * Opens the file a download names, as the request's user, and puts its
 * resolved path in path. The descriptor, or -1 with *status and msg set.
 */
static int open_requested(struct envd_req *r, char *path, size_t pathsz, struct stat *st, unsigned *status,
			  char *msg, size_t msgsz)
{
	const char *raw_path = envd_req_query(r, "path");
	struct envd_user user;
	struct envd_creds creds;
	struct rpc_error err = { 0 };
	int fd;

	if ((*status = files_lookup_user(files_username(r), &user, msg, msgsz)) != 0)
		return -1;
	if (envd_resolve_path(&user, raw_path, path, pathsz, &err) != 0) {
		snprintf(msg, msgsz, "error expanding and resolving path '%s': %s", raw_path ? raw_path : "",
			 err.message);
		*status = 400;
		return -1;
	}
	if ((*status = files_act_as(&user, &creds, msg, msgsz)) != 0)
		return -1;
	fd = open_download(path, st, status, msg, msgsz);
	envd_creds_leave(&creds);
	return fd;
}

unsigned files_download(struct envd_req *r, struct MHD_Response **resp)
{
	const char *raw_path = envd_req_query(r, "path");
	char path[PATH_MAX], msg[PATH_MAX + 128], base[NAME_MAX + 2], cd[3 * NAME_MAX + 64];
	struct stat st;
	enum files_encoding enc;
	unsigned status;
	int fd, forced;

	fd = open_requested(r, path, sizeof(path), &st, &status, msg, sizeof(msg));
	if (fd < 0)
		return fail_response(resp, status, msg);
	forced = envd_req_header(r, "Range") || envd_req_header(r, "If-Modified-Since") ||
		 envd_req_header(r, "If-None-Match") || envd_req_header(r, "If-Range");
	enc = files_choose_encoding(envd_req_header(r, "Accept-Encoding"), forced);
	if (enc == FILES_ENC_REFUSED) {
		close(fd);
		return fail_response(resp, 406, "error parsing Accept-Encoding: no acceptable encoding found, "
						"supported: [gzip]");
	}
	if (enc == FILES_ENC_GZIP) {
		status = 200;
		*resp = gzip_response(fd, (uint64_t)st.st_size);
	} else {
		status = identity_response(r, fd, &st, resp);
	}
	if (!*resp)
		return fail_response(resp, 500, "out of memory");
	if (status == 200 || status == 206) {
		envd_base_name(path, base, sizeof(base));
		if (files_content_disposition(base, cd, sizeof(cd)) == 0)
			MHD_add_response_header(*resp, "Content-Disposition", cd);
		MHD_add_response_header(*resp, "Content-Type", content_type_for(raw_path ? raw_path : path));
	}
	MHD_add_response_header(*resp, "Vary", "Accept-Encoding");
	return status;
}
