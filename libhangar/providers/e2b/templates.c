/*
 * Snapshots and templates: a snapshot is a template the platform makes of a
 * sandbox; a build is followed until it is ready, has failed, or its
 * deadline passed.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"
#include "hangar/template.h"

int e2b_put_buf(hangar_buf *out, const char *s)
{
	char *c = strdup(s);

	if (!c)
		return e2b_oom();
	hangar_buf_dispose(out);
	out->ptr = c;
	out->size = strlen(c);
	out->reserved = out->size + 1;
	return 0;
}

int e2b_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id)
{
	struct e2b *e = state;
	cJSON *body = cJSON_CreateObject();
	struct e2b_resp r;
	const char *snap;
	char path[160];
	int rc;

	if (!body)
		return e2b_oom();
	if (!e2b_valid_id(id)) {
		cJSON_Delete(body);
		return e2b_bad_id(id);
	}
	if (name)
		cJSON_AddStringToObject(body, "name", name);
	snprintf(path, sizeof(path), "/sandboxes/%s/snapshots", id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, "snapshot", &r);
	cJSON_Delete(body);
	if (rc == 0 && r.status == 409)
		rc = hangar_sys_error(HANGAR_EINVAL, 409, 0, "e2b: a snapshot of %s is already being taken", id);
	if (rc == 0) {
		snap = e2b_jstr(r.json, "snapshotID");
		/* A template reference ("snap-…", or E2B's "name:tag"): it goes into JSON, never a path. */
		if (!snap || strlen(snap) > 200 ||
		    strspn(snap, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/") != strlen(snap))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the snapshot answer has no valid id");
		else
			rc = e2b_put_buf(out_id, snap);
	}
	e2b_resp_free(&r);
	return rc;
}

void e2b_progress(const struct hangar_template_build_opts *o, const char *status, const char *msg)
{
	if (o->progress)
		o->progress(status, msg ? msg : "", o->payload);
}

/* Waits between two polls of a build, growing from 200 ms to 2 s, never past the deadline. */
static void poll_wait(int *delay_ms, int64_t deadline)
{
	int64_t left = deadline - clock_mono_ms();
	int d = *delay_ms;

	if (left < d)
		d = left > 0 ? (int)left : 0;
	if (d > 0)
		poll(NULL, 0, d);
	if (*delay_ms < 2000)
		*delay_ms = *delay_ms * 2 > 2000 ? 2000 : *delay_ms * 2;
}

int e2b_follow_build(struct e2b *e, const struct hangar_template_build_opts *o, const char *tid, const char *bid)
{
	int64_t deadline = clock_mono_ms() + e->build_timeout_ms;
	int delay = 200, offset = 0;
	char last[64] = "";

	for (;;) {
		struct e2b_resp r;
		char path[256];
		const char *status;
		int rc;

		e->fl->build_status_path(path, sizeof(path), tid, bid, offset);
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "build status", &r);
		if (rc) {
			e2b_resp_free(&r);
			return rc;
		}
		status = e2b_jstr(r.json, "status");
		if (!status) {
			e2b_resp_free(&r);
			return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a build status without a status");
		}
		/* E2B: new log entries; Cube: the phase or error in message. */
		{
			const cJSON *entries = cJSON_GetObjectItemCaseSensitive(r.json, "logEntries");
			int n = 0;

			for (const cJSON *le = cJSON_IsArray(entries) ? entries->child : NULL; le; le = le->next, n++)
				e2b_progress(o, status, e2b_jstr(le, "message"));
			offset += n;
			if (!n && (strcmp(last, status) || e2b_jstr(r.json, "message")))
				e2b_progress(o, status, e2b_jstr(r.json, "message"));
		}
		snprintf(last, sizeof(last), "%s", status);
		if (!strcmp(status, "ready")) {
			e2b_resp_free(&r);
			return 0;
		}
		if (!strcmp(status, "error") || !strcmp(status, "failed")) {
			const cJSON *reason = cJSON_GetObjectItemCaseSensitive(r.json, "reason");
			const char *why = e2b_jstr(reason, "message");

			if (!why)
				why = e2b_jstr(r.json, "message");
			rc = hangar_sys_error(HANGAR_ECREATE, 0, 0, "e2b: the build of template %s failed: %.300s", tid,
					      why ? why : "no reason given");
			e2b_resp_free(&r);
			return rc;
		}
		e2b_resp_free(&r);
		if (clock_mono_ms() >= deadline)
			return hangar_sys_error(HANGAR_ETIMEOUT, 0, 0,
						"e2b: template %s was not built within "
						"HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS (%lld s); it may still finish",
						tid, (long long)(e->build_timeout_ms / 1000));
		poll_wait(&delay, deadline);
	}
}

int e2b_template_build(void *state, const struct hangar_template_build_opts *opts, hangar_buf *out_template_id)
{
	struct e2b *e = state;

	if (!opts->name || !*opts->name || strlen(opts->name) > 128 || strpbrk(opts->name, " \t\r\n/\\\"") ||
	    !opts->image || !*opts->image || strpbrk(opts->image, " \t\r\n\""))
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a template build needs a name and an image");
	return e->fl->template_build(e, opts, out_template_id);
}

int e2b_template_list(void *state, int (*fn)(const struct hangar_template_info *info, void *payload), void *payload)
{
	struct e2b *e = state;
	cJSON *all = cJSON_CreateArray();
	char token[256] = "", esc[800], path[1024];
	int rc = 0;

	if (!all)
		return e2b_oom();
	/* Everything first, so that a failure reports nothing. */
	for (int page = 0; page < LIST_MAX_PAGES; page++) {
		struct e2b_resp r;

		if (!*token || e2b_escape(esc, sizeof(esc), token) < 0)
			esc[0] = '\0';
		e->fl->template_list_path(path, sizeof(path), esc);
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "template list", &r);
		if (rc == 0 && !cJSON_IsArray(r.json))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the template list is not an array");
		if (rc == 0 && *r.next_token && !strcmp(r.next_token, token))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the template list repeats its page token");
		while (rc == 0 && r.json->child) {
			cJSON *t = cJSON_DetachItemViaPointer(r.json, r.json->child);

			cJSON_AddItemToArray(all, t);
		}
		snprintf(token, sizeof(token), "%s", rc == 0 && e->fl->pages ? r.next_token : "");
		e2b_resp_free(&r);
		if (rc || !*token)
			break;
	}
	for (const cJSON *t = all->child; rc == 0 && t; t = t->next) {
		struct hangar_template_info info = { HANGAR_TEMPLATE_INFO_VERSION, sizeof(info), NULL, "", "", "e2b" };

		if (e2b_decode_template(t, &info) == 0)
			rc = fn(&info, payload);
	}
	cJSON_Delete(all);
	return rc;
}
