/*
 * A streaming multipart/form-data parser (RFC 7578) for POST /files. It holds
 * at most one boundary's worth of bytes, so uploads of any size stream through
 * it; part bodies are handed out as they arrive.
 */
#pragma once

#include <stddef.h>

struct multipart_callbacks {
	/* A part's headers are complete. name and filename may be NULL. */
	int (*part_begin)(void *ctx, const char *name, const char *filename);
	/* Some bytes of the current part's body. */
	int (*part_data)(void *ctx, const char *data, size_t len);
	/* The current part ended (its closing boundary was seen). */
	int (*part_end)(void *ctx);
	/* Each returns 0 to go on, non-zero to stop the parser (reported as an error). */
};

struct multipart_parser;

/* A parser for the boundary named in content_type; NULL when it names none
 * (or names an invalid one) or memory runs out. */
struct multipart_parser *multipart_new(const char *content_type, const struct multipart_callbacks *cb,
				       void *ctx);
/* Feeds body bytes. 0, or -1 once the input is malformed or a callback stopped
 * it; errors are sticky. */
int multipart_feed(struct multipart_parser *p, const char *data, size_t len);
/* At end of body: 0 if the closing boundary was seen, else -1. */
int multipart_finish(struct multipart_parser *p);
/* Why the parser failed, for an error message. */
const char *multipart_error(const struct multipart_parser *p);
/* Frees p; NULL is ignored. */
void multipart_free(struct multipart_parser *p);
