/*
 * Provider registry and lookup. A provider lives as long as its context.
 * The core knows no provider by name: the built-in ones come from one list
 * (hangar_builtin_providers), others register on a context or process-wide,
 * and each brings its own settings and capabilities (table version 3).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "context.h"

/* Tables registered process-wide (hangar_provider_register(NULL, ...)). */
struct global_provider {
	struct hangar_provider_ops ops;
	void *data;
	struct global_provider *next;
};

static pthread_mutex_t globals_mu = PTHREAD_MUTEX_INITIALIZER;
static struct global_provider *globals;

static int valid_name(const char *name)
{
	size_t n;

	if (!name)
		return 0;
	n = strlen(name);
	return n > 0 && n <= 32 && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/*
 * Checks a caller's table and copies what this library knows of it into
 * out. The table's version is checked here, once: slots its version cannot
 * have meant are cleared, so a call site tests only the slot's pointer.
 */
static int take_table(struct hangar_provider_ops *out, const struct hangar_provider_ops *ops)
{
	HCHECK_ARG(ops, "ops is NULL");
	HCHECK_ARG(ops->version >= 1 && ops->size >= offsetof(struct hangar_provider_ops, list) + sizeof(ops->list),
		   "ops->version or ops->size is too small for version 1");
	HCHECK_ARG(ops->version < 3 || ops->size >= offsetof(struct hangar_provider_ops, get_capabilities) +
							   sizeof(ops->get_capabilities),
		   "ops->size is too small for version 3");
	HCHECK_ARG(ops->version < 4 ||
			   ops->size >= offsetof(struct hangar_provider_ops, oom_kills) + sizeof(ops->oom_kills),
		   "ops->size is too small for version 4");
	HCHECK_ARG(ops->version < 5 ||
			   ops->size >= offsetof(struct hangar_provider_ops, snapshot_delete) +
						sizeof(ops->snapshot_delete),
		   "ops->size is too small for version 5");
	HCHECK_ARG(ops->version < 6 ||
			   ops->size >= offsetof(struct hangar_provider_ops, snapshot_list) +
						sizeof(ops->snapshot_list),
		   "ops->size is too small for version 6");
	HCHECK_ARG(ops->version < 7 ||
			   ops->size >= offsetof(struct hangar_provider_ops, snapshot_held) +
						sizeof(ops->snapshot_held),
		   "ops->size is too small for version 7");
	HCHECK_ARG(valid_name(ops->name), "ops->name must match [a-z0-9_-]{1,32}");
	HCHECK_ARG(ops->init && ops->create && ops->connect && ops->kill,
		   "ops->init, create, connect and kill are mandatory");
	memset(out, 0, sizeof(*out));
	/* Copy what the caller's table has and this library knows; the rest stays NULL. */
	memcpy(out, ops, ops->size < sizeof(*out) ? ops->size : sizeof(*out));
	out->size = sizeof(*out);
	if (out->version < 2) {
		/* Slots a version 1 table cannot have meant, whatever its size says. */
		out->pause_filesystem = NULL;
		out->snapshot = NULL;
		out->template_build = NULL;
		out->template_list = NULL;
		out->fork = NULL;
		out->metrics = NULL;
		out->logs = NULL;
	}
	if (out->version < 3) {
		out->settings = NULL;
		out->get_capabilities = NULL;
	}
	if (out->version < 4) {
		out->expose_port = NULL;
		out->oom_kills = NULL;
	}
	if (out->version < 5)
		out->snapshot_delete = NULL;
	if (out->version < 6) {
		out->snapshot_release = NULL;
		out->snapshot_list = NULL;
	}
	if (out->version < 7)
		out->snapshot_held = NULL;
	return 0;
}

static int register_on(hangar_ctx *ctx, const struct hangar_provider_ops *ops, void *data)
{
	struct hangar_provider *p, **tail;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((r = take_table(&p->ops, ops)) != 0) {
		free(p);
		return r;
	}
	p->ctx = ctx;
	p->data = data;
	p->capabilities = p->ops.capabilities;
	pthread_mutex_lock(&ctx->mu);
	for (tail = &ctx->providers; *tail; tail = &(*tail)->next)
		if (!strcmp((*tail)->ops.name, p->ops.name)) {
			pthread_mutex_unlock(&ctx->mu);
			r = herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "a provider named %s is already registered",
				 p->ops.name);
			free(p);
			return r;
		}
	/* Its settings are read and checked now, so a wrong one fails here. */
	r = settings_add(ctx, p, p->ops.settings);
	if (r == 0)
		*tail = p;
	pthread_mutex_unlock(&ctx->mu);
	if (r)
		free(p);
	return r;
}

int hangar_provider_register(hangar_ctx *ctx, const struct hangar_provider_ops *ops, void *data)
{
	struct global_provider *g, **tail;
	int r;

	if (ctx)
		return register_on(ctx, ops, data);
	/* Process-wide: every context opened from now on has it. */
	g = calloc(1, sizeof(*g));
	if (!g)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((r = take_table(&g->ops, ops)) != 0 || (r = settings_check_defs(g->ops.name, g->ops.settings)) != 0) {
		free(g);
		return r;
	}
	g->data = data;
	pthread_mutex_lock(&globals_mu);
	for (tail = &globals; *tail; tail = &(*tail)->next)
		if (!strcmp((*tail)->ops.name, g->ops.name))
			break;
	for (size_t i = 0; !*tail && hangar_builtin_providers[i]; i++)
		if (!strcmp(hangar_builtin_providers[i]->name, g->ops.name))
			tail = NULL;
	if (!tail || *tail) {
		pthread_mutex_unlock(&globals_mu);
		r = herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "a provider named %s is already registered",
			 g->ops.name);
		free(g);
		return r;
	}
	*tail = g;
	pthread_mutex_unlock(&globals_mu);
	herr_clear();
	return 0;
}

int providers_builtin(hangar_ctx *ctx)
{
	int r = 0;

	for (size_t i = 0; r == 0 && hangar_builtin_providers[i]; i++)
		r = register_on(ctx, hangar_builtin_providers[i], NULL);
	pthread_mutex_lock(&globals_mu);
	for (struct global_provider *g = globals; r == 0 && g; g = g->next)
		r = register_on(ctx, &g->ops, g->data);
	pthread_mutex_unlock(&globals_mu);
	return r;
}

int provider_in_use(struct hangar_provider *p)
{
	return p->initialised;
}

uint64_t provider_caps(const struct hangar_provider *p)
{
	return p->capabilities;
}

void providers_free(hangar_ctx *ctx)
{
	struct hangar_provider *p = ctx->providers, *next;

	for (; p; p = next) {
		next = p->next;
		if (p->initialised && p->ops.fini)
			p->ops.fini(p->state);
		free(p);
	}
	ctx->providers = NULL;
}

int provider_call_end(struct hangar_provider *p, int rc, int walk, const char *what)
{
	if (rc == 0 || (walk && rc > 0))
		return rc;
	return provider_failed(p, rc, what);
}

void provider_kill_quietly(struct hangar_provider *p, const char *id)
{
	hangar_sys_saved_error saved;

	hangar_sys_error_save(&saved);
	if (PROVIDER_CALL(p, "kill", kill, id) != 0)
		hangar_sys_log(p->ctx, HANGAR_LOG_WARNING, "provider %s: sandbox %s could not be killed: %s", p->ops.name, id,
		     hangar_error_last()->message);
	hangar_sys_error_restore(&saved);
}

int provider_failed(struct hangar_provider *p, int rc, const char *what)
{
	if (rc >= 0)
		rc = HANGAR_EUNAVAILABLE;
	if (hangar_error_last()->code != rc)
		herr(rc, HANGAR_ERRCAT_PROVIDER, "provider %s: %s failed", p->ops.name, what);
	return rc;
}

struct hangar_provider *provider_get(hangar_ctx *ctx, const char *name)
{
	struct hangar_provider *p;
	int r = 0;

	if (!name)
		name = hctx_str(ctx, HS_DEFAULT_PROVIDER);
	if (hcheck_text(name, "the provider name"))
		return NULL;
	pthread_mutex_lock(&ctx->mu);
	for (p = ctx->providers; p; p = p->next)
		if (!strcmp(p->ops.name, name))
			break;
	if (p && !p->initialised) {
		/*
		 * Set up on first use, so a provider nobody uses cannot fail the
		 * context; a failed set-up is tried again next time, so fixing a
		 * setting with hangar_ctx_set() is enough, and each failure reports
		 * its own reason.
		 */
		herr_clear();
		r = p->ops.init(&p->state, ctx, p->data);
		if (r == 0) {
			/* Asked once: a table serving several flavours says which it is now. */
			if (p->ops.get_capabilities)
				p->capabilities = p->ops.get_capabilities(p->state);
			p->initialised = 1;
		} else if (r > 0) {
			r = HANGAR_EUNAVAILABLE;
		}
	}
	pthread_mutex_unlock(&ctx->mu);
	if (!p) {
		herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no provider named %s", name);
		return NULL;
	}
	if (r) {
		if (hangar_error_last()->code != r)
			herr(r, HANGAR_ERRCAT_PROVIDER, "provider %s could not be set up", name);
		return NULL;
	}
	return p;
}

int hangar_provider_lookup(hangar_provider **out, hangar_ctx *ctx, const char *name)
{
	struct hangar_provider *p;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(ctx, "ctx is NULL");
	p = provider_get(ctx, name);
	if (!p)
		return hangar_error_last()->code;
	hangar_ctx_ref(ctx);
	*out = p;
	return 0;
}

hangar_provider *hangar_provider_ref(hangar_provider *p)
{
	if (p)
		hangar_ctx_ref(p->ctx);
	return p;
}

hangar_provider *hangar_provider_unref(hangar_provider *p)
{
	if (p)
		hangar_ctx_unref(p->ctx);
	return NULL;
}

const char *hangar_provider_name(const hangar_provider *p)
{
	return p ? p->ops.name : NULL;
}

uint64_t hangar_provider_capabilities(const hangar_provider *p)
{
	return p ? p->capabilities : 0;
}

int hangar_provider_foreach(hangar_ctx *ctx, hangar_provider_fn fn, void *payload)
{
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	/* Providers are only ever appended, so walking without the lock is safe. */
	for (struct hangar_provider *p = ctx->providers; p; p = p->next) {
		int r = fn(p, payload);

		if (r)
			return r;
	}
	return 0;
}

struct hangar_provider *providers_first(hangar_ctx *ctx)
{
	return ctx->providers;
}
