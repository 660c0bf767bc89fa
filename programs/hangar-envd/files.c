/*
 * GET and POST /files (BEHAVIOUR.md §4.2-§4.4): downloads served from the
 * file descriptor or gzip-compressed on the fly, uploads written to disk as
 * the body arrives. Neither direction holds a whole file in memory.
 *
 * Every open, mkdir, truncate and metadata change is made with the request
 * user's credentials (creds.h), and never through a /proc magic link; only
 * regular files are streamed: a device, FIFO or socket, or a file of a
 * kernel pseudo-filesystem (/proc, /sys, ...), is refused before it is read
 * from or written to. An upload never follows a symbolic link in the
 * final component and never changes an existing file's owner.
 */
#define _GNU_SOURCE
#include "files.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "creds.h"
#include "envd.h"
#include "multipart.h"

#define READ_BLOCK (32 * 1024)    /* bytes per content-reader call */
#define WRITE_BUF (64 * 1024)     /* upload bytes gathered before a write() */
#define INFLATE_BUF (32 * 1024)
/* Downloads are compressed for a client on the other end of a socket, often
 * loopback: speed matters more than ratio, so the fastest level. */
#define GZIP_LEVEL 1

#define META_KEY_MAX 246
#define META_TOTAL_MAX 4096
#define META_PREFIX_LEN 9         /* strlen("user.e2b.") */

/* ---- Accept-Encoding ---------------------------------------------------- */

struct coding {
	enum { C_OTHER, C_IDENTITY, C_GZIP, C_STAR } kind;
	double q;
};

/* [s, e) without surrounding blanks. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
		(*e)--;
}

/* q=<float> in [p, e); other parameters, and unparsable values, leave q alone (as upstream). */
static void parse_q(const char *p, const char *e, double *q)
{
	char num[32];
	size_t n;
	char *end;
	double v;

	trim(&p, &e);
	n = (size_t)(e - p);
	if (n <= 2 || n - 2 >= sizeof(num) || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=')
		return;
	memcpy(num, p + 2, n - 2);
	num[n - 2] = '\0';
	v = strtod(num, &end);
	if (*end == '\0' && end != num && !isnan(v))
		*q = v;
}

/* One comma-separated element [s, e): a coding name, then parameters. */
static struct coding parse_coding(const char *s, const char *e)
{
	struct coding c = { C_OTHER, 1.0 };
	const char *semi = memchr(s, ';', (size_t)(e - s));
	const char *name = s, *name_end = semi ? semi : e;
	size_t n;

	trim(&name, &name_end);
	n = (size_t)(name_end - name);
	if (n == 8 && strncasecmp(name, "identity", 8) == 0)
		c.kind = C_IDENTITY;
	else if (n == 4 && strncasecmp(name, "gzip", 4) == 0)
		c.kind = C_GZIP;
	else if (n == 1 && name[0] == '*')
		c.kind = C_STAR;
	while (semi) {
		const char *p = semi + 1, *next = memchr(p, ';', (size_t)(e - p));

		parse_q(p, next ? next : e, &c.q);
		semi = next;
	}
	return c;
}

enum files_encoding files_choose_encoding(const char *accept_encoding, int identity_forced)
{
	struct coding best = { C_OTHER, 0 };
	int identity_named = 0, identity_zero = 0, star_zero = 0, gzip_zero = 0;
	int identity_refused;
	const char *s = accept_encoding;

	if (!s || !*s)
		return FILES_ENC_IDENTITY;
	for (;;) {
		size_t len = strcspn(s, ",");
		struct coding c = parse_coding(s, s + len);

		if (c.kind == C_IDENTITY)
			identity_named = 1;
		if (c.q <= 0) {
			identity_zero |= c.kind == C_IDENTITY;
			star_zero |= c.kind == C_STAR;
			gzip_zero |= c.kind == C_GZIP;
		} else if (c.kind != C_OTHER && c.q > best.q) {
			best = c; /* ties keep the earlier one */
		}
		if (!s[len])
			break;
		s += len + 1;
	}
	identity_refused = identity_zero || (star_zero && !identity_named);
	if (identity_forced)
		return identity_refused ? FILES_ENC_REFUSED : FILES_ENC_IDENTITY;
	switch (best.kind) {
	case C_IDENTITY:
		return FILES_ENC_IDENTITY;
	case C_GZIP:
		return FILES_ENC_GZIP;
	case C_STAR:
		/* "*" stands for any coding not named: identity unless refused. */
		if (!identity_refused)
			return FILES_ENC_IDENTITY;
		return gzip_zero ? FILES_ENC_REFUSED : FILES_ENC_GZIP;
	default:
		return identity_refused ? FILES_ENC_REFUSED : FILES_ENC_IDENTITY;
	}
}

/* ---- Range ------------------------------------------------------------- */

/* A decimal in [s, e) with optional surrounding blanks; -1 when not one. */
static int parse_u64(const char *s, const char *e, uint64_t *out)
{
	uint64_t v = 0;

	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if (s == e)
		return -1;
	for (; s < e; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

enum files_range files_parse_range(const char *range, uint64_t size, uint64_t *start, uint64_t *len)
{
	const char *spec, *dash, *end;
	uint64_t a, b;

	if (!range || !*range)
		return FILES_RANGE_NONE;
	if (strncmp(range, "bytes=", 6) != 0)
		return FILES_RANGE_UNSATISFIABLE;
	spec = range + 6;
	if (strchr(spec, ','))
		return FILES_RANGE_NONE; /* several ranges: the whole file instead */
	end = spec + strlen(spec);
	dash = strchr(spec, '-');
	if (!dash)
		return FILES_RANGE_UNSATISFIABLE;
	if (parse_u64(spec, dash, &a) < 0) {
		/* "-n": the last n bytes. */
		const char *p = spec;

		while (p < dash && (*p == ' ' || *p == '\t'))
			p++;
		if (p != dash || parse_u64(dash + 1, end, &b) < 0 || b == 0 || size == 0)
			return FILES_RANGE_UNSATISFIABLE;
		if (b > size)
			b = size;
		*start = size - b;
		*len = b;
		return FILES_RANGE_ONE;
	}
	if (a >= size)
		return FILES_RANGE_UNSATISFIABLE;
	{
		const char *p = dash + 1;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p == end) {
			b = size - 1;
		} else if (parse_u64(dash + 1, end, &b) < 0 || b < a) {
			return FILES_RANGE_UNSATISFIABLE;
		}
	}
	if (b >= size)
		b = size - 1;
	*start = a;
	*len = b - a + 1;
	return FILES_RANGE_ONE;
}

/* ---- response headers -------------------------------------------------- */

static int attr_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("!#$&+-.^_`|~", c) != NULL;
}

int files_content_disposition(const char *base, char *out, size_t outsz)
{
	int plain = 1;
	size_t n;

	for (const unsigned char *s = (const unsigned char *)base; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			plain = 0;
	n = (size_t)snprintf(out, outsz, plain ? "inline; filename=\"" : "inline; filename*=UTF-8''");
	for (const unsigned char *s = (const unsigned char *)base; *s; s++) {
		if (n + 4 >= outsz)
			return -1;
		if (plain) {
			if (*s == '"' || *s == '\\')
				out[n++] = '\\';
			out[n++] = (char)*s;
		} else if (attr_char(*s)) {
			out[n++] = (char)*s;
		} else {
			n += (size_t)snprintf(out + n, outsz - n, "%%%02X", *s);
		}
	}
	if (n + 2 >= outsz)
		return -1;
	if (plain)
		out[n++] = '"';
	out[n] = '\0';
	return 0;
}

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

/* "Base" of a path as Go's filepath.Base: trailing slashes ignored. */
static void base_name(const char *path, char *out, size_t outsz)
{
	size_t len = strlen(path);
	const char *start;

	while (len > 1 && path[len - 1] == '/')
		len--;
	start = path + len;
	while (start > path && start[-1] != '/')
		start--;
	if (len == 1 && path[0] == '/')
		start = path;
	snprintf(out, outsz, "%.*s", (int)(len - (size_t)(start - path)), start);
	if (!*out)
		snprintf(out, outsz, ".");
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

static const char *download_user(struct envd_req *r)
{
	const char *u = envd_req_query(r, "username");

	return u ? u : envd_cfg.default_user;
}

static unsigned fail_response(struct MHD_Response **resp, unsigned status, const char *msg)
{
	*resp = envd_rest_error((int)status, "%s", msg);
	return status;
}

/* ---- what may be streamed ------------------------------------------------ */

/*
 * Opens path as the calling thread's credentials allow, refusing to pass
 * through a /proc magic link (/proc/<pid>/fd/N, .../cwd, .../root): those
 * lead to whatever another process holds open, past the permissions of the
 * directories on the way. Kernels without openat2 (before 5.6), or a seccomp
 * filter that hides it, fall back to open(), where only the user's
 * credentials protect.
 */
static int open_no_magic(const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)flags,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
		return (int)fd;
	return open(path, flags, mode);
}

/* What a non-regular file is, for messages. */
static const char *file_kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR:
		return "a directory";
	case S_IFLNK:
		return "a symbolic link";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	}
	return "not a regular file";
}

/*
 * Files of the kernel's pseudo-filesystems look regular but are views of
 * the kernel or of processes, envd's own among them (/proc/self/environ,
 * /proc/<envd>/mem): reading or writing one is never a file transfer.
 */
static int on_pseudo_fs(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return 1;
	switch ((unsigned long)sf.f_type & 0xffffffffUL) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case BPF_FS_MAGIC:
	case EFIVARFS_MAGIC:
		return 1;
	}
	return 0;
}

/* The status and message for a path that cannot be streamed; 0 when it can. */
static unsigned refuse_kind(const char *path, const struct stat *st, int fd, char *msg, size_t msgsz)
{
	if (S_ISDIR(st->st_mode)) {
		snprintf(msg, msgsz, "path '%s' is a directory", path);
		return 400;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(msg, msgsz, "path '%s' is %s: only regular files can be read or written", path,
			 file_kind(st->st_mode));
		return 400;
	}
	if (fd >= 0 && on_pseudo_fs(fd)) {
		snprintf(msg, msgsz, "path '%s' is on a kernel pseudo-filesystem (/proc, /sys, ...): only regular "
			 "files can be read or written", path);
		return 400;
	}
	return 0;
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
	if ((*status = refuse_kind(path, st, -1, msg, msgsz)) != 0)
		return -1;
	fd = open_no_magic(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
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
	if ((*status = refuse_kind(path, st, fd, msg, msgsz)) != 0) {
		close(fd);
		return -1;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

unsigned files_download(struct envd_req *r, struct MHD_Response **resp)
{
	const char *username = download_user(r);
	const char *raw_path = envd_req_query(r, "path");
	struct envd_user user;
	struct envd_creds creds;
	struct rpc_error err = { 0 };
	char path[PATH_MAX], msg[PATH_MAX + 128], base[NAME_MAX + 2], cd[3 * NAME_MAX + 64];
	struct stat st;
	enum files_encoding enc;
	unsigned status;
	int fd, forced, rc;

	if (!username)
		return fail_response(resp, 400, "username not provided");
	if (envd_user_lookup(username, &user) < 0) {
		snprintf(msg, sizeof(msg), "error looking up user '%s': user: unknown user %s", username, username);
		return fail_response(resp, 401, msg);
	}
	if (envd_resolve_path(&user, raw_path, path, sizeof(path), &err) != 0) {
		snprintf(msg, sizeof(msg), "error expanding and resolving path '%s': %s", raw_path ? raw_path : "",
			 err.message);
		return fail_response(resp, 400, msg);
	}
	rc = envd_creds_enter(&user, &creds);
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "cannot act as user '%s': %s", user.name, strerror(-rc));
		return fail_response(resp, rc == -EPERM ? 403 : 500, msg);
	}
	fd = open_download(path, &st, &status, msg, sizeof(msg));
	envd_creds_leave(&creds);
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
		base_name(path, base, sizeof(base));
		if (files_content_disposition(base, cd, sizeof(cd)) == 0)
			MHD_add_response_header(*resp, "Content-Disposition", cd);
		MHD_add_response_header(*resp, "Content-Type", content_type_for(raw_path ? raw_path : path));
	}
	MHD_add_response_header(*resp, "Vary", "Accept-Encoding");
	return status;
}

/* ---- uploads --------------------------------------------------------------- */

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

static int printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

/* The xattr rules (BEHAVIOUR.md §4.4), checked before any file is touched. */
static int validate_meta(struct files_upload *u)
{
	size_t total = 0;

	for (size_t i = 0; i < u->meta_n; i++) {
		const char *k = u->meta_keys[i], *v = u->meta_values[i];

		if (!printable(k) || !printable(v))
			return upload_fail(u, 400, "invalid metadata: key '%s': keys and values must be "
					   "printable ASCII", printable(k) ? k : "?");
		if (strlen(k) > META_KEY_MAX)
			return upload_fail(u, 400, "invalid metadata: key '%s' is longer than %d bytes", k,
					   META_KEY_MAX);
		total += META_PREFIX_LEN + strlen(k) + strlen(v);
	}
	if (total > META_TOTAL_MAX)
		return upload_fail(u, 400, "invalid metadata: total size %zu exceeds %d bytes", total,
				   META_TOTAL_MAX);
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
				   file_kind(st.st_mode));
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
	fd = open_no_magic(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
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
	if ((status = refuse_kind(path, &st, fd, msg, sizeof(msg))) != 0) {
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

static int open_target(struct files_upload *u, const char *path)
{
	struct envd_creds creds;
	int rc = envd_creds_enter(&u->user, &creds);

	if (rc < 0)
		return upload_fail(u, rc == -EPERM ? 403 : 500, "cannot act as user '%s': %s", u->user.name,
				   strerror(-rc));
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
	rc = envd_creds_enter(&u->user, &creds);
	if (rc < 0)
		return upload_fail(u, rc == -EPERM ? 403 : 500, "cannot act as user '%s': %s", u->user.name,
				   strerror(-rc));
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
	base_name(u->target, base, sizeof(base));
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

static int on_part_begin(void *ctx, const char *name, const char *filename)
{
	struct files_upload *u = ctx;
	struct rpc_error err = { 0 };
	const char *src = u->path_param ? u->path_param : filename;
	char path[PATH_MAX];

	u->skip_part = !name || strcmp(name, "file") != 0;
	if (u->skip_part)
		return 0;
	if (!src)
		return upload_fail(u, 400, "error getting multipart custom part file name: "
				   "filename not found in Content-Disposition header");
	if (envd_resolve_path(&u->user, src, path, sizeof(path), &err) != 0)
		return upload_fail(u, 400, "error resolving path: %s", err.message);
	if (already_written(u, path))
		return upload_fail(u, 400, "you cannot upload multiple files to the same path '%s' in one upload "
				   "request, only the first specified file was uploaded", path);
	return open_target(u, path);
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
		struct rpc_error err = { 0 };
		char path[PATH_MAX];

		u->raw = 1;
		if (!u->path_param)
			return upload_fail(u, 400, "path query parameter is required for raw body upload");
		if (envd_resolve_path(&u->user, u->path_param, path, sizeof(path), &err) != 0)
			return upload_fail(u, 400, "error resolving path: %s", err.message);
		return open_target(u, path);
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
	const char *username = envd_req_query(r, "username");
	const char *path = envd_req_query(r, "path");
	int gz;

	if (!username)
		username = envd_cfg.default_user;
	if (!username)
		return upload_fail(u, 400, "username not provided");
	gz = content_encoding_gzip(u, envd_req_header(r, "Content-Encoding"));
	if (gz < 0)
		return -1;
	if (envd_user_lookup(username, &u->user) < 0)
		return upload_fail(u, 401, "error looking up user '%s': user: unknown user %s", username, username);
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
