/* hangar environment list, show and publish. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct listing {
	int json;
	int count;
	int table;       /* list: a table row; show: the long form */
};

static const char *network_name(int32_t n)
{
	return n == HANGAR_NETWORK_ON ? "on" : n == HANGAR_NETWORK_OFF ? "off" : "";
}

static void print_json(const hangar_environment_info *in)
{
	printf("{\"name\":");
	json_string(in->name);
	printf(",\"description\":");
	json_string(in->description);
	printf(",\"tier\":");
	json_string(in->tier);
	printf(",\"templates\":");
	json_value(in->templates_json);
	printf(",\"env\":");
	json_value(in->env_json);
	printf(",\"timeout_sec\":%" PRId64 ",\"network\":", in->timeout_sec);
	json_string(network_name(in->network));
	printf(",\"workspace\":");
	json_string(in->workspace);
	printf(",\"user\":");
	json_string(in->user);
	printf(",\"image\":");
	json_string(in->image);
	printf("}");
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

static int one(const hangar_environment_info *in, void *payload)
{
	struct listing *l = payload;

	if (l->json) {
		printf("%s", l->table && l->count ? ",\n " : "");
		print_json(in);
	} else if (l->table) {
		if (l->count == 0)
			printf("%-24s %-9s %-40s %s\n", "NAME", "TIER", "TEMPLATES", "DESCRIPTION");
		printf("%-24s %-9s %-40s %s\n", in->name, or_dash(in->tier), in->templates_json,
		       or_dash(cli_text(in->description)));
	} else {
		printf("name:        %s\n", in->name);
		printf("description: %s\n", or_dash(in->description));
		printf("tier:        %s\n", or_dash(in->tier));
		printf("templates:   %s\n", in->templates_json);
		printf("image:       %s\n", or_dash(in->image));
		printf("env:         %s\n", in->env_json);
		if (in->timeout_sec)
			printf("timeout:     %" PRId64 " s\n", in->timeout_sec);
		else
			printf("timeout:     -\n");
		printf("network:     %s\n", or_dash(network_name(in->network)));
		printf("workspace:   %s\n", or_dash(in->workspace));
		printf("user:        %s\n", or_dash(in->user));
	}
	l->count++;
	return 0;
}

/* Options (--json) anywhere among exactly n operands. */
static int args(struct cli *cli, int argc, char **argv, int n, char **op, int *json)
{
	int got = 0, dd, c;

	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, "jh", cli_opts_json, &dd);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (got == n)
				return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
			op[got++] = argv[optind++];
			continue;
		}
		if (c == OPT_HELP)
			return OPT_HELP;
		if (c == '?')
			return EXIT_USAGE;
		*json = 1;
	}
	if (got < n)
		return cli_usage(cli, "missing environment name");
	return 0;
}

int cmd_environment_list(struct cli *cli, int argc, char **argv)
{
	struct listing l = { .table = 1 };
	hangar_ctx *ctx = NULL;
	int status = args(cli, argc, argv, 0, NULL, &l.json);

	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (l.json)
		printf("[");
	if (hangar_environment_list(ctx, one, &l) != 0) {
		if (l.json)
			printf("]\n");
		status = cli_fail("cannot list the environments");
	} else if (l.json) {
		printf("]\n");
	} else if (l.count == 0) {
		cli_say("no environments (HANGAR_ENVIRONMENTS_FILE)");
	}
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_environment_show(struct cli *cli, int argc, char **argv)
{
	struct listing l = { 0 };
	hangar_ctx *ctx = NULL;
	char *name = NULL;
	int status = args(cli, argc, argv, 1, &name, &l.json);

	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_environment_get(ctx, name, one, &l) != 0) {
		status = hangar_error_last()->code == HANGAR_ENOTFOUND
				 ? cli_fail("no environment %s", cli_text(name))
				 : cli_fail("cannot read environment %s", cli_text(name));
	} else if (l.json) {
		putchar('\n');
	}
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- publish ------------------------------------------------------------------------ */

struct published {
	int json, count, failed;
};

static void on_published(const hangar_publish_result *r, void *payload)
{
	struct published *p = payload;

	if (r->error)
		p->failed = 1;
	if (p->json) {
		printf("%s{\"provider\":", p->count ? ",\n " : "");
		json_string(r->provider);
		printf(",\"action\":");
		json_string(r->action);
		printf(",\"template\":");
		json_string(r->template_id);
		printf(",\"digest\":");
		json_string(r->digest);
		if (r->error) {
			printf(",\"error\":");
			json_string(hangar_error_name(r->error));
			printf(",\"message\":");
			json_string(r->message);
		}
		printf("}");
	} else if (r->error) {
		fprintf(stderr, "hangar: %s: failed (%s): %s\n", r->provider, hangar_error_name(r->error),
			cli_text(r->message));
	} else {
		printf("%-12s %-7s %s\n", r->provider, r->action, cli_text(r->template_id));
	}
	fflush(stdout);
	p->count++;
}

static void on_build_progress(const char *status, const char *message, void *payload)
{
	(void)payload;
	cli_say("building: %s%s%s", cli_text(status), *message ? ": " : "", cli_text(message));
}

int cmd_environment_publish(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "rebuild", no_argument, NULL, 'r' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_publish_opts o = HANGAR_PUBLISH_OPTS_INIT;
	struct published p = { 0 };
	hangar_ctx *ctx = NULL;
	char *name = NULL;
	int status, dd, c;

	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, "jrh", longopts, &dd);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (name)
				return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
			name = argv[optind++];
			continue;
		}
		if (c == OPT_HELP)
			return cli_help_cmd(cli->cmd);
		if (c == 'j')
			p.json = 1;
		else if (c == 'r')
			o.rebuild = 1;
		else
			return EXIT_USAGE;
	}
	if (!name)
		return cli_usage(cli, "missing environment name");
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	o.progress = on_build_progress;
	if (p.json)
		printf("[");
	if (hangar_environment_publish(ctx, name, &o, on_published, &p) != 0) {
		if (p.json)
			printf("]\n");
		status = hangar_error_last()->code == HANGAR_ENOTFOUND
				 ? cli_fail("no environment %s", cli_text(name))
				 : cli_fail("cannot publish environment %s", cli_text(name));
	} else {
		if (p.json)
			printf("]\n");
		if (p.failed)
			status = EXIT_FAIL;
	}
	hangar_ctx_unref(ctx);
	return status;
}
