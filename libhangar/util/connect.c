#include "connect.h"

#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	int http;
} codes[CONNECT_CODE_COUNT] = {
	[CONNECT_OK] = { "ok", 200 },
	[CONNECT_CANCELED] = { "canceled", 499 },
	[CONNECT_UNKNOWN] = { "unknown", 500 },
	[CONNECT_INVALID_ARGUMENT] = { "invalid_argument", 400 },
	[CONNECT_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
	[CONNECT_NOT_FOUND] = { "not_found", 404 },
	[CONNECT_ALREADY_EXISTS] = { "already_exists", 409 },
	[CONNECT_PERMISSION_DENIED] = { "permission_denied", 403 },
	[CONNECT_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
	[CONNECT_FAILED_PRECONDITION] = { "failed_precondition", 400 },
	[CONNECT_ABORTED] = { "aborted", 409 },
	[CONNECT_OUT_OF_RANGE] = { "out_of_range", 400 },
	[CONNECT_UNIMPLEMENTED] = { "unimplemented", 501 },
	[CONNECT_INTERNAL] = { "internal", 500 },
	[CONNECT_UNAVAILABLE] = { "unavailable", 503 },
	[CONNECT_DATA_LOSS] = { "data_loss", 500 },
	[CONNECT_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

const char *connect_code_name(enum connect_code code)
{
	if ((int)code < 0 || code >= CONNECT_CODE_COUNT)
		return "unknown";
	return codes[code].name;
}

enum connect_code connect_code_from_name(const char *name)
{
	if (!name)
		return CONNECT_UNKNOWN;
	for (int i = 1; i < CONNECT_CODE_COUNT; i++)
		if (strcmp(codes[i].name, name) == 0)
			return (enum connect_code)i;
	return CONNECT_UNKNOWN;
}

int connect_code_http_status(enum connect_code code)
{
	if ((int)code < 0 || code >= CONNECT_CODE_COUNT)
		return 500;
	return codes[code].http;
}

enum connect_code connect_code_from_http_status(int status)
{
	/* The mapping Connect clients use for responses without a Connect body. */
	switch (status) {
	case 400: return CONNECT_INTERNAL;
	case 401: return CONNECT_UNAUTHENTICATED;
	case 403: return CONNECT_PERMISSION_DENIED;
	case 404: return CONNECT_UNIMPLEMENTED;
	case 429: case 502: case 503: case 504: return CONNECT_UNAVAILABLE;
	default: return CONNECT_UNKNOWN;
	}
}

void connect_envelope_header(uint8_t out[CONNECT_ENVELOPE_HEADER], uint8_t flags, uint32_t len)
{
	out[0] = flags;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

void envelope_decoder_init(struct envelope_decoder *d, size_t max_frame)
{
	memset(d, 0, sizeof(*d));
	d->max_frame = max_frame;
}

void envelope_decoder_free(struct envelope_decoder *d)
{
	free(d->frame);
	d->frame = NULL;
}

enum envelope_status envelope_decoder_feed(struct envelope_decoder *d, const void *data, size_t len,
					   envelope_cb cb, void *payload_ctx)
{
	const uint8_t *p = data;

	if (d->failed)
		return (enum envelope_status)d->failed;
	while (len > 0) {
		if (d->header_have < CONNECT_ENVELOPE_HEADER) {
			size_t n = CONNECT_ENVELOPE_HEADER - d->header_have;

			if (n > len)
				n = len;
			memcpy(d->header + d->header_have, p, n);
			d->header_have += n;
			p += n;
			len -= n;
			if (d->header_have < CONNECT_ENVELOPE_HEADER)
				break;
			d->flags = d->header[0];
			d->want = (uint32_t)d->header[1] << 24 | (uint32_t)d->header[2] << 16 |
				  (uint32_t)d->header[3] << 8 | d->header[4];
			if (d->flags & ~(CONNECT_FLAG_COMPRESSED | CONNECT_FLAG_END_STREAM)) {
				d->failed = ENVELOPE_BAD_FLAGS;
				return ENVELOPE_BAD_FLAGS;
			}
			if (d->want > d->max_frame) {
				d->failed = ENVELOPE_TOO_LARGE;
				return ENVELOPE_TOO_LARGE;
			}
			free(d->frame);
			d->frame = malloc((size_t)d->want + 1);
			if (!d->frame) {
				d->failed = ENVELOPE_NOMEM;
				return ENVELOPE_NOMEM;
			}
			d->frame_have = 0;
		}
		if (d->frame_have < d->want) {
			size_t n = d->want - d->frame_have;

			if (n > len)
				n = len;
			memcpy(d->frame + d->frame_have, p, n);
			d->frame_have += n;
			p += n;
			len -= n;
			if (d->frame_have < d->want)
				break;
		}
		d->frame[d->want] = '\0';
		d->header_have = 0;
		if (d->flags & CONNECT_FLAG_END_STREAM)
			d->ended = 1;
		if (cb(d->flags, d->frame, d->want, payload_ctx)) {
			d->failed = ENVELOPE_STOPPED;
			return ENVELOPE_STOPPED;
		}
	}
	return ENVELOPE_OK;
}

enum envelope_status envelope_decoder_finish(struct envelope_decoder *d)
{
	if (d->failed)
		return (enum envelope_status)d->failed;
	if (d->header_have > 0)
		return ENVELOPE_TRUNCATED;
	return ENVELOPE_OK;
}

const char *envelope_status_str(enum envelope_status st)
{
	switch (st) {
	case ENVELOPE_OK: return "ok";
	case ENVELOPE_TOO_LARGE: return "envelope larger than the frame limit";
	case ENVELOPE_BAD_FLAGS: return "envelope with unknown flags";
	case ENVELOPE_NOMEM: return "out of memory";
	case ENVELOPE_STOPPED: return "stopped";
	case ENVELOPE_TRUNCATED: return "stream ended inside an envelope";
	}
	return "unknown envelope error";
}
