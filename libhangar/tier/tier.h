/*
 * Tiers: which provider serves a create, fallback past full or unreachable
 * providers with a per-context cooldown, and hedged creates.
 *
 * Retry-After: a provider that knows how long it will be full says so with
 * hangar_sys_error_retry_after() (hangar_error.retry_after_s), from the
 * platform's Retry-After header. The cooldown is then that long, up to
 * TIER_RETRY_AFTER_MAX_S, when that is longer than
 * HANGAR_TIER_COOLDOWN_SECONDS. Nothing is read out of a message.
 */
#pragma once

#include "core/internal.h"

struct tier_state;
struct hangar_provider;
struct hangar_sys_sandbox;

struct hmodule;
/* The tiers' per-context state: cooldowns and hedged creates (core/module.h). */
extern const struct hmodule tier_module;

/* The tier a create asks for, by its opts->tier (NULL: "default"); its
 * static name, or NULL with HANGAR_EINVAL set when there is no such tier. */
const char *tier_name_of(const char *tier);

/*
 * Creates a sandbox for o (already validated, timeout filled in) on the
 * provider o->provider names, or else on the one its tier picks. templates
 * (an environment's provider -> template object, or NULL) gives the
 * template for the provider asked when o names none. On success
 * *out_p is that provider and desc describes the sandbox (the caller checks
 * it and owns its contents); on failure the thread's last error says why.
 */
struct cJSON;
int tier_create(hangar_ctx *ctx, const hangar_create_opts *o, const struct cJSON *templates,
		struct hangar_provider **out_p, struct hangar_sys_sandbox *desc);

/*
 * The providers a create of tier (NULL: the default tier) would ask, in
 * order, whatever their state: *names (n of them) to free, each and the
 * array. 0 or HANGAR_EINVAL/HANGAR_ENOMEM.
 */
int tier_providers(hangar_ctx *ctx, const char *tier, char ***names, size_t *n);

/* The longest cooldown a Retry-After can ask for (a proxy's or platform's
 * word must not keep a provider out for a day). */
#define TIER_RETRY_AFTER_MAX_S 3600
