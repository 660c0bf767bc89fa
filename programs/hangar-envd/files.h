/*
 * The /files routes (files_download.c, files_upload.c), and the pieces of
 * them that are pure functions of request headers (files_headers.c),
 * exposed so the unit tests can pin them down.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "request.h"

struct MHD_Response;

/*
 * GET and POST /files. The server has already checked the access
 * token or signature (auth.c) when these run. Each returns the HTTP status
 * and sets *resp (never NULL on return).
 */
unsigned files_download(struct envd_req *r, struct MHD_Response **resp);

/* Uploads stream: begin once the headers are in, data per body chunk, finish
 * after the last. begin returns NULL (with status and resp set) only when it
 * cannot even record a refusal; other refusals are answered by finish, after
 * the body has been read. */
struct files_upload;
struct files_upload *files_upload_begin(struct envd_req *r, unsigned *status, struct MHD_Response **resp);
/* Consumes a body chunk; errors are sticky and reported by finish. */
void files_upload_data(struct files_upload *u, const char *data, size_t len);
/* After the last chunk: the HTTP status, and *resp (the written entries, or the first error). */
unsigned files_upload_finish(struct files_upload *u, struct MHD_Response **resp);
/* Closes what is still open and frees u; NULL is ignored. */
void files_upload_free(struct files_upload *u);

enum files_encoding {
	FILES_ENC_REFUSED = -1,  /* nothing acceptable: 406 */
	FILES_ENC_IDENTITY = 0,
	FILES_ENC_GZIP = 1,
};

/*
 * Picks the response coding from Accept-Encoding, as envd does: q-values
 * honoured, names case-insensitive, only gzip supported; identity is implicitly
 * acceptable unless "identity;q=0", or "*;q=0" with no explicit identity.
 * identity_forced (a Range or conditional request) allows only identity.
 * NULL or empty header → identity.
 */
enum files_encoding files_choose_encoding(const char *accept_encoding, int identity_forced);

enum files_range {
	FILES_RANGE_NONE = 0,          /* serve the whole file (no, or multiple, ranges) */
	FILES_RANGE_ONE = 1,           /* *start and *len set: 206 */
	FILES_RANGE_UNSATISFIABLE = -1 /* 416 */
};

/* Interprets a Range header against a file of size bytes. */
enum files_range files_parse_range(const char *range, uint64_t size, uint64_t *start, uint64_t *len);

/*
 * The Content-Disposition value for a download of a file named base:
 * `inline; filename="base"`, or RFC 5987 `inline; filename*=UTF-8''…` when
 * the name has bytes outside printable ASCII. 0, or -1 if out is too small.
 */
int files_content_disposition(const char *base, char *out, size_t outsz);
