/* Provider registry and lookup. A provider lives as long as its context. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "../providers/e2b/e2b.h"

int provider_local_register(hangar_ctx *ctx);

static int valid_name(const char *name)
{
	size_t n;

	if (!name)
		return 0;
	n = strlen(name);
	return n > 0 && n <= 32 && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int hangar_provider_register(hangar_ctx *ctx, const struct hangar_provider_ops *ops, void *data)
{
	struct hangar_provider *p, **tail;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(ops, "ops is NULL");
	HCHECK_ARG(ops->version >= 1 && ops->size >= offsetof(struct hangar_provider_ops, list) + sizeof(ops->list),
		   "ops->version or ops->size is too small for version 1");
	HCHECK_ARG(valid_name(ops->name), "ops->name must match [a-z0-9_-]{1,32}");
	HCHECK_ARG(ops->init && ops->create && ops->connect && ops->kill,
		   "ops->init, create, connect and kill are mandatory");
	p = calloc(1, sizeof(*p));
	if (!p)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	/* Copy what the caller's table has and this library knows; the rest stays NULL. */
	memcpy(&p->ops, ops, ops->size < sizeof(p->ops) ? ops->size : sizeof(p->ops));
	p->ops.size = sizeof(p->ops);
	if (p->ops.version < 2) {
		/* Slots a version 1 table cannot have meant, whatever its size says. */
		p->ops.pause_filesystem = NULL;
		p->ops.snapshot = NULL;
		p->ops.template_build = NULL;
		p->ops.template_list = NULL;
		p->ops.fork = NULL;
		p->ops.metrics = NULL;
		p->ops.logs = NULL;
	}
	p->ctx = ctx;
	p->data = data;
	pthread_mutex_lock(&ctx->mu);
	for (tail = &ctx->providers; *tail; tail = &(*tail)->next)
		if (!strcmp((*tail)->ops.name, ops->name)) {
			pthread_mutex_unlock(&ctx->mu);
			free(p);
			return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "a provider named %s is already registered",
				    ops->name);
		}
	*tail = p;
	pthread_mutex_unlock(&ctx->mu);
	return 0;
}

int providers_builtin(hangar_ctx *ctx)
{
	int r = provider_local_register(ctx);

	return r ? r : provider_e2b_register(ctx);
}

int provider_e2b_flavour_check(hangar_ctx *ctx, const char *flavour)
{
	int r = 0;

	pthread_mutex_lock(&ctx->mu);
	for (struct hangar_provider *p = ctx->providers; p; p = p->next)
		if (!strcmp(p->ops.name, "e2b") && p->initialised && e2b_ops_for(flavour) &&
		    p->ops.init != e2b_ops_for(flavour)->init)
			r = herr(HANGAR_EINVAL, HANGAR_ERRCAT_CONFIG,
				 "HANGAR_E2B_FLAVOR cannot change: the e2b provider of this context is already in use");
	pthread_mutex_unlock(&ctx->mu);
	return r;
}

void provider_e2b_flavour_changed(hangar_ctx *ctx, const char *flavour)
{
	const struct hangar_provider_ops *ops = e2b_ops_for(flavour);

	pthread_mutex_lock(&ctx->mu);
	for (struct hangar_provider *p = ctx->providers; ops && p; p = p->next)
		if (!strcmp(p->ops.name, "e2b") && !p->initialised && p->ops.init != ops->init &&
		    (p->ops.init == e2b_cloud_ops.init || p->ops.init == e2b_selfhosted_ops.init ||
		     p->ops.init == e2b_cube_ops.init)) {
			/* Not set up yet: take the other flavour's table. */
			memcpy(&p->ops, ops, sizeof(p->ops));
		}
	pthread_mutex_unlock(&ctx->mu);
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
		if (r == 0)
			p->initialised = 1;
		else if (r > 0)
			r = HANGAR_EUNAVAILABLE;
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
	return p ? p->ops.capabilities : 0;
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
