/*
 * tiers: shows the tiers, then creates a sandbox through one of them and
 * prints the audit events the create sent on the way.
 *
 *   tiers [TIER]       (default: fast)
 *
 * The fast tier asks the e2b provider first (HANGAR_E2B_FLAVOR and the other
 * HANGAR_E2B_* settings say which E2B); when it is full or unreachable, the
 * create falls back to HANGAR_DEFAULT_PROVIDER and says so with a
 * sandbox.tier_fallback event. Without HANGAR_E2B_API_KEY the e2b provider is
 * not loaded and the fast tier goes to the default provider directly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <hangar/hangar.h>

static int fail(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "tiers: %s: %s (%s)\n", what, e->message, hangar_error_name(e->code));
	return 1;
}

/* Events may come from any thread; stdio's own locking keeps a line whole. */
static void on_event(const char *name, const char *json, void *payload)
{
	(void)payload;
	printf("event %s %s\n", name, json);
	fflush(stdout);
}

static int show_tier(const hangar_tier_info *t, void *payload)
{
	int64_t now_us = *(const int64_t *)payload;
	uint32_t i;

	printf("tier %s:", t->name);
	for (i = 0; i < t->n_providers; i++) {
		printf(" %s", t->providers[i]);
		if (!t->loaded[i])
			printf("(not loaded)");
		else if (t->cooling_until_us[i] > now_us)
			printf("(cooling %" PRId64 "s)", (t->cooling_until_us[i] - now_us) / 1000000);
	}
	printf("%s\n", t->falls_back ? " [fallback]" : "");
	return 0;
}

int main(int argc, char **argv)
{
	const char *tier = argc > 1 ? argv[1] : "fast";
	hangar_ctx *ctx = NULL;
	hangar_sandbox *sb = NULL;
	hangar_create_opts co;
	int64_t now_us = (int64_t)time(NULL) * 1000000;
	int status = 1, r;

	if (hangar_create_opts_init(&co, HANGAR_CREATE_OPTS_VERSION) < 0 || hangar_ctx_new(&ctx, 0) < 0)
		return fail("context");
	hangar_ctx_set_event(ctx, on_event, NULL);
	if (hangar_tier_foreach(ctx, show_tier, &now_us) < 0) {
		status = fail("tiers");
		goto out;
	}

	co.tier = tier;
	if (hangar_sandbox_create(&sb, ctx, &co) < 0) {
		status = fail("create");
		goto out;
	}
	printf("sandbox %s on %s through tier %s\n", hangar_sandbox_id(sb),
	       hangar_provider_name(hangar_sandbox_provider(sb)), tier);
	status = 0;
	r = hangar_sandbox_kill(sb);
	if (r < 0 && r != HANGAR_EGONE)
		status = fail("kill");
out:
	hangar_sandbox_unref(sb);
	/* Events can arrive until the context is gone; stdout stays open until then. */
	hangar_ctx_unref(ctx);
	return status;
}
