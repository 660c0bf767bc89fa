/* The S3 store's one request (see s3http.h), on the HTTP layer (net/net.h). */
#define _GNU_SOURCE
#include "s3http.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/net.h"

#define BODY_MAX (64u << 10)

struct xfer {
	const struct s3_request *rq;
	struct s3_response *rs;
	struct hbuf body;       /* a 2xx answer's body when there is no sink */
	int sink_rc;
};

/* A 2xx body: to the sink, else kept up to BODY_MAX (what is past it is read and dropped). */
static int on_body(void *ud, const char *data, size_t len)
{
	struct xfer *x = ud;
	size_t keep;

	if (x->rq->sink) {
		x->sink_rc = x->rq->sink(x->rq->payload, data, len);
		return x->sink_rc < 0;
	}
	keep = x->body.len < BODY_MAX ? BODY_MAX - x->body.len : 0;
	if (keep > len)
		keep = len;
	if (keep && hbuf_put(&x->body, data, keep) < 0) {
		x->sink_rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		return 1;
	}
	return 0;
}

static void on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct xfer *x = ud;

	if (!name) {
		x->rs->etag[0] = '\0'; /* a new header block */
		return;
	}
	if (nlen == 4 && strncasecmp(name, "ETag", 4) == 0 && vlen < sizeof(x->rs->etag)) {
		memcpy(x->rs->etag, value, vlen);
		x->rs->etag[vlen] = '\0';
	}
}

/* Hands a body over to the response as a NUL-terminated string. */
static int take_body(struct s3_response *rs, struct hbuf *b)
{
	if (!b->data)
		return 0;
	rs->body_len = b->len;
	rs->body = hbuf_steal(b);
	return rs->body ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

int s3_http(const struct s3_request *rq, struct s3_response *rs)
{
	unsigned char hash[crypto_hash_sha256_BYTES];
	char hexhash[2 * crypto_hash_sha256_BYTES + 1], sigv4[160];
	struct xfer x = { .rq = rq, .rs = rs };
	struct net_request nr;
	struct net_result res;
	int rc = 0;

	memset(rs, 0, sizeof(*rs));
	net_request_init(&nr);
	memset(&res, 0, sizeof(res));
	/* The payload's hash is signed: computed here rather than left to curl,
	 * whose versions differ in what they hash for S3. */
	crypto_hash_sha256(hash, rq->body ? rq->body : (const void *)"", rq->body_len);
	sodium_bin2hex(hexhash, sizeof(hexhash), hash, sizeof(hash));
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", rq->cred->region);
	/* Both headers are signed; an explicit type keeps curl from adding a form type. */
	if ((rc = net_header_add(&nr, "x-amz-content-sha256: %s", hexhash)) != 0 ||
	    (rc = net_header_add(&nr, "Content-Type: application/octet-stream")) != 0)
		goto out;
	nr.method = rq->method;
	nr.url = rq->url;
	nr.aws_sigv4 = sigv4;
	nr.auth_user = rq->cred->access_key_id;
	nr.auth_secret = rq->cred->secret_access_key;
	nr.timeout_ms = rq->timeout_ms;
	nr.max_error_body = BODY_MAX;
	if (!strcmp(rq->method, "PUT") || !strcmp(rq->method, "POST")) {
		nr.body = rq->body;
		nr.body_len = rq->body_len;
		nr.has_body = 1;
	}
	nr.on_header = on_header;
	nr.on_body = on_body;
	nr.ud = &x;
	net_perform(NULL, &nr, &res);
	rs->status = res.http_status;
	switch (res.cls) {
	case NET_OK:
		rc = take_body(rs, &x.body);
		break;
	case NET_HTTP_STATUS:
		rc = take_body(rs, &res.body);
		break;
	case NET_ABORTED:
		rc = x.sink_rc; /* the sink's code, or ours, already reported */
		break;
	case NET_TIMEOUT:
		rc = herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "no answer within %ld ms", rq->timeout_ms);
		break;
	case NET_LOCAL:
		if (res.out_of_memory) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			break;
		}
		/* fall through */
	default:
		/* net's detail names the host and what failed, never the credentials. */
		rc = herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "%s",
			  res.detail[0] ? res.detail : net_class_name(res.cls));
		break;
	}
out:
	hbuf_free(&x.body);
	net_result_fini(&res);
	net_request_fini(&nr);
	return rc;
}

void s3_response_free(struct s3_response *rs)
{
	free(rs->body);
	rs->body = NULL;
	rs->body_len = 0;
}
