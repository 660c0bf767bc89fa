/* The context's layout, private to libhangar/core. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

struct sqlite3;

struct setting_value {
	char *value;            /* NULL: default */
	int source;             /* hangar_setting_source */
	int64_t num;            /* parsed numbers and booleans */
};

struct hangar_provider {
	hangar_ctx *ctx;                  /* owner; refs on a provider are refs on it */
	struct hangar_provider_ops ops;
	void *data;
	void *state;
	int initialised;
	struct hangar_provider *next;
};

struct hangar_ctx {
	atomic_int refs;
	struct setting_value settings[HS_COUNT];
	char *defaults[HS_COUNT];         /* computed defaults (e.g. the state dir) */

	pthread_mutex_t mu;               /* providers, envd client */
	struct hangar_provider *providers;
	struct envd_client *envd;
	struct sqlite3 *db;               /* the state store, opened on first use */

	int log_max;
	hangar_log_fn log_fn;
	void *log_payload;

	hangar_event_fn event_fn;
	void *event_payload;
	struct tier_state *tiers;         /* cooldowns, hedged creates (tier/tier.c) */
};

int settings_load(hangar_ctx *ctx, int from_env);
void settings_free(hangar_ctx *ctx);
/*
 * A provider operation returned rc: makes sure the thread's error says so
 * (a provider that returned a code without describing it gets a generic
 * message; a non-negative code becomes HANGAR_EUNAVAILABLE). Returns the code.
 */
int provider_failed(struct hangar_provider *p, int rc, const char *what);
/* The provider named name, initialised; NULL with the error set. */
struct hangar_provider *provider_get(hangar_ctx *ctx, const char *name);
void providers_free(hangar_ctx *ctx);
/* Registers the built-in providers. */
int providers_builtin(hangar_ctx *ctx);
/* Before HANGAR_E2B_FLAVOR changes: HANGAR_EINVAL when the e2b provider is in use. */
int provider_e2b_flavour_check(hangar_ctx *ctx, const char *flavour);
/* After it changed: an e2b provider not set up yet takes the new flavour's table. */
void provider_e2b_flavour_changed(hangar_ctx *ctx, const char *flavour);
