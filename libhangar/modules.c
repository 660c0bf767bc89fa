/*
 * The composition root: the one file that names every layer's module and
 * the built-in providers, so that no layer has to name one above it. Core
 * walks these lists (core/module.h, core/provider.c) and knows none of
 * them. The order is the layer order of libhangar-internals(7), lowest
 * first: a module's open() may register hooks on those before it.
 */
#include "core/module.h"
#include "envd/client.h"
#include "session/sess.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "tier/tier.h"

const struct hmodule *const hangar_modules[] = {
	&store_module,
	&envd_module,
	&tier_module,
	&sandbox_module,
	&session_module,
	NULL,
};

extern const struct hangar_provider_ops local_provider_ops;
extern const struct hangar_provider_ops e2b_provider_ops;

/* The providers every context has, in the order they are registered. */
const struct hangar_provider_ops *const hangar_builtin_providers[] = {
	&local_provider_ops,
	&e2b_provider_ops,
	NULL,
};
