/*
 * /v1/sandboxes: create, list, get, kill, pause, resume, timeout, fork and
 * snapshot, each one library call (plus the attach that names the sandbox).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "hangard.h"

cJSON *add_strings(cJSON *obj, ...)
{
	va_list ap;
	const char *key;
	va_start(ap, obj);
	while ((key = va_arg(ap, const char *)) != NULL) {
		const char *value = va_arg(ap, const char *);
		cJSON_AddStringToObject(obj, key, value ? value : "");
	}
	va_end(ap);
	return obj;
}

cJSON *sandbox_json(const hangar_sandbox_info *info)
{
	cJSON *o = add_strings(cJSON_CreateObject(), "id", info->id, "provider", info->provider, "template",
			       info->template_id, "state",
			       info->state == HANGAR_SANDBOX_PAUSED ? "paused" : "running", NULL);
	sjson_add_int64(o, "created_at_us", (int64_t)info->created_at_us);
	sjson_add_int64(o, "expires_at_us", (int64_t)info->expires_at_us);
	return o;
}

/* Attaches to the sandbox the path names, or answers the error. */
hangar_sandbox *sandbox_open(struct request *r)
{
	hangar_sandbox *sb = NULL;
	int rc = hangar_sandbox_attach(&sb, hangard->ctx, request_query(r, "provider"), request_param(r));
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return NULL;
	}
	return sb;
}

static void reply_info(struct request *r, hangar_sandbox *sb, unsigned status)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	int rc = hangar_sandbox_get_info(&info, sb);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return;
	}
	reply_json(r, status, sandbox_json(&info));
}

int want_string(struct request *r, cJSON *doc, const char *key, const char **out)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v)) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" must be a string", key);
		return -1;
	}
	*out = v->valuestring;
	return 0;
}

int want_int(struct request *r, cJSON *doc, const char *key, double min, double max, int64_t *out)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
	if (!v || cJSON_IsNull(v))
		return 0;
	/* The bounds first: 1e400 parses to infinity, and casting that (or
	 * anything past int64) to an integer is undefined. */
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= min && v->valuedouble <= max) ||
	    v->valuedouble != floor(v->valuedouble)) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" must be a whole number from %.0f to %.0f", key,
			    min, max);
		return -1;
	}
	*out = (int64_t)v->valuedouble;
	return 0;
}

int want_bool(struct request *r, cJSON *doc, const char *key, int dflt, int *out)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);
	*out = dflt;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v)) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" must be true or false", key);
		return -1;
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

/* {"K":"V",...} -> a NULL-terminated "K=V" array the caller frees. */
char **env_array(struct request *r, cJSON *doc, const char *key, int *failed)
{
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(doc, key), *it;
	char **v;
	size_t n = 0;

	*failed = 0;
	if (!obj || cJSON_IsNull(obj))
		return NULL;
	if (!cJSON_IsObject(obj)) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" must be an object of strings", key);
		*failed = 1;
		return NULL;
	}
	v = calloc((size_t)cJSON_GetArraySize(obj) + 1, sizeof(*v));
	if (!v)
		goto nomem;
	cJSON_ArrayForEach(it, obj) {
		if (!cJSON_IsString(it) || !it->string[0] || strchr(it->string, '=')) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL,
				    "\"%s\" must map names (without '=') to strings", key);
			goto fail;
		}
		size_t len = strlen(it->string) + strlen(it->valuestring) + 2;
		v[n] = malloc(len);
		if (!v[n])
			goto nomem;
		snprintf(v[n], len, "%s=%s", it->string, it->valuestring);
		n++;
	}
	return v;
nomem:
	reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
fail:
	*failed = 1;
	if (v)
		for (size_t i = 0; i < n; i++)
			free(v[i]);
	free(v);
	return NULL;
}

void env_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

void h_sandbox_create(struct request *r)
{
	static const char *const fields[] = { "tier", "environment", "template", "provider", "timeout",
					      "env", "network", NULL };
	hangar_create_opts opts = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	const char *network = NULL;
	char **env = NULL;
	int failed, rc;
	cJSON *doc = request_json(r, fields);

	if (!doc)
		return;
	if (want_string(r, doc, "tier", &opts.tier) < 0 || want_string(r, doc, "environment", &opts.environment) < 0 ||
	    want_string(r, doc, "template", &opts.template_id) < 0 ||
	    want_string(r, doc, "provider", &opts.provider) < 0 || want_string(r, doc, "network", &network) < 0 ||
	    want_int(r, doc, "timeout", -1, 31536000, &opts.timeout_sec) < 0)
		goto out;
	if (network) {
		if (strcmp(network, "on") == 0)
			opts.network = HANGAR_NETWORK_ON;
		else if (strcmp(network, "off") == 0)
			opts.network = HANGAR_NETWORK_OFF;
		else if (strcmp(network, "default") != 0) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"network\" is \"on\", \"off\" or \"default\"");
			goto out;
		}
	}
	env = env_array(r, doc, "env", &failed);
	if (failed)
		goto out;
	opts.env = (const char *const *)env;
	rc = hangar_sandbox_create(&sb, hangard->ctx, &opts);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	reply_info(r, sb, 201);
out:
	env_free(env);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

static int add_listed(const hangar_sandbox_info *info, void *payload)
{
	cJSON_AddItemToArray(payload, sandbox_json(info));
	return 0;
}

int fill_sandboxes(struct request *r, cJSON *arr)
{
	return hangar_sandbox_list(hangard->ctx, request_query(r, "provider"), add_listed, arr);
}

void h_sandbox_get(struct request *r)
{
	hangar_sandbox *sb = sandbox_open(r);
	if (!sb)
		return;
	reply_info(r, sb, 200);
	hangar_sandbox_unref(sb);
}

/* One call on the named sandbox: answers its state after, or 204 for a kill. */
static void lifecycle(struct request *r, int (*op)(hangar_sandbox *), unsigned status)
{
	hangar_sandbox *sb = sandbox_open(r);
	int rc;
	if (!sb)
		return;
	rc = op(sb);
	if (rc < 0)
		reply_hangar_error(r, rc);
	else if (status == 204)
		reply_empty(r, 204);
	else
		reply_info(r, sb, status);
	hangar_sandbox_unref(sb);
}

void h_sandbox_kill(struct request *r)
{
	lifecycle(r, hangar_sandbox_kill, 204);
}

void h_sandbox_pause(struct request *r)
{
	lifecycle(r, hangar_sandbox_pause, 200);
}

void h_sandbox_resume(struct request *r)
{
	lifecycle(r, hangar_sandbox_resume, 200);
}

void h_sandbox_timeout(struct request *r)
{
	static const char *const fields[] = { "seconds", NULL };
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb;
	int64_t secs = -1;
	int rc;

	if (!doc)
		return;
	if (want_int(r, doc, "seconds", 0, 31536000, &secs) < 0)
		goto out;
	if (secs < 0) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"seconds\" is required");
		goto out;
	}
	sb = sandbox_open(r);
	if (!sb)
		goto out;
	rc = hangar_sandbox_set_timeout(sb, secs);
	if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_info(r, sb, 200);
	hangar_sandbox_unref(sb);
out:
	cJSON_Delete(doc);
}

static void add_fork(const hangar_fork_result *f, void *payload)
{
	cJSON *o = cJSON_CreateObject();
	sjson_add_int64(o, "index", f->index);
	if (f->error == 0) {
		cJSON_AddStringToObject(o, "id", hangar_sandbox_id(f->sandbox));
		cJSON_AddStringToObject(o, "provider", hangar_provider_name(hangar_sandbox_provider(f->sandbox)));
	} else {
		cJSON *e = cJSON_AddObjectToObject(o, "error");
		cJSON_AddStringToObject(e, "kind", hangar_error_name(f->error));
		sjson_add_int64(e, "code", f->error);
		cJSON_AddStringToObject(e, "message", f->message);
	}
	cJSON_AddItemToArray(payload, o);
}

void h_sandbox_fork(struct request *r)
{
	static const char *const fields[] = { "count", NULL };
	cJSON *doc = request_json(r, fields), *out;
	hangar_sandbox *sb;
	int64_t count = 1;
	int rc;

	if (!doc)
		return;
	if (want_int(r, doc, "count", 1, 100, &count) < 0)
		goto done;
	sb = sandbox_open(r);
	if (!sb)
		goto done;
	out = cJSON_CreateObject();
	rc = hangar_sandbox_fork(sb, (uint32_t)count, add_fork, cJSON_AddArrayToObject(out, "forks"));
	if (rc < 0) {
		cJSON_Delete(out);
		reply_hangar_error(r, rc);
	} else {
		reply_json(r, 200, out);
	}
	hangar_sandbox_unref(sb);
done:
	cJSON_Delete(doc);
}

void h_sandbox_snapshot(struct request *r)
{
	static const char *const fields[] = { "name", NULL };
	cJSON *doc = request_json(r, fields);
	hangar_buf id = HANGAR_BUF_INIT;
	hangar_sandbox *sb;
	const char *name;
	int rc;

	if (!doc)
		return;
	if (want_string(r, doc, "name", &name) < 0)
		goto done;
	sb = sandbox_open(r);
	if (!sb)
		goto done;
	rc = hangar_sandbox_snapshot(&id, sb, name);
	if (rc < 0) {
		reply_hangar_error(r, rc);
	} else {
		cJSON *out = cJSON_CreateObject();
		cJSON_AddStringToObject(out, "snapshot_id", id.ptr);
		reply_json(r, 201, out);
	}
	hangar_buf_dispose(&id);
	hangar_sandbox_unref(sb);
done:
	cJSON_Delete(doc);
}
