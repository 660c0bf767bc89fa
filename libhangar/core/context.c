/* hangar_ctx: settings, providers, logging, shared clients. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "../envd/client.h"
#include "../store/store.h"
#include "../tier/tier.h"
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
		r = tier_state_new(&ctx->tiers);
	if (r == 0)
		r = store_memo_new(ctx);
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
	/* Hedged creates still finishing use the providers: wait for them first. */
	tier_state_free(ctx, ctx->tiers);
	providers_free(ctx);
	if (ctx->envd)
		envd_client_free(ctx->envd);
	if (ctx->db)
		store_close(ctx->db);
	store_memo_free(ctx);
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
			hlog(ctx, HANGAR_LOG_WARNING, "event %s dropped: out of memory", name);
		cJSON_free(json);
	}
	cJSON_Delete(obj);
}

void hlog(hangar_ctx *ctx, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!ctx || !ctx->log_fn || level > ctx->log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ctx->log_fn(level, msg, ctx->log_payload);
}

struct envd_client *hctx_envd(hangar_ctx *ctx)
{
	struct envd_client *c;

	pthread_mutex_lock(&ctx->mu);
	if (!ctx->envd && envd_client_new(&ctx->envd) != 0)
		ctx->envd = NULL;
	c = ctx->envd;
	pthread_mutex_unlock(&ctx->mu);
	if (!c)
		herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot set up the envd client");
	return c;
}

int hangar_sys_error(int code, int http_status, int os_errno, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (code >= 0)
		code = HANGAR_EUNAVAILABLE; /* a provider must report a failure as one */
	if (os_errno)
		return herr_os(code, os_errno, "%s", msg);
	return herr_http(code, HANGAR_ERRCAT_PROVIDER, http_status, NULL, "%s", msg);
}
