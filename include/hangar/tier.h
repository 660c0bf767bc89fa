/*
 * libhangar: tiers.
 *
 * A create asks for a tier rather than a provider (hangar_create_opts.tier):
 *
 *   fast      start time matters: forks, best-of-N, short jobs. Falls back to
 *             HANGAR_DEFAULT_PROVIDER when none of its providers can serve,
 *             since speed is a preference.
 *   isolated  untrusted code that needs a kernel boundary. Only providers
 *             listed for it with HANGAR_CAP_KERNEL_ISOLATION ever serve it;
 *             it never falls back.
 *   default   everything else: HANGAR_DEFAULT_PROVIDER, after the providers
 *             listed for it, if any.
 *   heavy     large sandboxes; never falls back.
 *
 * HANGAR_TIERS maps tiers to ordered provider names. A create takes the first
 * listed provider that is loaded (registered and set up) and not cooling
 * down. A provider that answers "full" (HANGAR_ECAPACITY, HTTP 429) or
 * "unreachable" (HTTP 502, 503, 504, no connection) is skipped for
 * HANGAR_TIER_COOLDOWN_SECONDS, or for as long as its Retry-After header
 * asks (hangar_error.retry_after_s, at most one hour) when that is longer,
 * and the create moves on to the next provider. The decision reads the
 * error's fields (code, http_status, os_errno, flags, retry_after_s), never
 * its message. Any other failure fails the create. Each such move is
 * reported as a "sandbox.tier_fallback" event (hangar_ctx_set_event(),
 * context.h). When every provider a create
 * could use is cooling down, it fails with HANGAR_ECAPACITY without asking
 * any of them.
 *
 * HANGAR_TIER_HEDGE opts a tier into hedged creates: when its first provider
 * has not answered within the delay, the next one is asked too; the first
 * sandbox to be ready is kept and the other is killed when it arrives.
 */
#ifndef HANGAR_TIER_H
#define HANGAR_TIER_H

#include "common.h"
#include "types.h"

HANGAR_BEGIN_DECL

/* ---- introspection ------------------------------------------------------------ */

/** One tier, as hangar_tier_foreach() reports it. */
typedef struct hangar_tier_info {
	uint32_t version;
	uint32_t size;
	const char *name;                 /**< "fast", "isolated", "default" or "heavy" */
	uint32_t n_providers;             /**< entries in each array below */
	int32_t falls_back;               /**< 1: the last provider is HANGAR_DEFAULT_PROVIDER as a fallback */
	const char *const *providers;     /**< the order a create tries them in */
	const int64_t *cooling_until_us;  /**< per provider: end of its cooldown, microseconds since
	                                       the epoch; 0 when it is not cooling down */
	const int32_t *loaded;            /**< per provider: 1 when registered, set up and allowed in
	                                       this tier (isolated: HANGAR_CAP_KERNEL_ISOLATION) */
	int64_t hedge_ms;                 /**< HANGAR_TIER_HEDGE delay; 0: creates are not hedged */
} hangar_tier_info;

#define HANGAR_TIER_INFO_VERSION 1

/** Called once per tier by hangar_tier_foreach(); return non-zero to stop. */
typedef int (*hangar_tier_fn)(const hangar_tier_info *info, void *payload);

/**
 * Walks the four tiers in a fixed order (fast, isolated, default, heavy),
 * with their providers, which of them can serve, and their cooldowns.
 * Providers not yet set up are set up to tell whether they can serve.
 *
 * @param ctx     the context.
 * @param fn      called once per tier.
 * @param payload passed to fn.
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL or HANGAR_ENOMEM.
 *
 * **Ownership:** info and everything it points to are valid during the
 * callback only.
 * **Thread safety:** safe, except against a concurrent hangar_ctx_set(); fn
 * runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_tier_foreach(hangar_ctx *ctx, hangar_tier_fn fn, void *payload);

HANGAR_END_DECL

#endif
