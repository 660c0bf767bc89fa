/* hangar config check: the effective settings, and whether the default provider can be set up. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *source_name(int source)
{
	switch (source) {
	case HANGAR_SETTING_DEFAULT: return "default";
	case HANGAR_SETTING_ENVIRONMENT: return "environment";
	case HANGAR_SETTING_EXPLICIT: return "explicit";
	default: return "unknown";
	}
}

static int print_setting(const char *name, const char *value, int source, void *payload)
{
	int *secret_key_set = payload;

	if (strcmp(name, "HANGAR_SECRET_KEY") == 0)
		*secret_key_set = source != HANGAR_SETTING_DEFAULT;
	printf("%s=%s  (%s)\n", name, value, source_name(source));
	return 0;
}

/* Where checkpoints' sealing key comes from; a generated one is one machine's only. */
static void print_secret_key(hangar_ctx *ctx, int set)
{
	hangar_buf dir = HANGAR_BUF_INIT;

	if (set) {
		puts("secret key: HANGAR_SECRET_KEY");
		return;
	}
	hangar_ctx_get(&dir, ctx, "HANGAR_STATE_DIR");
	printf("secret key: generated on first use into %s/secret.key (mode 0600); HANGAR_SECRET_KEY is unset, "
	       "so checkpoints sealed here open only with that file: set HANGAR_SECRET_KEY, the same on every "
	       "machine, for a deployment of several\n",
	       dir.ptr ? dir.ptr : "the state directory");
	hangar_buf_dispose(&dir);
}

static void print_capabilities(uint64_t caps)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
		{ HANGAR_CAP_PAUSE, "pause" },
		{ HANGAR_CAP_HOT_RESUME, "hot-resume" },
		{ HANGAR_CAP_PTY, "pty" },
		{ HANGAR_CAP_SNAPSHOT, "snapshot" },
		{ HANGAR_CAP_FORK, "fork" },
		{ HANGAR_CAP_KERNEL_ISOLATION, "kernel-isolation" },
		{ HANGAR_CAP_FS_PAUSE, "fs-pause" },
		{ HANGAR_CAP_TEMPLATES, "templates" },
		{ HANGAR_CAP_IMAGES, "images" },
	};
	const char *sep = "";

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (caps & names[i].bit) {
			printf("%s%s", sep, names[i].name);
			sep = " ";
		}
	}
	puts(*sep ? "" : "none");
}

/* One line per provider: ready with its capabilities, or why it cannot be set up. */
static int print_provider_status(hangar_provider *listed, void *payload)
{
	hangar_ctx *ctx = payload;
	hangar_provider *p = NULL;

	printf("provider %s: ", hangar_provider_name(listed));
	if (hangar_provider_lookup(&p, ctx, hangar_provider_name(listed)) != 0) {
		const hangar_error *e = hangar_error_last();

		printf("not usable: %s\n", *e->message ? e->message : hangar_strerror(e->code));
		hangar_ctx_foreach_setting_of(ctx, hangar_provider_name(listed), print_setting, NULL);
		return 0;
	}
	fputs("ready, ", stdout);
	print_capabilities(hangar_provider_capabilities(p));
	hangar_provider_unref(p);
	/* The settings it declared, under its own line. */
	hangar_ctx_foreach_setting_of(ctx, hangar_provider_name(listed), print_setting, NULL);
	return 0;
}

int cmd_config_check(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_buf name = HANGAR_BUF_INIT;
	hangar_provider *p = NULL;
	hangar_ctx *ctx = NULL;
	int dd, c, status, secret_key_set = 0;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "h", longopts, &dd)) != -1) {
		if (c == OPT_HELP)
			return cli_help_cmd(cli->cmd);
		return EXIT_USAGE;
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	/* The library's own settings, then each provider with its own. */
	hangar_ctx_foreach_setting_of(ctx, NULL, print_setting, &secret_key_set);
	print_secret_key(ctx, secret_key_set);

	hangar_provider_foreach(ctx, print_provider_status, ctx);
	if (hangar_provider_lookup(&p, ctx, NULL) != 0) {
		const hangar_error *e = hangar_error_last();
		char msg[512];

		/* Keep the lookup's error: reading the setting's name would clear it. */
		snprintf(msg, sizeof(msg), "%s", *e->message ? e->message : hangar_strerror(e->code));
		hangar_ctx_get(&name, ctx, "HANGAR_DEFAULT_PROVIDER");
		fflush(stdout);
		fprintf(stderr, "hangar: cannot set up the default provider '%s': %s\n", name.ptr ? name.ptr : "",
			msg);
		status = EXIT_FAIL;
		goto out;
	}
	printf("default provider: %s\n", hangar_provider_name(p));
	fputs("capabilities: ", stdout);
	print_capabilities(hangar_provider_capabilities(p));
out:
	hangar_buf_dispose(&name);
	hangar_provider_unref(p);
	hangar_ctx_unref(ctx);
	return status;
}
