/*
 * HANGAR_* settings through the public hangar_ctx_set(), as a caller or an
 * environment would give them: the first byte picks the setting (the JSON
 * ones first: HANGAR_TIERS, HANGAR_E2B_ENVIRONMENT_TEMPLATES,
 * HANGAR_TIER_HEDGE), the rest is its value. A refused value must be
 * refused naming the variable; an accepted one must then be usable by what
 * reads it (the tier plans, the e2b provider's initialisation).
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hangar/hangar.h>

static const char *const names[] = {
	"HANGAR_TIERS",
	"HANGAR_E2B_ENVIRONMENT_TEMPLATES",
	"HANGAR_TIER_HEDGE",
	"HANGAR_TIER_COOLDOWN_SECONDS",
	"HANGAR_SANDBOX_TIMEOUT_SECONDS",
	"HANGAR_E2B_REQUEST_TIMEOUT_SECONDS",
	"HANGAR_E2B_FLAVOR",
	"HANGAR_E2B_DOMAIN",
	"HANGAR_E2B_SANDBOX_URL",
	"HANGAR_DEFAULT_PROVIDER",
};

static char state_dir[64];

static int tier_cb(const hangar_tier_info *info, void *payload)
{
	(void)payload;
	if (!info->name || (info->n_providers && !info->providers))
		abort();
	for (uint32_t i = 0; i < info->n_providers; i++)
		if (!info->providers[i])
			abort();
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* libFuzzer ends with exit() once its time is up: the scratch state directory goes with it. */
static void remove_state_dir(void)
{
	nftw(state_dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-fuzz-settings-XXXXXX");
	if (!mkdtemp(state_dir))
		abort();
	atexit(remove_state_dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *name;
	hangar_ctx *ctx = NULL;
	hangar_provider *p = NULL;
	char *value;
	int rc;

	if (size < 1)
		return 0;
	name = names[data[0] % (sizeof(names) / sizeof(names[0]))];
	value = strndup((const char *)data + 1, size - 1);
	if (!value || hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV) != 0 ||
	    hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) != 0 ||
	    hangar_ctx_set(ctx, "HANGAR_E2B_API_KEY", "e2b_fuzz") != 0 ||
	    hangar_ctx_set(ctx, "HANGAR_E2B_API_URL", "http://127.0.0.1:9") != 0)
		abort();
	rc = hangar_ctx_set(ctx, name, value);
	if (rc != 0) {
		/* A wrong configuration is refused naming the variable. */
		if (rc != HANGAR_ECONFIG && rc != HANGAR_EINVAL && rc != HANGAR_ENOMEM)
			abort();
		if (rc != HANGAR_ENOMEM && !strstr(hangar_error_last()->message, name))
			abort();
	} else {
		if (hangar_tier_foreach(ctx, tier_cb, NULL) != 0 && hangar_error_last()->code == HANGAR_OK)
			abort();
		if (hangar_provider_lookup(&p, ctx, "e2b") == 0)
			hangar_provider_unref(p);
	}
	hangar_ctx_unref(ctx);
	free(value);
	return 0;
}
