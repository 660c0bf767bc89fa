/* Creating sandboxes: request validation and start-up, for every flavour. */
#define _GNU_SOURCE
#include "fake-e2b.h"

static const char *const cube_env_deny[] = { "PATH", "PYTHONPATH", "NODE_PATH", "CLASSPATH", "IFS",
					     "BASH_ENV", "ENV", "PERL5LIB", "RUBYLIB", NULL };

static int cube_env_ok(cJSON *env, struct reply *r)
{
	cJSON *e;

	if (!env)
		return 1;
	cJSON_ArrayForEach(e, env) {
		const char *k = e->string;

		if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
			goto bad;
		for (const char *p = k; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '_'))
				goto bad;
		if (strncasecmp(k, "LD_", 3) == 0)
			goto deny;
		for (int i = 0; cube_env_deny[i]; i++)
			if (strcasecmp(k, cube_env_deny[i]) == 0)
				goto deny;
		if (strlen(e->valuestring) > 4096)
			goto bad;
		for (const char *p = e->valuestring; *p; p++)
			if ((unsigned char)*p < 0x20 && *p != '\t')
				goto bad;
	}
	return 1;
deny:
	reply_error(r, 400, "environment variable %s is not allowed", e->string);
	return 0;
bad:
	reply_error(r, 400, "invalid environment variable %s", e->string);
	return 0;
}

/* Creates and starts a sandbox; returns it RUNNING or NULL. Takes ownership of the cJSON fields. */
struct sandbox *create_sandbox(struct create_opts *o)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		abort();
	pthread_mutex_init(&sb->op, NULL);
	if (is_cube())
		random_hex(sb->id, 32);
	else
		random_from(sb->id, 20, "abcdefghijklmnopqrstuvwxyz0123456789");
	snprintf(sb->template_id, sizeof(sb->template_id), "%s", o->template_id);
	sb->alias = o->alias;
	sb->secure = o->secure;
	sb->public_traffic = o->public_traffic;
	sb->allow_internet = o->allow_internet;
	sb->auto_pause = o->auto_pause;
	sb->auto_pause_memory = o->auto_pause_memory;
	sb->auto_resume = o->auto_resume;
	sb->metadata = o->metadata;
	sb->env_vars = o->env_vars;
	sb->network = o->network;
	sb->logs = cJSON_CreateArray();
	sb->timeout_s = o->timeout_s;
	sb->cpu = o->tpl ? o->tpl->cpu : 2;
	sb->mem_mb = o->tpl ? o->tpl->mem_mb : 512;
	sb->disk_mb = 1024;
	sb->started_ms = wall_ms();
	sb->expires = NEVER;
	sb->state = SB_RUNNING;
	if (!is_cube() && sb->secure)
		new_token(sb->envd_token);
	if (!sb->public_traffic) {
		if (is_cube())
			random_uuid(sb->traffic_token);
		else
			random_hex(sb->traffic_token, 32);
	}
	o->alias = NULL;
	o->metadata = o->env_vars = o->network = NULL;
	sb_log(sb, "sandbox created from template %s", sb->template_id);
	if (start_envd(sb) < 0) {
		free_sandbox(sb);
		return NULL;
	}
	pthread_mutex_lock(&g.lock);
	sb->started_ms = wall_ms();
	sb->expires = expiry_after(sb->timeout_s);
	sb->next = g.sandboxes;
	g.sandboxes = sb;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	return sb;
}

void create_opts_free(struct create_opts *o)
{
	free(o->alias);
	cJSON_Delete(o->metadata);
	cJSON_Delete(o->env_vars);
	cJSON_Delete(o->network);
}

void handle_create(struct req *q, struct reply *r, int v2)
{
	cJSON *b = body_object(q, r, 0), *tid, *net, *ar, *lc;
	struct create_opts o = { .secure = 0, .public_traffic = 1, .allow_internet = -1,
				 .auto_pause_memory = 1 };
	struct sandbox *sb;
	struct template *t;
	int present;

	if (!b)
		return;
	tid = cJSON_GetObjectItemCaseSensitive(b, "templateID");
	if (!tid || cJSON_IsNull(tid)) {
		reply_missing_field(r, "templateID");
		goto out;
	}
	if (!cJSON_IsString(tid) || !tid->valuestring[0]) {
		reply_bad_field(r, "templateID", "a non-empty string");
		goto out;
	}
	o.timeout_s = is_cube() ? -1 : (v2 ? 300 : 15);
	/* NewSandboxV2 has no "secure": v2 sandboxes always get a token [E2B]. */
	o.secure = v2;
	if (int_field(b, "timeout", &o.timeout_s, &present, r) < 0)
		goto out;
	if (present && o.timeout_s < 0 && !(is_cube() && o.timeout_s == -1)) {
		reply_error(r, 400, "timeout must be %s", is_cube() ? ">= 0 or -1" : ">= 0");
		goto out;
	}
	if (bool_field(b, "secure", &o.secure, r) == -2 || bool_field(b, "autoPause", &o.auto_pause, r) == -2 ||
	    bool_field(b, "allow_internet_access", &o.allow_internet, r) == -2)
		goto out;
	if (!is_cube() && bool_field(b, "autoPauseMemory", &o.auto_pause_memory, r) == -2)
		goto out;
	ar = cJSON_GetObjectItemCaseSensitive(b, "autoResume");
	if (cJSON_IsBool(ar))
		o.auto_resume = cJSON_IsTrue(ar);
	else if (cJSON_IsObject(ar))
		o.auto_resume = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ar, "enabled"));
	lc = cJSON_GetObjectItemCaseSensitive(b, "lifecycle");
	if (is_cube() && cJSON_IsObject(lc)) {
		cJSON *ot = cJSON_GetObjectItemCaseSensitive(lc, "onTimeout");
		cJSON *lr = cJSON_GetObjectItemCaseSensitive(lc, "autoResume");

		if (!ot)
			ot = cJSON_GetObjectItemCaseSensitive(lc, "on_timeout");
		if (!lr)
			lr = cJSON_GetObjectItemCaseSensitive(lc, "auto_resume");
		if (cJSON_IsString(ot))
			o.auto_pause = strcmp(ot->valuestring, "pause") == 0;
		if (cJSON_IsBool(lr))
			o.auto_resume = cJSON_IsTrue(lr);
	}
	if (!is_cube() && o.auto_resume && o.auto_pause && !o.auto_pause_memory) {
		reply_error(r, 400, "autoPauseMemory=false cannot be combined with autoResume");
		goto out;
	}
	net = cJSON_GetObjectItemCaseSensitive(b, "network");
	if (net && !cJSON_IsNull(net)) {
		cJSON *apt;

		if (!cJSON_IsObject(net)) {
			reply_bad_field(r, "network", "an object");
			goto out;
		}
		if (is_cube()) {
			cJSON *rules = cJSON_GetObjectItemCaseSensitive(net, "rules");

			if (rules && !cJSON_IsArray(rules) && !cJSON_IsNull(rules)) {
				/* E2B's rules are an object keyed by domain; Cube wants an array [Cube]. */
				reply_bad_field(r, "network.rules", "a sequence");
				goto out;
			}
		}
		apt = cJSON_GetObjectItemCaseSensitive(net, "allowPublicTraffic");
		if (cJSON_IsBool(apt))
			o.public_traffic = cJSON_IsTrue(apt);
		o.network = cJSON_Duplicate(net, 1);
	}
	/* A fault: the platform made it public whatever was asked (CubeMaster minting no token). */
	if (q->make_public)
		o.public_traffic = 1;
	if (string_map(b, "metadata", &o.metadata, r) < 0)
		goto out;
	if (string_map(b, "envVars", &o.env_vars, r) < 0)
		goto out;
	if (is_cube() && !o.env_vars && string_map(b, "envs", &o.env_vars, r) < 0)
		goto out;
	if (is_cube() && !cube_env_ok(o.env_vars, r))
		goto out;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid->valuestring);
	if (t && t->status == T_READY) {
		o.tpl = t;
		snprintf(o.template_id, sizeof(o.template_id), "%s", t->id);
		if (t->alias && !t->is_snapshot)
			o.alias = strdup(t->alias);
	} else {
		t = NULL;
	}
	pthread_mutex_unlock(&g.lock);
	if (!t) {
		if (is_cube())
			reply_error(r, 500, "CubeMaster returned error code 130404: template %s not found",
				    tid->valuestring);
		else
			reply_error(r, 400, "template '%s' not found", tid->valuestring);
		goto out;
	}
	sb = create_sandbox(&o);
	if (!sb) {
		reply_error(r, 500, "failed to create sandbox: envd did not start");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	reply_json(r, 201, sandbox_json_locked(sb, V_CREATE));
	pthread_mutex_unlock(&g.lock);
out:
	create_opts_free(&o);
	cJSON_Delete(b);
}
