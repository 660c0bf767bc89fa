/*
 * E2B's own control API, as E2B's cloud and self-hosted E2B run it (the
 * e2b-dev/infra API server): the hooks the cloud and selfhosted flavour
 * tables share. Templates are named as they are (the create route takes
 * names, aliases and ids), the connect route always carries a timeout,
 * pause says whether to keep memory, templates are built in two steps
 * (POST /v3/templates, then a build from an image) whose status pages its
 * log entries, and the template list pages with nextToken.
 */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "e2b.h"

int e2b_infra_resolve_template(struct e2b *e, const char *tpl, char *out, size_t size)
{
	(void)e;
	snprintf(out, size, "%s", tpl);
	return 0;
}

/* E2B requires a timeout on connect: "no limit" or none asked for is the longest we allow. */
void e2b_infra_connect_body(cJSON *body, int64_t timeout, int running)
{
	(void)running;
	cJSON_AddNumberToObject(body, "timeout", (double)(timeout > 0 ? timeout : E2B_MAX_TIMEOUT));
}

int e2b_infra_pause_body(cJSON **out, int memory)
{
	*out = cJSON_CreateObject();
	if (!*out)
		return -1;
	cJSON_AddBoolToObject(*out, "memory", memory);
	return 0;
}

void e2b_infra_build_status_path(char *out, size_t size, const char *tid, const char *bid, int offset)
{
	snprintf(out, size, "/templates/%s/builds/%s/status?logsOffset=%d", tid, bid, offset);
}

void e2b_infra_template_list_path(char *out, size_t size, const char *token)
{
	if (*token)
		snprintf(out, size, "/v2/templates?limit=%d&nextToken=%s", LIST_PAGE, token);
	else
		snprintf(out, size, "/v2/templates?limit=%d", LIST_PAGE);
}

int e2b_infra_template_build(struct e2b *e, const struct hangar_template_build_opts *o, hangar_buf *out)
{
	cJSON *body = cJSON_CreateObject();
	struct e2b_resp r, s;
	const char *tid, *bid;
	char path[256];
	int rc;

	if (!body)
		return e2b_oom();
	cJSON_AddStringToObject(body, "name", o->name);
	if (o->cpu_millis)
		cJSON_AddNumberToObject(body, "cpuCount", (o->cpu_millis + 999) / 1000);
	if (o->memory_mb)
		cJSON_AddNumberToObject(body, "memoryMB", o->memory_mb);
	rc = e2b_call(&e->api, "POST", "/v3/templates", body, 1, E2B_ROUTE_OTHER, "template build", &r);
	cJSON_Delete(body);
	if (rc) {
		e2b_resp_free(&r);
		return rc;
	}
	tid = e2b_jstr(r.json, "templateID");
	bid = e2b_jstr(r.json, "buildID");
	if (!tid || !bid || !e2b_valid_id(tid) || !e2b_valid_id(bid)) {
		e2b_resp_free(&r);
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the build answer has no valid template or build id");
	}
	body = cJSON_CreateObject();
	if (!body) {
		e2b_resp_free(&r);
		return e2b_oom();
	}
	cJSON_AddStringToObject(body, "fromImage", o->image);
	snprintf(path, sizeof(path), "/v2/templates/%s/builds/%s", tid, bid);
	rc = e2b_call(&e->api, "POST", path, body, 0, E2B_ROUTE_OTHER, "template build start", &s);
	cJSON_Delete(body);
	e2b_resp_free(&s);
	if (rc == 0) {
		e2b_progress(o, "waiting", "build started");
		rc = e2b_follow_build(e, o, tid, bid);
	}
	if (rc == 0)
		rc = e2b_put_buf(out, tid);
	e2b_resp_free(&r);
	return rc;
}
