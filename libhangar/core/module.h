/*
 * Per-context state of the layers above core, without core knowing them.
 *
 * A layer that keeps something per context (the store's connection, the
 * envd client's pool, the tiers' cooldowns, the hooks a higher layer lends a
 * lower one) describes itself with a struct hmodule. The list of modules is
 * defined once, above every layer, in libhangar/modules.c, lowest layer
 * first. The context opens each module when it is made, after its settings
 * are loaded, in that order, and closes them in reverse order at its last
 * release, before its providers are freed.
 *
 * A module's open() may register hooks on the modules below it (which are
 * open by then): that is how a lower layer reaches a higher one.
 */
#pragma once

#include "internal.h"

struct hmodule {
	const char *name;
	/* The size of the module's state, which core allocates zeroed and frees (0: none). */
	size_t state_size;
	/* Sets the state up (NULL: zeroes will do); 0 or a reported failure. */
	int (*open)(hangar_ctx *ctx, void *state);
	/* Releases what the state holds, before core frees it; ctx's providers are still there. */
	void (*close)(hangar_ctx *ctx, void *state);
	/*
	 * Checks a value of one of the library's own settings that this module
	 * interprets (NULL: none): 0, or a failure reported naming the setting.
	 * Called for every such setting; a module answers 0 for those it does
	 * not know.
	 */
	int (*check_setting)(const char *name, const char *value);
};

/* Every module, lowest layer first, NULL-terminated (libhangar/modules.c). */
extern const struct hmodule *const hangar_modules[];

#define HMODULES_MAX 8

/* m's state in ctx; NULL when it has none. */
void *hctx_module(hangar_ctx *ctx, const struct hmodule *m);

/* Asks every module to check a library setting's value: 0 or the first failure. */
int hmodules_check_setting(const char *name, const char *value);
