/*
 * One signed request to an S3-compatible service, on the library's HTTP
 * layer (libhangar/net/), which computes the SigV4 signature and keeps its
 * rules: no redirects, no compression, deadlines, capped error bodies.
 */
#pragma once

#include <stddef.h>

#include "blobstore.h"

struct s3_credentials {
	const char *access_key_id;
	const char *secret_access_key;
	const char *region;
};

struct s3_request {
	const char *method;             /* GET, HEAD, PUT, POST, DELETE */
	const char *url;                /* already encoded; its query in canonical (sorted) form */
	const void *body;               /* the whole request body, or NULL */
	size_t body_len;
	const struct s3_credentials *cred;
	long timeout_ms;                /* the whole request */
	blob_sink sink;                 /* a 2xx answer's body goes here, when set */
	void *payload;
};

struct s3_response {
	long status;                    /* 0: no answer */
	char *body;                     /* a non-2xx answer's body, or a 2xx one without a sink; capped */
	size_t body_len;
	char etag[128];                 /* the ETag header, quotes included */
};

/* Makes the request, signed with SigV4 (the payload's SHA-256 signed too).
 * 0 when an answer came, whatever its status; a negative code when none did
 * or it was refused (HANGAR_EUNAVAILABLE, HANGAR_ETIMEOUT), or the sink's code. Nothing in an
 * error names a credential. s3_response_free() in every case. */
int s3_http(const struct s3_request *rq, struct s3_response *rs);
void s3_response_free(struct s3_response *rs);
