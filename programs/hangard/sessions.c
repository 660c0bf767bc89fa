/*
 * /v1/sessions: create, list, get, suspend, resume, archive and delete, each
 * one call of the public session API (hangar/session.h).
 */
#include <stdlib.h>
#include <string.h>

#include "hangard.h"

static const char *state_name(int32_t s)
{
	switch (s) {
	case HANGAR_SESSION_ACTIVE:
		return "active";
	case HANGAR_SESSION_SUSPENDED:
		return "suspended";
	case HANGAR_SESSION_PARKED:
		return "parked";
	case HANGAR_SESSION_ARCHIVED:
		return "archived";
	}
	return "unknown";
}

static const char *resume_name(int32_t r)
{
	switch (r) {
	case HANGAR_RESUME_HOT:
		return "hot";
	case HANGAR_RESUME_COLD:
		return "cold";
	case HANGAR_RESUME_FRESH:
		return "fresh";
	}
	return "none";
}

static cJSON *session_json(const hangar_session_info *i)
{
	cJSON *o = add_strings(cJSON_CreateObject(), "id", i->id, "state", state_name(i->state), "provider",
			       i->provider, "sandbox", i->sandbox_id, "checkpoint", i->checkpoint_id, "last_resume",
			       resume_name(i->last_resume), "last_resume_reason", i->last_resume_reason,
			       "suspend_reason", i->suspend_reason, "environment", i->environment, "workspace",
			       i->workspace, "parent", i->parent_id, "fork_group", i->fork_group, NULL);
	cJSON *labels = cJSON_Parse(i->labels_json ? i->labels_json : "{}");
	cJSON_AddItemToObject(o, "labels", labels ? labels : cJSON_CreateObject());
	cJSON_AddBoolToObject(o, "exclusive_credential", (i->flags & HANGAR_SESSION_EXCLUSIVE_CREDENTIAL) != 0);
	sjson_add_int64(o, "created_us", (int64_t)i->created_at_us);
	sjson_add_int64(o, "updated_us", (int64_t)i->updated_at_us);
	sjson_add_int64(o, "parked_since_us", (int64_t)i->parked_since_us);
	return o;
}

static void reply_session(struct request *r, hangar_session *s, unsigned status)
{
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	int rc = hangar_session_get_info(&info, s);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return;
	}
	reply_json(r, status, session_json(&info));
}

static hangar_session *session_open(struct request *r)
{
	hangar_session *s = NULL;
	int rc = hangar_session_open(&s, hangard->ctx, request_param(r));
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return NULL;
	}
	return s;
}

/* {"k":"v",...} -> a NULL-terminated "k=v" array the caller frees. */
static char **labels_array(struct request *r, cJSON *doc, int *failed)
{
	return env_array(r, doc, "labels", failed);
}

void h_session_create(struct request *r)
{
	static const char *const fields[] = { "environment", "provider", "tier", "template", "timeout", "env",
					      "network", "id", "workspace", "user", "labels",
					      "exclusive_credential", NULL };
	hangar_create_opts create = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts opts = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;
	const char *network = NULL;
	char **env = NULL, **labels = NULL;
	int failed, rc;
	cJSON *doc = request_json(r, fields), *excl;

	if (!doc)
		return;
	if (want_string(r, doc, "tier", &create.tier) < 0 || want_string(r, doc, "environment", &opts.environment) < 0 ||
	    want_string(r, doc, "template", &create.template_id) < 0 ||
	    want_string(r, doc, "provider", &create.provider) < 0 || want_string(r, doc, "network", &network) < 0 ||
	    want_string(r, doc, "id", &opts.id) < 0 || want_string(r, doc, "workspace", &opts.workspace) < 0 ||
	    want_string(r, doc, "user", &opts.user) < 0 ||
	    want_int(r, doc, "timeout", -1, 31536000, &create.timeout_sec) < 0)
		goto out;
	excl = cJSON_GetObjectItemCaseSensitive(doc, "exclusive_credential");
	if (excl && !cJSON_IsNull(excl)) {
		if (!cJSON_IsBool(excl)) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"exclusive_credential\" must be true or false");
			goto out;
		}
		if (cJSON_IsTrue(excl))
			opts.flags |= HANGAR_SESSION_EXCLUSIVE_CREDENTIAL;
	}
	if (network) {
		if (strcmp(network, "on") == 0)
			create.network = HANGAR_NETWORK_ON;
		else if (strcmp(network, "off") == 0)
			create.network = HANGAR_NETWORK_OFF;
		else if (strcmp(network, "default") != 0) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"network\" is \"on\", \"off\" or \"default\"");
			goto out;
		}
	}
	env = env_array(r, doc, "env", &failed);
	if (failed)
		goto out;
	labels = labels_array(r, doc, &failed);
	if (failed)
		goto out;
	create.env = (const char *const *)env;
	create.environment = opts.environment;
	opts.create = &create;
	opts.labels = (const char *const *)labels;
	rc = hangar_session_create(&s, hangard->ctx, &opts);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	reply_session(r, s, 201);
out:
	env_free(env);
	env_free(labels);
	hangar_session_unref(s);
	cJSON_Delete(doc);
}

static int add_session(const hangar_session_info *info, void *payload)
{
	cJSON_AddItemToArray(payload, session_json(info));
	return 0;
}

int fill_sessions(struct request *r, cJSON *arr)
{
	(void)r;
	return hangar_session_list(hangard->ctx, add_session, arr);
}

void h_session_get(struct request *r)
{
	hangar_session *s = session_open(r);
	if (!s)
		return;
	reply_session(r, s, 200);
	hangar_session_unref(s);
}

/* The blob is taken as the string's bytes, as sent (UTF-8 text such as a
 * conversation); callers with binary bytes encode them themselves. A client
 * that leaves before the answer cancels the suspend: the library stores
 * nothing, the session stays active and its lease is free again. */
void h_session_suspend(struct request *r)
{
	static const char *const fields[] = { "blob", "labels", "no_park", NULL };
	hangar_suspend_opts opts = HANGAR_SUSPEND_OPTS_INIT;
	hangar_session *s = NULL;
	const char *blob = NULL;
	char **labels = NULL;
	int failed, rc;
	cJSON *doc = request_json(r, fields), *np;

	if (!doc)
		return;
	if (want_string(r, doc, "blob", &blob) < 0)
		goto out;
	np = cJSON_GetObjectItemCaseSensitive(doc, "no_park");
	if (np && !cJSON_IsNull(np)) {
		if (!cJSON_IsBool(np)) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"no_park\" must be true or false");
			goto out;
		}
		if (cJSON_IsTrue(np))
			opts.flags |= HANGAR_SUSPEND_NO_PARK;
	}
	labels = labels_array(r, doc, &failed);
	if (failed)
		goto out;
	opts.blob = blob;
	opts.blob_len = blob ? strlen(blob) : 0;
	opts.labels = (const char *const *)labels;
	opts.cancel = request_abandoned;
	opts.cancel_payload = r;
	s = session_open(r);
	if (!s)
		goto out;
	rc = hangar_session_suspend(s, &opts);
	if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_session(r, s, 200);
out:
	env_free(labels);
	hangar_session_unref(s);
	cJSON_Delete(doc);
}

void h_session_resume(struct request *r)
{
	hangar_session *s = session_open(r);
	hangar_sandbox *sb = NULL;
	int rc;
	if (!s)
		return;
	rc = hangar_session_resume(s, &sb);
	if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_session(r, s, 200);
	hangar_sandbox_unref(sb);
	hangar_session_unref(s);
}

static void lifecycle(struct request *r, int (*op)(hangar_session *), unsigned status)
{
	hangar_session *s = session_open(r);
	int rc;
	if (!s)
		return;
	rc = op(s);
	if (rc < 0)
		reply_hangar_error(r, rc);
	else if (status == 204)
		reply_empty(r, 204);
	else
		reply_session(r, s, status);
	hangar_session_unref(s);
}

void h_session_archive(struct request *r)
{
	lifecycle(r, hangar_session_archive, 200);
}

void h_session_delete(struct request *r)
{
	lifecycle(r, hangar_session_delete, 204);
}

struct fork_out {
	cJSON *forks;
};

static const char *fork_method_name(int32_t m)
{
	switch (m) {
	case HANGAR_FORK_NATIVE:
		return "native";
	case HANGAR_FORK_SNAPSHOT:
		return "snapshot";
	case HANGAR_FORK_CHECKPOINT:
		return "checkpoint";
	}
	return "unknown";
}

/* One entry per fork: the new session, or why this one failed. The library
 * reports every fork, so a partial failure is a 200 whose entries say it. */
static void add_session_fork(const hangar_session_fork_result *f, void *payload)
{
	struct fork_out *out = payload;
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	cJSON *o = cJSON_CreateObject();
	int rc = f->error;
	const char *msg = f->message;

	sjson_add_int64(o, "index", f->index);
	cJSON_AddStringToObject(o, "method", fork_method_name(f->method));
	if (rc == 0) {
		rc = hangar_session_get_info(&info, f->session);
		if (rc == 0)
			cJSON_AddItemToObject(o, "session", session_json(&info));
		else
			msg = hangar_error_last()->message;
	}
	if (rc != 0) {
		cJSON *e = cJSON_AddObjectToObject(o, "error");
		cJSON_AddStringToObject(e, "kind", hangar_error_name(rc));
		sjson_add_int64(e, "code", rc);
		cJSON_AddStringToObject(e, "message", msg ? msg : "");
	}
	cJSON_AddItemToArray(out->forks, o);
}

void h_session_fork(struct request *r)
{
	static const char *const fields[] = { "count", NULL };
	cJSON *doc = request_json(r, fields), *body;
	hangar_session_fork_opts fo = HANGAR_SESSION_FORK_OPTS_INIT;
	struct fork_out out;
	hangar_session *s;
	int64_t count = 1;
	int rc;

	if (!doc)
		return;
	if (want_int(r, doc, "count", 1, 100, &count) < 0)
		goto done;
	s = session_open(r);
	if (!s)
		goto done;
	body = cJSON_CreateObject();
	out.forks = cJSON_AddArrayToObject(body, "forks");
	/* A client that leaves before the answer gives the fork up: nothing is kept. */
	fo.cancel = request_abandoned;
	fo.cancel_payload = r;
	rc = hangar_session_fork_ext(s, (uint32_t)count, &fo, add_session_fork, &out);
	if (rc < 0) {
		cJSON_Delete(body);
		reply_hangar_error(r, rc);
	} else {
		reply_json(r, 200, body);
	}
	hangar_session_unref(s);
done:
	cJSON_Delete(doc);
}

void h_session_keep(struct request *r)
{
	static const char *const fields[] = { NULL };
	cJSON *doc = request_json(r, fields);
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	hangar_session *s;
	uint32_t archived = 0;
	int rc;

	if (!doc)
		return;
	s = session_open(r);
	if (!s)
		goto done;
	rc = hangar_session_keep(s, &archived);
	if (rc == 0)
		rc = hangar_session_get_info(&info, s);
	if (rc < 0) {
		reply_hangar_error(r, rc);
	} else {
		cJSON *body = cJSON_CreateObject();
		sjson_add_int64(body, "archived", archived);
		cJSON_AddItemToObject(body, "session", session_json(&info));
		reply_json(r, 200, body);
	}
	hangar_session_unref(s);
done:
	cJSON_Delete(doc);
}
