/*
 * hangar snapshot: a sandbox's files frozen for new sandboxes to start from
 * (hangar_sandbox_snapshot(3)), the list of them, and their deletion, now
 * or once unused.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const struct option snapshot_opts[] = {
	{ "provider", required_argument, NULL, 'p' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static int provider_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	(void)cli;
	if (c != 'p')
		return EXIT_USAGE;
	*(const char **)payload = arg;
	return 0;
}

/* ---- list ---------------------------------------------------------------------------- */

struct listing {
	const char *provider;
	int json, n;
};

static int list_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct listing *ls = payload;

	switch (c) {
	case 'p': ls->provider = arg; return 0;
	case 'j': ls->json = 1; return 0;
	default: (void)cli; return EXIT_USAGE;
	}
}

static int print_snapshot(const hangar_snapshot_info *info, void *payload)
{
	struct listing *ls = payload;
	char created[32];

	format_time_us(created, sizeof(created), info->created_at_us);
	if (ls->json) {
		printf("%s{\"id\":", ls->n++ ? "," : "[");
		json_string(info->snapshot_id);
		printf(",\"name\":");
		json_string(info->name);
		printf(",\"sandbox\":");
		json_string(info->sandbox_id);
		printf(",\"provider\":");
		json_string(info->provider);
		printf(",\"created_at\":");
		if (info->created_at_us > 0)
			json_string(created);
		else
			printf("null");
		printf(",\"released\":%s}", info->released ? "true" : "false");
		return 0;
	}
	if (ls->n++ == 0)
		printf("%-22s  %-20s  %-20s  %-20s  %s\n", "SNAPSHOT", "NAME", "SANDBOX", "CREATED", "RELEASED");
	printf("%-22s  %-20s  %-20s  %-20s  %s\n", cli_text(info->snapshot_id), *info->name ? cli_text(info->name) : "-",
	       *info->sandbox_id ? cli_text(info->sandbox_id) : "-", created, info->released ? "yes" : "no");
	return 0;
}

int cmd_snapshot_list(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct listing ls = { NULL, 0, 0 };
	hangar_ctx *ctx = NULL;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "p:jh", longopts, NULL, 0, list_opt, &ls), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	/* The provider reports nothing before it has read them all: a failure prints no list at all. */
	if (hangar_snapshot_list(ctx, ls.provider, print_snapshot, &ls) != 0)
		status = cli_fail("cannot list snapshots");
	else if (ls.json)
		printf("%s]\n", ls.n ? "" : "[");
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- create, delete, release ------------------------------------------------------------ */

int cmd_snapshot_create(struct cli *cli, int argc, char **argv)
{
	hangar_buf id = HANGAR_BUF_INIT;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *ops[2] = { NULL, NULL };
	int got, status;

	got = cli_parse(cli, argc, argv, "h", cli_opts_help, ops, 2, NULL, NULL);
	status = cli_want(cli, got, 1, "sandbox id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, ops[0], &sb)) != 0)
		goto out;
	if (hangar_sandbox_snapshot(&id, sb, ops[1]) != 0)
		status = hangar_error_last()->code == HANGAR_EGONE
				 ? cli_fail("sandbox %s is gone", cli_text(ops[0]))
				 : cli_fail("cannot snapshot sandbox %s", cli_text(ops[0]));
	else
		printf("%s\n", id.ptr);
out:
	hangar_buf_dispose(&id);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

/* delete (release 0) or release (1) of one snapshot. */
static int drop(struct cli *cli, int argc, char **argv, int release)
{
	const char *provider = NULL;
	hangar_ctx *ctx = NULL;
	char *id = NULL;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "p:h", snapshot_opts, &id, 1, provider_opt, &provider), 1,
			  "snapshot id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		goto out;
	rc = release ? hangar_snapshot_release(ctx, provider, id) : hangar_snapshot_delete(ctx, provider, id);
	switch (rc) {
	case 0:
		break;
	case HANGAR_EGONE:
		status = cli_fail("no snapshot %s", cli_text(id));
		break;
	default:
		status = cli_fail("cannot %s snapshot %s", release ? "release" : "delete", cli_text(id));
		break;
	}
out:
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_snapshot_delete(struct cli *cli, int argc, char **argv)
{
	return drop(cli, argc, argv, 0);
}

int cmd_snapshot_release(struct cli *cli, int argc, char **argv)
{
	return drop(cli, argc, argv, 1);
}
