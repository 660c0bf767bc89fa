/* The context's layout: private to libhangar/core. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "module.h"
#include "providers.h"

struct setting {
	const struct hangar_setting_def *def;
	struct hangar_provider *owner;    /* NULL: one of the library's own */
	char *value;                      /* NULL: default */
	char *computed;                   /* a default computed at open (the state dir), or NULL */
	int source;                       /* hangar_setting_source */
	int64_t num;                      /* parsed numbers and booleans */
};

struct hangar_ctx {
	atomic_int refs;
	/* The library's settings at their enum hsetting index, then each
	 * provider's in registration order. Grows only while providers are
	 * registered, before the context is shared. */
	struct setting *settings;
	size_t nsettings, settings_cap;
	int from_env;                     /* settings are read from the environment */

	pthread_mutex_t mu;               /* providers */
	struct hangar_provider *providers;
	void *modules[HMODULES_MAX];      /* each module's state, at its index in hangar_modules */
	size_t opened;                    /* how many modules are open */

	int log_max;
	hangar_log_fn log_fn;
	void *log_payload;

	hangar_event_fn event_fn;
	void *event_payload;

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
