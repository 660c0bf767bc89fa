/*
 * What the envd client makes of a sandbox's bytes (libhangar/envd/decode.c):
 * the body of a server stream (Connect envelopes → messages → the end
 * message) and the body of a GET /files download (identity or gzip, into
 * memory under a limit or into an fd).
 *
 * Input: byte 0 picks the decoder and its options, byte 1 the sizes the rest
 * is cut into (so every split is seen), byte 2 a limit; the rest is the body.
 * Checks beyond the sanitizers: a decoder that failed reported an error
 * code; a file read into memory never holds more than its limit; a stream
 * never delivers a message after its end message.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/internal.h"
#include "envd/decode.h"

struct tally {
	size_t messages;
	size_t stop_after;      /* 0: never ask to stop */
	struct envd_stream_dec *d;
};

static int on_message(const cJSON *msg, void *ctx)
{
	struct tally *t = ctx;

	if (!cJSON_IsObject(msg) || t->d->ended)
		abort();
	t->messages++;
	return t->stop_after && t->messages >= t->stop_after;
}

static size_t cut_size(uint8_t seed, size_t i)
{
	/* 1..64 bytes, varying along the input; seed 0 feeds everything at once. */
	return seed ? 1 + (size_t)((seed * (i + 7)) % 64) : SIZE_MAX;
}

static void fuzz_stream(const uint8_t *body, size_t size, uint8_t cuts, uint8_t opt)
{
	struct envd_stream_dec d;
	struct tally t = { 0, opt % 4, &d };
	size_t at = 0;
	int rc = 0;

	envd_stream_dec_init(&d, "fuzz stream", 200, on_message, &t);
	for (size_t i = 0; at < size; i++) {
		size_t n = cut_size(cuts, i);

		if (n > size - at)
			n = size - at;
		rc = envd_stream_dec_feed(&d, (const char *)body + at, n);
		at += n;
		if (rc != 0)
			break;
	}
	if (rc != 0) {
		/* Stopped: by the callback, or by a reported failure. */
		if (!d.stopped && (d.fail >= 0 || hangar_error_last()->code != d.fail))
			abort();
	} else {
		rc = envd_stream_dec_finish(&d);
		if (rc > 0 || (rc < 0 && hangar_error_last()->code != rc))
			abort();
		if (rc == 0 && !d.ended)
			abort();
	}
	envd_stream_dec_free(&d);
}

static void fuzz_file(const uint8_t *body, size_t size, uint8_t cuts, uint8_t opt, uint8_t lim)
{
	static const enum net_encoding encs[] = { NET_ENC_NONE, NET_ENC_IDENTITY, NET_ENC_GZIP, NET_ENC_OTHER };
	struct envd_file_dec d;
	enum net_encoding enc = encs[(opt >> 1) & 3];
	size_t limit = (size_t)1 << (lim % 21);
	int to_fd = (opt >> 3) & 1, fd = -1;
	int64_t announced;
	size_t at = 0;
	int rc;

	switch ((opt >> 4) & 3) {
	case 0: announced = -1; break;
	case 1: announced = (int64_t)size; break;
	case 2: announced = (int64_t)limit + 1; break;
	default: announced = INT64_MAX; break;
	}
	if (to_fd && (fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
		abort();
	envd_file_dec_init(&d, "fuzz file", limit, fd);
	rc = envd_file_dec_begin(&d, 200, enc, "x-fuzz", announced);
	for (size_t i = 0; rc == 0 && at < size; i++) {
		size_t n = cut_size(cuts, i);

		if (n > size - at)
			n = size - at;
		rc = envd_file_dec_feed(&d, (const char *)body + at, n);
		at += n;
	}
	if (rc == 0)
		rc = envd_file_dec_finish(&d);
	if (rc > 0 || (rc < 0 && hangar_error_last()->code != rc))
		abort();
	if (d.body.len > limit)
		abort();
	/* Identity into memory, accepted: exactly the bytes sent. */
	if (rc == 0 && !to_fd && enc != NET_ENC_GZIP && (d.body.len != size || (size && memcmp(d.body.data, body, size))))
		abort();
	envd_file_dec_free(&d);
	if (fd >= 0)
		close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	if (data[0] & 1)
		fuzz_file(data + 3, size - 3, data[1], data[0], data[2]);
	else
		fuzz_stream(data + 3, size - 3, data[1], data[0] >> 1);
	return 0;
}
