/* The control-API client (api.h) on libcurl. */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "api.h"
#include "version.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int e2b_escape(char *out, size_t size, const char *v)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;

		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
			if (o + 1 >= size)
				return -1;
			out[o++] = (char)c;
		} else {
			if (o + 3 >= size)
				return -1;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o >= size)
		return -1;
	out[o] = '\0';
	return 0;
}

int e2b_api_init(struct e2b_api *a, hangar_ctx *ctx, const char *base, const char *key, int64_t timeout_ms)
{
	size_t n;

	memset(a, 0, sizeof(*a));
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "libcurl could not be initialised");
	a->ctx = ctx;
	a->base = strdup(base);
	a->key = key && *key ? strdup(key) : NULL;
	if (!a->base || (key && *key && !a->key)) {
		free(a->base);
		free(a->key);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	n = strlen(a->base);
	while (n > 0 && a->base[n - 1] == '/')
		a->base[--n] = '\0';
	a->timeout_ms = timeout_ms;
	pthread_mutex_init(&a->mu, NULL);
	return 0;
}

void e2b_api_fini(struct e2b_api *a)
{
	for (int i = 0; i < a->nidle; i++)
		curl_easy_cleanup(a->idle[i]);
	if (a->key) {
		explicit_bzero(a->key, strlen(a->key));
		free(a->key);
	}
	free(a->base);
	pthread_mutex_destroy(&a->mu);
	memset(a, 0, sizeof(*a));
}

void e2b_resp_free(struct e2b_resp *r)
{
	hbuf_free(&r->body);
	cJSON_Delete(r->json);
	r->json = NULL;
}

/* ---- one transfer -------------------------------------------------------------------- */

struct xfer {
	struct e2b_resp *r;
	int too_big;
	int encoded;              /* a Content-Encoding other than identity */
};

static size_t write_cb(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;

	if (x->r->body.len + len > E2B_API_MAX_BODY) {
		x->too_big = 1;
		return 0;
	}
	if (hbuf_put(&x->r->body, data, len) < 0)
		return 0;
	return len;
}

static int header_is(const char *line, size_t len, const char *name, const char **value, size_t *vlen)
{
	size_t n = strlen(name);

	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
		return 0;
	line += n + 1;
	len -= n + 1;
	while (len > 0 && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
		len--;
	*value = line;
	*vlen = len;
	return 1;
}

static size_t header_cb(char *line, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n, vlen;
	const char *v;

	/* A new status line (after a 100 Continue) starts a new set of headers. */
	if (len >= 5 && !strncmp(line, "HTTP/", 5)) {
		x->r->next_token[0] = '\0';
		x->r->retry_after = -1;
		x->encoded = 0;
		return len;
	}
	if (header_is(line, len, "X-Next-Token", &v, &vlen)) {
		if (vlen < sizeof(x->r->next_token)) {
			memcpy(x->r->next_token, v, vlen);
			x->r->next_token[vlen] = '\0';
		}
	} else if (header_is(line, len, "Retry-After", &v, &vlen)) {
		int s = e2b_retry_after_value(v, vlen);

		if (s >= 0)
			x->r->retry_after = s;
	} else if (header_is(line, len, "Content-Encoding", &v, &vlen)) {
		if (vlen && !(vlen == 8 && !strncasecmp(v, "identity", 8)))
			x->encoded = 1;
	}
	return len;
}

static CURL *get_handle(struct e2b_api *a)
{
	CURL *h = NULL;

	pthread_mutex_lock(&a->mu);
	if (a->nidle > 0)
		h = a->idle[--a->nidle];
	pthread_mutex_unlock(&a->mu);
	if (h)
		curl_easy_reset(h); /* keeps the connection cache */
	else
		h = curl_easy_init();
	return h;
}

static void put_handle(struct e2b_api *a, CURL *h)
{
	pthread_mutex_lock(&a->mu);
	if (a->nidle < (int)(sizeof(a->idle) / sizeof(a->idle[0]))) {
		a->idle[a->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&a->mu);
	if (h)
		curl_easy_cleanup(h);
}

/* Replaces every occurrence of the key in s with "[redacted]", in place (s has size bytes). */
static void scrub(const struct e2b_api *a, char *s, size_t size)
{
	size_t klen;
	char *p;

	if (!a->key || (klen = strlen(a->key)) < 4)
		return;
	while ((p = strstr(s, a->key)) != NULL) {
		static const char r[] = "[redacted]";
		size_t tail = strlen(p + klen);

		if (klen >= sizeof(r) - 1) {
			memcpy(p, r, sizeof(r) - 1);
			memmove(p + sizeof(r) - 1, p + klen, tail + 1);
		} else {
			/* Shorter than the marker: blank it out where it stands. */
			memset(p, '*', klen);
		}
	}
	(void)size;
}

/* One printable line out of an error body, without the key. */
static void error_text(const struct e2b_api *a, const struct e2b_resp *r, char *out, size_t size)
{
	e2b_error_text(r->body.data, r->body.len, out, size);
	scrub(a, out, size);
}

static int map_status(struct e2b_api *a, const struct e2b_resp *r, enum e2b_route route, const char *what)
{
	char text[256], ra[48] = "";
	long s = r->status;
	int code;

	error_text(a, r, text, sizeof(text));
	if (r->retry_after >= 0 && (s == 429 || s == 503))
		snprintf(ra, sizeof(ra), "; retry after %d s", r->retry_after);
	if (s == 401 || s == 403) {
		return herr_http(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_PROVIDER, (int)s, NULL,
				 "e2b: %s: the control API rejected the key (HTTP %ld%s%s)", what, s, *text ? ": " : "",
				 text);
	}
	if (s == 429)
		code = HANGAR_ECAPACITY;
	else if ((s == 500 || s == 503) && e2b_capacity_error(r->body.data, r->body.len))
		code = HANGAR_ECAPACITY;
	else if (s == 502 || s == 503 || s == 504 || s == 408)
		code = HANGAR_EUNAVAILABLE;
	else if (s == 404 && route != E2B_ROUTE_CREATE && !e2b_body_is_json_object(r->body.data, r->body.len))
		/* An unknown route (CubeAPI: empty body; E2B: text), not an unknown sandbox (JSON). */
		return herr_http(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, (int)s, NULL,
				 "e2b: %s: the control API has no such route (HTTP 404 without a JSON body)%s%s", what,
				 *text ? ": " : "", text);
	else if (s == 404)
		code = route == E2B_ROUTE_SANDBOX ? HANGAR_EGONE : route == E2B_ROUTE_CREATE ? HANGAR_ECREATE
											     : HANGAR_ENOTFOUND;
	else if (s == 400 || s == 415 || s == 422)
		code = route == E2B_ROUTE_CREATE ? HANGAR_ECREATE : HANGAR_EINVAL;
	else if (s == 409)
		code = HANGAR_EINVAL;
	else if (s == 405)
		code = HANGAR_EUNSUPPORTED;
	else if (s >= 500)
		code = route == E2B_ROUTE_CREATE ? HANGAR_ECREATE : HANGAR_EUNAVAILABLE;
	else
		code = HANGAR_EPROTOCOL;
	herr_http(code, HANGAR_ERRCAT_PROVIDER, (int)s, NULL, "e2b: %s: HTTP %ld%s%s%s", what, s,
		  *text ? ": " : "", text, ra);
	/* From the header only: a body's words never set a cooldown. */
	if (r->retry_after > 0 && (s == 429 || s == 503))
		herr_retry_after(r->retry_after);
	return code;
}

int e2b_call(struct e2b_api *a, const char *method, const char *path, const cJSON *body, int want_json,
	     enum e2b_route route, const char *what, struct e2b_resp *r)
{
	struct xfer x = { r, 0, 0 };
	struct curl_slist *hdrs = NULL, *l;
	char errbuf[CURL_ERROR_SIZE] = "", *json = NULL, *url = NULL, keyhdr[600];
	int64_t t0 = hmono_ms();
	CURLcode cc;
	CURL *h;
	int rc = 0, connected = 0, sent = 0;

	memset(r, 0, sizeof(*r));
	r->retry_after = -1;
	if (body && !(json = cJSON_PrintUnformatted(body)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (asprintf(&url, "%s%s", a->base, path) < 0) {
		url = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	h = get_handle(a);
	if (!h) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	/* Never ask for compression: no Accept-Encoding header at all. */
	l = curl_slist_append(hdrs, "Accept: application/json");
	if (l)
		hdrs = l;
	if (json && (l = curl_slist_append(hdrs, "Content-Type: application/json")))
		hdrs = l;
	if (a->key) {
		snprintf(keyhdr, sizeof(keyhdr), "X-API-Key: %s", a->key);
		if ((l = curl_slist_append(hdrs, keyhdr)))
			hdrs = l;
		explicit_bzero(keyhdr, sizeof(keyhdr));
	}
	if ((l = curl_slist_append(hdrs, "Expect:")))
		hdrs = l;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (json) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(json));
	} else if (strcmp(method, "GET") && strcmp(method, "DELETE")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	if (!strcmp(method, "GET"))
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	/*
	 * A create on a fresh connection: curl silently sends a request again
	 * when a reused connection dies before answering, and a create sent
	 * twice could make two sandboxes.
	 */
	if (route == E2B_ROUTE_CREATE)
		curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "libhangar/" HANGAR_VERSION_STRING);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, a->timeout_ms > LONG_MAX ? LONG_MAX : (long)a->timeout_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	/*
	 * Whether the request reached the platform: a connection was made (a
	 * reused one counts) and request bytes were written to it.
	 */
	{
		curl_off_t connect_us = 0;
		long req_bytes = 0;

		curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);
		curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req_bytes);
		connected = connect_us > 0 || req_bytes > 0;
		sent = req_bytes > 0;
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
	if (cc == CURLE_OK || x.too_big)
		put_handle(a, h);
	else
		curl_easy_cleanup(h); /* a broken connection is not kept */
	hlog(a->ctx, HANGAR_LOG_DEBUG, "e2b: %s %s -> %ld (%lld ms)", method, path, r->status,
	     (long long)(hmono_ms() - t0));
	if (x.too_big) {
		rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, (int)r->status, NULL,
			       "e2b: %s: the answer is larger than %u bytes", what, E2B_API_MAX_BODY);
		goto out;
	}
	if (cc != CURLE_OK) {
		char msg[CURL_ERROR_SIZE + 64];

		snprintf(msg, sizeof(msg), "%s", *errbuf ? errbuf : curl_easy_strerror(cc));
		scrub(a, msg, sizeof(msg));
		if (cc == CURLE_OPERATION_TIMEDOUT && !connected)
			/* Nothing was sent, so nothing was done: as unreachable as a refused connection. */
			rc = herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET,
				  "e2b: %s: the control API cannot be reached: no connection within %lld ms (%s)", what,
				  (long long)a->timeout_ms, msg);
		else if (cc == CURLE_OPERATION_TIMEDOUT)
			/* The request went out: the platform may have acted on it (a create may exist). */
			rc = herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "e2b: %s: no answer within %lld ms (%s)", what,
				  (long long)a->timeout_ms, msg);
		else if (cc == CURLE_OUT_OF_MEMORY)
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		else
			rc = herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "e2b: %s: the control API cannot be reached (%s)",
				  what, msg);
		if (rc == HANGAR_EUNAVAILABLE)
			herr_flags(HANGAR_ERROR_UNREACHABLE);
		r->status = 0;
		r->unanswered = sent && rc != HANGAR_ENOMEM;
		goto out;
	}
	if (x.encoded) {
		rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, (int)r->status, NULL,
			       "e2b: %s: the answer is compressed, which was not asked for", what);
		goto out;
	}
	if (r->status < 200 || r->status > 299) {
		rc = map_status(a, r, route, what);
		goto out;
	}
	if (want_json) {
		r->json = r->body.len ? cJSON_ParseWithLength(r->body.data, r->body.len) : NULL;
		if (!r->json)
			rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, (int)r->status, NULL,
				       "e2b: %s: the answer is not JSON", what);
	}
out:
	for (l = hdrs; l; l = l->next)
		if (!strncasecmp(l->data, "X-API-Key:", 10))
			explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(hdrs);
	free(url);
	free(json);
	return rc;
}
