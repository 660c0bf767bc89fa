/*
 * A sandbox's lifecycle after create: connect (which never resumes a paused
 * sandbox), resume, kill, pause, timeouts, and the list.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"

/* GET /sandboxes/{id}: the detail, in r->json. */
static int get_detail(struct e2b *e, const char *id, struct e2b_resp *r)
{
	char path[128];

	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	return e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "status", r);
}

static int state_of(const cJSON *j)
{
	const char *s = e2b_jstr(j, "state");

	return s && (!strcmp(s, "paused") || !strcmp(s, "pausing")) ? HANGAR_SANDBOX_PAUSED
								      : HANGAR_SANDBOX_RUNNING;
}

/* The flavour's connect route: resumes a paused sandbox, extends a running one. */
static int connect_route(struct e2b *e, const char *id, int64_t timeout, int running, struct e2b_resp *r,
			 const char *what)
{
	cJSON *body = cJSON_CreateObject();
	char path[160];
	int rc;

	if (!body)
		return e2b_oom();
	e->fl->connect_body(body, timeout, running);
	snprintf(path, sizeof(path), "%s/%s/connect", e->fl->sandboxes_path, id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, what, r);
	cJSON_Delete(body);
	if (rc == 0) {
		const char *got = e2b_jstr(r->json, "sandboxID");

		if (got && strcmp(got, id) != 0)
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: %s answered for another sandbox", what);
	}
	return rc;
}

/* A paused sandbox from its detail j: connecting would resume it, so it is described without tokens. */
static int describe_paused(struct e2b *e, const char *id, const cJSON *j, int64_t created, hangar_sys_sandbox *out)
{
	int rc = hangar_sys_sandbox_set_id(out, id);

	if (rc == 0)
		rc = hangar_sys_sandbox_set_state(out, HANGAR_SANDBOX_PAUSED);
	if (rc == 0)
		rc = e2b_describe_envd(e, id, e2b_jstr(j, "domain"), out);
	if (rc == 0 && e2b_jstr(j, "templateID"))
		rc = hangar_sys_sandbox_set_template(out, e2b_jstr(j, "templateID"));
	if (rc == 0)
		rc = hangar_sys_sandbox_set_times(out, created, 0);
	return rc;
}

int e2b_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct e2b *e = state;
	struct e2b_resp d, c;
	int64_t created, expires, now = clock_wall_us();
	int rc, refused;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	rc = get_detail(e, id, &d);
	if (rc) {
		e2b_resp_free(&d);
		return rc;
	}
	created = e2b_jtime_us(d.json, "startedAt");
	expires = e2b_jtime_us(d.json, "endAt");
	if (state_of(d.json) == HANGAR_SANDBOX_PAUSED) {
		rc = describe_paused(e, id, d.json, created, out);
		e2b_resp_free(&d);
		return rc;
	}
	/*
	 * Running. E2B's detail carries the envd token: nothing to change then.
	 * Else (Cube) the connect route hands the tokens out; on a running
	 * sandbox it only extends the lifetime, so ask for no more than it has
	 * left (a flavour whose platform ignores the value there sends none).
	 */
	if (e2b_jstr(d.json, "envdAccessToken")) {
		rc = e2b_describe(e, id, d.json, out, &refused);
		if (rc == 0)
			rc = hangar_sys_sandbox_set_times(out, created, expires);
		e2b_resp_free(&d);
		return rc;
	}
	{
		int64_t left = expires > now ? (expires - now) / 1000000 : 0;

		if (expires == 0)
			left = e2b_remembered_timeout(e, id);
		else if (left < 1)
			left = 1;
		rc = connect_route(e, id, left, 1, &c, "connect");
	}
	if (rc == 0) {
		rc = e2b_describe(e, id, c.json, out, &refused);
		if (rc == 0 && !e2b_jstr(c.json, "templateID") && e2b_jstr(d.json, "templateID"))
			rc = hangar_sys_sandbox_set_template(out, e2b_jstr(d.json, "templateID"));
		if (rc == 0)
			rc = hangar_sys_sandbox_set_times(out, created, expires);
		if (rc == 0)
			e2b_reseal(e, id, c.json);
	}
	e2b_resp_free(&c);
	e2b_resp_free(&d);
	return rc;
}

int e2b_resume(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct e2b *e = state;
	struct e2b_resp c;
	int64_t timeout, now = clock_wall_us();
	int rc, refused;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	timeout = e2b_remembered_timeout(e, id);
	rc = connect_route(e, id, timeout, 0, &c, "resume");
	if (rc == 0)
		rc = e2b_describe(e, id, c.json, out, &refused);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_times(out, 0, timeout > 0 ? now + timeout * 1000000 : 0);
	if (rc == 0)
		e2b_reseal(e, id, c.json);
	e2b_resp_free(&c);
	return rc;
}

int e2b_kill(void *state, const char *id)
{
	struct e2b *e = state;
	struct e2b_resp r;
	char path[128];
	int rc;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	rc = e2b_call(&e->api, "DELETE", path, NULL, 0, E2B_ROUTE_SANDBOX, "kill", &r);
	e2b_resp_free(&r);
	if (rc == 0 || rc == HANGAR_EGONE)
		e2b_forget(e, id);
	return rc;
}

static int do_pause(struct e2b *e, const char *id, int memory)
{
	struct e2b_resp r, d;
	cJSON *body = NULL;
	char path[160];
	int rc;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	if (e->fl->pause_body(&body, memory) != 0)
		return e2b_oom();
	snprintf(path, sizeof(path), "/sandboxes/%s/pause", id);
	rc = e2b_call(&e->api, "POST", path, body, 0, E2B_ROUTE_SANDBOX, "pause", &r);
	cJSON_Delete(body);
	if (rc && r.status == 409) {
		/* Already paused is done; anything else is the platform refusing. */
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		if (get_detail(e, id, &d) == 0 && state_of(d.json) == HANGAR_SANDBOX_PAUSED)
			rc = 0;
		else
			hangar_sys_error_restore(&saved);
		e2b_resp_free(&d);
	}
	e2b_resp_free(&r);
	return rc;
}

int e2b_pause(void *state, const char *id)
{
	return do_pause(state, id, 1);
}

int e2b_pause_filesystem(void *state, const char *id)
{
	struct e2b *e = state;

	if (!(e->fl->capabilities & HANGAR_CAP_FS_PAUSE))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
					"e2b: the %s flavour always pauses with memory; a filesystem-only pause is "
					"not available",
					e->fl->name);
	return do_pause(state, id, 0);
}

int e2b_set_timeout(void *state, const char *id, int64_t seconds)
{
	struct e2b *e = state;
	struct e2b_resp r;
	cJSON *body;
	char path[160];
	int rc;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	if (seconds < 0 || seconds > E2B_MAX_TIMEOUT)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a timeout must be 0 to 366 days");
	body = cJSON_CreateObject();
	if (!body)
		return e2b_oom();
	/* 0 is "no limit": the flavour says how its platform spells it. */
	cJSON_AddNumberToObject(body, "timeout", (double)(seconds ? seconds : e->fl->no_limit_timeout));
	snprintf(path, sizeof(path), "/sandboxes/%s/timeout", id);
	rc = e2b_call(&e->api, "POST", path, body, 0, E2B_ROUTE_SANDBOX, "set timeout", &r);
	cJSON_Delete(body);
	e2b_resp_free(&r);
	if (rc == 0)
		e2b_remember(e, id, seconds ? seconds : e->fl->no_limit_timeout);
	return rc;
}

static int list_entry(struct e2b *e, const cJSON *s, hangar_sys_list *out)
{
	struct e2b_sandbox_fields f;
	hangar_sys_sandbox *d;
	int rc;

	if (e2b_decode_sandbox(s, &f) < 0)
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list holds a sandbox without a valid id");
	d = hangar_sys_list_add(out);
	if (!d)
		return e2b_oom();
	rc = hangar_sys_sandbox_set_id(d, f.id);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_state(d, f.paused ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING);
	if (rc == 0 && f.template_id)
		rc = hangar_sys_sandbox_set_template(d, f.template_id);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_times(d, f.started_us, f.paused ? 0 : f.end_us);
	(void)e;
	return rc;
}

int e2b_list(void *state, hangar_sys_list *out)
{
	struct e2b *e = state;
	char token[256] = "", esc[800], path[1024];
	int rc = 0;

	for (int page = 0; page < LIST_MAX_PAGES; page++) {
		struct e2b_resp r;

		if (*token) {
			if (e2b_escape(esc, sizeof(esc), token) < 0)
				return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list's page token is too long");
			snprintf(path, sizeof(path), "/v2/sandboxes?limit=%d&nextToken=%s", LIST_PAGE, esc);
		} else {
			snprintf(path, sizeof(path), "/v2/sandboxes?limit=%d", LIST_PAGE);
		}
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "list", &r);
		if (rc == 0 && !cJSON_IsArray(r.json))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list is not an array");
		for (const cJSON *s = r.json ? r.json->child : NULL; rc == 0 && s; s = s->next)
			rc = list_entry(e, s, out);
		/* A list that does not page (CubeAPI's) ignores nextToken and sends none. */
		if (rc == 0 && !e->fl->pages && cJSON_GetArraySize(r.json) >= LIST_PAGE)
			hangar_sys_log(e->ctx, HANGAR_LOG_WARNING,
			     "e2b: the %s flavour lists at most %d sandboxes and does not page: more may exist",
			     e->fl->name, LIST_PAGE);
		if (rc == 0 && *r.next_token && !strcmp(r.next_token, token))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list repeats its page token");
		if (rc == 0)
			snprintf(token, sizeof(token), "%s", r.next_token);
		e2b_resp_free(&r);
		if (rc)
			return rc; /* the core drops what was added: never a partial list */
		if (!*token)
			return 0;
	}
	return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list goes on past %d pages", LIST_MAX_PAGES);
}
