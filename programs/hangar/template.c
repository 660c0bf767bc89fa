/* hangar template build|list: templates on providers that build them. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A size: a whole number, for --cpu in millicores, --memory and --disk in MiB. */
static int parse_u32(const struct cli *cli, const char *opt, const char *s, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *s == '+' || v == 0 || v > UINT32_MAX)
		return cli_usage(cli, "%s wants a positive whole number, not '%s'", opt, s);
	*out = (uint32_t)v;
	return 0;
}

static void show_progress(const char *status, const char *message, void *payload)
{
	(void)payload;
	if (*message)
		printf("%s: %s\n", status, message);
	else
		printf("%s\n", status);
	fflush(stdout);
}

int cmd_template_build(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "name", required_argument, NULL, 'n' },
		{ "image", required_argument, NULL, 'i' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "memory", required_argument, NULL, 'm' },
		{ "disk", required_argument, NULL, 'd' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_template_build_opts opts = HANGAR_TEMPLATE_BUILD_OPTS_INIT;
	hangar_buf id = HANGAR_BUF_INIT;
	const char *provider = NULL;
	hangar_ctx *ctx = NULL;
	int quiet = 0, dd, c, status;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "p:n:i:c:m:d:qh", longopts, &dd)) != -1) {
		switch (c) {
		case 'p': provider = optarg; break;
		case 'n': opts.name = optarg; break;
		case 'i': opts.image = optarg; break;
		case 'c':
			if (parse_u32(cli, "--cpu", optarg, &opts.cpu_millis))
				return EXIT_USAGE;
			break;
		case 'm':
			if (parse_u32(cli, "--memory", optarg, &opts.memory_mb))
				return EXIT_USAGE;
			break;
		case 'd':
			if (parse_u32(cli, "--disk", optarg, &opts.disk_mb))
				return EXIT_USAGE;
			break;
		case 'q': quiet = 1; break;
		case OPT_HELP: return cli_help_cmd(cli->cmd);
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if (!opts.name || !opts.image)
		return cli_usage(cli, "--name and --image are required");
	if (!quiet)
		opts.progress = show_progress;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_template_build(&id, ctx, provider, &opts) != 0) {
		status = cli_fail("cannot build template %s", opts.name);
	} else {
		printf("%s\n", id.ptr);
		status = 0;
	}
	hangar_buf_dispose(&id);
	hangar_ctx_unref(ctx);
	return status;
}

static int print_template(const hangar_template_info *info, void *payload)
{
	int *n = payload;

	if ((*n)++ == 0)
		printf("%-28s  %-28s  %s\n", "TEMPLATE", "NAME", "STATUS");
	printf("%-28s  %-28s  %s\n", info->template_id, *info->name ? info->name : "-",
	       *info->status ? info->status : "-");
	return 0;
}

int cmd_template_list(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *provider = NULL;
	hangar_ctx *ctx = NULL;
	int n = 0, dd, c, status = 0;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "p:h", longopts, &dd)) != -1) {
		switch (c) {
		case 'p': provider = optarg; break;
		case OPT_HELP: return cli_help_cmd(cli->cmd);
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_template_list(ctx, provider, print_template, &n) != 0)
		status = cli_fail("cannot list templates");
	hangar_ctx_unref(ctx);
	return status;
}
