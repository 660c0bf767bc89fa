/* hangar tier list. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- hangar tier list --------------------------------------------------------------- */

struct list_state {
	int json;
	int first;
	int64_t now_us;
};

static void print_provider_json(const hangar_tier_info *t, uint32_t i, int64_t now_us)
{
	int64_t left = t->cooling_until_us[i] ? (t->cooling_until_us[i] - now_us + 999999) / 1000000 : 0;

	printf("%s{\"name\":", i ? "," : "");
	json_string(t->providers[i]);
	printf(",\"loaded\":%s,\"fallback\":%s,\"cooldown_seconds\":%lld}", t->loaded[i] ? "true" : "false",
	       t->falls_back && i > 0 && i + 1 == t->n_providers ? "true" : "false", (long long)(left > 0 ? left : 0));
}

static int print_tier(const hangar_tier_info *t, void *payload)
{
	struct list_state *s = payload;

	if (s->json) {
		printf("%s{\"tier\":", s->first ? "" : ",");
		json_string(t->name);
		printf(",\"falls_back\":%s,\"hedge_ms\":%lld,\"providers\":[", t->falls_back ? "true" : "false",
		       (long long)t->hedge_ms);
		for (uint32_t i = 0; i < t->n_providers; i++)
			print_provider_json(t, i, s->now_us);
		printf("]}");
		s->first = 0;
		return 0;
	}
	if (t->n_providers == 0) {
		printf("%-10s %-16s %s\n", t->name, "-", "no provider: creates fail (HANGAR_TIERS)");
		return 0;
	}
	for (uint32_t i = 0; i < t->n_providers; i++) {
		char state[96];
		int64_t left = t->cooling_until_us[i] ? (t->cooling_until_us[i] - s->now_us + 999999) / 1000000 : 0;
		int n;

		if (!t->loaded[i])
			n = snprintf(state, sizeof(state), "not loaded");
		else if (left > 0)
			n = snprintf(state, sizeof(state), "cooling down, %llds left", (long long)left);
		else
			n = snprintf(state, sizeof(state), "ready");
		if (n > 0 && t->falls_back && i > 0 && i + 1 == t->n_providers)
			snprintf(state + n, sizeof(state) - (size_t)n, " (fallback)");
		if (i == 0 && t->hedge_ms) {
			n = (int)strlen(state);
			snprintf(state + n, sizeof(state) - (size_t)n, "; hedged after %lld ms", (long long)t->hedge_ms);
		}
		printf("%-10s %-16s %s\n", i == 0 ? t->name : "", t->providers[i], state);
	}
	return 0;
}

int cmd_tier_list(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct list_state s = { 0, 1, 0 };
	hangar_ctx *ctx = NULL;
	struct timespec ts;
	int dd, c, status;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "jh", longopts, &dd)) != -1) {
		switch (c) {
		case 'j': s.json = 1; break;
		case OPT_HELP: return cli_help_cmd(cli->cmd);
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	clock_gettime(CLOCK_REALTIME, &ts);
	s.now_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	if (s.json)
		putchar('[');
	else
		printf("%-10s %-16s %s\n", "TIER", "PROVIDER", "STATE");
	if (hangar_tier_foreach(ctx, print_tier, &s) != 0) {
		if (s.json)
			putchar('\n');
		status = cli_fail("cannot list the tiers");
	} else if (s.json) {
		printf("]\n");
	}
	hangar_ctx_unref(ctx);
	return status;
}
