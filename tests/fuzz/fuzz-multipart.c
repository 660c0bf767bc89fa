/*
 * The streaming multipart/form-data parser used by POST /files. The first
 * line of the input is the Content-Type header value; the rest is the body,
 * fed in pieces whose sizes come from the body itself. The same body is also
 * parsed in one piece: both runs must report the same parts and bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

struct seen {
	int in_part;
	size_t parts;
	size_t bytes;
	uint32_t hash;
	size_t stop_at; /* ask the parser to stop at this data callback (0: never) */
	size_t calls;
};

static void mix(struct seen *s, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		s->hash = s->hash * 31u + (uint8_t)p[i];
}

static int on_begin(void *ctx, const char *name, const char *filename)
{
	struct seen *s = ctx;

	if (s->in_part)
		abort(); /* a part began before the previous one ended */
	s->in_part = 1;
	s->parts++;
	/* Reading the strings in full catches unterminated or dangling ones. */
	if (name)
		mix(s, name, strlen(name) + 1);
	if (filename)
		mix(s, filename, strlen(filename) + 1);
	return 0;
}

static int on_data(void *ctx, const char *data, size_t len)
{
	struct seen *s = ctx;

	if (!s->in_part)
		abort(); /* body bytes outside a part */
	mix(s, data, len);
	s->bytes += len;
	s->calls++;
	return s->stop_at && s->calls == s->stop_at;
}

static int on_end(void *ctx)
{
	struct seen *s = ctx;

	if (!s->in_part)
		abort();
	s->in_part = 0;
	return 0;
}

static const struct multipart_callbacks callbacks = { on_begin, on_data, on_end };

static int parse(const char *ct, const uint8_t *body, size_t len, size_t step_seed, struct seen *s)
{
	struct multipart_parser *p = multipart_new(ct, &callbacks, s);
	size_t at = 0, k = step_seed;
	int rc = 0, fed_ok;

	if (!p)
		return -2;
	while (at < len && rc == 0) {
		size_t piece = len - at;

		if (step_seed) {
			/* Piece sizes 0..63 taken from the body bytes themselves. */
			piece = body[k++ % len] % 64;
			if (piece > len - at)
				piece = len - at;
		}
		rc = multipart_feed(p, (const char *)body + at, piece);
		at += piece;
		if (step_seed && k > len * 4 + 64)
			step_seed = 0; /* too many empty pieces: finish in one go */
	}
	fed_ok = rc == 0;
	if (rc == 0)
		rc = multipart_finish(p);
	if (rc != 0 && multipart_error(p) == NULL)
		abort();
	/* Errors from feeding are sticky. */
	if (!fed_ok && multipart_feed(p, "\r\n", 2) == 0)
		abort();
	multipart_free(p);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	struct seen whole = { 0 }, split = { 0 };
	size_t ctlen, blen;
	const uint8_t *body;
	char *ct;
	int a, b;

	if (!nl)
		return 0;
	ctlen = (size_t)(nl - data);
	ct = malloc(ctlen + 1);
	if (!ct)
		return 0;
	memcpy(ct, data, ctlen);
	ct[ctlen] = '\0';
	body = nl + 1;
	blen = size - ctlen - 1;

	a = parse(ct, body, blen, 0, &whole);
	b = parse(ct, body, blen, blen ? 1 : 0, &split);
	if (a == 0 && b == 0 && (whole.parts != split.parts || whole.bytes != split.bytes || whole.hash != split.hash))
		abort();
	if ((a == 0) != (b == 0))
		abort();
	if (a == 0 && whole.in_part)
		abort(); /* finished cleanly with a part still open */

	/* Once more, stopping from a callback part-way. */
	if (a == 0 && whole.calls >= 1) {
		struct seen stopped = { .stop_at = 1 };

		if (parse(ct, body, blen, 0, &stopped) == 0)
			abort();
	}
	free(ct);
	return 0;
}
