/* Lifecycle routes: connect, resume, pause, kill, timeouts, snapshots, forks, network, logs and metrics. */
#define _GNU_SOURCE
#include "fake-e2b.h"

static void not_found_sandbox(struct reply *r, const char *id)
{
	reply_error(r, 404, "sandbox \"%s\" doesn't exist or you don't have access to it", id);
}

void handle_get(struct req *q, struct reply *r, const char *id)
{
	struct sandbox *sb;

	(void)q;
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD)
		not_found_sandbox(r, id);
	else
		reply_json(r, 200, sandbox_json_locked(sb, V_DETAIL));
	pthread_mutex_unlock(&g.lock);
}

void handle_kill(struct reply *r, const char *id)
{
	struct sandbox *sb = find_live(id);

	if (!sb) {
		not_found_sandbox(r, id);
		return;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		sb_kill(sb);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&sb->op);
}

/* connect (resume_only=0) or the deprecated resume (resume_only=1). */
void handle_connect(struct req *q, struct reply *r, const char *id, int resume_only)
{
	cJSON *b = body_object(q, r, !is_cube() && resume_only);
	struct sandbox *sb;
	int64_t timeout = resume_only && !is_cube() ? 15 : -1;
	int present, resumed = 0, memory = 1;

	if (!b)
		return;
	if (int_field(b, "timeout", &timeout, &present, r) < 0)
		goto out;
	if (!is_cube() && !resume_only && !present) {
		reply_missing_field(r, "timeout");
		goto out;
	}
	if (present && timeout < 0) {
		reply_error(r, 400, "timeout must be >= 0");
		goto out;
	}
	if (!is_cube() && bool_field(b, "memory", &memory, r) == -2)
		goto out;
	sb = find_live(id);
	if (!sb) {
		not_found_sandbox(r, id);
		goto out;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
		goto unlock;
	}
	if (sb->state == SB_RUNNING) {
		if (resume_only) {
			reply_error(r, 409, "sandbox %s is already running", id);
			goto unlock;
		}
		if (!is_cube()) {
			/* A running sandbox's TTL is only ever extended [E2B]. */
			int64_t e = expiry_after(timeout);

			pthread_mutex_lock(&g.lock);
			if (e > sb->expires)
				set_expiry_locked(sb, e);
			pthread_mutex_unlock(&g.lock);
		}
	} else {
		if (!memory && sb->pause_full) {
			/* memory=false means a cold boot; envd is restarted fresh. */
			kill_tree(sb);
			pthread_mutex_lock(&g.lock);
			sb->envd_pid = 0;
			pthread_mutex_unlock(&g.lock);
		}
		if (sb_resume(sb) < 0) {
			reply_error(r, 500, "failed to resume sandbox %s", id);
			goto unlock;
		}
		resumed = 1;
		pthread_mutex_lock(&g.lock);
		set_expiry_locked(sb, expiry_after(present ? timeout : (is_cube() ? sb->timeout_s : timeout)));
		pthread_mutex_unlock(&g.lock);
	}
	pthread_mutex_lock(&g.lock);
	/* Cube's connect is always 200 [Cube]; resume is 201 everywhere. */
	reply_json(r, resume_only ? 201 : (resumed && !is_cube() ? 201 : 200),
		   sandbox_json_locked(sb, V_CONNECT));
	pthread_mutex_unlock(&g.lock);
unlock:
	pthread_mutex_unlock(&sb->op);
out:
	cJSON_Delete(b);
}

void handle_pause(struct req *q, struct reply *r, const char *id)
{
	struct sandbox *sb;
	int memory = 1;

	if (q->len > 0) {
		cJSON *b = cJSON_ParseWithLength(q->body, q->len);

		if (!is_cube() && (!b || !cJSON_IsObject(b))) {
			cJSON_Delete(b);
			reply_error(r, 400, "Error when parsing request: request body has an error");
			return;
		}
		if (cJSON_IsObject(b) && bool_field(b, "memory", &memory, r) == -2) {
			cJSON_Delete(b);
			return;
		}
		cJSON_Delete(b);
	}
	if (is_cube() && !memory) {
		/* Cube always keeps memory; PR #1800 refuses memory=false [Cube]. */
		reply_error(r, 400, "memory=false is not supported: CubeSandbox pause always keeps memory");
		return;
	}
	sb = find_live(id);
	if (!sb) {
		not_found_sandbox(r, id);
		return;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else if (sb->state == SB_PAUSED) {
		if (is_cube())
			reply_error(r, 409, "sandbox %s cannot be paused: it is already paused", id);
		else
			reply_error(r, 409, "Sandbox %s is already paused", id);
	} else {
		sb_pause(sb, memory);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&sb->op);
}

void handle_timeout(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0);
	int64_t t = 0;
	int present;
	struct sandbox *sb;

	if (!b)
		return;
	if (int_field(b, "timeout", &t, &present, r) < 0)
		goto out;
	if (!present) {
		reply_missing_field(r, "timeout");
		goto out;
	}
	if (t < 0 && !(is_cube() && t == -1)) {
		reply_error(r, 400, "timeout must be %s", is_cube() ? ">= 0 or -1" : ">= 0");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		set_expiry_locked(sb, expiry_after(t));
		if (is_cube())
			sb->timeout_s = t;
		sb_log(sb, "timeout set to %" PRId64 " s", t);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

void handle_refresh(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 1);
	int64_t d = 0;
	int present;
	struct sandbox *sb;

	if (!b)
		return;
	if (int_field(b, "duration", &d, &present, r) < 0)
		goto out;
	if (present && !is_cube() && (d < 0 || d > 3600)) {
		reply_error(r, 400, "duration must be between 0 and 3600");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		int64_t e = expiry_after(present ? d : sb->timeout_s);

		if (e > sb->expires || is_cube())
			set_expiry_locked(sb, e);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

void handle_network(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0);
	struct sandbox *sb;

	if (!b)
		return;
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else if (sb->state != SB_RUNNING) {
		reply_error(r, 409, "sandbox %s is not running", id);
	} else {
		cJSON_Delete(sb->network);
		sb->network = b;
		b = NULL;
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
	cJSON_Delete(b);
}

/* POST /sandboxes/{id}/snapshots. The source keeps running [E2B]. */
void handle_snapshot(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0), *name, *o;
	struct sandbox *sb;
	struct template *t;
	char tid[64];

	if (!b)
		return;
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (name && !cJSON_IsNull(name) && !cJSON_IsString(name)) {
		reply_bad_field(r, "name", "a string");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
		pthread_mutex_unlock(&g.lock);
		goto out;
	}
	if (is_cube()) {
		char h[25];

		random_hex(h, 24);
		snprintf(tid, sizeof(tid), "snap-%s", h);
	} else {
		new_template_id(tid, sizeof(tid));
	}
	t = add_template(tid, cJSON_IsString(name) ? name->valuestring : NULL);
	t->is_snapshot = 1;
	t->status = T_READY;
	t->cpu = sb->cpu;
	t->mem_mb = sb->mem_mb;
	snprintf(t->origin, sizeof(t->origin), "%s", sb->id);
	snprintf(t->source_tpl, sizeof(t->source_tpl), "%s", sb->template_id);
	if (is_cube()) {
		snprintf(t->snap_id, sizeof(t->snap_id), "%s", tid);
		if (t->alias)
			cJSON_AddItemToArray(t->names, cJSON_CreateString(t->alias));
	} else {
		char full[200];

		snprintf(t->snap_id, sizeof(t->snap_id), "%s:default", t->alias ? t->alias : tid);
		snprintf(full, sizeof(full), "%s%s:default", t->alias ? "fake-team/" : "",
			 t->alias ? t->alias : tid);
		cJSON_AddItemToArray(t->names, cJSON_CreateString(full));
	}
	sb_log(sb, "snapshot %s taken", t->snap_id);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "snapshotID", t->snap_id);
	cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
	reply_json(r, 201, o);
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

/* Cube: POST /sandboxes/{id}/rollback restarts the sandbox in place [Cube]. */
void handle_rollback(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0), *snap, *o;
	struct sandbox *sb;
	struct template *t;
	int ok;
	char op[40];

	if (!b)
		return;
	snap = cJSON_GetObjectItemCaseSensitive(b, "snapshotID");
	if (!cJSON_IsString(snap)) {
		reply_missing_field(r, "snapshotID");
		goto out;
	}
	sb = find_live(id);
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(snap->valuestring);
	ok = sb && t && t->is_snapshot && strcmp(t->origin, id) == 0;
	pthread_mutex_unlock(&g.lock);
	if (!ok) {
		reply_error(r, 404, "sandbox %s or snapshot %s not found", id, snap->valuestring);
		goto out;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		pthread_mutex_unlock(&sb->op);
		not_found_sandbox(r, id);
		goto out;
	}
	if (sb->envd_pid > 0)
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = 0;
	pthread_mutex_unlock(&g.lock);
	if (start_envd(sb) < 0) {
		pthread_mutex_unlock(&sb->op);
		reply_error(r, 500, "rollback failed");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb->state = SB_RUNNING;
	sb_log(sb, "rolled back to %s", snap->valuestring);
	pthread_mutex_unlock(&g.lock);
	pthread_mutex_unlock(&sb->op);
	random_uuid(op);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sandboxID", id);
	cJSON_AddStringToObject(o, "snapshotID", snap->valuestring);
	cJSON_AddStringToObject(o, "operationID", op);
	cJSON_AddStringToObject(o, "status", "READY");
	reply_json(r, 200, o);
out:
	cJSON_Delete(b);
}

/* E2B cloud: POST /sandboxes/{id}/fork. Each fork gets a fresh envd. */
void handle_fork(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 1), *arr;
	int64_t timeout = 15, count = 1;
	int present;
	struct sandbox *src;
	struct create_opts base = { 0 };

	if (!b)
		return;
	if (int_field(b, "timeout", &timeout, &present, r) < 0 || int_field(b, "count", &count, &present, r) < 0)
		goto out;
	if (count < 1 || count > 100 || timeout < 0) {
		reply_error(r, 400, "count must be between 1 and 100 and timeout >= 0");
		goto out;
	}
	src = find_live(id);
	if (!src) {
		not_found_sandbox(r, id);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	if (src->state != SB_RUNNING) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 409, "sandbox %s is not running", id);
		goto out;
	}
	base.tpl = resolve_template_locked(src->template_id);
	snprintf(base.template_id, sizeof(base.template_id), "%s", src->template_id);
	base.secure = src->secure;
	base.public_traffic = src->public_traffic;
	base.allow_internet = src->allow_internet;
	base.auto_pause = src->auto_pause;
	base.auto_pause_memory = src->auto_pause_memory;
	base.auto_resume = src->auto_resume;
	base.timeout_s = timeout;
	pthread_mutex_unlock(&g.lock);
	arr = cJSON_CreateArray();
	for (int64_t i = 0; i < count; i++) {
		struct create_opts o = base;
		struct sandbox *sb;
		cJSON *e = cJSON_CreateObject();

		if (i < q->fork_errors) {
			cJSON *err = cJSON_AddObjectToObject(e, "error");

			cJSON_AddNumberToObject(err, "code", 500);
			cJSON_AddStringToObject(err, "message", "injected fault: this fork failed");
			cJSON_AddItemToArray(arr, e);
			continue;
		}
		pthread_mutex_lock(&g.lock);
		o.alias = src->alias ? strdup(src->alias) : NULL;
		o.metadata = src->metadata ? cJSON_Duplicate(src->metadata, 1) : NULL;
		o.env_vars = src->env_vars ? cJSON_Duplicate(src->env_vars, 1) : NULL;
		o.network = src->network ? cJSON_Duplicate(src->network, 1) : NULL;
		pthread_mutex_unlock(&g.lock);
		sb = create_sandbox(&o);
		create_opts_free(&o);
		if (sb) {
			pthread_mutex_lock(&g.lock);
			sb_log(sb, "forked from %s", id);
			cJSON_AddItemToObject(e, "sandbox", sandbox_json_locked(sb, V_CREATE));
			pthread_mutex_unlock(&g.lock);
		} else {
			cJSON *err = cJSON_CreateObject();

			cJSON_AddNumberToObject(err, "code", 500);
			cJSON_AddStringToObject(err, "message", "failed to start the fork");
			cJSON_AddItemToObject(e, "error", err);
		}
		cJSON_AddItemToArray(arr, e);
	}
	reply_json(r, 201, arr);
out:
	cJSON_Delete(b);
}

static cJSON *metric_json(const struct sandbox *sb)
{
	cJSON *m = cJSON_CreateObject();
	int64_t now = wall_ms();
	long rss = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)sb->envd_pid);
	if (sb->envd_pid > 0 && (f = fopen(path, "re"))) {
		if (fscanf(f, "%*s %ld", &rss) != 1)
			rss = 0;
		fclose(f);
	}
	add_time(m, "timestamp", now);
	cJSON_AddNumberToObject(m, "timestampUnix", (double)(now / 1000));
	cJSON_AddNumberToObject(m, "cpuCount", sb->cpu);
	cJSON_AddNumberToObject(m, "cpuUsedPct", 0);
	cJSON_AddNumberToObject(m, "memUsed", (double)rss * 4096);
	cJSON_AddNumberToObject(m, "memTotal", (double)sb->mem_mb * 1048576);
	cJSON_AddNumberToObject(m, "memCache", 0);
	cJSON_AddNumberToObject(m, "diskUsed", 0);
	cJSON_AddNumberToObject(m, "diskTotal", (double)sb->disk_mb * 1048576);
	return m;
}

void handle_metrics(struct reply *r, const char *id)
{
	struct sandbox *sb;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		cJSON *a = cJSON_CreateArray();

		cJSON_AddItemToArray(a, metric_json(sb));
		reply_json(r, 200, a);
	}
	pthread_mutex_unlock(&g.lock);
}

void handle_metrics_many(struct req *q, struct reply *r)
{
	const char *ids = arg(q, "sandbox_ids");
	char *copy, *save = NULL;
	cJSON *o, *m;

	if (!ids || !*ids) {
		reply_error(r, 400, "sandbox_ids is required");
		return;
	}
	copy = strdup(ids);
	o = cJSON_CreateObject();
	m = cJSON_AddObjectToObject(o, "sandboxes");
	pthread_mutex_lock(&g.lock);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct sandbox *sb = find_sandbox_locked(t);

		if (sb && sb->state == SB_RUNNING && !cJSON_GetObjectItemCaseSensitive(m, t))
			cJSON_AddItemToObject(m, t, metric_json(sb));
	}
	pthread_mutex_unlock(&g.lock);
	free(copy);
	reply_json(r, 200, o);
}

void handle_logs(struct reply *r, const char *id, int v2)
{
	struct sandbox *sb;
	cJSON *o, *lines, *entries, *e;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb) {
		pthread_mutex_unlock(&g.lock);
		not_found_sandbox(r, id);
		return;
	}
	o = cJSON_CreateObject();
	lines = v2 ? NULL : cJSON_AddArrayToObject(o, "logs");
	entries = cJSON_AddArrayToObject(o, v2 ? "logs" : "logEntries");
	cJSON_ArrayForEach(e, sb->logs) {
		int64_t ms = (int64_t)cJSON_GetObjectItemCaseSensitive(e, "ms")->valuedouble;
		const char *msg = cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring;
		cJSON *x = cJSON_CreateObject();

		add_time(x, "timestamp", ms);
		cJSON_AddStringToObject(x, "message", msg);
		cJSON_AddStringToObject(x, "level", "info");
		cJSON_AddItemToObject(x, "fields", cJSON_CreateObject());
		cJSON_AddItemToArray(entries, x);
		if (lines) {
			cJSON *l = cJSON_CreateObject();

			add_time(l, "timestamp", ms);
			cJSON_AddStringToObject(l, "line", msg);
			cJSON_AddItemToArray(lines, l);
		}
	}
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}
