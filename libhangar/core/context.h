/* The context's layout, private to libhangar/core. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

struct db;

struct setting {
	const struct hangar_setting_def *def;
	struct hangar_provider *owner;    /* NULL: one of the library's own */
	char *value;                      /* NULL: default */
	char *computed;                   /* a default computed at open (the state dir), or NULL */
	int source;                       /* hangar_setting_source */
	int64_t num;                      /* parsed numbers and booleans */
};

struct hangar_provider {
	hangar_ctx *ctx;                  /* owner; refs on a provider are refs on it */
	struct hangar_provider_ops ops;
	void *data;
	void *state;
	int initialised;
	uint64_t capabilities;            /* what it reported at init, else ops.capabilities */
	struct hangar_provider *next;
};

struct hangar_ctx {
	atomic_int refs;
	/* The library's settings at their enum hsetting index, then each
	 * provider's in registration order. Grows only while providers are
	 * registered, before the context is shared. */
	struct setting *settings;
	size_t nsettings, settings_cap;
	int from_env;                     /* settings are read from the environment */

	pthread_mutex_t mu;               /* providers, envd client */
	struct hangar_provider *providers;
	struct envd_client *envd;
	struct db *db;                    /* the state store, opened on first use */
	struct holder_memo *holders;      /* which provider holds which sandbox (store/store.c) */

	int log_max;
	hangar_log_fn log_fn;
	void *log_payload;

	hangar_event_fn event_fn;
	void *event_payload;
	struct tier_state *tiers;         /* cooldowns, hedged creates (tier/tier.c) */

	hangar_session_hook_fn session_hook;
	void *session_hook_payload;

	/* Who this context is among the holders of a store lease (the reaper's):
	 * host, process and a random part, fixed at open. */
	char instance[96];
};

int settings_load(hangar_ctx *ctx, int from_env);
/* Declares owner's settings, read and validated now (HANGAR_ECONFIG names the variable). */
int settings_add(hangar_ctx *ctx, struct hangar_provider *owner, const struct hangar_setting_def *defs);
/* Checks a provider's declarations alone (process-wide registration). */
int settings_check_defs(const char *provider, const struct hangar_setting_def *defs);
void settings_free(hangar_ctx *ctx);
/* Whether p has been set up (its HANGAR_SETTING_FIXED settings can no longer change). */
int provider_in_use(struct hangar_provider *p);
/*
 * Every call into a provider goes through PROVIDER_CALL (slots returning 0
 * or a failure) or PROVIDER_WALK (slots that report through a callback and
 * return its non-zero value): the thread's error is cleared first, so what a
 * provider leaves there is its own, and a failure is recorded after
 * (provider_failed). Both evaluate to the code.
 */
#define PROVIDER_CALL(p, what, slot, ...) \
	provider_call_end((p), (herr_clear(), (p)->ops.slot((p)->state, __VA_ARGS__)), 0, (what))
#define PROVIDER_WALK(p, what, slot, ...) \
	provider_call_end((p), (herr_clear(), (p)->ops.slot((p)->state, __VA_ARGS__)), 1, (what))
int provider_call_end(struct hangar_provider *p, int rc, int walk, const char *what);
/*
 * A provider operation returned rc: makes sure the thread's error says so
 * (a provider that returned a code without describing it gets a generic
 * message; a non-negative code becomes HANGAR_EUNAVAILABLE). Returns the code.
 */
int provider_failed(struct hangar_provider *p, int rc, const char *what);
/* Kills id on p on a clean-up path, keeping the thread's error as it was. */
void provider_kill_quietly(struct hangar_provider *p, const char *id);
/* The capabilities p reported (after init) or declared. */
uint64_t provider_caps(const struct hangar_provider *p);
/* The provider named name, initialised; NULL with the error set. */
struct hangar_provider *provider_get(hangar_ctx *ctx, const char *name);
void providers_free(hangar_ctx *ctx);
/* Registers the built-in providers, then those registered process-wide. */
int providers_builtin(hangar_ctx *ctx);
