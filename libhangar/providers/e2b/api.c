/* The control-API client (api.h) on the HTTP layer (net/net.h). */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "net/net.h"
#include "util/sjson.h"

#define API_POOL_MAX 4 /* idle handles kept, so their connections are reused */

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

int e2b_error(int code, int category, int http_status, const char *provider_code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hangar_sys_error(code, http_status, 0, "%s", msg);
	hangar_sys_error_category(category);
	hangar_sys_error_provider_code(provider_code);
	return code;
}

int e2b_api_init(struct e2b_api *a, hangar_ctx *ctx, const char *base, const char *key, int64_t timeout_ms)
{
	size_t n;
	int rc;

	memset(a, 0, sizeof(*a));
	if ((rc = net_pool_new(&a->pool, API_POOL_MAX)) != 0)
		return rc;
	a->ctx = ctx;
	a->base = strdup(base);
	a->key = key && *key ? strdup(key) : NULL;
	if (!a->base || (key && *key && !a->key)) {
		e2b_api_fini(a);
		return e2b_error(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, 0, NULL, "out of memory");
	}
	n = strlen(a->base);
	while (n > 0 && a->base[n - 1] == '/')
		a->base[--n] = '\0';
	a->timeout_ms = timeout_ms;
	return 0;
}

void e2b_api_fini(struct e2b_api *a)
{
	net_pool_free(a->pool);
	if (a->key) {
		explicit_bzero(a->key, strlen(a->key));
		free(a->key);
	}
	free(a->base);
	memset(a, 0, sizeof(*a));
}

void e2b_resp_free(struct e2b_resp *r)
{
	hbuf_free(&r->body);
	cJSON_Delete(r->json);
	r->json = NULL;
}

/* X-Next-Token, the one header of an answer only this client reads. */
static void on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct e2b_resp *r = ud;

	if (!name) {
		r->next_token[0] = '\0'; /* a new header block (after a 1xx) */
		return;
	}
	if (nlen == 12 && strncasecmp(name, "X-Next-Token", 12) == 0 && vlen < sizeof(r->next_token)) {
		memcpy(r->next_token, value, vlen);
		r->next_token[vlen] = '\0';
	}
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
		return e2b_error(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_PROVIDER, (int)s, NULL,
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
		return e2b_error(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, (int)s, NULL,
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
	e2b_error(code, HANGAR_ERRCAT_PROVIDER, (int)s, NULL, "e2b: %s: HTTP %ld%s%s%s", what, s,
		  *text ? ": " : "", text, ra);
	/* From the header only: a body's words never set a cooldown. */
	if (r->retry_after > 0 && (s == 429 || s == 503))
		hangar_sys_error_retry_after(r->retry_after);
	return code;
}

/*
 * No answer, or one we refuse: what became of the request, on the thread's
 * error. Sets r->unanswered when the request may have reached the platform.
 */
static int transfer_error(struct e2b_api *a, const struct net_result *res, const char *what, struct e2b_resp *r)
{
	char msg[sizeof(res->detail)];
	int rc;

	snprintf(msg, sizeof(msg), "%s", res->detail[0] ? res->detail : net_class_name(res->cls));
	scrub(a, msg, sizeof(msg));
	if (res->cls == NET_PROTOCOL && res->protocol == NET_PROTO_OVERSIZED)
		return e2b_error(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, res->http_status, NULL,
				 "e2b: %s: the answer is larger than %u bytes", what, E2B_API_MAX_BODY);
	if (res->cls == NET_PROTOCOL && res->protocol == NET_PROTO_ENCODED)
		return e2b_error(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, res->http_status, NULL,
				 "e2b: %s: the answer is compressed, which was not asked for", what);
	r->status = 0; /* no answer to speak of */
	if (res->cls == NET_LOCAL && res->out_of_memory)
		return e2b_error(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, 0, NULL, "out of memory");
	if (res->cls == NET_TIMEOUT && res->timeout == NET_TIMEOUT_CONNECT) {
		/* Nothing was sent, so nothing was done: as unreachable as a refused connection. */
		rc = e2b_error(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, 0, NULL,
			  "e2b: %s: the control API at %s cannot be reached: no connection within %lld ms (%s)", what,
			  a->base, (long long)res->connect_timeout_ms, msg);
	} else if (res->cls == NET_TIMEOUT) {
		/* The request went out: the platform may have acted on it (a create may exist). */
		r->unanswered = 1;
		return e2b_error(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, 0, NULL, "e2b: %s: no answer within %lld ms (%s)", what,
			    (long long)a->timeout_ms, msg);
	} else {
		/*
		 * Refused, unreachable, or broken off: a request that went out
		 * (dropped, a garbled or truncated answer) may have been acted on.
		 */
		r->unanswered = res->connected && res->cls != NET_UNREACHABLE && res->cls != NET_LOCAL;
		/* The address, so a certificate error names the host it is about. */
		rc = e2b_error(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, 0, NULL,
			       "e2b: %s: the control API at %s cannot be reached (%s)", what, a->base, msg);
	}
	hangar_sys_error_flags(HANGAR_ERROR_UNREACHABLE);
	return rc;
}

int e2b_call(struct e2b_api *a, const char *method, const char *path, const cJSON *body, int want_json,
	     enum e2b_route route, const char *what, struct e2b_resp *r)
{
	struct net_request rq;
	struct net_result res;
	char *json = NULL, *url = NULL;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->retry_after = -1;
	net_request_init(&rq);
	memset(&res, 0, sizeof(res));
	if (body && !(json = cJSON_PrintUnformatted(body)))
		return e2b_error(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, 0, NULL, "out of memory");
	if (asprintf(&url, "%s%s", a->base, path) < 0) {
		url = NULL;
		rc = e2b_error(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, 0, NULL, "out of memory");
		goto out;
	}
	rq.method = method;
	rq.url = url;
	if (json) {
		rq.body = json;
		rq.body_len = strlen(json);
		rq.has_body = 1;
	} else if (strcmp(method, "GET") != 0 && strcmp(method, "DELETE") != 0) {
		rq.has_body = 1; /* an empty body, announced as such */
	}
	rq.timeout_ms = a->timeout_ms;
	rq.extra_ca_file = a->ca_file;
	rq.max_body = E2B_API_MAX_BODY;
	/* Error bodies are read as far as answers are: a 404's JSON decides what it means. */
	rq.max_error_body = E2B_API_MAX_BODY;
	/*
	 * A create on a fresh connection: curl silently sends a request again
	 * when a reused connection dies before answering, and a create sent
	 * twice could make two sandboxes.
	 */
	rq.fresh_connect = route == E2B_ROUTE_CREATE;
	rq.on_header = on_header;
	rq.ud = r;
	/* No Accept-Encoding: the HTTP layer never asks for compression. */
	rc = net_header_add(&rq, "Accept: application/json");
	if (rc == 0 && json)
		rc = net_header_add(&rq, "Content-Type: application/json");
	if (rc == 0 && a->key)
		rc = net_header_add(&rq, "X-API-Key: %s", a->key);
	if (rc)
		goto out;
	net_perform(a->pool, &rq, &res);
	r->status = res.http_status;
	r->retry_after = res.retry_after_s;
	r->body = res.body;
	memset(&res.body, 0, sizeof(res.body));
	hangar_sys_log(a->ctx, HANGAR_LOG_DEBUG, "e2b: %s %s -> %ld (%lld ms)", method, path, r->status,
	     (long long)res.elapsed_ms);
	if (res.cls != NET_OK && res.cls != NET_HTTP_STATUS) {
		rc = transfer_error(a, &res, what, r);
		goto out;
	}
	if (r->status < 200 || r->status > 299) {
		rc = map_status(a, r, route, what);
		goto out;
	}
	if (want_json) {
		char err[160];

		/* Strict: an answer with two members of one name (two ids, two tokens)
		 * or something after its value is not one the platform meant. */
		r->json = sjson_parse(r->body.data ? r->body.data : "", r->body.len, 0, err, sizeof(err));
		if (!r->json)
			rc = e2b_error(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, (int)r->status, NULL,
				       "e2b: the control plane's answer to %s is not strict JSON: %s", what, err);
	}
out:
	net_request_fini(&rq); /* wipes the header lines, the key's among them */
	net_result_fini(&res);
	free(url);
	free(json);
	return rc;
}
