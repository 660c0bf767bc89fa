/*
 * The incremental Connect envelope decoder. The first bytes of the input
 * choose the frame limit and the sizes the rest is cut into, so the decoder
 * sees every kind of split (including empty pieces); the same input is also
 * decoded in one piece, and both runs must agree on everything.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"

struct tally {
	size_t frames;
	size_t bytes;
	uint32_t hash;
	int any_end;
	size_t max_frame;
};

static int count(uint8_t flags, const char *payload, size_t len, void *ctx)
{
	struct tally *t = ctx;

	/* Every delivered frame is within the limit, readable, and NUL-terminated. */
	if (len > t->max_frame || payload[len] != '\0')
		abort();
	if (flags & ~(CONNECT_FLAG_COMPRESSED | CONNECT_FLAG_END_STREAM))
		abort();
	for (size_t i = 0; i < len; i++)
		t->hash = t->hash * 31u + (uint8_t)payload[i];
	t->hash = t->hash * 31u + flags;
	t->frames++;
	t->bytes += len;
	if (flags & CONNECT_FLAG_END_STREAM)
		t->any_end = 1;
	/* A payload starting with '!' asks the decoder to stop, to exercise that path. */
	return len > 0 && payload[0] == '!';
}

static enum envelope_status decode(const uint8_t *data, size_t size, size_t max_frame, const uint8_t *cuts,
				   size_t ncuts, struct tally *t)
{
	struct envelope_decoder d;
	enum envelope_status st = ENVELOPE_OK;
	size_t at = 0, ci = 0;

	t->max_frame = max_frame;
	envelope_decoder_init(&d, max_frame);
	if (ncuts)
		st = envelope_decoder_feed(&d, data, 0, count, t);
	while (st == ENVELOPE_OK && at < size) {
		size_t piece = ncuts ? cuts[ci++ % ncuts] : size - at;

		if (piece > size - at)
			piece = size - at;
		st = envelope_decoder_feed(&d, data + at, piece, count, t);
		at += piece;
	}
	if (st == ENVELOPE_OK)
		st = envelope_decoder_finish(&d);
	if (d.ended != t->any_end)
		abort();
	envelope_decoder_free(&d);
	return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tally whole = { 0 }, split = { 0 };
	enum envelope_status a, b;
	size_t max_frame, ncuts, nonzero = 0;
	const uint8_t *cuts;

	if (size < 2)
		return 0;
	/* Byte 0: the frame limit (255 means 1 MiB). Byte 1: how many cut sizes follow. */
	max_frame = data[0] == 255 ? (1u << 20) : data[0];
	ncuts = data[1] % 32;
	if (size < 2 + ncuts)
		return 0;
	cuts = data + 2;
	for (size_t i = 0; i < ncuts; i++)
		nonzero += cuts[i] != 0;
	if (ncuts && !nonzero)
		return 0; /* all-empty pieces would never make progress */
	data += 2 + ncuts;
	size -= 2 + ncuts;

	a = decode(data, size, max_frame, NULL, 0, &whole);
	b = decode(data, size, max_frame, cuts, ncuts, &split);
	if (a != b || whole.frames != split.frames || whole.bytes != split.bytes || whole.hash != split.hash ||
	    whole.any_end != split.any_end)
		abort();
	if (envelope_status_str(a) == NULL)
		abort();
	return 0;
}
