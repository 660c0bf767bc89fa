/*
 * What enters hangard as text, checked before anything reads it: the request
 * target (path and query, after percent-decoding) and JSON bodies. Free of
 * libmicrohttpd, so tests/fuzz links it alone.
 *
 * Text is valid UTF-8 without NUL or it is refused, never cut: a C string
 * would end at the NUL, so "/v1/sandboxes/ID%00x" would name ID and
 * "path=/tmp/a%00.txt" would write /tmp/a. JSON is strict (libhangar/util's
 * sjson): one value, no duplicate member, no \u0000, no lone surrogate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "sjson.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes s[0..n) into out (n + 1 bytes) as libmicrohttpd does
 * ('+' is a space in the query); returns the decoded length. */
static size_t unescape(const char *s, size_t n, int query, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else if (query && s[i] == '+') {
			out[o++] = ' ';
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
	return o;
}

/* At most 64 bytes of the valid UTF-8 text s, cut on a character boundary. */
static const char *shown(char out[65], const char *s)
{
	size_t n = strlen(s);
	if (n > 64) {
		n = 64;
		while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
			n--;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

/* Checks one component; its decoded text must be valid UTF-8 without NUL. */
static int component_ok(const char *s, size_t n, int query, char *scratch)
{
	size_t len = unescape(s, n, query, scratch);
	return sjson_text_ok(scratch, len);
}

int target_check(const char *target, char *err, size_t errlen)
{
	const char *q = strchr(target, '?');
	size_t plen = q ? (size_t)(q - target) : strlen(target);
	char *scratch = malloc(strlen(target) + 1);
	int rc = -1;

	if (!scratch) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!component_ok(target, plen, 0, scratch)) {
		snprintf(err, errlen, "the path holds a NUL byte or bytes that are not UTF-8 (after percent-decoding)");
		goto out;
	}
	for (const char *p = q ? q + 1 : NULL; p && *p;) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		size_t klen = eq ? (size_t)(eq - p) : (size_t)(end - p);
		if (!component_ok(p, klen, 1, scratch)) {
			snprintf(err, errlen,
				 "a query parameter's name holds a NUL byte or bytes that are not UTF-8 "
				 "(after percent-decoding)");
			goto out;
		}
		if (eq && !component_ok(eq + 1, (size_t)(end - eq - 1), 1, scratch)) {
			/* The name is valid UTF-8 (checked above): it may be shown. */
			char name[65];
			unescape(p, klen, 1, scratch);
			snprintf(err, errlen,
				 "the query parameter \"%s\" holds a NUL byte or bytes that are not UTF-8 "
				 "(after percent-decoding)",
				 shown(name, scratch));
			goto out;
		}
		p = amp ? amp + 1 : end;
	}
	rc = 0;
out:
	free(scratch);
	return rc;
}

cJSON *body_decode(const char *body, size_t len, const char *const *allowed, char *err, size_t errlen)
{
	char why[320];
	cJSON *doc, *it;

	if (len == 0)
		return cJSON_CreateObject();
	doc = sjson_parse(body, len, BODY_MAX_DEPTH, why, sizeof(why));
	if (!doc) {
		snprintf(err, errlen, "the body is not JSON: %s", why);
		return NULL;
	}
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		snprintf(err, errlen, "the body must be a JSON object");
		return NULL;
	}
	cJSON_ArrayForEach(it, doc) {
		const char *const *a;
		for (a = allowed; *a; a++)
			if (strcmp(*a, it->string) == 0)
				break;
		if (!*a) {
			char name[65];
			snprintf(err, errlen, "unknown field \"%s\"", shown(name, it->string));
			cJSON_Delete(doc);
			return NULL;
		}
	}
	return doc;
}
