/*
 * The e2b provider on Tencent's CubeSandbox, whose CubeAPI differs from E2B's
 * (its control API, CubeAPI): create and connect only at the v1 paths
 * (the v2 ones answer 405 or 404), no envd access token, the traffic token
 * only in create's answer (so it is kept sealed), connect answering 200,
 * plain-text or empty framework errors, pause always keeping memory (a
 * filesystem-only pause is refused, never downgraded), templates built by
 * POST /templates, templates named by alias looked up for their tpl- id
 * before a create. Logs come from GET /v2/sandboxes/{id}/logs; CubeAPI has
 * no metrics and no fork, so those are HANGAR_EUNSUPPORTED.
 * Its v2 list has no pagination: one answer of at most 100 sandboxes.
 * HANGAR_E2B_API_URL is required; the API key is optional.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "e2b.h"
#include "hangar/provider.h"

/* CubeAPI's alias form: ^[a-z0-9][a-z0-9-]{0,63}$, never a tpl- or snap- id. */
static int cube_alias(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 64 && s[0] != '-' && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n &&
	       strncmp(s, "tpl-", 4) != 0 && strncmp(s, "snap-", 5) != 0;
}

/*
 * A template named by its alias is looked up for its tpl-… id
 * (GET /templates/aliases/{alias}) before the create, so the
 * create names exactly the template that alias meant then. out receives
 * the id to create from.
 */
static int cube_resolve_template(struct e2b *e, const char *tpl, char *out, size_t size)
{
	struct e2b_resp r;
	const char *tid;
	char path[128];
	int rc;

	snprintf(out, size, "%s", tpl);
	if (!cube_alias(tpl))
		return 0;
	snprintf(path, sizeof(path), "/templates/aliases/%s", tpl);
	rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "template alias lookup", &r);
	if (rc == HANGAR_ENOTFOUND)
		rc = hangar_sys_error(HANGAR_ECREATE, 404, 0, "e2b: create: no template has the alias %s", tpl);
	if (rc == 0) {
		tid = e2b_jstr(r.json, "templateID");
		if (!tid || !e2b_valid_id(tid) || strlen(tid) >= size)
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0,
					      "e2b: the alias lookup of %s answered no valid template id", tpl);
		else
			snprintf(out, size, "%s", tid);
	}
	e2b_resp_free(&r);
	if (rc == 0)
		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: template alias %s is %s", tpl, out);
	return rc;
}

/* On a running sandbox CubeAPI ignores a timeout: it gets none. -1 is "no limit". */
static void cube_connect_body(cJSON *body, int64_t timeout, int running)
{
	if (running)
		return;
	if (timeout > 0)
		cJSON_AddNumberToObject(body, "timeout", (double)timeout);
	else if (timeout < 0)
		cJSON_AddNumberToObject(body, "timeout", -1);
}

/* CubeAPI's pause takes no body and always keeps memory. */
static int cube_pause_body(cJSON **out, int memory)
{
	(void)memory;
	*out = NULL;
	return 0;
}

/* Its build status has no log offset: the phase, or the error, is in message. */
static void cube_build_status_path(char *out, size_t size, const char *tid, const char *bid, int offset)
{
	(void)offset;
	snprintf(out, size, "/templates/%s/builds/%s/status", tid, bid);
}

static void cube_template_list_path(char *out, size_t size, const char *token)
{
	(void)token; /* one answer holds them all */
	snprintf(out, size, "/templates");
}

/* One POST /templates from an image, envd's port exposed and its /health the readiness probe. */
static int cube_template_build(struct e2b *e, const struct hangar_template_build_opts *o, hangar_buf *out)
{
	cJSON *body = cJSON_CreateObject(), *ports;
	struct e2b_resp r;
	const char *tid, *job;
	int rc;

	if (!body)
		return e2b_oom();
	cJSON_AddStringToObject(body, "image", o->image);
	cJSON_AddStringToObject(body, "name", o->name);
	if (o->cpu_millis)
		cJSON_AddNumberToObject(body, "cpu", o->cpu_millis);
	if (o->memory_mb)
		cJSON_AddNumberToObject(body, "memory", o->memory_mb);
	ports = cJSON_AddArrayToObject(body, "exposedPorts");
	if (ports)
		cJSON_AddItemToArray(ports, cJSON_CreateNumber(ENVD_PORT));
	cJSON_AddNumberToObject(body, "probePort", ENVD_PORT);
	cJSON_AddStringToObject(body, "probePath", "/health");
	if (o->disk_mb) {
		char size[32];

		if (o->disk_mb % 1024 == 0)
			snprintf(size, sizeof(size), "%uG", o->disk_mb / 1024);
		else
			snprintf(size, sizeof(size), "%uM", o->disk_mb);
		cJSON_AddStringToObject(body, "writableLayerSize", size);
	}
	rc = e2b_call(&e->api, "POST", "/templates", body, 1, E2B_ROUTE_OTHER, "template build", &r);
	cJSON_Delete(body);
	if (rc) {
		e2b_resp_free(&r);
		return rc;
	}
	tid = e2b_jstr(r.json, "templateID");
	job = e2b_jstr(r.json, "jobID");
	if (!tid || !job || !e2b_valid_id(tid) || !e2b_valid_id(job)) {
		e2b_resp_free(&r);
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the build answer has no valid template or job id");
	}
	e2b_progress(o, "waiting", "build started");
	rc = e2b_follow_build(e, o, tid, job);
	if (rc == 0)
		rc = e2b_put_buf(out, tid);
	e2b_resp_free(&r);
	return rc;
}

const struct e2b_flavour e2b_flavour_cube = {
	.name = "cube",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_TEMPLATES,
	.need_api_url = 1,
	.sandboxes_path = "/sandboxes",
	.no_limit_timeout = -1,
	.traffic_token_once = 1,
	.no_metrics = "CubeAPI has no GET /sandboxes/{id}/metrics route",
	.resolve_template = cube_resolve_template,
	.connect_body = cube_connect_body,
	.pause_body = cube_pause_body,
	.template_build = cube_template_build,
	.build_status_path = cube_build_status_path,
	.template_list_path = cube_template_list_path,
};
