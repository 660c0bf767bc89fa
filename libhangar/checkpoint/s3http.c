/* The S3 store's one libcurl request (see s3http.h). */
#define _GNU_SOURCE
#include "s3http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BODY_MAX (64u << 10)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void init_curl(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct xfer {
	CURL *curl;
	const struct s3_request *rq;
	struct s3_response *rs;
	int sink_rc;
};

static size_t on_body(char *data, size_t size, size_t n, void *p)
{
	struct xfer *x = p;
	long status = 0;
	size_t len = size * n;

	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300 && x->rq->sink) {
		x->sink_rc = x->rq->sink(x->rq->payload, data, len);
		return x->sink_rc < 0 ? 0 : len;
	}
	if (x->rs->body_len < BODY_MAX) {
		size_t keep = len < BODY_MAX - x->rs->body_len ? len : BODY_MAX - x->rs->body_len;
		char *b = realloc(x->rs->body, x->rs->body_len + keep + 1);

		if (!b)
			return 0;
		memcpy(b + x->rs->body_len, data, keep);
		x->rs->body = b;
		x->rs->body_len += keep;
		b[x->rs->body_len] = '\0';
	}
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *p)
{
	struct xfer *x = p;
	size_t len = size * n;

	if (len > 5 && !strncasecmp(data, "etag:", 5)) {
		const char *v = data + 5;
		size_t vl = len - 5;

		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (vl < sizeof(x->rs->etag)) {
			memcpy(x->rs->etag, v, vl);
			x->rs->etag[vl] = '\0';
		}
	}
	return len;
}

int s3_http(const struct s3_request *rq, struct s3_response *rs)
{
	unsigned char hash[crypto_hash_sha256_BYTES];
	char hexhash[2 * crypto_hash_sha256_BYTES + 1], hdr[128], sigv4[160], errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL, *h;
	struct xfer x = { .rq = rq, .rs = rs };
	CURLcode cc;
	int rc = 0;

	memset(rs, 0, sizeof(*rs));
	pthread_once(&curl_once, init_curl);
	x.curl = curl_easy_init();
	if (!x.curl)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	/* The payload's hash is signed: computed here rather than left to curl,
	 * whose versions differ in what they hash for S3. */
	crypto_hash_sha256(hash, rq->body ? rq->body : (const void *)"", rq->body_len);
	sodium_bin2hex(hexhash, sizeof(hexhash), hash, sizeof(hash));
	snprintf(hdr, sizeof(hdr), "x-amz-content-sha256: %s", hexhash);
	/* Both headers are signed; an explicit type keeps curl from adding a form type. */
	if (!(headers = curl_slist_append(NULL, hdr)) ||
	    !(h = curl_slist_append(headers, "Content-Type: application/octet-stream")))
		goto nomem;
	headers = h;
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", rq->cred->region);

	curl_easy_setopt(x.curl, CURLOPT_URL, rq->url);
	curl_easy_setopt(x.curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x.curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(x.curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x.curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(x.curl, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(x.curl, CURLOPT_USERNAME, rq->cred->access_key_id);
	curl_easy_setopt(x.curl, CURLOPT_PASSWORD, rq->cred->secret_access_key);
	curl_easy_setopt(x.curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(x.curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(x.curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x.curl, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(x.curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x.curl, CURLOPT_HEADERDATA, &x);
	curl_easy_setopt(x.curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(x.curl, CURLOPT_TIMEOUT_MS, rq->timeout_ms);
	if (!strcmp(rq->method, "HEAD")) {
		curl_easy_setopt(x.curl, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(rq->method, "PUT") || !strcmp(rq->method, "POST")) {
		curl_easy_setopt(x.curl, CURLOPT_POSTFIELDS, rq->body ? rq->body : (const void *)"");
		curl_easy_setopt(x.curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		curl_easy_setopt(x.curl, CURLOPT_CUSTOMREQUEST, rq->method);
	} else if (strcmp(rq->method, "GET")) {
		curl_easy_setopt(x.curl, CURLOPT_CUSTOMREQUEST, rq->method);
	}
	cc = curl_easy_perform(x.curl);
	curl_easy_getinfo(x.curl, CURLINFO_RESPONSE_CODE, &rs->status);
	if (x.sink_rc < 0)
		rc = x.sink_rc;
	else if (cc == CURLE_OPERATION_TIMEDOUT)
		rc = herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "no answer within %ld ms", rq->timeout_ms);
	else if (cc != CURLE_OK)
		/* curl's message names the host and what failed, never the credentials. */
		rc = herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "%s", *errbuf ? errbuf : curl_easy_strerror(cc));
	curl_slist_free_all(headers);
	curl_easy_cleanup(x.curl);
	return rc;
nomem:
	curl_slist_free_all(headers);
	curl_easy_cleanup(x.curl);
	return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

void s3_response_free(struct s3_response *rs)
{
	free(rs->body);
	rs->body = NULL;
	rs->body_len = 0;
}
