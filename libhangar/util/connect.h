/*
 * The pieces of the Connect protocol (JSON codec) that both ends of the envd
 * wire need: error codes and their HTTP statuses, and the 5-byte envelope that
 * frames every message of a streaming call.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum connect_code {
	CONNECT_OK = 0,
	CONNECT_CANCELED,
	CONNECT_UNKNOWN,
	CONNECT_INVALID_ARGUMENT,
	CONNECT_DEADLINE_EXCEEDED,
	CONNECT_NOT_FOUND,
	CONNECT_ALREADY_EXISTS,
	CONNECT_PERMISSION_DENIED,
	CONNECT_RESOURCE_EXHAUSTED,
	CONNECT_FAILED_PRECONDITION,
	CONNECT_ABORTED,
	CONNECT_OUT_OF_RANGE,
	CONNECT_UNIMPLEMENTED,
	CONNECT_INTERNAL,
	CONNECT_UNAVAILABLE,
	CONNECT_DATA_LOSS,
	CONNECT_UNAUTHENTICATED,
	CONNECT_CODE_COUNT
};

/* "not_found" for CONNECT_NOT_FOUND; "unknown" for anything out of range. */
const char *connect_code_name(enum connect_code code);
/* The code for a wire name; CONNECT_UNKNOWN when the name is not one. */
enum connect_code connect_code_from_name(const char *name);
/* The HTTP status a unary error carries. */
int connect_code_http_status(enum connect_code code);
/* The code a client infers from an HTTP status when the body names none. */
enum connect_code connect_code_from_http_status(int status);

#define CONNECT_ENVELOPE_HEADER 5
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END_STREAM 0x02

void connect_envelope_header(uint8_t out[CONNECT_ENVELOPE_HEADER], uint8_t flags, uint32_t len);

/*
 * Incremental envelope decoder. Feed bytes as they arrive; each complete
 * envelope is handed to the callback. Frames larger than max_frame are
 * refused before any of their payload is buffered.
 */
enum envelope_status {
	ENVELOPE_OK = 0,        /* all input consumed, waiting for more */
	ENVELOPE_TOO_LARGE = -1,
	ENVELOPE_BAD_FLAGS = -2,
	ENVELOPE_NOMEM = -3,
	ENVELOPE_STOPPED = -4,  /* the callback asked to stop */
	ENVELOPE_TRUNCATED = -5 /* from envelope_decoder_finish(): input ended inside a frame */
};

/* Return 0 to go on, non-zero to stop decoding. */
typedef int (*envelope_cb)(uint8_t flags, const char *payload, size_t len, void *payload_ctx);

struct envelope_decoder {
	size_t max_frame;
	uint8_t header[CONNECT_ENVELOPE_HEADER];
	size_t header_have;
	uint8_t flags;
	uint32_t want;
	char *frame;
	size_t frame_have;
	int failed;
	int ended;            /* saw an end-of-stream envelope */
};

void envelope_decoder_init(struct envelope_decoder *d, size_t max_frame);
enum envelope_status envelope_decoder_feed(struct envelope_decoder *d, const void *data, size_t len,
					   envelope_cb cb, void *payload_ctx);
/* Call at end of input: ENVELOPE_TRUNCATED if a frame was left incomplete. */
enum envelope_status envelope_decoder_finish(struct envelope_decoder *d);
void envelope_decoder_free(struct envelope_decoder *d);
const char *envelope_status_str(enum envelope_status st);
