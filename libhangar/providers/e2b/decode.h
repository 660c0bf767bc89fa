/*
 * Decoding of the control API's answers (E2B's REST API and CubeAPI): pure
 * functions, no I/O and no library state, so that each can be fuzzed alone
 * (tests/fuzz/fuzz-e2b-decode.c). Every input is a peer's and untrusted:
 * ids are checked before anything may put them in a URL, text is cut to
 * one printable line before it may enter a message.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "hangar/errors.h"
#include "hangar/sandbox.h"
#include "hangar/template.h"

#define E2B_ID_MAX 64
#define E2B_CREATE_ID_KEY "hangar_create_id"   /* the metadata key a create is tagged with */

/* A sandbox, template or snapshot id safe to put in a URL path: [A-Za-z0-9_-], 1 to 64. */
int e2b_valid_id(const char *id);

/* A host name (and port) an answer may name as the sandbox's domain. */
int e2b_valid_domain(const char *d);

/* A non-empty string member of obj, or NULL (obj may be NULL or not an object). */
const char *e2b_jstr(const cJSON *obj, const char *name);

/* An RFC 3339 member of obj in microseconds since the epoch, or 0 when absent or malformed. */
int64_t e2b_jtime_us(const cJSON *obj, const char *name);

/* One printable line of at most size - 1 bytes out of an error body: its
 * "message" (or "error") when it is a JSON object, the text when it is not
 * JSON, else "". out is always NUL-terminated. */
void e2b_error_text(const char *body, size_t len, char *out, size_t size);

/* Whether the body is a JSON object (a 404 with one names a missing thing, without one a missing route). */
int e2b_body_is_json_object(const char *body, size_t len);

/* Whether an error body carries one of E2B's "no room" error codes. */
int e2b_capacity_error(const char *body, size_t len);

/* What a Sandbox, SandboxDetail or ListedSandbox says; pointers borrow from the JSON. */
struct e2b_sandbox_fields {
	const char *id;             /* always valid (e2b_valid_id) */
	const char *template_id;    /* or NULL */
	const char *envd_token;     /* or NULL */
	const char *traffic_token;  /* or NULL */
	const char *domain;         /* or NULL; see domain_bad */
	int domain_bad;             /* a domain was given and it is malformed */
	const char *create_id;      /* metadata[E2B_CREATE_ID_KEY], or NULL */
	int paused;                 /* state "paused" or "pausing" */
	int64_t started_us, end_us; /* 0 when absent */
};

/* Decodes one sandbox object; -1 when it has no valid sandboxID. */
int e2b_decode_sandbox(const cJSON *j, struct e2b_sandbox_fields *f);

/* Decodes one entry of a template list into info (pointers borrow from t); -1 without a templateID. */
int e2b_decode_template(const cJSON *t, struct hangar_template_info *info);

/* Decodes one metrics sample (E2B's SandboxMetric); -1 when it is malformed. */
int e2b_decode_metric(const cJSON *x, struct hangar_sandbox_metric *m);

/* One printable line of at most max bytes of untrusted text, cut on a UTF-8 boundary; malloc'd, NULL when out of memory. */
char *e2b_clean_line(const char *src, size_t max);

/* Decodes one log entry; its level and message are malloc'd (free both). -1 malformed, -2 out of memory. */
int e2b_decode_log(const cJSON *x, struct hangar_sandbox_log_entry *e, size_t message_max);

/* One failed fork's {"code","message","error_code"}: the hangar code it maps to, and its reason cut into why. */
int e2b_decode_fork_error(const cJSON *err, char *why, size_t size);
