/*
 * The S3 store's reader of ListMultipartUploads answers
 * (libhangar/checkpoint/s3list.c) on any bytes: a refusal says why and
 * keeps nothing; an acceptance came from valid UTF-8 without a NUL and
 * holds no more uploads than asked for, each with a key and an upload id
 * that are non-empty, bounded, valid UTF-8, and a truncated listing has
 * somewhere to go on from.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/s3list.h"
#include "sjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int text_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	return s && n <= max && sjson_text_ok(s, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct s3_listing l;
	const char *why = NULL;
	size_t max;

	/* The first byte is how many uploads were asked for; the rest the answer. */
	if (size == 0)
		return 0;
	max = 1 + data[0] % 8;
	data++;
	size--;
	if (s3_listing_parse(&l, (const char *)data, size, max, &why) < 0) {
		if (!why || !*why || l.u || l.n || l.next_key || l.next_id)
			abort();
		return 0;
	}
	if (why || !sjson_text_ok((const char *)data, size) || l.n > max || (l.truncated != 0 && l.truncated != 1))
		abort();
	if (l.truncated && (!l.next_key || !*l.next_key))
		abort();
	if ((l.next_key && !text_ok(l.next_key, size)) || (l.next_id && !text_ok(l.next_id, size)))
		abort();
	for (size_t i = 0; i < l.n; i++)
		if (!text_ok(l.u[i].key, 1024) || !*l.u[i].key || !text_ok(l.u[i].id, 1024) || !*l.u[i].id ||
		    l.u[i].initiated < 0)
			abort();
	s3_listing_free(&l);
	return 0;
}
