/* hangar_ctx: settings, providers, logging, shared clients. */
#define _GNU_SOURCE
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "context.h"
#include "environment.h"

/*
 * The context's name as a lease holder: the host and process say who it is
 * in a log or a lease row; the random part keeps two contexts of one
 * process (or a reused pid) apart.
 */
static void name_instance(hangar_ctx *ctx)
{
	char host[64] = "";
	unsigned char raw[6];

	if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
		snprintf(host, sizeof(host), "host");
	host[sizeof(host) - 1] = '\0';
	if (sodium_init() < 0)
		memset(raw, 0, sizeof(raw));   /* the host and pid still tell processes apart */
	else
		randombytes_buf(raw, sizeof(raw));
	snprintf(ctx->instance, sizeof(ctx->instance), "%s:%ld:%02x%02x%02x%02x%02x%02x", host, (long)getpid(),
		 raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]);
}

static size_t module_index(const struct hmodule *m)
{
	size_t i;

	for (i = 0; hangar_modules[i] && hangar_modules[i] != m; i++)
		;
	return i;
}

void *hctx_module(hangar_ctx *ctx, const struct hmodule *m)
{
	size_t i = module_index(m);

	return hangar_modules[i] ? ctx->modules[i] : NULL;
}

int hmodules_check_setting(const char *name, const char *value)
{
	int rc;

	for (size_t i = 0; hangar_modules[i]; i++)
		if (hangar_modules[i]->check_setting && (rc = hangar_modules[i]->check_setting(name, value)) != 0)
			return rc;
	return 0;
}

/*
 * Opens every module, lowest layer first. On a failure the context's unref
 * closes those it reached, the failed one included: a close must cope with
 * a state its open() left half set up.
 */
static int modules_open(hangar_ctx *ctx)
{
	static_assert(HMODULES_MAX >= 6, "room for every module in hangar_modules");
	int rc;

	for (size_t i = 0; hangar_modules[i]; i++) {
		if (i >= HMODULES_MAX)
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_CONFIG, "too many modules (HMODULES_MAX)");
		const struct hmodule *m = hangar_modules[i];

		if (m->state_size && !(ctx->modules[i] = calloc(1, m->state_size)))
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		ctx->opened = i + 1;
		if (m->open && (rc = m->open(ctx, ctx->modules[i])) != 0)
			return rc;
	}
	return 0;
}

static void modules_close(hangar_ctx *ctx)
{
	for (size_t i = ctx->opened; i-- > 0;) {
		if (hangar_modules[i]->close)
			hangar_modules[i]->close(ctx, ctx->modules[i]);
		free(ctx->modules[i]);
		ctx->modules[i] = NULL;
	}
	ctx->opened = 0;
}

const char *hctx_instance(hangar_ctx *ctx)
{
	return ctx->instance;
}

int hangar_ctx_new(hangar_ctx **out, uint32_t flags)
{
	hangar_ctx *ctx;
	int r;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(!(flags & ~HANGAR_CTX_NO_ENV), "unknown flags");
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	atomic_init(&ctx->refs, 1);
	pthread_mutex_init(&ctx->mu, NULL);
	name_instance(ctx);
	r = settings_load(ctx, !(flags & HANGAR_CTX_NO_ENV));
	/* The default environments file is checked here (one named explicitly was, as a setting). */
	if (r == 0)
		r = env_check_ctx(ctx);
	if (r == 0)
		r = modules_open(ctx);
	if (r == 0)
		r = providers_builtin(ctx);
	if (r) {
		hangar_ctx_unref(ctx);
		return r;
	}
	herr_clear();
	*out = ctx;
	return 0;
}

hangar_ctx *hangar_ctx_ref(hangar_ctx *ctx)
{
	if (ctx)
		atomic_fetch_add(&ctx->refs, 1);
	return ctx;
}

hangar_ctx *hangar_ctx_unref(hangar_ctx *ctx)
{
	if (!ctx || atomic_fetch_sub(&ctx->refs, 1) != 1)
		return NULL;
	/* Modules first: the tiers' hedged creates still finishing use the providers. */
	modules_close(ctx);
	providers_free(ctx);
	settings_free(ctx);
	pthread_mutex_destroy(&ctx->mu);
	free(ctx);
	return NULL;
}

void hangar_ctx_set_log(hangar_ctx *ctx, int max_level, hangar_log_fn fn, void *payload)
{
	if (!ctx)
		return;
	ctx->log_max = max_level;
	ctx->log_fn = fn;
	ctx->log_payload = payload;
}

void hangar_ctx_set_event(hangar_ctx *ctx, hangar_event_fn fn, void *payload)
{
	if (!ctx)
		return;
	ctx->event_fn = fn;
	ctx->event_payload = payload;
}

int hevent_wanted(hangar_ctx *ctx)
{
	return ctx && ctx->event_fn;
}

void hevent(hangar_ctx *ctx, const char *name, struct cJSON *obj)
{
	char *json;

	if (!obj)
		return;
	if (hevent_wanted(ctx)) {
		json = cJSON_PrintUnformatted(obj);
		if (json)
			ctx->event_fn(name, json, ctx->event_payload);
		else
			hangar_sys_log(ctx, HANGAR_LOG_WARNING, "event %s dropped: out of memory", name);
		cJSON_free(json);
	}
	cJSON_Delete(obj);
}

void hangar_sys_log(hangar_ctx *ctx, int32_t level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!ctx || !ctx->log_fn || level > ctx->log_max || !fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctx->log_fn(level, msg, ctx->log_payload);
}

