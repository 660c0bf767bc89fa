/*
 * The answer to ListMultipartUploads, read strictly: the whole document is
 * checked (UTF-8, no NUL, well-formed XML of the elements S3 sends, values
 * of their type) before anything of it is handed on, so a hostile or cut
 * answer yields nothing to act on.
 */
#define _GNU_SOURCE
#include "s3list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sjson.h"

#define LIST_DEPTH 8
#define LIST_NAME_MAX 64

void s3_listing_free(struct s3_listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->u[i].key);
		free(l->u[i].id);
	}
	free(l->u);
	free(l->next_key);
	free(l->next_id);
	memset(l, 0, sizeof(*l));
}

/* The XML of an S3 answer, read as a stream of tokens: elements (attributes
 * read and ignored), and text with its five entities and character
 * references decoded. Comments, CDATA, DOCTYPE and processing instructions
 * other than the leading declaration are refused: S3 sends none. */
enum xtok { XT_ERR = -1, XT_EOF, XT_OPEN, XT_CLOSE, XT_TEXT };

struct xml {
	const char *p, *end;
	int self_closed;        /* the last XT_OPEN was <name/>: an XT_CLOSE follows */
	char name[LIST_NAME_MAX + 1];
	char *text;             /* decoded XT_TEXT; room for the whole document */
	size_t text_len;
	const char *err;
};

static int xml_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int xml_name_char(char c, int first)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' ||
	       (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

static int xml_fail(struct xml *x, const char *why)
{
	x->err = why;
	return XT_ERR;
}

static int xml_name(struct xml *x)
{
	size_t n = 0;

	if (x->p >= x->end || !xml_name_char(*x->p, 1))
		return xml_fail(x, "a tag without a valid name");
	while (x->p < x->end && xml_name_char(*x->p, n == 0)) {
		if (n == LIST_NAME_MAX)
			return xml_fail(x, "a tag name longer than 64 bytes");
		x->name[n++] = *x->p++;
	}
	x->name[n] = '\0';
	return 0;
}

static void xml_skip_space(struct xml *x)
{
	while (x->p < x->end && xml_space(*x->p))
		x->p++;
}

/* Appends the UTF-8 form of code point c; 0 or -1 for a NUL, a surrogate or
 * a value past Unicode. */
static int put_utf8(struct xml *x, unsigned long c)
{
	char *o = x->text + x->text_len;

	if (c == 0 || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return -1;
	if (c < 0x80) {
		o[0] = (char)c;
		x->text_len += 1;
	} else if (c < 0x800) {
		o[0] = (char)(0xc0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3f));
		x->text_len += 2;
	} else if (c < 0x10000) {
		o[0] = (char)(0xe0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		x->text_len += 3;
	} else {
		o[0] = (char)(0xf0 | (c >> 18));
		o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[3] = (char)(0x80 | (c & 0x3f));
		x->text_len += 4;
	}
	return 0;
}

/* Text up to the next '<', decoded. A decoded character is never longer
 * than its reference, so x->text (as large as the document) has room. */
static int xml_text_token(struct xml *x)
{
	static const struct {
		const char *ref;
		char c;
	} ents[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };

	x->text_len = 0;
	while (x->p < x->end && *x->p != '<') {
		const char *semi;
		size_t i, n = (size_t)(x->end - x->p);

		if (*x->p != '&') {
			x->text[x->text_len++] = *x->p++;
			continue;
		}
		for (i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
			size_t rl = strlen(ents[i].ref);

			if (n >= rl && !memcmp(x->p, ents[i].ref, rl)) {
				x->text[x->text_len++] = ents[i].c;
				x->p += rl;
				break;
			}
		}
		if (i < sizeof(ents) / sizeof(ents[0]))
			continue;
		semi = memchr(x->p, ';', n < 12 ? n : 12);
		if (n > 3 && x->p[1] == '#' && semi) {
			int hex = x->p[2] == 'x';
			const char *d = x->p + 2 + hex;
			unsigned long c = 0;

			if (d == semi)
				return xml_fail(x, "an empty character reference");
			for (; d < semi; d++) {
				int v = (*d >= '0' && *d <= '9') ? *d - '0'
					: hex && (*d >= 'a' && *d <= 'f') ? *d - 'a' + 10
					: hex && (*d >= 'A' && *d <= 'F') ? *d - 'A' + 10 : -1;

				if (v < 0)
					return xml_fail(x, "a malformed character reference");
				c = c * (hex ? 16 : 10) + (unsigned long)v;
			}
			if (put_utf8(x, c) < 0)
				return xml_fail(x, "a character reference to NUL, a surrogate or past Unicode");
			x->p = semi + 1;
			continue;
		}
		return xml_fail(x, "a '&' that starts no entity");
	}
	x->text[x->text_len] = '\0';
	return XT_TEXT;
}

static int xml_next(struct xml *x)
{
	if (x->self_closed) {
		x->self_closed = 0;
		return XT_CLOSE;
	}
	if (x->p >= x->end)
		return XT_EOF;
	if (*x->p != '<')
		return xml_text_token(x);
	x->p++;
	if (x->p < x->end && (*x->p == '!' || *x->p == '?'))
		return xml_fail(x, "a comment, CDATA, DOCTYPE or processing instruction");
	if (x->p < x->end && *x->p == '/') {
		x->p++;
		if (xml_name(x) < 0)
			return XT_ERR;
		xml_skip_space(x);
		if (x->p >= x->end || *x->p != '>')
			return xml_fail(x, "an unterminated closing tag");
		x->p++;
		return XT_CLOSE;
	}
	if (xml_name(x) < 0)
		return XT_ERR;
	for (;;) {
		const char *q;
		char quote;
		int had_space = x->p < x->end && xml_space(*x->p);

		xml_skip_space(x);
		if (x->p >= x->end)
			return xml_fail(x, "an unterminated tag");
		if (*x->p == '>') {
			x->p++;
			return XT_OPEN;
		}
		if (*x->p == '/') {
			if (x->end - x->p < 2 || x->p[1] != '>')
				return xml_fail(x, "a stray '/' in a tag");
			x->p += 2;
			x->self_closed = 1;
			return XT_OPEN;
		}
		/* An attribute: name="value", read and ignored. */
		if (!had_space || !xml_name_char(*x->p, 1))
			return xml_fail(x, "a malformed attribute");
		while (x->p < x->end && xml_name_char(*x->p, 0))
			x->p++;
		xml_skip_space(x);
		if (x->p >= x->end || *x->p != '=')
			return xml_fail(x, "an attribute without a value");
		x->p++;
		xml_skip_space(x);
		if (x->p >= x->end || (*x->p != '"' && *x->p != '\''))
			return xml_fail(x, "an attribute value without quotes");
		quote = *x->p++;
		q = memchr(x->p, quote, (size_t)(x->end - x->p));
		if (!q || memchr(x->p, '<', (size_t)(q - x->p)))
			return xml_fail(x, "an unterminated attribute value");
		x->p = q + 1;
	}
}

/* ISO 8601 as S3 writes it: 2026-12-02T14:40:13[.fraction]Z, in UTC. */
static int parse_initiated(const char *v, time_t *out)
{
	struct tm tm = { 0 }, back;
	int y, mo, d, h, mi, s, n = 0;
	time_t t;

	if (strlen(v) < 20 || sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &n) != 6 || n != 19 ||
	    strspn(v, "0123456789") != 4 || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' ||
	    v[16] != ':')
		return -1;
	for (int i = 0; i < 19; i++)
		if (i != 4 && i != 7 && i != 10 && i != 13 && i != 16 && (v[i] < '0' || v[i] > '9'))
			return -1;
	v += 19;
	if (*v == '.') {
		size_t digits = strspn(v + 1, "0123456789");

		if (digits < 1 || digits > 9)
			return -1;
		v += 1 + digits;
	}
	if (strcmp(v, "Z") != 0 || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	t = timegm(&tm);
	/* 31 February is not 3 March. */
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d || back.tm_mon != mo - 1)
		return -1;
	*out = t;
	return 0;
}

static int is_space_text(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!xml_space(t[i]))
			return 0;
	return 1;
}

/* What of a ListMultipartUploadsResult is read; everything else is
 * checked for form and ignored. */
enum field { F_NONE, F_TRUNCATED, F_NEXT_KEY, F_NEXT_ID, F_KEY, F_ID, F_INITIATED };

static enum field field_of(char stack[][LIST_NAME_MAX + 1], int depth)
{
	const char *n = stack[depth - 1];

	if (depth == 2)
		return !strcmp(n, "IsTruncated") ? F_TRUNCATED : !strcmp(n, "NextKeyMarker") ? F_NEXT_KEY
			: !strcmp(n, "NextUploadIdMarker") ? F_NEXT_ID : F_NONE;
	if (depth == 3 && !strcmp(stack[1], "Upload"))
		return !strcmp(n, "Key") ? F_KEY : !strcmp(n, "UploadId") ? F_ID
			: !strcmp(n, "Initiated") ? F_INITIATED : F_NONE;
	return F_NONE;
}

int s3_listing_parse(struct s3_listing *l, const char *body, size_t len, size_t max, const char **why)
{
	char stack[LIST_DEPTH][LIST_NAME_MAX + 1];
	struct xml x = { .p = body, .end = body + len };
	struct s3_upload cur = { 0 };
	int depth = 0, done = 0, seen = 0, tok;
	const char *q;

	memset(l, 0, sizeof(*l));
	l->truncated = -1;
	*why = NULL;
	if (memchr(body, '\0', len))
		*why = "a NUL byte in the answer";
	else if (!sjson_text_ok(body, len))
		*why = "the answer is not UTF-8";
	else if (!(x.text = malloc(len + 1)) || !(l->u = calloc(max ? max : 1, sizeof(*l->u))))
		*why = "out of memory";
	if (*why) {
		free(x.text);
		return -1;
	}
	/* The XML declaration, if any, is the first thing. */
	xml_skip_space(&x);
	if (x.end - x.p >= 5 && !memcmp(x.p, "<?xml", 5)) {
		for (q = x.p; q + 1 < x.end && !(q[0] == '?' && q[1] == '>'); q++)
			if (*q == '<' && q != x.p)
				break;
		if (q + 1 >= x.end || q[0] != '?')
			*why = "an unterminated XML declaration";
		else
			x.p = q + 2;
	}
	while (!*why && (tok = xml_next(&x)) != XT_EOF) {
		enum field f;

		if (tok == XT_ERR) {
			*why = x.err;
		} else if (tok == XT_TEXT) {
			if (depth == 0 || done) {
				if (!is_space_text(x.text, x.text_len))
					*why = done ? "data after the document" : "text before the document";
			} else if ((depth == 1 || (depth == 2 && !strcmp(stack[1], "Upload"))) &&
				   !is_space_text(x.text, x.text_len)) {
				*why = "text among the elements of a listing";
			}
		} else if (tok == XT_OPEN) {
			if (done)
				*why = "data after the document";
			else if (depth == LIST_DEPTH)
				*why = "elements nested too deep";
			else if (depth == 0 && strcmp(x.name, "ListMultipartUploadsResult"))
				*why = "not a ListMultipartUploadsResult";
			else if (depth > 0 && field_of(stack, depth) != F_NONE)
				*why = "an element inside a value";
			if (*why)
				break;
			if (depth == 1 && !strcmp(x.name, "Upload")) {
				if (l->n == max)
					*why = "more uploads than asked for";
				memset(&cur, 0, sizeof(cur));
				cur.initiated = -1;
			}
			memcpy(stack[depth], x.name, sizeof(x.name));
			depth++;
			x.text_len = 0; /* a value's text follows its open tag */
			x.text[0] = '\0';
		} else if (tok == XT_CLOSE) {
			if (depth == 0 || strcmp(x.name, stack[depth - 1])) {
				*why = "a closing tag that matches no open one";
				break;
			}
			f = field_of(stack, depth);
			if (f != F_NONE) {
				/* The text token, if any, was the last one: x.text holds it. */
				const char *v = x.text;
				char **slot = f == F_NEXT_KEY ? &l->next_key : f == F_NEXT_ID ? &l->next_id
					      : f == F_KEY ? &cur.key : f == F_ID ? &cur.id : NULL;

				if (slot) {
					if (*slot)
						*why = "a value given twice";
					else if (!(*slot = strdup(v)))
						*why = "out of memory";
					else if ((f == F_KEY || f == F_ID) && (!*v || strlen(v) > 1024))
						*why = "an empty or overlong Key or UploadId";
				} else if (f == F_TRUNCATED) {
					if (l->truncated != -1)
						*why = "IsTruncated given twice";
					else if (!strcmp(v, "true") || !strcmp(v, "false"))
						l->truncated = v[0] == 't';
					else
						*why = "IsTruncated is neither true nor false";
				} else if (cur.initiated != -1) {
					*why = "Initiated given twice";
				} else if (parse_initiated(v, &cur.initiated) < 0) {
					*why = "Initiated is not an ISO 8601 UTC time";
				}
			}
			if (depth == 2 && !strcmp(stack[1], "Upload") && !*why) {
				if (!cur.key || !cur.id || cur.initiated == -1)
					*why = "an Upload without its Key, UploadId or Initiated";
				else
					l->u[l->n++] = cur;
				if (!*why)
					memset(&cur, 0, sizeof(cur));
			}
			depth--;
			if (depth == 0)
				done = 1;
			x.text_len = 0;
			x.text[0] = '\0';
		}
		seen = 1;
	}
	free(cur.key);
	free(cur.id);
	free(x.text);
	if (!*why && (!seen || !done))
		*why = "the answer ends before the listing does";
	if (!*why && l->truncated == -1)
		*why = "no IsTruncated";
	if (!*why && l->truncated && (!l->next_key || !*l->next_key))
		*why = "a truncated listing without NextKeyMarker";
	if (*why) {
		s3_listing_free(l);
		return -1;
	}
	return 0;
}
