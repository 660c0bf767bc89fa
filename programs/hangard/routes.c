/*
 * The route table: the one list of what hangard answers. `hangard routes`
 * prints it and tests/hangard compares it with openapi.json both ways, so a
 * route cannot go undocumented nor a documented one unserved. The E2B routes
 * follow E2B's own document instead: `hangard routes e2b` prints them and
 * tests/e2b-api compares them with hangard(8)'s table.
 *
 * Scopes: reading routes need read, changing ones write; /metrics and
 * /v1/events need read; the E2B routes (/e2b) need sandboxes, which grants
 * nothing else. admin grants every scope.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "hangard.h"

void h_livez(struct request *r)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "status", "ok");
	reply_json(r, 200, doc);
}

/* 503 with Retry-After, whatever the library's code: a probe asks again. */
static void reply_unready(struct request *r, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reply_unready(struct request *r, int code, const char *fmt, ...)
{
	cJSON *doc = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(doc, "error");
	struct MHD_Response *resp;
	char msg[512], *text;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddStringToObject(err, "kind", hangar_error_name(code));
	sjson_add_int64(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	sjson_add_int64(err, "retry_after_s", 1);
	text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	resp = text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
	if (!resp) {
		free(text);
		reply_error(r, 503, "nomem", HANGAR_ENOMEM, "out of memory");
		return;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Retry-After", "1");
	reply_response(r, 503, resp);
}

/* Ready: the state directory is there and writable (checkpoints and
 * temporary files go there whatever the store), and the state store
 * answers a query (hangar_ctx_ping_store(): SQLite or PostgreSQL). */
void h_readyz(struct request *r)
{
	hangar_buf dir = HANGAR_BUF_INIT;
	struct stat st;
	cJSON *doc;
	int rc;

	if ((rc = hangar_ctx_get(&dir, hangard->ctx, "HANGAR_STATE_DIR")) < 0) {
		reply_hangar_error(r, rc);
		return;
	}
	errno = 0;
	if (stat(dir.ptr, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir.ptr, W_OK | X_OK) < 0) {
		reply_unready(r, HANGAR_EUNAVAILABLE, "the state directory does not answer: %s",
			      strerror(errno ? errno : ENOTDIR));
		hangar_buf_dispose(&dir);
		return;
	}
	hangar_buf_dispose(&dir);
	if ((rc = hangar_ctx_ping_store(hangard->ctx)) < 0) {
		char safe[512];
		reply_unready(r, rc, "the state store does not answer: %s",
			      error_public_message(hangar_error_last()->message, safe, sizeof(safe)));
		return;
	}
	doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "status", "ready");
	reply_json(r, 200, doc);
}

void h_list(struct request *r)
{
	const struct route *rt = request_route(r);
	list_fill_fn fill = rt->fill;
	const char *key = rt->list_key;
	cJSON *doc = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(doc, key);
	int rc = fill(r, arr);
	if (rc < 0) {
		cJSON_Delete(doc);
		reply_hangar_error(r, rc);
		return;
	}
	reply_json(r, 200, doc);
}

void h_openapi(struct request *r)
{
	reply_text(r, 200, "application/json", hangard_openapi, hangard_openapi_len);
}

/* ---- tiers, templates, environments ---- */

static int add_tier(const hangar_tier_info *t, void *payload)
{
	cJSON *arr = payload, *o = cJSON_CreateObject(), *ps;
	cJSON_AddStringToObject(o, "name", t->name);
	cJSON_AddBoolToObject(o, "falls_back", t->falls_back);
	sjson_add_int64(o, "hedge_ms", (int64_t)t->hedge_ms);
	ps = cJSON_AddArrayToObject(o, "providers");
	for (uint32_t i = 0; i < t->n_providers; i++) {
		cJSON *p = cJSON_CreateObject();
		cJSON_AddStringToObject(p, "name", t->providers[i]);
		cJSON_AddBoolToObject(p, "loaded", t->loaded[i]);
		sjson_add_int64(p, "cooling_until_us", (int64_t)t->cooling_until_us[i]);
		cJSON_AddItemToArray(ps, p);
	}
	cJSON_AddItemToArray(arr, o);
	return 0;
}

static int fill_tiers(struct request *r, cJSON *arr)
{
	(void)r;
	return hangar_tier_foreach(hangard->ctx, add_tier, arr);
}

static int add_template(const hangar_template_info *t, void *payload)
{
	cJSON_AddItemToArray(payload, add_strings(cJSON_CreateObject(), "id", t->template_id, "name", t->name,
						    "status", t->status, "provider", t->provider, NULL));
	return 0;
}

static int fill_templates(struct request *r, cJSON *arr)
{
	return hangar_template_list(hangard->ctx, request_query(r, "provider"), add_template, arr);
}

static int add_environment(const hangar_environment_info *e, void *payload)
{
	cJSON *o = add_strings(cJSON_CreateObject(), "name", e->name, "description", e->description, "tier", e->tier,
			       "workspace", e->workspace, "user", e->user, NULL);
	sjson_add_int64(o, "timeout", (int64_t)e->timeout_sec);
	cJSON_AddStringToObject(o, "network", e->network == HANGAR_NETWORK_ON    ? "on"
					      : e->network == HANGAR_NETWORK_OFF ? "off"
										 : "default");
	cJSON *t = cJSON_Parse(e->templates_json), *v = cJSON_Parse(e->env_json);
	cJSON_AddItemToObject(o, "templates", t ? t : cJSON_CreateObject());
	cJSON_AddItemToObject(o, "env", v ? v : cJSON_CreateObject());
	cJSON_AddItemToArray(payload, o);
	return 0;
}

static int fill_environments(struct request *r, cJSON *arr)
{
	(void)r;
	return hangar_environment_list(hangard->ctx, add_environment, arr);
}

/* ---- the table ---- */

#define R SCOPE_READ
#define W SCOPE_WRITE
#define S SCOPE_SANDBOXES
#define E ROUTE_E2B

const struct route hangard_routes[] = {
	{ "GET", "/livez", h_livez, 0, ROUTE_INLINE | ROUTE_NOAUTH },
	{ "GET", "/readyz", h_readyz, R, 0 },
	{ "GET", "/metrics", h_metrics, R, 0 },
	{ "GET", "/v1/openapi.json", h_openapi, R, ROUTE_INLINE },
	{ "GET", "/v1/events", h_events, R, ROUTE_INLINE },
	{ "GET", "/v1/tiers", h_list, R, 0, "tiers", fill_tiers },
	{ "GET", "/v1/templates", h_list, R, 0, "templates", fill_templates },
	{ "GET", "/v1/environments", h_list, R, 0, "environments", fill_environments },
	{ "GET", "/v1/images", h_list, R, 0, "images", fill_images },
	{ "POST", "/v1/images/pull", h_image_pull, W, 0 },
	{ "GET", "/v1/images/{id}", h_image_get, R, 0 },
	{ "DELETE", "/v1/images/{id}", h_image_delete, W, 0 },
	{ "POST", "/v1/sandboxes", h_sandbox_create, W, 0 },
	{ "GET", "/v1/sandboxes", h_list, R, 0, "sandboxes", fill_sandboxes },
	{ "GET", "/v1/sandboxes/{id}", h_sandbox_get, R, 0 },
	{ "DELETE", "/v1/sandboxes/{id}", h_sandbox_kill, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/pause", h_sandbox_pause, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/resume", h_sandbox_resume, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/timeout", h_sandbox_timeout, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/exec", h_exec, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/exec/stream", h_exec_stream, W, 0 },
	{ "GET", "/v1/sandboxes/{id}/files", h_file_get, R, 0 },
	{ "PUT", "/v1/sandboxes/{id}/files", h_file_put, W, ROUTE_UPLOAD },
	{ "POST", "/v1/sandboxes/{id}/fork", h_sandbox_fork, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/snapshot", h_sandbox_snapshot, W, 0 },
	{ "POST", "/v1/sandboxes/{id}/checkpoints", h_sandbox_checkpoint, W, 0 },
	{ "POST", "/v1/sessions", h_session_create, W, 0 },
	{ "GET", "/v1/sessions", h_list, R, 0, "sessions", fill_sessions },
	{ "GET", "/v1/sessions/{id}", h_session_get, R, 0 },
	{ "DELETE", "/v1/sessions/{id}", h_session_delete, W, 0 },
	{ "POST", "/v1/sessions/{id}/suspend", h_session_suspend, W, 0 },
	{ "POST", "/v1/sessions/{id}/resume", h_session_resume, W, 0 },
	{ "POST", "/v1/sessions/{id}/archive", h_session_archive, W, 0 },
	{ "POST", "/v1/sessions/{id}/fork", h_session_fork, W, 0 },
	{ "POST", "/v1/sessions/{id}/keep", h_session_keep, W, 0 },
	{ "GET", "/v1/sessions/{id}/checkpoints", h_list, R, 0, "checkpoints", fill_session_checkpoints },
	{ "GET", "/v1/checkpoints/{id}", h_checkpoint_get, R, 0 },
	{ "DELETE", "/v1/checkpoints/{id}", h_checkpoint_delete, W, 0 },
	/* E2B's control API (e2b.c): E2B's paths under /e2b, the sandboxes scope. */
	{ "GET", "/e2b/health", h_e2b_health, 0, E | ROUTE_INLINE | ROUTE_NOAUTH },
	{ "POST", "/e2b/sandboxes", h_e2b_create, S, E },
	{ "POST", "/e2b/v2/sandboxes", h_e2b_create, S, E },
	{ "GET", "/e2b/sandboxes", h_e2b_list, S, E },
	{ "GET", "/e2b/v2/sandboxes", h_e2b_list_v2, S, E },
	{ "GET", "/e2b/sandboxes/{id}", h_e2b_get, S, E },
	{ "DELETE", "/e2b/sandboxes/{id}", h_e2b_kill, S, E },
	{ "POST", "/e2b/sandboxes/{id}/timeout", h_e2b_timeout, S, E },
	{ "POST", "/e2b/sandboxes/{id}/refreshes", h_e2b_refresh, S, E },
	{ "POST", "/e2b/sandboxes/{id}/pause", h_e2b_pause, S, E },
	{ "POST", "/e2b/sandboxes/{id}/resume", h_e2b_resume, S, E },
	{ "POST", "/e2b/sandboxes/{id}/connect", h_e2b_connect, S, E },
	{ "POST", "/e2b/v2/sandboxes/{id}/connect", h_e2b_connect, S, E },
	{ "POST", "/e2b/sandboxes/{id}/fork", h_e2b_fork, S, E },
	{ "POST", "/e2b/sandboxes/{id}/snapshots", h_e2b_snapshot, S, E },
	{ "GET", "/e2b/sandboxes/{id}/metrics", h_e2b_metrics, S, E },
	{ "GET", "/e2b/v2/sandboxes/{id}/logs", h_e2b_logs, S, E },
	/* What does not map: 501 with where to go instead. */
	{ "POST", "/e2b/v3/templates", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "POST", "/e2b/v2/templates", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "GET", "/e2b/v2/templates", h_e2b_templates_v2, S, E },
	{ "GET", "/e2b/templates", h_e2b_templates, S, E },
	{ "GET", "/e2b/templates/{id}", h_e2b_template_get, S, E },
	{ "DELETE", "/e2b/templates/{id}", h_e2b_template_delete, S, E },
	{ "GET", "/e2b/templates/aliases/{id}", h_e2b_template_alias, S, E },
	{ "GET", "/e2b/snapshots", h_e2b_snapshots, S, E },
	{ "GET", "/e2b/api-keys", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "POST", "/e2b/api-keys", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "GET", "/e2b/teams", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "GET", "/e2b/volumes", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "POST", "/e2b/volumes", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "PUT", "/e2b/sandboxes/{id}/network", h_e2b_unmapped, S, E | ROUTE_INLINE },
	{ "GET", "/e2b/sandboxes/{id}/logs", h_e2b_unmapped, S, E | ROUTE_INLINE },
};
const size_t hangard_n_routes = sizeof(hangard_routes) / sizeof(hangard_routes[0]);
