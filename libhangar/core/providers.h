/*
 * Providers as the layers that call them see them: the registered table and
 * state, and the one way to call a slot. For core and every layer above it;
 * providers themselves see only include/hangar/sys/provider.h.
 */
#pragma once

#include "internal.h"

struct hangar_provider {
	hangar_ctx *ctx;                  /* owner; refs on a provider are refs on it */
	struct hangar_provider_ops ops;
	void *data;
	void *state;
	int initialised;
	uint64_t capabilities;            /* what it reported at init, else ops.capabilities */
	struct hangar_provider *next;
};

/* The first of ctx's providers, in registration order (then ->next). Providers are
 * only ever appended, so the list may be walked without a lock. */
struct hangar_provider *providers_first(hangar_ctx *ctx);
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
