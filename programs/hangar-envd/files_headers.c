/*
 * The parts of the /files routes that are pure functions of request
 * headers: Accept-Encoding negotiation, Range, and the Content-Disposition
 * of a download (declared in files.h, where the unit tests reach them).
 */
#include "files.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---- Content-Disposition ------------------------------------------------ */

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
