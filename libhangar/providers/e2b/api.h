/*
 * The control-API client of the e2b provider: E2B's REST API (cloud and
 * self-hosted) and CubeAPI, on the HTTP layer (net/net.h).
 *
 * One client per provider instance. Every request goes to the base URL only
 * (redirects are never followed, so the API key cannot be carried to another
 * host), asks for no compression and refuses a compressed answer, caps the
 * answer at E2B_API_MAX_BODY, and has the deadline
 * HANGAR_E2B_REQUEST_TIMEOUT_SECONDS. The API key is sent as X-API-Key and
 * scrubbed from every message this client produces; it is never logged.
 *
 * Failures are described on the thread's last error (hangar_error_last()) and
 * returned as HANGAR_E* codes:
 *   connection refused, reset or dropped  HANGAR_EUNAVAILABLE, flag HANGAR_ERROR_UNREACHABLE
 *   our deadline, before a connection     HANGAR_EUNAVAILABLE, flag
 *     was made and the request written      HANGAR_ERROR_UNREACHABLE: nothing
 *                                           reached the platform
 *   our deadline, after the request       HANGAR_ETIMEOUT: the platform may
 *     was written                           have acted on it (a create may exist)
 *   401, 403                              HANGAR_EUNAVAILABLE ("key rejected")
 *   429                                   HANGAR_ECAPACITY; with a Retry-After
 *                                         header of N s (or a date N s away),
 *                                         the error's retry_after_s is N
 *                                         (also on 503)
 *   500 (E2B's capacity error codes)      HANGAR_ECAPACITY
 *   502, 503, 504, 408                    HANGAR_EUNAVAILABLE
 *   404 with a JSON body                  per route: HANGAR_EGONE for a
 *                                         sandbox, HANGAR_ENOTFOUND otherwise
 *   404 without one (no such route:       HANGAR_EUNSUPPORTED, never "gone":
 *     CubeAPI's is empty, E2B's text)       nothing is known of the sandbox
 *   400, 415, 422                         HANGAR_EINVAL (HANGAR_ECREATE on create)
 *   409                                   per route (e2b_call's caller decides)
 *   other 5xx                             HANGAR_EUNAVAILABLE (HANGAR_ECREATE on create)
 *   a malformed, oversized or compressed answer  HANGAR_EPROTOCOL
 * Error bodies may be E2B's or CubeAPI's {"code","message"}, plain text, or
 * empty; the message is taken from whichever is there, cut to one short line.
 */
#pragma once

#include <stdint.h>

#include <cjson/cJSON.h>

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"
#include "util/clock.h"
#include "util/buf.h"
#include "decode.h"

#define E2B_API_MAX_BODY (4u << 20)    /* one answer */

struct net_pool;

struct e2b_api {
	hangar_ctx *ctx;          /* for logging; not referenced */
	char *base;               /* without a trailing slash */
	char *key;                /* X-API-Key, or NULL */
	const char *ca_file;      /* PEM CAs trusted besides the system's (the instance's), or NULL */
	int64_t timeout_ms;
	struct net_pool *pool;    /* idle handles, so connections are reused */
};

/* What a route's 404 and 409 mean, and whether it is the create route. */
enum e2b_route {
	E2B_ROUTE_SANDBOX,        /* 404 → HANGAR_EGONE */
	E2B_ROUTE_CREATE,         /* 400/422/5xx → HANGAR_ECREATE */
	E2B_ROUTE_OTHER,          /* 404 → HANGAR_ENOTFOUND (templates, snapshots, aliases) */
};

struct e2b_resp {
	long status;              /* 0: no answer */
	struct hbuf body;
	char next_token[256];     /* X-Next-Token, "" when absent */
	int retry_after;          /* Retry-After seconds, -1 when absent */
	cJSON *json;              /* the parsed body after e2b_call with want_json, or NULL */
	int unanswered;           /* failed after the request went out: the platform may have acted on it */
};

/*
 * Describes a failure on the thread's last error through the public
 * hangar_sys_error*() calls: code, category (hangar_error_category), HTTP
 * status (or 0) and the platform's code (or NULL). Returns code.
 */
int e2b_error(int code, int category, int http_status, const char *provider_code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

int e2b_api_init(struct e2b_api *a, hangar_ctx *ctx, const char *base, const char *key, int64_t timeout_ms);
void e2b_api_fini(struct e2b_api *a);

/*
 * One request. path starts with "/" and may carry a query string (its
 * values already escaped: see e2b_escape). body is sent as JSON when not
 * NULL. A 2xx answer returns 0, with its body parsed into r->json when
 * want_json (an unparsable or non-JSON 2xx body → HANGAR_EPROTOCOL). Any
 * other answer is mapped per the table above, for the route kind given;
 * r->status tells callers that handle a status themselves (409) what it was.
 * what names the operation in messages ("create", "pause sandbox X").
 * Release r with e2b_resp_free().
 */
int e2b_call(struct e2b_api *a, const char *method, const char *path, const cJSON *body, int want_json,
	     enum e2b_route route, const char *what, struct e2b_resp *r);
void e2b_resp_free(struct e2b_resp *r);

/* Percent-escapes a query value into out (always NUL-terminated); -1 when it does not fit. */
int e2b_escape(char *out, size_t size, const char *v);
