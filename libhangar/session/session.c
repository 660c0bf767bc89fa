/*
 * Sessions: handles, records in the state store, leases, and the calls that
 * create, open, describe, list, archive and delete them. Suspend and resume
 * are in park.c, forks in fork.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/seal.h"
#include "core/module.h"
#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "sess.h"
#include "util/sjson.h"

/* ---- records --------------------------------------------------------------------- */

void sess_new_id(char out[32], const char *prefix)
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char raw[26];
	size_t n = strlen(prefix);

	randombytes_buf(raw, sizeof(raw));
	memcpy(out, prefix, n);
	for (size_t i = 0; i < 26 && n + i < 31; i++)
		out[n + i] = b32[raw[i] & 31];
	out[n + 26 < 31 ? n + 26 : 31] = '\0';
}

int sess_set(char **field, const char *value)
{
	char *v = strdup(value ? value : "");

	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	free(*field);
	*field = v;
	return 0;
}

void sess_clear_sandbox(struct store_session *row)
{
	sess_set(&row->provider, "");
	sess_set(&row->sandbox_id, "");
	sess_set(&row->parked_checkpoint_id, "");
	row->parked_us = 0;
}

int sess_save(hangar_ctx *ctx, struct store_session *row)
{
	row->updated_us = clock_wall_us();
	return store_session_update(ctx, row);
}

/* A deep copy of a row. */
static int row_copy(struct store_session *dst, const struct store_session *src)
{
	char *const *from[] = { &src->id, &src->environment, &src->workspace, &src->user, &src->labels_json,
				&src->parent_id, &src->fork_group, &src->provider, &src->sandbox_id,
				&src->checkpoint_id, &src->parked_checkpoint_id, &src->last_reason,
				&src->suspend_reason };
	char **to[] = { &dst->id, &dst->environment, &dst->workspace, &dst->user, &dst->labels_json,
			&dst->parent_id, &dst->fork_group, &dst->provider, &dst->sandbox_id,
			&dst->checkpoint_id, &dst->parked_checkpoint_id, &dst->last_reason, &dst->suspend_reason };

	memset(dst, 0, sizeof(*dst));
	*dst = *src;
	for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++)
		*to[i] = NULL;
	dst->spec = NULL;
	for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++)
		if (sess_set(to[i], *from[i]) != 0)
			goto nomem;
	if (!(dst->spec = malloc(src->spec_len + 1)))
		goto nomem;
	if (src->spec_len)
		memcpy(dst->spec, src->spec, src->spec_len);
	return 0;
nomem:
	store_session_free(dst);
	return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

void sess_cache(struct hangar_session *s, const struct store_session *row)
{
	struct store_session copy;

	if (row_copy(&copy, row) != 0)
		return;
	pthread_mutex_lock(&s->mu);
	store_session_free(&s->row);
	s->row = copy;
	pthread_mutex_unlock(&s->mu);
}

int sess_handle_new(struct hangar_session **out, hangar_ctx *ctx, struct store_session *row)
{
	struct hangar_session *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->id = strdup(row->id))) {
		free(s);
		store_session_free(row);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->mu, NULL);
	s->ctx = hangar_ctx_ref(ctx);
	s->row = *row;
	memset(row, 0, sizeof(*row));
	*out = s;
	return 0;
}

/* ---- the sealed create options ------------------------------------------------------ */

#define SPEC_SEAL_ID "session-spec"

struct grow {
	unsigned char *p;
	size_t n, cap;
};

static int grow_sink(void *payload, const void *data, size_t len)
{
	struct grow *g = payload;

	if (g->n + len + 1 > g->cap) {
		size_t cap = (g->n + len + 1) * 2;
		unsigned char *p = realloc(g->p, cap);

		if (!p)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		g->p = p;
		g->cap = cap;
	}
	memcpy(g->p + g->n, data, len);
	g->n += len;
	g->p[g->n] = 0;
	return 0;
}

int sess_spec_seal(hangar_ctx *ctx, const char *id, const char *json, unsigned char **out, size_t *out_len)
{
	struct seal_keyring kr;
	struct seal_writer *w = NULL;
	struct grow g = { 0 };
	int rc;

	*out = NULL;
	if ((rc = seal_keyring_load(&kr, ctx)) != 0)
		return rc;
	rc = seal_writer_new(&w, &kr, SPEC_SEAL_ID, id, grow_sink, &g);
	if (rc == 0)
		rc = seal_writer_write(w, json, strlen(json));
	if (rc == 0)
		rc = seal_writer_finish(w);
	seal_writer_free(w);
	seal_keyring_wipe(&kr);
	if (rc) {
		free(g.p);
		return rc;
	}
	*out = g.p;
	*out_len = g.n;
	return 0;
}

int sess_spec_open(hangar_ctx *ctx, const char *id, const unsigned char *sealed, size_t len, char **json)
{
	struct seal_keyring kr;
	struct seal_reader *r = NULL;
	struct grow g = { 0 };
	int rc;

	*json = NULL;
	if ((rc = seal_keyring_load(&kr, ctx)) != 0)
		return rc;
	rc = seal_reader_new(&r, &kr, SPEC_SEAL_ID, id, grow_sink, &g);
	if (rc == 0)
		rc = seal_reader_feed(r, sealed, len);
	if (rc == 0)
		rc = seal_reader_finish(r);
	seal_reader_free(r);
	seal_keyring_wipe(&kr);
	if (rc == 0 && !g.p)
		rc = grow_sink(&g, "", 0);
	if (rc) {
		if (g.p)
			sodium_memzero(g.p, g.n);
		free(g.p);
		herr_prefix("the create options of session %s", id);
		return hangar_error_last()->code;
	}
	*json = (char *)g.p;
	return 0;
}

/* The create options o as JSON (what a later create of the session needs). */
static char *spec_json(const hangar_create_opts *o, const char *environment)
{
	cJSON *j = cJSON_CreateObject(), *env;
	char *out = NULL;

	if (!j)
		return NULL;
	if (o && o->provider)
		cJSON_AddStringToObject(j, "provider", o->provider);
	if (o && o->template_id)
		cJSON_AddStringToObject(j, "template", o->template_id);
	if (o && o->tier)
		cJSON_AddStringToObject(j, "tier", o->tier);
	if (environment)
		cJSON_AddStringToObject(j, "environment", environment);
	cJSON_AddNumberToObject(j, "timeout_sec", o ? (double)o->timeout_sec : 0);
	cJSON_AddNumberToObject(j, "network", o ? o->network : 0);
	env = cJSON_AddArrayToObject(j, "env");
	for (const char *const *e = o ? o->env : NULL; env && e && *e; e++)
		cJSON_AddItemToArray(env, cJSON_CreateString(*e));
	out = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return out;
}

static const char *json_str(const cJSON *j, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int sess_create_sandbox(hangar_ctx *ctx, const struct store_session *row, const char *provider,
			const char *template_id, hangar_sandbox **out)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	const char **envv = NULL;
	char *json = NULL;
	cJSON *j = NULL;
	int rc;

	*out = NULL;
	if ((rc = sess_spec_open(ctx, row->id, row->spec, row->spec_len, &json)) != 0)
		return rc;
	{
		char err[160];

		j = sjson_parse(json, strlen(json), 0, err, sizeof(err));
		sodium_memzero(json, strlen(json));
		free(json);
		if (!j)
			return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_OS, "session %s: its create options do not parse: %s",
				    row->id, err);
	}
	{
		const cJSON *env = cJSON_GetObjectItemCaseSensitive(j, "env"), *e;
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "timeout_sec");
		const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "network");
		size_t k = 0;

		envv = calloc((size_t)cJSON_GetArraySize(env) + 1, sizeof(*envv));
		if (!envv) {
			cJSON_Delete(j);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		cJSON_ArrayForEach(e, env)
			if (cJSON_IsString(e))
				envv[k++] = e->valuestring;
		o.env = k ? envv : NULL;
		o.provider = provider ? provider : json_str(j, "provider");
		o.template_id = template_id ? template_id : json_str(j, "template");
		o.tier = json_str(j, "tier");
		o.environment = json_str(j, "environment");
		o.timeout_sec = cJSON_IsNumber(t) ? (int64_t)t->valuedouble : 0;
		o.network = cJSON_IsNumber(n) ? n->valueint : 0;
	}
	rc = hangar_sandbox_create(out, ctx, &o);
	free(envv);
	cJSON_Delete(j);
	return rc;
}

int sess_attach(hangar_ctx *ctx, const struct store_session *row, hangar_sandbox **out)
{
	int rc;

	*out = NULL;
	if (!*row->sandbox_id)
		return herr(HANGAR_EGONE, HANGAR_ERRCAT_SANDBOX, "session %s holds no sandbox", row->id);
	rc = hangar_sandbox_attach(out, ctx, *row->provider ? row->provider : NULL, row->sandbox_id);
	if (rc == HANGAR_ENOTFOUND)
		rc = herr_recode(HANGAR_EGONE);
	return rc;
}

void sess_destroy_sandbox(hangar_ctx *ctx, const struct store_session *row, hangar_sandbox *sb, const char *why)
{
	hangar_sys_saved_error saved;
	hangar_sandbox *own = NULL;
	int rc;

	if (!*row->sandbox_id)
		return;
	hangar_sys_error_save(&saved);
	if (!sb) {
		rc = sess_attach(ctx, row, &own);
		sb = own;
	} else {
		rc = 0;
	}
	if (rc == 0)
		rc = hangar_sandbox_kill(sb);
	if (rc && rc != HANGAR_EGONE) {
		/* Never left paused with no owner: the reaper destroys it once it answers. */
		hangar_sys_log(ctx, HANGAR_LOG_WARNING,
			       "session %s: sandbox %s (%s) could not be destroyed now, the reaper will: %s", row->id,
			       row->sandbox_id, why, hangar_error_last()->message);
		if (store_doomed_add(ctx, row->sandbox_id, row->provider, why) != 0)
			hangar_sys_log(ctx, HANGAR_LOG_ERROR, "session %s: sandbox %s could not be recorded for the reaper: %s",
				       row->id, row->sandbox_id, hangar_error_last()->message);
	} else
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "session %s: destroyed sandbox %s: %s", row->id, row->sandbox_id, why);
	hangar_sandbox_unref(own);
	hangar_sys_error_restore(&saved);
}

struct newest {
	char *id;
};

static int newest_fn(const struct store_ckpt *c, void *payload)
{
	struct newest *n = payload;

	/* Oldest first: the last one seen is the newest. */
	free(n->id);
	n->id = strdup(c->id);
	return n->id ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

int sess_latest_checkpoint(hangar_ctx *ctx, const struct store_session *row, char **id)
{
	struct newest n = { NULL };
	int rc = store_ckpt_list(ctx, row->id, newest_fn, &n);

	*id = NULL;
	if (rc) {
		free(n.id);
		return rc;
	}
	*id = n.id ? n.id : strdup(row->checkpoint_id);
	return *id ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

int sess_restore(hangar_ctx *ctx, const struct store_session *row, const char *checkpoint_id, hangar_sandbox *sb,
		 hangar_cancel_fn cancel, void *cancel_payload)
{
	hangar_restore_opts ro = HANGAR_RESTORE_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	int rc;

	if ((rc = hangar_checkpoint_lookup(&cp, ctx, checkpoint_id)) != 0)
		return rc;
	ro.workspace = *row->workspace ? row->workspace : NULL;
	ro.user = *row->user ? row->user : NULL;
	ro.cancel = cancel;
	ro.cancel_payload = cancel_payload;
	rc = hangar_checkpoint_restore(sb, cp, &ro);
	hangar_checkpoint_unref(cp);
	return rc;
}

/* ---- the session layer's per-context state -------------------------------- */

struct session_state {
	hangar_session_hook_fn hook;      /* hangar_session_set_hook() */
	void *hook_payload;
};

static int evict_for_create(hangar_ctx *ctx, const char *why)
{
	return sess_evict_parked(ctx, NULL, why);
}

/* Lends the sandbox layer the eviction of parked sandboxes. */
static int session_module_open(hangar_ctx *ctx, void *state)
{
	(void)state;
	sandbox_set_evict(ctx, evict_for_create);
	return 0;
}

const struct hmodule session_module = { "session", sizeof(struct session_state), session_module_open, NULL, NULL };

int sess_hook(struct hangar_session *s, hangar_sandbox *sb, int hook)
{
	struct session_state *st = hctx_module(s->ctx, &session_module);
	int rc;

	if (!st->hook)
		return 0;
	herr_clear();
	rc = st->hook(s, sb, hook, st->hook_payload);
	if (rc) {
		static const char *const names[] = { "", "park", "wake", "cold" };

		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "the %s hook of session %s failed (%d)",
			    hook >= 1 && hook <= 3 ? names[hook] : "?", s->id, rc);
	}
	return 0;
}

void sess_event(hangar_ctx *ctx, const char *name, const struct store_session *row, const char *reason)
{
	cJSON *ev;

	if (!hevent_wanted(ctx))
		return;
	ev = cJSON_CreateObject();
	if (ev) {
		cJSON_AddStringToObject(ev, "session", row->id);
		if (*row->sandbox_id) {
			cJSON_AddStringToObject(ev, "sandbox", row->sandbox_id);
			cJSON_AddStringToObject(ev, "provider", row->provider);
		}
		if (*row->checkpoint_id)
			cJSON_AddStringToObject(ev, "checkpoint", row->checkpoint_id);
		if (reason && *reason)
			cJSON_AddStringToObject(ev, "reason", reason);
	}
	hevent(ctx, name, ev);
}

/* ---- the public calls --------------------------------------------------------------- */

static int valid_session_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 0 && n <= 128 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
	       id[0] != '.';
}

int hangar_session_opts_init(hangar_session_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_session_opts);
}

int hangar_suspend_opts_init(hangar_suspend_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_suspend_opts);
}

struct env_view {
	char *workspace, *user;
};

static int env_view_fn(const hangar_environment_info *info, void *payload)
{
	struct env_view *v = payload;

	v->workspace = strdup(info->workspace);
	v->user = strdup(info->user);
	return v->workspace && v->user ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

struct holder {
	const char *sandbox_id;
	int held;
};

static int holder_fn(const struct store_session *r, void *payload)
{
	struct holder *h = payload;

	if (r->sandbox_id && strcmp(r->sandbox_id, h->sandbox_id) == 0) {
		h->held = 1;
		return 1;
	}
	return 0;
}

/*
 * A sandbox a new session takes (opts->sandbox): running, since a session
 * is active with it, and no other session's, since two sessions resuming
 * one machine would each restore over the other's work.
 */
static int check_adopted(hangar_ctx *ctx, hangar_sandbox *sb)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct holder h = { hangar_sandbox_id(sb), 0 };
	int rc = hangar_sandbox_get_info(&info, sb);

	if (rc != 0)
		return rc;
	if (info.state != HANGAR_SANDBOX_RUNNING)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "opts->sandbox %s is not running", h.sandbox_id);
	rc = store_session_list(ctx, 0, holder_fn, &h);
	if (rc < 0)
		return rc;
	if (h.held)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "opts->sandbox %s is another session's", h.sandbox_id);
	return 0;
}

/*
 * Two creates adopting one sandbox at once would each find it free before
 * either recorded it: the check and the record are made under a lease
 * named for the sandbox, held by this call alone (its new session's id
 * makes the holder unique among threads of one process). A caller that
 * dies holding it holds it ADOPT_LEASE_US at most.
 */
#define ADOPT_LEASE_US (30 * 1000000LL)

struct adopt_lease {
	char name[96];
	char holder[192];
	int held;
};

static int adopt_lease_take(hangar_ctx *ctx, struct adopt_lease *l, const char *sandbox_id, const char *session_id)
{
	char proc[96];
	int rc;

	hproc_identity(proc, sizeof(proc));
	if (snprintf(l->name, sizeof(l->name), "session-adopt:%.64s", sandbox_id) < 0 ||
	    snprintf(l->holder, sizeof(l->holder), "%.95s/%.90s", proc, session_id) < 0)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: opts->sandbox");
	if ((rc = store_lease_acquire(ctx, l->name, l->holder, clock_wall_us(), ADOPT_LEASE_US, &l->held)) != 0)
		return rc;
	if (!l->held) {
		rc = herr(HANGAR_EBUSY, HANGAR_ERRCAT_ARGUMENT, "opts->sandbox %s is being taken by another session",
			  sandbox_id);
		herr_retry_after(1);
		return rc;
	}
	return 0;
}

static void adopt_lease_give(hangar_ctx *ctx, struct adopt_lease *l)
{
	hangar_sys_saved_error saved;
	int released = 0;

	if (!l->held)
		return;
	hangar_sys_error_save(&saved);
	if (store_lease_release(ctx, l->name, l->holder, &released) != 0 || !released)
		hangar_sys_log(ctx, HANGAR_LOG_WARNING, "lease %s was not released: it runs out by itself", l->name);
	hangar_sys_error_restore(&saved);
	l->held = 0;
}

int hangar_session_create(hangar_session **out, hangar_ctx *ctx, const hangar_session_opts *opts)
{
	struct adopt_lease adopt = { .held = 0 };
	hangar_session_opts o;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	struct store_session row = { 0 };
	struct env_view ev = { NULL, NULL };
	hangar_sandbox *sb = NULL;
	char id[32], *spec = NULL;
	const char *environment;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_session_opts, "opts")) != 0)
		return rc;
	HCHECK_ARG(!o.id || valid_session_id(o.id), "opts->id must be 1 to 128 of [A-Za-z0-9._-]");
	HCHECK_TEXT(o.environment, "opts->environment");
	HCHECK_TEXT(o.workspace, "opts->workspace");
	HCHECK_TEXT(o.user, "opts->user");
	HCHECK_ARG(!o.workspace || o.workspace[0] == '/', "opts->workspace must be absolute");
	HCHECK_ARG(!(o.flags & ~HANGAR_SESSION_EXCLUSIVE_CREDENTIAL), "opts->flags has unknown bits");
	if (o.create && (rc = HOPTS_COPY(co, o.create, hv_create_opts, "opts->create")) != 0)
		return rc;
	environment = co.environment ? co.environment : o.environment;
	co.environment = environment;
	if (environment && (rc = hangar_environment_get(ctx, environment, env_view_fn, &ev)) != 0)
		goto out;
	if (!o.id)
		sess_new_id(id, "ses-");
	memset(&row, 0, sizeof(row));
	if ((rc = ckpt_labels_json(&row.labels_json, o.labels)) != 0)
		goto out;
	if (sess_set(&row.id, o.id ? o.id : id) || sess_set(&row.environment, environment) ||
	    sess_set(&row.workspace, o.workspace       ? o.workspace
				     : ev.workspace && *ev.workspace ? ev.workspace
								     : hctx_str(ctx, HS_WORKSPACE)) ||
	    sess_set(&row.user, o.user ? o.user : ev.user) || sess_set(&row.parent_id, "") ||
	    sess_set(&row.fork_group, "") || sess_set(&row.provider, "") || sess_set(&row.sandbox_id, "") ||
	    sess_set(&row.checkpoint_id, "") || sess_set(&row.parked_checkpoint_id, "") ||
	    sess_set(&row.last_reason, "") || sess_set(&row.suspend_reason, "")) {
		rc = HANGAR_ENOMEM;
		goto out;
	}
	if (!(spec = spec_json(&co, environment))) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	if ((rc = sess_spec_seal(ctx, row.id, spec, &row.spec, &row.spec_len)) != 0)
		goto out;
	row.state = HANGAR_SESSION_SUSPENDED;
	row.flags = o.flags;
	row.created_us = row.updated_us = clock_wall_us();
	if (o.sandbox && ((rc = adopt_lease_take(ctx, &adopt, hangar_sandbox_id(o.sandbox), row.id)) != 0 ||
			  (rc = check_adopted(ctx, o.sandbox)) != 0))
		goto out;
	/* The record first, so a taken id fails before any sandbox exists. */
	if ((rc = store_session_put(ctx, &row)) != 0)
		goto out;
	if (o.sandbox)
		sb = hangar_sandbox_ref(o.sandbox);
	else if ((rc = sess_create_sandbox(ctx, &row, NULL, NULL, &sb)) != 0) {
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		store_session_delete(ctx, row.id);
		hangar_sys_error_restore(&saved);
		goto out;
	}
	row.state = HANGAR_SESSION_ACTIVE;
	sess_set(&row.sandbox_id, hangar_sandbox_id(sb));
	sess_set(&row.provider, hangar_provider_name(hangar_sandbox_provider(sb)));
	if ((rc = sess_save(ctx, &row)) != 0) {
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		/* A sandbox the caller brought stays the caller's. */
		if (!o.sandbox)
			hangar_sandbox_kill(sb);
		store_session_delete(ctx, row.id);
		hangar_sys_error_restore(&saved);
		goto out;
	}
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "created session %s with %s sandbox %s", row.id, o.sandbox ? "the" : "a new",
		       row.sandbox_id);
	sess_event(ctx, "session.created", &row, NULL);
	rc = sess_handle_new(out, ctx, &row);
	if (rc == 0)
		herr_clear();
out:
	adopt_lease_give(ctx, &adopt);
	hangar_sandbox_unref(sb);
	if (spec) {
		sodium_memzero(spec, strlen(spec));
		free(spec);
	}
	free(ev.workspace);
	free(ev.user);
	store_session_free(&row);
	return rc;
}

int hangar_session_open(hangar_session **out, hangar_ctx *ctx, const char *id)
{
	struct store_session row;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(valid_session_id(id), "id is not a session id");
	if ((rc = store_session_get(ctx, id, &row)) != 0)
		return rc;
	rc = sess_handle_new(out, ctx, &row);
	if (rc == 0)
		herr_clear();
	return rc;
}

hangar_session *hangar_session_ref(hangar_session *s)
{
	if (s)
		atomic_fetch_add(&s->refs, 1);
	return s;
}

hangar_session *hangar_session_unref(hangar_session *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return NULL;
	store_session_free(&s->row);
	pthread_mutex_destroy(&s->mu);
	hangar_ctx_unref(s->ctx);
	free(s->id);
	free(s);
	return NULL;
}

const char *hangar_session_id(const hangar_session *s)
{
	return s ? s->id : NULL;
}

static void fill_info(hangar_session_info *i, const struct store_session *r)
{
	i->id = r->id;
	i->state = r->state;
	i->last_resume = r->last_resume;
	i->last_resume_reason = r->last_reason;
	i->suspend_reason = r->suspend_reason;
	i->environment = r->environment;
	i->workspace = r->workspace;
	i->provider = r->provider;
	i->sandbox_id = r->sandbox_id;
	i->checkpoint_id = r->checkpoint_id;
	i->parent_id = r->parent_id;
	i->fork_group = r->fork_group;
	i->labels_json = r->labels_json;
	i->flags = r->flags;
	i->created_at_us = r->created_us;
	i->updated_at_us = r->updated_us;
	i->parked_since_us = r->state == HANGAR_SESSION_PARKED ? r->parked_us : 0;
}

int hangar_session_get_info(hangar_session_info *out, hangar_session *s)
{
	hangar_session_info i = HANGAR_SESSION_INFO_INIT;
	struct store_session row;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(s, "s is NULL");
	if ((rc = hversioned_check(out, &hv_session_info, "out")) != 0)
		return rc;
	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		return rc;
	pthread_mutex_lock(&s->mu);
	store_session_free(&s->row);
	s->row = row;
	fill_info(&i, &s->row);
	hresult_store(out, &i, sizeof(i));
	pthread_mutex_unlock(&s->mu);
	herr_clear();
	return 0;
}

struct list_walk {
	hangar_session_list_fn fn;
	void *payload;
};

static int list_fn(const struct store_session *r, void *payload)
{
	struct list_walk *w = payload;
	hangar_session_info i = HANGAR_SESSION_INFO_INIT;

	fill_info(&i, r);
	return w->fn(&i, w->payload);
}

int hangar_session_list(hangar_ctx *ctx, hangar_session_list_fn fn, void *payload)
{
	struct list_walk w = { fn, payload };
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	rc = store_session_list(ctx, 0, list_fn, &w);
	if (rc == 0)
		herr_clear();
	return rc;
}

void hangar_session_set_hook(hangar_ctx *ctx, hangar_session_hook_fn fn, void *payload)
{
	struct session_state *st;

	if (!ctx)
		return;
	st = hctx_module(ctx, &session_module);
	st->hook = fn;
	st->hook_payload = payload;
}

/* Archives the session under its lease; row is read again under it. */
static int archive_locked(hangar_session *s, const char *why)
{
	struct store_session row;
	int rc;

	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		return rc;
	if (row.state != HANGAR_SESSION_ARCHIVED) {
		sess_destroy_sandbox(s->ctx, &row, NULL, why);
		sess_clear_sandbox(&row);
		row.state = HANGAR_SESSION_ARCHIVED;
		if ((rc = sess_save(s->ctx, &row)) == 0) {
			hangar_sys_log(s->ctx, HANGAR_LOG_INFO, "archived session %s", row.id);
			sess_event(s->ctx, "session.archived", &row, why);
		}
	}
	sess_cache(s, &row);
	store_session_free(&row);
	return rc;
}

int hangar_session_archive(hangar_session *s)
{
	struct sess_lease l;
	int rc;

	HCHECK_ARG(s, "s is NULL");
	if ((rc = sess_lease_take(&l, s->ctx, s->id, 1)) != 0)
		return rc;
	rc = archive_locked(s, "the session was archived");
	sess_lease_give(&l);
	if (rc == 0)
		herr_clear();
	return rc;
}

struct ckpt_ids {
	char **v;
	size_t n;
};

static int collect_ckpt(const struct store_ckpt *c, void *payload)
{
	struct ckpt_ids *ids = payload;
	char **v = realloc(ids->v, (ids->n + 1) * sizeof(*v));

	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	ids->v = v;
	if (!(v[ids->n] = strdup(c->id)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	ids->n++;
	return 0;
}

int hangar_session_delete(hangar_session *s)
{
	struct ckpt_ids ids = { NULL, 0 };
	struct store_session row;
	struct sess_lease l;
	int rc;

	HCHECK_ARG(s, "s is NULL");
	if ((rc = sess_lease_take(&l, s->ctx, s->id, 1)) != 0)
		return rc;
	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		goto out;
	sess_destroy_sandbox(s->ctx, &row, NULL, "the session was deleted");
	if (*row.sandbox_id) {
		sess_clear_sandbox(&row);
		row.state = HANGAR_SESSION_ARCHIVED;
		if ((rc = sess_save(s->ctx, &row)) != 0)
			goto out;
	}
	/* Its checkpoints; the record goes last, so a failure can be retried. */
	if ((rc = store_ckpt_list(s->ctx, s->id, collect_ckpt, &ids)) != 0)
		goto out;
	for (size_t i = 0; i < ids.n && rc == 0; i++) {
		hangar_checkpoint *cp = NULL;

		/* A fork's base stays: the fork restores from it. */
		if ((rc = store_session_ckpt_in_use(s->ctx, ids.v[i], s->id)) != 0) {
			if (rc == 1)
				rc = 0;
			continue;
		}
		rc = hangar_checkpoint_lookup(&cp, s->ctx, ids.v[i]);
		if (rc == 0)
			rc = hangar_checkpoint_delete(cp);
		if (rc == HANGAR_ENOTFOUND)
			rc = 0;
		hangar_checkpoint_unref(cp);
	}
	if (rc == 0 && (rc = store_session_delete(s->ctx, s->id)) == 0) {
		hangar_sys_log(s->ctx, HANGAR_LOG_INFO, "deleted session %s and %zu checkpoints", s->id, ids.n);
		sess_event(s->ctx, "session.deleted", &row, NULL);
		l.held = 0; /* the row, and so the lease, is gone */
	}
out:
	for (size_t i = 0; i < ids.n; i++)
		free(ids.v[i]);
	free(ids.v);
	store_session_free(&row);
	sess_lease_give(&l);
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_session_keep(hangar_session *s, uint32_t *archived)
{
	struct store_session row;
	char **ids = NULL;
	uint32_t n = 0;
	int rc, first = 0;

	if (archived)
		*archived = 0;
	HCHECK_ARG(s, "s is NULL");
	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		return rc;
	if (!*row.fork_group) {
		store_session_free(&row);
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: session %s is not a fork", s->id);
	}
	rc = store_session_fork_group(s->ctx, row.fork_group, &ids);
	store_session_free(&row);
	if (rc)
		return rc;
	for (char **id = ids; *id; id++) {
		hangar_session *other = NULL;

		if (!strcmp(*id, s->id))
			continue;
		rc = hangar_session_open(&other, s->ctx, *id);
		if (rc == 0) {
			struct store_session r;

			rc = store_session_get(s->ctx, *id, &r);
			if (rc == 0) {
				int was = r.state;

				store_session_free(&r);
				rc = hangar_session_archive(other);
				if (rc == 0 && was != HANGAR_SESSION_ARCHIVED)
					n++;
			}
		}
		hangar_session_unref(other);
		if (rc && rc != HANGAR_ENOTFOUND && !first)
			first = rc;
	}
	store_ids_free(ids);
	if (archived)
		*archived = n;
	if (first)
		return first;
	herr_clear();
	return 0;
}
