/* Template routes of E2B (v2/v3 builds) and CubeAPI. */
#define _GNU_SOURCE
#include "fake-e2b.h"

/* ------------------------------------------------------- E2B template routes */

void handle_v3_template(struct req *q, struct reply *r)
{
	cJSON *b = body_object(q, r, 0), *name, *tags, *o, *names, *tarr;
	char alias[160] = "", tag[64] = "default", tid[64];
	struct template *t;

	if (!b)
		return;
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (!cJSON_IsString(name))
		name = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (cJSON_IsString(name)) {
		const char *c = strchr(name->valuestring, ':');

		if (strlen(name->valuestring) > 128) {
			reply_error(r, 400, "name is longer than 128 characters");
			goto out;
		}
		snprintf(alias, sizeof(alias), "%.*s", c ? (int)(c - name->valuestring) : 128, name->valuestring);
		if (c)
			snprintf(tag, sizeof(tag), "%s", c + 1);
	}
	tags = cJSON_GetObjectItemCaseSensitive(b, "tags");
	pthread_mutex_lock(&g.lock);
	t = alias[0] ? resolve_template_locked(alias) : NULL;
	if (t && (t->is_snapshot || !t->alias || strcmp(t->alias, alias) != 0))
		t = NULL;
	if (!t) {
		new_template_id(tid, sizeof(tid));
		t = add_template(tid, alias[0] ? alias : NULL);
		if (alias[0])
			cJSON_AddItemToArray(t->names, cJSON_CreateString(alias));
	}
	{
		int64_t v;
		int present;

		if (int_field(b, "cpuCount", &v, &present, r) == 0 && present)
			t->cpu = (int)v;
		if (int_field(b, "memoryMB", &v, &present, r) == 0 && present)
			t->mem_mb = (int)v;
	}
	random_uuid(t->build_id);
	t->status = T_WAITING;
	free(t->tag);
	t->tag = strdup(tag);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "buildID", t->build_id);
	cJSON_AddBoolToObject(o, "public", t->is_public);
	names = cJSON_AddArrayToObject(o, "names");
	if (alias[0])
		cJSON_AddItemToArray(names, cJSON_CreateString(alias));
	tarr = cJSON_IsArray(tags) ? cJSON_Duplicate(tags, 1) : cJSON_CreateArray();
	if (cJSON_GetArraySize(tarr) == 0)
		cJSON_AddItemToArray(tarr, cJSON_CreateString(tag));
	cJSON_AddItemToObject(o, "tags", tarr);
	cJSON_AddItemToObject(o, "aliases", cJSON_Duplicate(names, 1));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 202, o);
out:
	cJSON_Delete(b);
}

void handle_build_start(struct req *q, struct reply *r, const char *tid, const char *bid)
{
	cJSON *b = body_object(q, r, 1);
	struct template *t;

	if (!b)
		return;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
	} else {
		start_build_locked(t, 0);
		reply_empty(r, 202);
	}
	pthread_mutex_unlock(&g.lock);
	cJSON_Delete(b);
}

static const char *e2b_build_status(enum tpl_status s)
{
	switch (s) {
	case T_WAITING: return "waiting";
	case T_BUILDING: return "building";
	case T_READY: return "ready";
	default: return "error";
	}
}

void handle_build_status(struct req *q, struct reply *r, const char *tid, const char *bid)
{
	struct template *t;
	cJSON *o, *entries, *e;
	const char *off_s = arg(q, "logsOffset");
	long off = off_s ? atol(off_s) : 0, i = 0;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
		return;
	}
	advance_build_locked(t);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "buildID", t->build_id);
	cJSON_AddStringToObject(o, "status", e2b_build_status(t->status));
	entries = cJSON_CreateArray();
	{
		cJSON *logs = cJSON_AddArrayToObject(o, "logs");

		cJSON_ArrayForEach(e, t->build_logs) {
			if (i++ < off)
				continue;
			cJSON_AddItemToArray(entries, cJSON_Duplicate(e, 1));
			cJSON_AddItemToArray(logs, cJSON_CreateString(
				cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring));
		}
	}
	cJSON_AddItemToObject(o, "logEntries", entries);
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

void handle_build_logs(struct reply *r, const char *tid, const char *bid)
{
	struct template *t;
	cJSON *o;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "logs", cJSON_Duplicate(t->build_logs, 1));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

void handle_e2b_templates_list(struct req *q, struct reply *r)
{
	long limit, offset, i = 0;
	int more = 0;
	cJSON *out;

	if (page_args(q, r, &limit, &offset) < 0)
		return;
	out = cJSON_CreateArray();
	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next) {
		cJSON *o;

		if (t->is_snapshot || t->deleted)
			continue;
		if (i++ < offset)
			continue;
		if (i > offset + limit) {
			more = 1;
			break;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "templateID", t->id);
		cJSON_AddStringToObject(o, "buildID", t->build_id);
		cJSON_AddNumberToObject(o, "cpuCount", t->cpu);
		cJSON_AddNumberToObject(o, "memoryMB", t->mem_mb);
		cJSON_AddNumberToObject(o, "diskSizeMB", 1024);
		cJSON_AddBoolToObject(o, "public", t->is_public);
		cJSON_AddItemToObject(o, "aliases", cJSON_Duplicate(t->names, 1));
		cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
		add_time(o, "createdAt", t->created_ms);
		add_time(o, "updatedAt", t->created_ms);
		cJSON_AddNullToObject(o, "createdBy");
		cJSON_AddNullToObject(o, "lastSpawnedAt");
		cJSON_AddNumberToObject(o, "spawnCount", 0);
		cJSON_AddNumberToObject(o, "buildCount", 1);
		cJSON_AddStringToObject(o, "envdVersion", ENVD_VERSION);
		cJSON_AddStringToObject(o, "buildStatus", e2b_build_status(t->status));
		cJSON_AddItemToArray(out, o);
	}
	pthread_mutex_unlock(&g.lock);
	if (more)
		next_token_header(r, offset + limit, "X-Next-Token");
	reply_json(r, 200, out);
}

void handle_alias(struct reply *r, const char *alias)
{
	struct template *t = NULL;

	if (is_cube() && !valid_cube_alias(alias)) {
		reply_error(r, 400, "invalid alias %s", alias);
		return;
	}
	pthread_mutex_lock(&g.lock);
	for (struct template *x = g.templates; x; x = x->next)
		if (!x->deleted && !x->is_snapshot && x->alias && strcmp(x->alias, alias) == 0)
			t = x;
	if (!t) {
		reply_error(r, 404, "template with alias '%s' not found", alias);
	} else {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "templateID", t->id);
		cJSON_AddBoolToObject(o, "public", is_cube() ? 1 : t->is_public);
		reply_json(r, 200, o);
	}
	pthread_mutex_unlock(&g.lock);
}

void handle_template_delete(struct req *q, struct reply *r, const char *tid)
{
	struct template *t;

	(void)q;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t) {
		reply_error(r, 404, "template %s not found", tid);
	} else {
		t->deleted = 1;
		reply_empty(r, 204);
		if (is_cube() && t->is_snapshot) {
			char op[40];

			random_uuid(op);
			reply_header(r, "x-operation-id", op);
		}
	}
	pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------ Cube template routes */

static const char *const cube_phases[] = { "PULLING", "UNPACKING", "BUILDING_EXT4", "GENERATING_JSON",
					   "DISTRIBUTING", "CREATING_TEMPLATE", "SNAPSHOTTING",
					   "REGISTERING", "READY" };

static const char *cube_tpl_status(const struct template *t)
{
	switch (t->status) {
	case T_READY: return "READY";
	case T_ERROR: return "FAILED";
	case T_WAITING: return "PENDING";
	default: return "CREATING";
	}
}

static cJSON *cube_job_json_locked(const struct template *t)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "jobID", t->build_id);
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "status", t->status == T_READY ? "READY" : "PENDING");
	cJSON_AddStringToObject(o, "phase", t->status == T_READY ? "READY" : "PULLING");
	cJSON_AddNumberToObject(o, "progress", t->status == T_READY ? 100 : 0);
	return o;
}

static cJSON *cube_template_json_locked(const struct template *t, int detail)
{
	cJSON *o = cJSON_CreateObject(), *aliases = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddBoolToObject(o, "public", 1);
	cJSON_AddStringToObject(o, "status", cube_tpl_status(t));
	if (t->alias)
		cJSON_AddItemToArray(aliases, cJSON_CreateString(t->alias));
	cJSON_AddItemToObject(o, "aliases", aliases);
	add_time(o, "createdAt", t->created_ms);
	if (t->build_id[0])
		cJSON_AddStringToObject(o, "jobID", t->build_id);
	if (detail) {
		cJSON_AddItemToObject(o, "replicas", cJSON_CreateArray());
		cJSON_AddItemToObject(o, "createRequest",
				      t->create_request ? cJSON_Duplicate(t->create_request, 1) : cJSON_CreateNull());
	}
	return o;
}

void handle_cube_template_create(struct req *q, struct reply *r)
{
	cJSON *b = body_object(q, r, 0), *image, *name, *ports, *e;
	char alias[80] = "", tid[64];
	struct template *t;
	int custom = 0;
	int64_t v;
	int present;

	if (!b)
		return;
	image = cJSON_GetObjectItemCaseSensitive(b, "image");
	if (!image || cJSON_IsNull(image)) {
		reply_missing_field(r, "image");
		goto out;
	}
	if (!cJSON_IsString(image)) {
		reply_bad_field(r, "image", "a string");
		goto out;
	}
	if (!*image->valuestring) {
		reply_error(r, 400, "image must not be empty");
		goto out;
	}
	ports = cJSON_GetObjectItemCaseSensitive(b, "exposedPorts");
	if (ports && !cJSON_IsNull(ports)) {
		if (!cJSON_IsArray(ports)) {
			reply_bad_field(r, "exposedPorts", "a sequence");
			goto out;
		}
		cJSON_ArrayForEach(e, ports) {
			if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 65535) {
				reply_bad_field(r, "exposedPorts", "a sequence of u16");
				goto out;
			}
			if ((int)e->valuedouble != ENVD_PORT)
				custom++;
		}
		if (custom > 3) {
			reply_error(r, 400, "at most 3 exposed ports besides %d are allowed", ENVD_PORT);
			goto out;
		}
	}
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (!cJSON_IsString(name) || !*name->valuestring)
		name = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (cJSON_IsString(name)) {
		const char *c = strchr(name->valuestring, ':');

		snprintf(alias, sizeof(alias), "%.*s", c ? (int)(c - name->valuestring) : 79, name->valuestring);
		if (!valid_cube_alias(alias))
			alias[0] = '\0'; /* dropped silently [Cube] */
	}
	pthread_mutex_lock(&g.lock);
	new_template_id(tid, sizeof(tid));
	t = add_template(tid, alias[0] ? alias : NULL);
	if (alias[0]) {
		/* A stable alias moves to the newest template. */
		for (struct template *x = t->next; x; x = x->next)
			if (x->alias && strcmp(x->alias, alias) == 0) {
				free(x->alias);
				x->alias = NULL;
			}
	}
	if (int_field(b, "cpu", &v, &present, r) == 0 && present)
		t->cpu = (int)(v / 1000 > 0 ? v / 1000 : 1);
	if (int_field(b, "memory", &v, &present, r) == 0 && present)
		t->mem_mb = (int)v;
	t->create_request = cJSON_Duplicate(b, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(t->create_request, "registryPassword");
	start_build_locked(t, 1);
	reply_json(r, 202, cube_job_json_locked(t));
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

void handle_cube_rebuild(struct req *q, struct reply *r, const char *tid, int need_body)
{
	struct template *t;

	if (need_body) {
		cJSON *b = body_object(q, r, 0);

		if (!b)
			return;
		cJSON_Delete(b);
	}
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || t->is_snapshot) {
		reply_error(r, 404, "template %s not found", tid);
	} else {
		start_build_locked(t, 1);
		reply_json(r, 202, cube_job_json_locked(t));
	}
	pthread_mutex_unlock(&g.lock);
}

void handle_cube_build_status(struct reply *r, const char *tid, const char *job, int logs)
{
	struct template *t;
	cJSON *o;
	int progress;
	const char *status, *msg;

	if (!valid_path_id(tid) || !valid_path_id(job)) {
		reply_error(r, 400, "invalid path parameter");
		return;
	}
	pthread_mutex_lock(&g.lock);
	t = find_template_by_build_locked(job);
	if (!t) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 500, "CubeMaster returned error code 130500: job %s not found", job);
		return;
	}
	if (!logs)
		advance_build_locked(t);
	progress = g.build_steps ? 100 * (g.build_steps - t->steps_left) / g.build_steps : 100;
	if (t->status == T_READY)
		progress = 100;
	status = t->status == T_READY ? "ready" : t->status == T_ERROR ? "error" : "building";
	msg = t->status == T_READY ? "READY" : cube_phases[(progress * 7) / 100];
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "buildID", job);
	if (!logs)
		cJSON_AddStringToObject(o, "templateID", tid); /* echoed, not checked [Cube] */
	cJSON_AddStringToObject(o, "status", status);
	cJSON_AddNumberToObject(o, "progress", progress);
	if (logs) {
		char line[128];
		cJSON *lines = cJSON_AddArrayToObject(o, "lines");

		snprintf(line, sizeof(line), "[%s] %s", status, msg);
		cJSON_AddItemToArray(lines, cJSON_CreateString(line));
	} else {
		cJSON_AddStringToObject(o, "message", msg);
	}
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

void handle_cube_template_get(struct reply *r, const char *tid)
{
	struct template *t;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || t->is_snapshot)
		reply_error(r, 404, "template %s not found", tid);
	else
		reply_json(r, 200, cube_template_json_locked(t, 1));
	pthread_mutex_unlock(&g.lock);
}

void handle_cube_templates_list(struct reply *r)
{
	cJSON *out = cJSON_CreateArray();

	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next)
		if (!t->deleted && !t->is_snapshot)
			cJSON_AddItemToArray(out, cube_template_json_locked(t, 0));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, out);
}

void handle_cube_set_alias(struct req *q, struct reply *r, const char *tid)
{
	cJSON *b = body_object(q, r, 0), *a;
	struct template *t;

	if (!b)
		return;
	a = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (a && !cJSON_IsNull(a) && !cJSON_IsString(a)) {
		reply_bad_field(r, "alias", "a string or null");
		goto out;
	}
	if (cJSON_IsString(a) && *a->valuestring && !valid_cube_alias(a->valuestring)) {
		reply_error(r, 400, "invalid alias %s", a->valuestring);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t) {
		reply_error(r, 404, "template %s not found", tid);
	} else if (t->is_snapshot) {
		reply_error(r, 400, "cannot alias a snapshot");
	} else if (t->status != T_READY) {
		reply_error(r, 409, "template %s is not READY", tid);
	} else {
		free(t->alias);
		t->alias = cJSON_IsString(a) && *a->valuestring ? strdup(a->valuestring) : NULL;
		reply_json(r, 200, cube_template_json_locked(t, 1));
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}
