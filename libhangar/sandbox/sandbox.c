/* hangar_sandbox: creating, finding and managing sandboxes on any provider. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sandbox.h"
#include "core/module.h"
#include "core/versioned.h"
#include "store/store.h"

#define SANDBOX_TIMEOUT_MAX (366LL * 86400)   /* as HANGAR_SANDBOX_TIMEOUT_SECONDS */
#include "core/environment.h"
#include "tier/tier.h"

/* ---- views ---------------------------------------------------------------- */

void sbview_put(struct sbview *v)
{
	if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
		return;
	sysbox_clear(&v->desc);
	free(v);
}

static struct sbview *sbview_get(struct sbview *v)
{
	atomic_fetch_add(&v->refs, 1);
	return v;
}

/* Takes ownership of desc's contents. */
static struct sbview *sbview_new(struct hangar_sys_sandbox *desc)
{
	struct sbview *v = calloc(1, sizeof(*v));

	if (!v) {
		sysbox_clear(desc);
		return NULL;
	}
	atomic_init(&v->refs, 1);
	v->desc = *desc;
	memset(desc, 0, sizeof(*desc));
	v->ep.base_url = v->desc.envd_url ? v->desc.envd_url : "http://localhost";
	v->ep.socket_path = v->desc.envd_socket;
	v->ep.ca_file = v->desc.envd_ca_file;
	v->ep.access_token = v->desc.access_token;
	v->ep.headers = (const char *const *)v->desc.headers;
	v->ep.user = v->desc.user ? v->desc.user : "user";
	return v;
}

static void set_view(struct hangar_sandbox *sb, struct sbview *v)
{
	struct sbview *old;

	pthread_mutex_lock(&sb->mu);
	old = sb->view;
	sb->view = v;
	pthread_mutex_unlock(&sb->mu);
	sbview_put(old);
}

struct sbview *sandbox_current_view(struct hangar_sandbox *sb)
{
	struct sbview *v;

	pthread_mutex_lock(&sb->mu);
	v = sbview_get(sb->view);
	pthread_mutex_unlock(&sb->mu);
	return v;
}

/* ---- checks on what providers report --------------------------------------- */

static int check_desc(struct hangar_provider *p, const struct hangar_sys_sandbox *d)
{
	if (!d->id)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s described a sandbox without an id",
			    p->ops.name);
	if (!d->envd_url && !d->envd_socket)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			    "provider %s described sandbox %s without an envd endpoint", p->ops.name, d->id);
	return 0;
}

static int valid_id(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n <= 64 &&
	       strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int sandbox_new(struct hangar_sandbox **out, hangar_ctx *ctx, struct hangar_provider *p,
		       struct hangar_sys_sandbox *desc)
{
	struct hangar_sandbox *sb = calloc(1, sizeof(*sb));

	if (sb)
		sb->id = strdup(desc->id);
	if (sb && sb->id)
		sb->view = sbview_new(desc);
	if (!sb || !sb->id || !sb->view) {
		if (sb)
			free(sb->id);
		free(sb);
		sysbox_clear(desc);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	atomic_init(&sb->refs, 1);
	pthread_mutex_init(&sb->mu, NULL);
	sb->ctx = hangar_ctx_ref(ctx);
	sb->provider = p;
	*out = sb;
	return 0;
}

/* ---- public API -------------------------------------------------------------- */

int hangar_create_opts_init(hangar_create_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_create_opts);
}

/* The environment's variables, then the create's, a create's value replacing the environment's. */
static int merge_env(const char *const *base, const char *const *over, const char ***out)
{
	size_t n = 0, k = 0;
	const char **v;

	for (const char *const *e = base; e && *e; e++)
		n++;
	for (const char *const *e = over; e && *e; e++)
		n++;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (const char *const *e = base; e && *e; e++) {
		size_t len = strcspn(*e, "=") + 1;
		int replaced = 0;

		for (const char *const *o = over; o && *o && !replaced; o++)
			replaced = !strncmp(*o, *e, len);
		if (!replaced)
			v[k++] = *e;
	}
	for (const char *const *e = over; e && *e; e++)
		v[k++] = *e;
	*out = v;
	return 0;
}

/* Fills what o leaves unset from the environment it names. */
static int apply_environment(hangar_ctx *ctx, hangar_create_opts *o, struct env_resolved **envr,
			     const char ***envv)
{
	struct env_resolved *r;
	int rc;

	if ((rc = env_resolve(ctx, o->environment, &r)) != 0)
		return rc;
	if (!o->tier)
		o->tier = r->tier;
	if (o->timeout_sec == 0)
		o->timeout_sec = r->timeout_sec;
	if (o->network == HANGAR_NETWORK_DEFAULT)
		o->network = r->network;
	if (r->envv[0]) {
		if ((rc = merge_env((const char *const *)r->envv, o->env, envv)) != 0) {
			env_resolved_free(r);
			return rc;
		}
		o->env = *envv;
	}
	o->environment = r->name;
	*envr = r;
	return 0;
}

/* ---- the sandbox layer's per-context state -------------------------------- */

struct sandbox_state {
	sandbox_evict_fn evict;           /* lent by the session layer, or NULL */
};

const struct hmodule sandbox_module = { "sandbox", sizeof(struct sandbox_state), NULL, NULL, NULL };

void sandbox_set_evict(hangar_ctx *ctx, sandbox_evict_fn fn)
{
	struct sandbox_state *st = hctx_module(ctx, &sandbox_module);

	st->evict = fn;
}

/*
 * HANGAR_MAX_SANDBOXES: at the cap, a parked sandbox makes room for the
 * create, through the hook the session layer lends; with none to evict,
 * the create is refused.
 */
static int make_room(hangar_ctx *ctx)
{
	int64_t max = hctx_int(ctx, HS_MAX_SANDBOXES);
	uint64_t n = 0;
	int rc;

	if (max <= 0)
		return 0;
	while ((rc = store_sandbox_count(ctx, &n)) == 0 && n >= (uint64_t)max) {
		sandbox_evict_fn evict = ((struct sandbox_state *)hctx_module(ctx, &sandbox_module))->evict;

		rc = evict ? evict(ctx, "a create needed its place under HANGAR_MAX_SANDBOXES") : 0;
		if (rc < 0)
			return rc;
		if (rc == 0)
			return herr(HANGAR_ECAPACITY, HANGAR_ERRCAT_PROVIDER,
				    "%llu sandboxes exist, HANGAR_MAX_SANDBOXES is %lld, and none is parked to make room",
				    (unsigned long long)n, (long long)max);
	}
	return rc;
}

int hangar_sandbox_create(hangar_sandbox **out, hangar_ctx *ctx, const hangar_create_opts *opts)
{
	struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
	struct env_resolved *envr = NULL;
	const char **envv = NULL;
	hangar_create_opts o;
	struct hangar_provider *p;
	const char *tier;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	rc = HOPTS_COPY(o, opts, hv_create_opts, "opts");
	if (rc)
		return rc;
	HCHECK_ARG(o.timeout_sec <= SANDBOX_TIMEOUT_MAX, "opts->timeout_sec must be at most 31622400 (366 days)");
	HCHECK_ARG(o.network >= HANGAR_NETWORK_DEFAULT && o.network <= HANGAR_NETWORK_OFF, "opts->network");
	for (const char *const *e = o.env; e && *e; e++)
		HCHECK_ARG(strchr(*e, '=') && **e != '=', "opts->env entries must be KEY=VALUE");
	if (hcheck_text(o.provider, "opts->provider") || hcheck_text(o.template_id, "opts->template_id") ||
	    hcheck_texts(o.env, "opts->env") || hcheck_text(o.tier, "opts->tier") ||
	    hcheck_text(o.environment, "opts->environment"))
		return HANGAR_EINVAL;
	if (o.environment && (rc = apply_environment(ctx, &o, &envr, &envv)) != 0)
		return rc;
	if (o.timeout_sec == 0)
		o.timeout_sec = hctx_int(ctx, HS_SANDBOX_TIMEOUT);
	tier = tier_name_of(o.tier);
	if (!tier) {
		rc = hangar_error_last()->code;
		goto out;
	}
	o.tier = tier;
	if ((rc = make_room(ctx)) != 0)
		goto out;
	/* The named provider, or the one the tier picks (with the environment's template for it). */
	rc = tier_create(ctx, &o, envr ? envr->for_tier : NULL, &p, &desc);
	free(envv);
	envv = NULL;
	if (rc) {
		sysbox_clear(&desc);
		goto out;
	}
	rc = check_desc(p, &desc);
	if (rc) {
		/* Do not leave behind a sandbox nobody can reach. */
		if (desc.id)
			provider_kill_quietly(p, desc.id);
		sysbox_clear(&desc);
		goto out;
	}
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "created sandbox %s on %s", desc.id, p->ops.name);
	/* Which provider holds it, so attach finds it after a restart. The
	 * sandbox exists either way: a store that cannot be written is logged. */
	if (store_record(ctx, desc.id, p->ops.name) != 0)
		hangar_sys_log(ctx, HANGAR_LOG_WARNING, "sandbox %s: %s", desc.id, hangar_error_last()->message);
	if (hevent_wanted(ctx)) {
		cJSON *ev = cJSON_CreateObject();

		if (ev) {
			cJSON_AddStringToObject(ev, "id", desc.id);
			cJSON_AddStringToObject(ev, "provider", p->ops.name);
			cJSON_AddStringToObject(ev, "tier", tier);
			if (envr)
				cJSON_AddStringToObject(ev, "environment", envr->name);
		}
		hevent(ctx, "sandbox.created", ev);
	}
	rc = sandbox_new(out, ctx, p, &desc);
	if (rc == 0)
		herr_clear();
out:
	free(envv);
	env_resolved_free(envr);
	return rc;
}

static int attach_on(struct hangar_sandbox **out, hangar_ctx *ctx, struct hangar_provider *p, const char *id)
{
	struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
	int rc = PROVIDER_CALL(p, "connect", connect, id, &desc);

	if (rc == 0)
		rc = check_desc(p, &desc);
	if (rc == 0 && strcmp(desc.id, id) != 0)
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s answered for another sandbox",
			  p->ops.name);
	if (rc) {
		sysbox_clear(&desc);
		return rc;
	}
	return sandbox_new(out, ctx, p, &desc);
}

int hangar_sandbox_attach(hangar_sandbox **out, hangar_ctx *ctx, const char *provider, const char *id)
{
	struct hangar_provider *p;
	int first_error = 0;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(id && valid_id(id), "id must match [A-Za-z0-9_-]{1,64}");
	if (provider) {
		p = provider_get(ctx, provider);
		if (!p)
			return hangar_error_last()->code;
		return attach_on(out, ctx, p, id);
	}
	/* The provider that created it, when it was created here. A provider
	 * remembered from before that finds it gone is checked in the store. */
	for (int fresh = 0; fresh < 2; fresh++) {
		char *recorded = NULL;
		int rc, remembered = 0;

		if ((fresh ? store_lookup(ctx, id, &recorded) : store_holder(ctx, id, &recorded, &remembered)) != 0)
			break;
		p = provider_get(ctx, recorded);
		free(recorded);
		if (!p)
			return hangar_error_last()->code;
		rc = attach_on(out, ctx, p, id);
		if (rc != HANGAR_EGONE)
			return rc;
		if (remembered)
			continue;
		store_forget(ctx, id);
		return rc;
	}
	/* Else ask every provider; only "gone" everywhere means gone. */
	for (struct hangar_provider *q = providers_first(ctx); q; q = q->next) {
		int rc;

		p = provider_get(ctx, q->ops.name);
		if (!p) {
			/* A provider nobody configured holds no sandboxes. */
			if (!first_error && hangar_error_last()->code != HANGAR_ECONFIG)
				first_error = hangar_error_last()->code;
			continue;
		}
		rc = attach_on(out, ctx, p, id);
		if (rc == 0)
			return 0;
		if (rc != HANGAR_EGONE && !first_error)
			first_error = rc;
	}
	if (first_error)
		return herr(first_error, HANGAR_ERRCAT_PROVIDER,
			    "sandbox %s not found, and not every provider could be asked", id);
	return herr(HANGAR_EGONE, HANGAR_ERRCAT_PROVIDER, "no sandbox %s (killed, expired or never created)", id);
}

hangar_sandbox *hangar_sandbox_ref(hangar_sandbox *sb)
{
	if (sb)
		atomic_fetch_add(&sb->refs, 1);
	return sb;
}

hangar_sandbox *hangar_sandbox_unref(hangar_sandbox *sb)
{
	if (!sb || atomic_fetch_sub(&sb->refs, 1) != 1)
		return NULL;
	sbview_put(sb->view);
	sbview_put(sb->info_view);
	sbview_put(sb->endpoint_view);
	pthread_mutex_destroy(&sb->mu);
	hangar_ctx_unref(sb->ctx);
	free(sb->id);
	free(sb);
	return NULL;
}

const char *hangar_sandbox_id(const hangar_sandbox *sb)
{
	return sb ? sb->id : NULL;
}

hangar_provider *hangar_sandbox_provider(const hangar_sandbox *sb)
{
	return sb ? sb->provider : NULL;
}

/* The store keeps no row for a sandbox that is gone; the caller's error stays as it was. */
static void forget_quietly(hangar_ctx *ctx, const char *id)
{
	hangar_sys_saved_error saved;

	hangar_sys_error_save(&saved);
	store_forget(ctx, id);
	hangar_sys_error_restore(&saved);
}

/* Asks the provider again; on success the sandbox's view is replaced. */
int sandbox_refresh(struct hangar_sandbox *sb)
{
	struct hangar_provider *p = sb->provider;
	struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
	struct sbview *v;
	int rc = PROVIDER_CALL(p, "status", connect, sb->id, &desc);

	if (rc) {
		sysbox_clear(&desc);
		if (rc == HANGAR_EGONE)
			forget_quietly(sb->ctx, sb->id);
		return rc;
	}
	rc = check_desc(p, &desc);
	if (rc) {
		sysbox_clear(&desc);
		return rc;
	}
	v = sbview_new(&desc);
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	set_view(sb, v);
	return 0;
}

static void fill_info(hangar_sandbox_info *out, const char *id, const char *provider,
		      const struct hangar_sys_sandbox *d)
{
	hangar_sandbox_info full = { 0 };

	full.id = id;
	full.provider = provider;
	full.template_id = d->template_id ? d->template_id : "";
	full.state = d->state == HANGAR_SANDBOX_PAUSED ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING;
	full.created_at_us = d->created_at_us;
	full.expires_at_us = d->expires_at_us;
	hresult_store(out, &full, sizeof(full));
}

int hangar_sandbox_get_info(hangar_sandbox_info *out, hangar_sandbox *sb)
{
	struct sbview *v, *old;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	rc = hversioned_check(out, &hv_sandbox_info, "out");
	if (rc)
		return rc;
	HCHECK_ARG(sb, "sb is NULL");
	rc = sandbox_refresh(sb);
	if (rc)
		return rc;
	v = sandbox_current_view(sb);
	pthread_mutex_lock(&sb->mu);
	old = sb->info_view;
	sb->info_view = v;
	pthread_mutex_unlock(&sb->mu);
	sbview_put(old);
	fill_info(out, sb->id, sb->provider->ops.name, &v->desc);
	herr_clear();
	return 0;
}

int hangar_sandbox_envd_endpoint(hangar_envd_endpoint *out, hangar_sandbox *sb)
{
	static const char *const no_headers[] = { NULL };
	hangar_envd_endpoint full = { 0 };
	struct sbview *v, *old;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	if ((rc = hversioned_check(out, &hv_envd_endpoint, "out")) != 0)
		return rc;
	HCHECK_ARG(sb, "sb is NULL");
	v = sandbox_current_view(sb);
	if (v->desc.state == HANGAR_SANDBOX_PAUSED) {
		sbview_put(v);
		return herr(HANGAR_EPAUSED, HANGAR_ERRCAT_ARGUMENT, "sandbox %s is paused", sb->id);
	}
	pthread_mutex_lock(&sb->mu);
	old = sb->endpoint_view;
	sb->endpoint_view = v;
	pthread_mutex_unlock(&sb->mu);
	sbview_put(old);
	full.url = v->desc.envd_url ? v->desc.envd_url : "";
	full.socket_path = v->desc.envd_socket ? v->desc.envd_socket : "";
	full.access_token = v->desc.access_token ? v->desc.access_token : "";
	full.headers = v->desc.headers ? (const char *const *)v->desc.headers : no_headers;
	hresult_store(out, &full, sizeof(full));
	herr_clear();
	return 0;
}

/* At most this many stale rows are checked per list, so a list stays cheap. */
#define PRUNE_MAX 64

/*
 * After a full list from p: rows the store keeps for p that the list did
 * not show are asked about one by one (a sandbox created meanwhile, or one
 * the list leaves out, is still there), and forgotten when p says gone.
 * Returns how many were forgotten.
 */
static uint32_t prune_store(hangar_ctx *ctx, struct hangar_provider *p, const struct hangar_sys_list *list)
{
	hangar_sys_saved_error saved;
	char **ids = NULL;
	uint32_t n = 0;

	hangar_sys_error_save(&saved);
	if (store_ids(ctx, p->ops.name, PRUNE_MAX, &ids) == 0) {
		for (char **id = ids; *id; id++) {
			struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
			const struct hangar_sys_sandbox *d = list->head;

			while (d && (!d->id || strcmp(d->id, *id) != 0))
				d = d->next;
			if (d || !valid_id(*id))
				continue;
			if (PROVIDER_CALL(p, "status", connect, *id, &desc) == HANGAR_EGONE) {
				hangar_sys_log(ctx, HANGAR_LOG_INFO, "forgetting sandbox %s: %s says it is gone", *id, p->ops.name);
				if (store_forget(ctx, *id) == 0)
					n++;
			}
			sysbox_clear(&desc);
		}
		store_ids_free(ids);
	}
	hangar_sys_error_restore(&saved);
	return n;
}

static void list_free(struct hangar_sys_list *list)
{
	struct hangar_sys_sandbox *d, *next;

	for (d = list->head; d; d = next) {
		next = d->next;
		sysbox_clear(d);
		free(d);
	}
	list->head = NULL;
}

int sandbox_prune(hangar_ctx *ctx, uint32_t *forgotten)
{
	int rc = 0;

	*forgotten = 0;
	/* Providers are only ever appended, so walking without the lock is safe. */
	for (struct hangar_provider *p = providers_first(ctx); p; p = p->next) {
		struct hangar_sys_list list = { NULL, &list.head };
		struct hangar_provider *q;
		char **ids = NULL;
		int r;

		/* A provider with no records has nothing to prune: it is not even set up. */
		if (!p->ops.list)
			continue;
		if ((r = store_ids(ctx, p->ops.name, 1, &ids)) != 0) {
			rc = rc ? rc : r;
			continue;
		}
		r = ids[0] != NULL;
		store_ids_free(ids);
		if (!r)
			continue;
		q = provider_get(ctx, p->ops.name);
		if (!q || (r = PROVIDER_CALL(q, "list", list, &list)) != 0) {
			/* A provider that cannot list now is asked again next time. */
			hangar_sys_log(ctx, HANGAR_LOG_WARNING, "reaper: cannot list %s: %s", p->ops.name, hangar_error_last()->message);
			list_free(&list);
			continue;
		}
		*forgotten += prune_store(ctx, q, &list);
		list_free(&list);
	}
	return rc;
}

/* Lists p's sandboxes; *stopped set when fn's non-zero value is what rc is. */
static int list_one(struct hangar_provider *p, hangar_sandbox_list_fn fn, void *payload, int *stopped)
{
	struct hangar_sys_list list = { NULL, &list.head };
	struct hangar_sys_sandbox *d, *next;
	int rc = 0;

	if (!p->ops.list)
		return 0;
	rc = PROVIDER_CALL(p, "list", list, &list);
	if (rc == 0)
		prune_store(p->ctx, p, &list);
	for (d = list.head; d; d = next) {
		next = d->next;
		if (rc == 0 && d->id) {
			hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;

			fill_info(&info, d->id, p->ops.name, d);
			rc = fn(&info, payload);
			*stopped = rc != 0;
		}
		sysbox_clear(d);
		free(d);
	}
	return rc;
}

/*
 * Whether a provider that cannot be set up may be left out of a list of
 * every provider: only one nobody configured (HANGAR_ECONFIG), that is not
 * the default and holds no sandbox the store knows of. Any other failure
 * could be hiding running sandboxes.
 */
static int may_skip(hangar_ctx *ctx, const char *name, int rc)
{
	hangar_sys_saved_error saved;
	char **ids = NULL;
	int skip;

	if (rc != HANGAR_ECONFIG || strcmp(name, hctx_str(ctx, HS_DEFAULT_PROVIDER)) == 0)
		return 0;
	hangar_sys_error_save(&saved);
	skip = store_ids(ctx, name, 1, &ids) == 0 && !ids[0];
	store_ids_free(ids);
	hangar_sys_error_restore(&saved);
	return skip;
}

int hangar_sandbox_list(hangar_ctx *ctx, const char *provider, hangar_sandbox_list_fn fn, void *payload)
{
	struct hangar_provider *p;
	hangar_sys_saved_error first;
	char failed[256] = "";
	int rc, nfailed = 0, stopped = 0;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	if (provider) {
		p = provider_get(ctx, provider);
		if (!p)
			return hangar_error_last()->code;
		rc = list_one(p, fn, payload, &stopped);
		if (rc == 0)
			herr_clear();
		return rc;
	}
	/* Every provider that answers is listed; the ones that fail are reported after. */
	for (struct hangar_provider *q = providers_first(ctx); q; q = q->next) {
		p = provider_get(ctx, q->ops.name);
		rc = p ? list_one(p, fn, payload, &stopped) : hangar_error_last()->code;
		if (stopped)
			return rc;
		if (rc == 0 || (!p && may_skip(ctx, q->ops.name, rc)))
			continue;
		if (!nfailed++)
			hangar_sys_error_save(&first);
		snprintf(failed + strlen(failed), sizeof(failed) - strlen(failed), "%s%s", nfailed > 1 ? ", " : "",
			 q->ops.name);
	}
	if (nfailed)
		return herr(first.error.code, first.error.category, "cannot list the sandboxes of %s: %s", failed,
			    first.message);
	herr_clear();
	return 0;
}

int hangar_sandbox_pause(hangar_sandbox *sb)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	p = sb->provider;
	if (!(provider_caps(p) & HANGAR_CAP_PAUSE) || !p->ops.pause)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot pause with memory",
			    p->ops.name);
	rc = PROVIDER_CALL(p, "pause", pause, sb->id);
	if (rc)
		return rc;
	return sandbox_refresh(sb);
}

int hangar_sandbox_resume(hangar_sandbox *sb)
{
	struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
	struct hangar_provider *p;
	struct sbview *v;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	p = sb->provider;
	if (!p->ops.resume)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot resume", p->ops.name);
	rc = PROVIDER_CALL(p, "resume", resume, sb->id, &desc);
	if (rc == 0)
		rc = check_desc(p, &desc);
	if (rc) {
		sysbox_clear(&desc);
		return rc;
	}
	v = sbview_new(&desc);
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	set_view(sb, v);
	herr_clear();
	return 0;
}

int hangar_sandbox_set_timeout(hangar_sandbox *sb, int64_t seconds)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(seconds >= 0 && seconds <= SANDBOX_TIMEOUT_MAX, "seconds must be from 0 to 31622400 (366 days)");
	p = sb->provider;
	if (!p->ops.set_timeout)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot change timeouts",
			    p->ops.name);
	rc = PROVIDER_CALL(p, "set_timeout", set_timeout, sb->id, seconds);
	if (rc)
		return rc;
	herr_clear();
	return 0;
}

int hangar_sandbox_kill(hangar_sandbox *sb)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	p = sb->provider;
	rc = PROVIDER_CALL(p, "kill", kill, sb->id);
	if (rc == 0 || rc == HANGAR_EGONE) {
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		store_forget(sb->ctx, sb->id);
		hangar_sys_error_restore(&saved);
	}
	if (rc)
		return rc;
	hangar_sys_log(sb->ctx, HANGAR_LOG_INFO, "killed sandbox %s", sb->id);
	if (hevent_wanted(sb->ctx)) {
		cJSON *ev = cJSON_CreateObject();

		if (ev) {
			cJSON_AddStringToObject(ev, "id", sb->id);
			cJSON_AddStringToObject(ev, "provider", p->ops.name);
		}
		hevent(sb->ctx, "sandbox.killed", ev);
	}
	herr_clear();
	return 0;
}

/* ---- native forks ------------------------------------------------------------------ */

/* One fork the provider described: checked, recorded and wrapped like a created sandbox. */
static void fork_report(struct hangar_sandbox *src, struct hangar_sys_sandbox *d, uint32_t index,
			hangar_fork_fn fn, void *payload)
{
	struct hangar_provider *p = src->provider;
	hangar_fork_result res = { HANGAR_FORK_RESULT_VERSION, sizeof(res), index, 0, NULL, "" };
	struct hangar_sandbox *sb = NULL;
	int rc = d->error;

	if (rc) {
		res.error = rc;
		res.message = d->error_message ? d->error_message : "the fork failed";
		fn(&res, payload);
		return;
	}
	rc = check_desc(p, d);
	if (rc) {
		if (d->id)
			provider_kill_quietly(p, d->id);
	} else {
		hangar_sys_log(src->ctx, HANGAR_LOG_INFO, "forked sandbox %s from %s on %s", d->id, src->id, p->ops.name);
		if (store_record(src->ctx, d->id, p->ops.name) != 0)
			hangar_sys_log(src->ctx, HANGAR_LOG_WARNING, "sandbox %s: %s", d->id, hangar_error_last()->message);
		if (hevent_wanted(src->ctx)) {
			cJSON *ev = cJSON_CreateObject();

			if (ev) {
				cJSON_AddStringToObject(ev, "id", d->id);
				cJSON_AddStringToObject(ev, "provider", p->ops.name);
				cJSON_AddStringToObject(ev, "from", src->id);
			}
			hevent(src->ctx, "sandbox.forked", ev);
		}
		/* A copy: the list entry is freed by the caller. */
		{
			struct hangar_sys_sandbox copy = *d;

			memset(d, 0, sizeof(*d));
			copy.next = NULL;
			rc = sandbox_new(&sb, src->ctx, p, &copy);
		}
	}
	if (rc) {
		res.error = rc;
		res.message = hangar_error_last()->message;
	} else {
		res.sandbox = sb;
	}
	fn(&res, payload);
	hangar_sandbox_unref(sb);
}

int hangar_sandbox_fork(hangar_sandbox *sb, uint32_t count, hangar_fork_fn fn, void *payload)
{
	struct hangar_sys_list list = { NULL, &list.head };
	struct hangar_sys_sandbox *d, *next;
	struct hangar_provider *p;
	uint32_t i = 0;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(count >= 1 && count <= 100, "count must be 1 to 100");
	HCHECK_ARG(fn, "fn is NULL");
	p = sb->provider;
	if (!(provider_caps(p) & HANGAR_CAP_FORK) || !p->ops.fork)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot fork sandboxes",
			    p->ops.name);
	rc = PROVIDER_CALL(p, "fork", fork, sb->id, count, hctx_int(sb->ctx, HS_SANDBOX_TIMEOUT), &list);
	for (d = list.head; d; d = next) {
		next = d->next;
		if (rc == 0 && i < count)
			fork_report(sb, d, i++, fn, payload);
		else if (rc == 0 && d->id && !d->error)
			provider_kill_quietly(p, d->id); /* more than asked for: nobody would know of it */
		sysbox_clear(d);
		free(d);
	}
	if (rc)
		return rc;
	/* Fewer answers than forks asked for: say so for each missing one. */
	for (; i < count; i++) {
		hangar_fork_result res = { HANGAR_FORK_RESULT_VERSION, sizeof(res), i, HANGAR_EPROTOCOL, NULL,
					   "the provider reported nothing for this fork" };

		fn(&res, payload);
	}
	herr_clear();
	return 0;
}

/* ---- used by exec, files and processes -------------------------------------------- */

struct sbview *sandbox_begin(struct hangar_sandbox *sb, struct envd_call *call, const char *user)
{
	struct sbview *v;

	/* Every call that runs as a user starts here: its name is checked once. */
	if (hcheck_text(user, "the user name"))
		return NULL;
	v = sandbox_current_view(sb);

	if (v->desc.state == HANGAR_SANDBOX_PAUSED) {
		/* Maybe someone resumed it since: ask once before refusing. */
		sbview_put(v);
		if (sandbox_refresh(sb) != 0)
			return NULL;
		v = sandbox_current_view(sb);
		if (v->desc.state == HANGAR_SANDBOX_PAUSED) {
			sbview_put(v);
			herr(HANGAR_EPAUSED, HANGAR_ERRCAT_SANDBOX, "sandbox %s is paused; resume it first", sb->id);
			return NULL;
		}
	}
	memset(call, 0, sizeof(*call));
	call->ep = &v->ep;
	call->user = user;
	call->deadline_ms = hctx_int(sb->ctx, HS_REQUEST_TIMEOUT) * 1000;
	return v;
}

int sandbox_paused_now(struct hangar_sandbox *sb)
{
	struct sbview *v;
	int rc = sandbox_refresh(sb), paused;

	if (rc)
		return rc;
	v = sandbox_current_view(sb);
	paused = v->desc.state == HANGAR_SANDBOX_PAUSED;
	sbview_put(v);
	return paused;
}

int sandbox_classify_failure(struct hangar_sandbox *sb, int rc, const struct envd_status *st)
{
	hangar_error saved = *hangar_error_last();
	char msg[1024];
	int r;

	/*
	 * Only a silent, vanished or broken-off sandbox needs a second look; an
	 * answer is an answer. An edge in front of envd says a sandbox is gone
	 * with 502 (E2B), 404 or 410 (CubeProxy); a stream that broke off
	 * (HANGAR_EPROTOCOL) may be envd dying with its sandbox.
	 */
	if (!st || !(rc == HANGAR_EPROTOCOL || st->transport_failed || st->timed_out || st->http_status == 502 ||
		     st->http_status == 410 || (st->http_status == 404 && st->code == CONNECT_UNIMPLEMENTED)))
		return rc;
	snprintf(msg, sizeof(msg), "%s", saved.message);
	r = sandbox_refresh(sb);
	if (r == HANGAR_EGONE)
		return herr(HANGAR_EGONE, HANGAR_ERRCAT_SANDBOX, "sandbox %s is gone (%s)", sb->id, msg);
	if (r == 0) {
		struct sbview *v = sandbox_current_view(sb);
		int paused = v->desc.state == HANGAR_SANDBOX_PAUSED;

		sbview_put(v);
		if (paused)
			return herr(HANGAR_EPAUSED, HANGAR_ERRCAT_SANDBOX, "sandbox %s was paused (%s)", sb->id, msg);
	}
	/* Alive (or the provider cannot say): report the original failure. */
	herr_http(rc, saved.category, saved.http_status, saved.provider_code, "%s", msg);
	herr_flags(saved.flags);
	herr_retry_after(saved.retry_after_s);
	return rc;
}
