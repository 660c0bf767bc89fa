/*
 * Streaming multipart/form-data parser (RFC 2046 §5.1, RFC 7578).
 *
 * The delimiter is "\r\n--" + boundary. Because the boundary may not contain
 * CR, a delimiter can only start at a CR, and the bytes of a partial match are
 * always a prefix of the delimiter itself. So the parser never stores body
 * bytes: it remembers how many delimiter bytes it has matched, and when the
 * match breaks it hands that prefix out of the delimiter string.
 */
#define _GNU_SOURCE
#include "multipart.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BOUNDARY_MAX 200          /* RFC 2046 says 70; be lenient */
#define HEADER_BLOCK_MAX (16 * 1024)
#define PADDING_MAX 64            /* whitespace allowed after a delimiter */

enum state {
	ST_PREAMBLE,     /* discarding bytes before the first delimiter */
	ST_AFTER_DELIM,  /* delimiter matched: "--", padding or CRLF follows */
	ST_AFTER_DASH,   /* one '-' seen after the delimiter */
	ST_DELIM_LF,     /* CR seen after the delimiter (and padding) */
	ST_HEADERS,      /* collecting a part's header block */
	ST_BODY,         /* streaming a part's body */
	ST_EPILOGUE,     /* closing delimiter seen: the rest is ignored */
	ST_ERROR,
};

struct multipart_parser {
	struct multipart_callbacks cb;
	void *ctx;
	enum state state;
	int in_part;              /* part_begin was called, part_end not yet */
	char *delim;              /* "\r\n--" boundary */
	size_t delim_len;
	size_t matched;           /* delimiter bytes matched so far */
	size_t padding;
	char *hdr;                /* the current header block */
	size_t hdr_len;
	size_t line_start;        /* offset of the current header line in hdr */
	char error[128];
};

static int fail(struct multipart_parser *p, const char *why)
{
	if (p->state != ST_ERROR) {
		snprintf(p->error, sizeof(p->error), "%s", why);
		p->state = ST_ERROR;
	}
	return -1;
}

/* ---- parameters: `type; key=value; key="quoted \" value"` ---------------- */

static const char *skip_ws(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/*
 * Reads one value (quoted string with backslash escapes, or a bare run up to
 * ';') into a new string. *sp is advanced past it. NULL when malformed or out
 * of memory.
 */
static char *read_value(const char **sp)
{
	const char *s = *sp;
	size_t n = 0;
	char *out;

	if (*s == '"') {
		const char *q = s + 1;

		out = malloc(strlen(q) + 1);
		if (!out)
			return NULL;
		while (*q && *q != '"') {
			if (*q == '\\' && q[1])
				q++;
			out[n++] = *q++;
		}
		if (*q != '"') {
			free(out);
			return NULL;
		}
		out[n] = '\0';
		*sp = q + 1;
		return out;
	}
	n = strcspn(s, ";");
	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	out = strndup(s, n);
	*sp = s + n;
	return out;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * RFC 5987 / 2231: charset'language'percent-encoded. Only UTF-8 and US-ASCII
 * are understood. Returns a new string, or NULL when undecodable (including
 * an encoded NUL, which would silently shorten a path).
 */
static char *decode_ext_value(const char *v)
{
	const char *q1 = strchr(v, '\''), *q2, *s;
	char *out, *o;

	if (!q1 || !(q2 = strchr(q1 + 1, '\'')))
		return NULL;
	if (!((q1 - v == 5 && strncasecmp(v, "utf-8", 5) == 0) ||
	      (q1 - v == 8 && strncasecmp(v, "us-ascii", 8) == 0)))
		return NULL;
	out = o = malloc(strlen(q2 + 1) + 1);
	if (!out)
		return NULL;
	for (s = q2 + 1; *s; s++) {
		if (*s == '%') {
			int hi = hexval((unsigned char)s[1]), lo = hi < 0 ? -1 : hexval((unsigned char)s[2]);

			if (lo < 0 || (hi == 0 && lo == 0)) {
				free(out);
				return NULL;
			}
			*o++ = (char)(hi << 4 | lo);
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return out;
}

/*
 * Walks the parameters after the first ';' of a header value and calls fn for
 * each key (as written, not lower-cased) with its raw-decoded value. Stops at
 * the first malformed parameter. fn returns non-zero to stop early.
 */
typedef int (*param_fn)(void *ctx, const char *key, size_t keylen, char *value);

static void each_param(const char *s, param_fn fn, void *ctx)
{
	s = strchr(s, ';');
	while (s && *s == ';') {
		const char *key;
		size_t keylen;
		char *value;

		s = skip_ws(s + 1);
		if (*s == ';' || *s == '\0')
			continue; /* empty parameter, e.g. a trailing ';' */
		key = s;
		keylen = strcspn(s, "=; \t");
		s = skip_ws(s + keylen);
		if (*s != '=' || keylen == 0)
			return;
		s = skip_ws(s + 1);
		value = read_value(&s);
		if (!value)
			return;
		if (fn(ctx, key, keylen, value))
			return;
		s = skip_ws(s);
	}
}

static int key_is(const char *key, size_t keylen, const char *want)
{
	return keylen == strlen(want) && strncasecmp(key, want, keylen) == 0;
}

struct boundary_ctx {
	char *boundary;
};

static int take_boundary(void *ctx, const char *key, size_t keylen, char *value)
{
	struct boundary_ctx *b = ctx;

	if (!key_is(key, keylen, "boundary") || b->boundary) {
		free(value);
		return 0;
	}
	b->boundary = value;
	return 1;
}

/* RFC 2046 allows 1-70 of a small set; refuse only what would break parsing. */
static int boundary_ok(const char *b)
{
	size_t n = strlen(b);

	if (n == 0 || n > BOUNDARY_MAX)
		return 0;
	for (const unsigned char *s = (const unsigned char *)b; *s; s++)
		if (*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

struct multipart_parser *multipart_new(const char *content_type, const struct multipart_callbacks *cb,
				       void *ctx)
{
	struct boundary_ctx b = { NULL };
	struct multipart_parser *p;

	if (!content_type || !cb)
		return NULL;
	each_param(content_type, take_boundary, &b);
	if (!b.boundary || !boundary_ok(b.boundary)) {
		free(b.boundary);
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p || asprintf(&p->delim, "\r\n--%s", b.boundary) < 0) {
		free(p);
		free(b.boundary);
		return NULL;
	}
	free(b.boundary);
	p->delim_len = strlen(p->delim);
	p->cb = *cb;
	p->ctx = ctx;
	p->state = ST_PREAMBLE;
	/* The first delimiter may open the body with no CRLF before it:
	 * behave as if one had just been read. */
	p->matched = 2;
	return p;
}

/* ---- part headers ------------------------------------------------------ */

struct disposition {
	char *name;
	char *filename;
	char *filename_ext;   /* filename*=, which wins over filename= */
	int bad_ext;
};

static int take_disposition(void *ctx, const char *key, size_t keylen, char *value)
{
	struct disposition *d = ctx;
	char **slot = NULL;

	if (key_is(key, keylen, "name"))
		slot = &d->name;
	else if (key_is(key, keylen, "filename"))
		slot = &d->filename;
	else if (key_is(key, keylen, "filename*"))
		slot = &d->filename_ext;
	if (slot && !*slot) {
		*slot = value; /* the first of a repeated parameter wins */
		return 0;
	}
	free(value);
	return 0;
}

/* The next line of a header block, or NULL after the last. */
static const char *next_line(const char *line)
{
	const char *lf = strchr(line, '\n');

	return lf && lf[1] ? lf + 1 : NULL;
}

/*
 * A header value starting at v, up to the end of its line plus any folded
 * continuation lines (joined with one space), as a new string.
 */
static char *unfold(const char *v)
{
	char *out = malloc(strlen(v) + 1);
	size_t n = 0;

	if (!out)
		return NULL;
	for (;;) {
		const char *lf = strchr(v, '\n'), *end = lf ? lf : v + strlen(v);

		while (end > v && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (n)
			out[n++] = ' ';
		memcpy(out + n, v, (size_t)(end - v));
		n += (size_t)(end - v);
		if (!lf || (lf[1] != ' ' && lf[1] != '\t'))
			break;
		v = skip_ws(lf + 1);
	}
	out[n] = '\0';
	return out;
}

/*
 * Finds a header in the block by case-insensitive name and returns its value
 * as a new string; NULL if absent. The block is NUL-terminated and its lines
 * end in LF (CR optional).
 */
static char *find_header(const char *block, const char *name)
{
	size_t nlen = strlen(name);

	for (const char *line = block; line; line = next_line(line)) {
		const char *v;

		if (strncasecmp(line, name, nlen) != 0)
			continue;
		v = skip_ws(line + nlen);
		if (*v == ':')
			return unfold(skip_ws(v + 1));
	}
	return NULL;
}

static int headers_done(struct multipart_parser *p)
{
	struct disposition d = { 0 };
	char *cd;
	int rc;

	p->hdr[p->hdr_len] = '\0';
	cd = find_header(p->hdr, "Content-Disposition");
	if (cd) {
		each_param(cd, take_disposition, &d);
		free(cd);
	}
	if (d.filename_ext) {
		char *dec = decode_ext_value(d.filename_ext);

		if (dec) {
			free(d.filename);
			d.filename = dec;
		}
	}
	p->state = ST_BODY;
	p->matched = 0;
	p->in_part = 1;
	rc = p->cb.part_begin ? p->cb.part_begin(p->ctx, d.name, d.filename) : 0;
	free(d.name);
	free(d.filename);
	free(d.filename_ext);
	p->hdr_len = 0;
	p->line_start = 0;
	if (rc)
		return fail(p, "stopped at the start of a part");
	return 0;
}

/* One byte of a header block. Lines may end in CRLF or a bare LF. */
static int header_byte(struct multipart_parser *p, char c)
{
	if (p->hdr_len >= HEADER_BLOCK_MAX)
		return fail(p, "part header block larger than 16 KiB");
	if (c == '\0')
		return fail(p, "NUL byte in a part header");
	p->hdr[p->hdr_len++] = c;
	if (c != '\n')
		return 0;
	{
		size_t linelen = p->hdr_len - p->line_start; /* includes the LF */

		if (linelen == 1 || (linelen == 2 && p->hdr[p->line_start] == '\r'))
			return headers_done(p);
	}
	p->line_start = p->hdr_len;
	return 0;
}

/* ---- the byte stream ---------------------------------------------------- */

static int emit(struct multipart_parser *p, const char *data, size_t len)
{
	if (len == 0 || p->state != ST_BODY || !p->cb.part_data)
		return 0; /* the preamble is dropped */
	if (p->cb.part_data(p->ctx, data, len))
		return fail(p, "stopped in a part's body");
	return 0;
}

static int end_part(struct multipart_parser *p)
{
	if (!p->in_part)
		return 0;
	p->in_part = 0;
	if (p->cb.part_end && p->cb.part_end(p->ctx))
		return fail(p, "stopped at the end of a part");
	return 0;
}

/*
 * Body or preamble bytes: hands them out until a whole delimiter matches.
 * Returns how many bytes were consumed, or -1.
 */
static long scan_body(struct multipart_parser *p, const char *data, size_t len)
{
	size_t i = 0;

	while (i < len) {
		if (p->matched == 0) {
			const char *cr = memchr(data + i, '\r', len - i);
			size_t run = cr ? (size_t)(cr - (data + i)) : len - i;

			if (emit(p, data + i, run) < 0)
				return -1;
			i += run;
			if (!cr)
				break;
			p->matched = 1;
			i++;
			continue;
		}
		if (data[i] == p->delim[p->matched]) {
			i++;
			if (++p->matched == p->delim_len) {
				p->matched = 0;
				p->padding = 0;
				/* Entering AFTER_DELIM: the part's body is complete, but
				 * part_end waits until the delimiter line proves valid. */
				p->state = ST_AFTER_DELIM;
				return (long)i;
			}
			continue;
		}
		/* The match broke: what was held back is body data after all
		 * (a prefix of the delimiter), and this byte is looked at again. */
		if (emit(p, p->delim, p->matched) < 0)
			return -1;
		p->matched = 0;
	}
	return (long)i;
}

/* The bytes after a delimiter: "--" closes, [ \t]* CRLF opens a part. */
static int after_delim_byte(struct multipart_parser *p, char c)
{
	switch (p->state) {
	case ST_AFTER_DELIM:
		if (c == '-' && p->padding == 0) {
			p->state = ST_AFTER_DASH;
			return 0;
		}
		if (c == ' ' || c == '\t') {
			if (++p->padding > PADDING_MAX)
				return fail(p, "malformed delimiter line");
			return 0;
		}
		if (c == '\r') {
			p->state = ST_DELIM_LF;
			return 0;
		}
		if (c == '\n')
			break; /* tolerate a bare LF */
		return fail(p, "malformed delimiter line");
	case ST_AFTER_DASH:
		if (c != '-')
			return fail(p, "malformed delimiter line");
		if (end_part(p) < 0)
			return -1;
		p->state = ST_EPILOGUE;
		return 0;
	case ST_DELIM_LF:
		if (c != '\n')
			return fail(p, "malformed delimiter line");
		break;
	default:
		return fail(p, "internal parser state");
	}
	if (end_part(p) < 0)
		return -1;
	if (!p->hdr) {
		p->hdr = malloc(HEADER_BLOCK_MAX + 1);
		if (!p->hdr)
			return fail(p, "out of memory");
	}
	p->hdr_len = 0;
	p->line_start = 0;
	p->state = ST_HEADERS;
	return 0;
}

int multipart_feed(struct multipart_parser *p, const char *data, size_t len)
{
	size_t i = 0;

	if (!p)
		return -1;
	if (len && !data)
		return fail(p, "no data");
	while (i < len) {
		switch (p->state) {
		case ST_ERROR:
			return -1;
		case ST_EPILOGUE:
			return 0;
		case ST_PREAMBLE:
		case ST_BODY: {
			long n = scan_body(p, data + i, len - i);

			if (n < 0)
				return -1;
			i += (size_t)n;
			break;
		}
		case ST_HEADERS:
			if (header_byte(p, data[i++]) < 0)
				return -1;
			break;
		default:
			if (after_delim_byte(p, data[i++]) < 0)
				return -1;
			break;
		}
	}
	return p->state == ST_ERROR ? -1 : 0;
}

int multipart_finish(struct multipart_parser *p)
{
	if (!p)
		return -1;
	if (p->state == ST_ERROR)
		return -1;
	if (p->state != ST_EPILOGUE)
		return fail(p, "unexpected end of body: no closing boundary");
	return 0;
}

const char *multipart_error(const struct multipart_parser *p)
{
	if (!p)
		return "no parser";
	return p->error[0] ? p->error : "no error";
}

void multipart_free(struct multipart_parser *p)
{
	if (!p)
		return;
	free(p->delim);
	free(p->hdr);
	free(p);
}
