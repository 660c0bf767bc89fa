/*
 * hangar snapshot: a sandbox's files frozen for new sandboxes to start from
 * (hangar_sandbox_snapshot(3)), and their deletion, now or once unused.
 *
 * There is no `snapshot list`: no provider lists its snapshots through the
 * public API yet (the local provider keeps them in its state directory,
 * and hangar_template_list() of local is unsupported).
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
	case HANGAR_EBUSY:
		status = cli_fail("snapshot %s is in use (release it to delete it once unused)", cli_text(id));
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
