#define _GNU_SOURCE
#include "sjson.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One container being walked: the member or element the walk is in. */
struct frame {
	int is_object;
	int has_key;      /* an object's current member name is known */
	size_t key_off;   /* in the arena */
	size_t key_len;
	size_t index;     /* an array's current element */
};

/* A member name of an object not yet closed, unescaped in the arena. */
struct name {
	size_t off, len;
	size_t at;        /* where the member starts in the text */
};

struct walk {
	const unsigned char *start, *p, *end;
	unsigned max_depth;
	unsigned depth;
	struct frame *frames;
	char *arena;
	size_t alen, acap;
	struct name *names;
	size_t nnames, ncap;
	char *err;
	size_t errlen;
	int failed;
};

/* Length of the well-formed UTF-8 sequence at p (RFC 3629, table 3-7 of
 * Unicode), or 0 when the bytes there are not one. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xBF;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4;
	else
		return 0;   /* continuation bytes, C0/C1 (overlong), F5..FF (past U+10FFFF) */
	if (c == 0xE0)
		lo = 0xA0;  /* overlong three-byte forms */
	else if (c == 0xED)
		hi = 0x9F;  /* U+D800..U+DFFF, surrogates */
	else if (c == 0xF0)
		lo = 0x90;  /* overlong four-byte forms */
	else if (c == 0xF4)
		hi = 0x8F;  /* above U+10FFFF */
	if ((size_t)(end - p) < n)
		return 0;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return n;
}

size_t sjson_char_len(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	if (len == 0 || *p == 0)
		return 0;
	return utf8_len(p, p + len);
}

int sjson_text_ok(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		size_t n;
		if (*p == 0)
			return 0;
		n = utf8_len(p, end);
		if (n == 0)
			return 0;
		p += n;
	}
	return 1;
}

/* ---- the message ---- */

/* A bounded text: appends are cut on a character boundary, and cut stays set. */
struct text {
	char *buf;
	size_t cap, len;
	int cut;
};

static void put(struct text *t, const char *s, size_t n)
{
	size_t room = t->cap - 1 - t->len;

	if (n > room) {
		n = room;
		/* s is valid UTF-8: back off a sequence the cut would split. */
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
		t->cut = 1;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

/* The JSON Pointer of the frames below depth ("/a/0/b~1c"), "" at the top. */
static void path_of(const struct walk *w, unsigned depth, struct text *t)
{
	char num[32];

	for (unsigned d = 0; d < depth && !t->cut; d++) {
		const struct frame *f = &w->frames[d];
		if (!f->is_object) {
			int n = snprintf(num, sizeof(num), "/%zu", f->index);
			put(t, num, (size_t)n);
			continue;
		}
		/* Before its first name is read, an object adds nothing to the path. */
		if (!f->has_key)
			continue;
		put(t, "/", 1);
		const char *k = w->arena + f->key_off;
		size_t from = 0;
		/* JSON Pointer escapes: ~ as ~0, / as ~1. */
		for (size_t i = 0; i < f->key_len; i++) {
			if (k[i] != '~' && k[i] != '/')
				continue;
			put(t, k + from, i - from);
			put(t, k[i] == '~' ? "~0" : "~1", 2);
			from = i + 1;
		}
		put(t, k + from, f->key_len - from);
	}
}

/* "at PATH (byte N): why". A long path is cut (with "...") so that the
 * reason fits whenever err can hold it. */
static int fail_at(struct walk *w, unsigned depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(struct walk *w, unsigned depth, const char *fmt, ...)
{
	char why[160], where[48], pathbuf[200];
	struct text path = { pathbuf, sizeof(pathbuf), 0, 0 }, out;
	va_list ap;

	if (w->failed)
		return -1;
	w->failed = 1;
	if (!w->err || w->errlen == 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(where, sizeof(where), " (byte %zu): ", (size_t)(w->p - w->start));
	pathbuf[0] = '\0';
	path_of(w, depth, &path);
	size_t fixed = 3 + strlen(where) + strlen(why) + 3;
	if (fixed < w->errlen && path.len > w->errlen - 1 - fixed) {
		path.len = 0;
		path.cap = w->errlen - fixed;
		path.cut = 0;
		path_of(w, depth, &path);
		path.cut = 1;
	}
	out = (struct text){ w->err, w->errlen, 0, 0 };
	w->err[0] = '\0';
	put(&out, "at ", 3);
	if (path.len == 0)
		put(&out, "the top level", 13);
	put(&out, pathbuf, path.len);
	if (path.cut)
		put(&out, "...", 3);
	put(&out, where, strlen(where));
	put(&out, why, strlen(why));
	return -1;
}

#define fail(w, ...) fail_at((w), (w)->depth, __VA_ARGS__)

/* ---- the walk ---- */

static void skip_ws(struct walk *w)
{
	while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
		w->p++;
}

static int arena_put(struct walk *w, const void *s, size_t n)
{
	if (w->alen + n > w->acap) {
		size_t cap = w->acap ? w->acap : 256;
		while (cap < w->alen + n)
			cap *= 2;
		char *a = realloc(w->arena, cap);
		if (!a)
			return fail(w, "out of memory");
		w->arena = a;
		w->acap = cap;
	}
	memcpy(w->arena + w->alen, s, n);
	w->alen += n;
	return 0;
}

static int hex4(const unsigned char *p, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

static int put_code_point(struct walk *w, unsigned cp)
{
	unsigned char b[4];
	size_t n;

	if (cp < 0x80) {
		b[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xC0 | cp >> 6);
		b[1] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xE0 | cp >> 12);
		b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		b[2] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		b[0] = (unsigned char)(0xF0 | cp >> 18);
		b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
		b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		b[3] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return arena_put(w, b, n);
}

/* One \u escape at w->p (on its backslash): its code point, a pair of
 * escapes read as one. Advances w->p past it; on a refusal w->p stays on
 * the backslash, so the message names where the escape starts. */
static int unicode_escape(struct walk *w, unsigned *cp)
{
	const unsigned char *q = w->p + 2;
	unsigned hi, lo;

	if (w->end - q < 4 || hex4(q, &hi) < 0)
		return fail(w, "a \\u escape needs four hex digits");
	q += 4;
	if (hi == 0)
		return fail(w, "a string holds \\u0000 (NUL)");
	if (hi >= 0xDC00 && hi <= 0xDFFF)
		return fail(w, "a string holds a low surrogate escape (\\u%04X) without its high half", hi);
	if (hi >= 0xD800 && hi <= 0xDBFF) {
		if (w->end - q < 6 || q[0] != '\\' || q[1] != 'u' || hex4(q + 2, &lo) < 0 || lo < 0xDC00 ||
		    lo > 0xDFFF)
			return fail(w, "a string holds a high surrogate escape (\\u%04X) without its low half", hi);
		q += 6;
		hi = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
	}
	*cp = hi;
	w->p = q;
	return 0;
}

/* A string at w->p (on its quote). keep: its unescaped bytes go to the arena. */
static int walk_string(struct walk *w, int keep)
{
	w->p++;
	for (;;) {
		const unsigned char *run = w->p;
		while (w->p < w->end && *w->p >= 0x20 && *w->p != '"' && *w->p != '\\' && *w->p < 0x80)
			w->p++;
		if (keep && w->p > run && arena_put(w, run, (size_t)(w->p - run)) < 0)
			return -1;
		if (w->p >= w->end)
			return fail(w, "a string is not closed");
		unsigned char c = *w->p;
		if (c == '"') {
			w->p++;
			return 0;
		}
		if (c < 0x20)
			return fail(w, "a string holds the control byte 0x%02X unescaped", c);
		if (c >= 0x80) {
			size_t n = utf8_len(w->p, w->end);
			if (n == 0)
				return fail(w, "a string is not valid UTF-8");
			if (keep && arena_put(w, w->p, n) < 0)
				return -1;
			w->p += n;
			continue;
		}
		/* A backslash. */
		if (w->end - w->p < 2)
			return fail(w, "a string is not closed");
		char out;
		switch (w->p[1]) {
		case '"': out = '"'; break;
		case '\\': out = '\\'; break;
		case '/': out = '/'; break;
		case 'b': out = '\b'; break;
		case 'f': out = '\f'; break;
		case 'n': out = '\n'; break;
		case 'r': out = '\r'; break;
		case 't': out = '\t'; break;
		case 'u': {
			unsigned cp = 0;
			if (unicode_escape(w, &cp) < 0)
				return -1;
			if (keep && put_code_point(w, cp) < 0)
				return -1;
			continue;
		}
		default:
			return fail(w, "a string holds an unknown escape");
		}
		w->p += 2;
		if (keep && arena_put(w, &out, 1) < 0)
			return -1;
	}
}

static int digits(struct walk *w)
{
	const unsigned char *from = w->p;
	while (w->p < w->end && *w->p >= '0' && *w->p <= '9')
		w->p++;
	return w->p > from ? 0 : -1;
}

static int walk_number(struct walk *w)
{
	if (*w->p == '-')
		w->p++;
	if (w->p < w->end && *w->p == '0')
		w->p++;
	else if (w->p >= w->end || *w->p < '1' || *w->p > '9' || digits(w) < 0)
		return fail(w, "a number is malformed");
	if (w->p < w->end && *w->p == '.') {
		w->p++;
		if (digits(w) < 0)
			return fail(w, "a number is malformed");
	}
	if (w->p < w->end && (*w->p == 'e' || *w->p == 'E')) {
		w->p++;
		if (w->p < w->end && (*w->p == '+' || *w->p == '-'))
			w->p++;
		if (digits(w) < 0)
			return fail(w, "a number is malformed");
	}
	return 0;
}

static int walk_literal(struct walk *w, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(w->end - w->p) < n || memcmp(w->p, word, n) != 0)
		return fail(w, "unexpected byte 0x%02X", *w->p);
	w->p += n;
	return 0;
}

static int cmp_names(const void *a, const void *b, void *arena)
{
	const struct name *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp((const char *)arena + x->off, (const char *)arena + y->off, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* The names of the object just closed (from base on): equal neighbours once sorted. */
static int no_duplicates(struct walk *w, size_t base, unsigned depth)
{
	size_t n = w->nnames - base;
	struct name *v = w->names + base;

	if (n < 2)
		return 0;
	qsort_r(v, n, sizeof(*v), cmp_names, w->arena);
	for (size_t i = 1; i < n; i++) {
		if (cmp_names(&v[i - 1], &v[i], w->arena) != 0)
			continue;
		/* The name is valid UTF-8 (it was checked); the message cuts it on a boundary. */
		char shown[72];
		size_t len = v[i].len, at = 0;
		const char *k = w->arena + v[i].off;
		if (len > 64) {
			len = 64;
			while (len > 0 && ((unsigned char)k[len] & 0xC0) == 0x80)
				len--;
		}
		for (size_t j = 0; j < len && at + 1 < sizeof(shown); j++)
			shown[at++] = k[j] ? k[j] : '?';
		shown[at] = '\0';
		/* The message points at the second of the two. */
		w->p = w->start + (v[i - 1].at > v[i].at ? v[i - 1].at : v[i].at);
		return fail_at(w, depth, "duplicate member \"%s\"", shown);
	}
	return 0;
}

static int walk_value(struct walk *w);

static int enter(struct walk *w, int is_object)
{
	if (w->depth >= w->max_depth)
		return fail(w, "nested deeper than %u levels", w->max_depth);
	w->frames[w->depth] = (struct frame){ .is_object = is_object };
	w->depth++;
	w->p++;
	skip_ws(w);
	return 0;
}

static int walk_object(struct walk *w)
{
	size_t base = w->nnames, mark = w->alen;
	unsigned depth = w->depth;

	if (enter(w, 1) < 0)
		return -1;
	struct frame *f = &w->frames[depth];
	if (w->p < w->end && *w->p == '}') {
		w->p++;
		w->depth--;
		return 0;
	}
	for (;;) {
		if (w->p >= w->end || *w->p != '"')
			return fail(w, "a member name (a string) is expected");
		size_t off = w->alen, at = (size_t)(w->p - w->start);
		f->has_key = 0;
		if (walk_string(w, 1) < 0)
			return -1;
		if (w->nnames == w->ncap) {
			size_t cap = w->ncap ? w->ncap * 2 : 32;
			struct name *v = realloc(w->names, cap * sizeof(*v));
			if (!v)
				return fail(w, "out of memory");
			w->names = v;
			w->ncap = cap;
		}
		w->names[w->nnames++] = (struct name){ off, w->alen - off, at };
		f->has_key = 1;
		f->key_off = off;
		f->key_len = w->alen - off;
		skip_ws(w);
		if (w->p >= w->end || *w->p != ':')
			return fail(w, "a ':' is expected after the member name");
		w->p++;
		skip_ws(w);
		if (walk_value(w) < 0)
			return -1;
		skip_ws(w);
		if (w->p < w->end && *w->p == ',') {
			w->p++;
			skip_ws(w);
			continue;
		}
		if (w->p < w->end && *w->p == '}') {
			w->p++;
			break;
		}
		return fail(w, "a ',' or '}' is expected");
	}
	w->depth--;
	if (no_duplicates(w, base, depth) < 0)
		return -1;
	w->nnames = base;
	w->alen = mark;
	return 0;
}

static int walk_array(struct walk *w)
{
	unsigned depth = w->depth;

	if (enter(w, 0) < 0)
		return -1;
	struct frame *f = &w->frames[depth];
	if (w->p < w->end && *w->p == ']') {
		w->p++;
		w->depth--;
		return 0;
	}
	for (;;) {
		if (walk_value(w) < 0)
			return -1;
		skip_ws(w);
		if (w->p < w->end && *w->p == ',') {
			w->p++;
			f->index++;
			skip_ws(w);
			continue;
		}
		if (w->p < w->end && *w->p == ']') {
			w->p++;
			break;
		}
		return fail(w, "a ',' or ']' is expected");
	}
	w->depth--;
	return 0;
}

static int walk_value(struct walk *w)
{
	if (w->p >= w->end)
		return fail(w, "a value is expected");
	switch (*w->p) {
	case '{':
		return walk_object(w);
	case '[':
		return walk_array(w);
	case '"':
		return walk_string(w, 0);
	case 't':
		return walk_literal(w, "true");
	case 'f':
		return walk_literal(w, "false");
	case 'n':
		return walk_literal(w, "null");
	default:
		if (*w->p == '-' || (*w->p >= '0' && *w->p <= '9'))
			return walk_number(w);
		if (*w->p >= 0x80 && utf8_len(w->p, w->end) == 0)
			return fail(w, "the text is not valid UTF-8");
		return fail(w, "unexpected byte 0x%02X", *w->p);
	}
}

int sjson_check(const char *text, size_t len, unsigned max_depth, char *err, size_t errlen)
{
	struct walk w = { 0 };
	int rc = -1;

	if (err && errlen)
		err[0] = '\0';
	w.start = w.p = (const unsigned char *)(text ? text : "");
	w.end = w.p + (text ? len : 0);
	w.max_depth = max_depth == 0 ? SJSON_DEFAULT_DEPTH : max_depth > SJSON_MAX_DEPTH ? SJSON_MAX_DEPTH : max_depth;
	w.err = err;
	w.errlen = errlen;
	w.frames = calloc(w.max_depth, sizeof(*w.frames));
	/* Never NULL, even for empty names: offsets into it are always valid. */
	w.acap = 256;
	w.arena = malloc(w.acap);
	if (!w.frames || !w.arena) {
		free(w.frames);
		free(w.arena);
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* A byte-order mark is refused like any other byte outside the grammar
	 * (RFC 8259 section 8.1 lets a parser do either). */
	skip_ws(&w);
	if (walk_value(&w) == 0) {
		skip_ws(&w);
		if (w.p < w.end)
			fail(&w, "data follows the value");
		else
			rc = 0;
	}
	free(w.frames);
	free(w.arena);
	free(w.names);
	return rc;
}

cJSON *sjson_parse(const char *text, size_t len, unsigned max_depth, char *err, size_t errlen)
{
	cJSON *doc;

	if (sjson_check(text, len, max_depth, err, errlen) < 0)
		return NULL;
	doc = cJSON_ParseWithLength(text, len);
	if (!doc && err && errlen)
		snprintf(err, errlen, "out of memory");
	return doc;
}

cJSON *sjson_int64(int64_t v)
{
	char text[24];
	snprintf(text, sizeof(text), "%" PRId64, v);
	return cJSON_CreateRaw(text);
}

cJSON *sjson_add_int64(cJSON *obj, const char *name, int64_t v)
{
	cJSON *it = sjson_int64(v);
	if (!it)
		return NULL;
	if (!cJSON_AddItemToObject(obj, name, it)) {
		cJSON_Delete(it);
		return NULL;
	}
	return it;
}
