/* hangar run and hangar sandbox exec: one command, its output live, its exit status passed through. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))

/* Extra lifetime given to a sandbox made for one command, beyond its timeout. */
#define RUN_LIFETIME_SLACK_SEC 60

/* Output goes where the command sent it, as it arrives; it is not printed again. */
static void forward_output(int stream, const char *data, size_t len, void *payload)
{
	(void)payload;
	write_all(stream == HANGAR_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

struct exec_args {
	int64_t timeout;
	const char *cwd;
	struct strv env;
	char *command;
};

static const struct option run_longopts[] = {
	{ "timeout", required_argument, NULL, 't' },
	{ "cwd", required_argument, NULL, 'C' },
	{ "env", required_argument, NULL, 'e' },
	{ "provider", required_argument, NULL, 'p' },
	{ "tier", required_argument, NULL, 'R' },
	{ "environment", required_argument, NULL, 'M' },
	{ "keep", no_argument, NULL, 'k' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

static const struct option exec_longopts[] = {
	{ "timeout", required_argument, NULL, 't' },
	{ "cwd", required_argument, NULL, 'C' },
	{ "env", required_argument, NULL, 'e' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

/* An integer setting's effective value, or def. */
static int64_t setting_int(hangar_ctx *ctx, const char *name, int64_t def)
{
	hangar_buf b = HANGAR_BUF_INIT;
	int64_t v = def;

	if (hangar_ctx_get(&b, ctx, name) == 0 && b.ptr && *b.ptr)
		v = strtoll(b.ptr, NULL, 10);
	hangar_buf_dispose(&b);
	return v;
}

static int report_outcome(const struct exec_outcome *o, const char *id)
{
	if (o->rc == EXEC_INTERRUPTED)
		return EXIT_SIGNAL_BASE + o->signo;
	if (o->rc) {
		fflush(stdout);
		fprintf(stderr, "hangar: command in sandbox %s failed: %s\n", id, o->message);
		return EXIT_FAIL;
	}
	if (o->oom_killed) {
		fflush(stdout);
		fprintf(stderr, "hangar: sandbox %s reached its memory limit: the OOM killer killed the command\n",
			id);
	}
	return o->status;
}

int cmd_run(struct cli *cli, int argc, char **argv)
{
	struct exec_args a = { 0 };
	hangar_create_opts copts = HANGAR_CREATE_OPTS_INIT;
	hangar_exec_opts eopts = HANGAR_EXEC_OPTS_INIT;
	struct exec_outcome o = { 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	const char *provider = NULL, *tier = NULL, *environment = NULL;
	int keep = 0, dd, c, status;
	char id[256];

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "t:C:e:p:kh", run_longopts, &dd)) != -1) {
		switch (c) {
		case 't':
			if (cli_parse_seconds(cli, "--timeout", optarg, CLI_EXEC_TIMEOUT_MAX, &a.timeout))
				goto usage;
			break;
		case 'C': a.cwd = optarg; break;
		case 'e':
			if ((status = cli_add_env(cli, &a.env, optarg)) != 0)
				goto out;
			break;
		case 'p': provider = optarg; break;
		case 'R': tier = optarg; break;
		case 'M': environment = optarg; break;
		case 'k': keep = 1; break;
		case OPT_HELP:
			strv_free(&a.env);
			return cli_help_cmd(cli->cmd);
		default:
			goto usage;
		}
	}
	if (optind >= argc) {
		cli_usage(cli, "no command given: hangar run [OPTIONS] -- COMMAND...");
		goto usage;
	}
	a.command = shell_join(argc - optind, argv + optind);
	if (!a.command) {
		fprintf(stderr, "hangar: out of memory\n");
		status = EXIT_FAIL;
		goto out;
	}

	if ((status = cli_open(cli, &ctx)) != 0)
		goto out;
	if (sig_setup(stop_signals, N_STOP_SIGNALS) < 0) {
		status = EXIT_FAIL;
		goto out;
	}

	/* The sandbox only has to outlive the command; it is killed right after. */
	copts.provider = provider;
	copts.tier = tier;
	copts.environment = environment;
	{
		int64_t life = setting_int(ctx, "HANGAR_SANDBOX_TIMEOUT_SECONDS", 300);
		int64_t cmd = a.timeout ? a.timeout : setting_int(ctx, "HANGAR_EXEC_TIMEOUT_SECONDS", 120);

		if (life > 0 && cmd + RUN_LIFETIME_SLACK_SEC > life)
			copts.timeout_sec = cmd + RUN_LIFETIME_SLACK_SEC;
	}
	if (hangar_sandbox_create(&sb, ctx, &copts) != 0) {
		status = cli_fail("cannot create a sandbox");
		goto out;
	}
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	if (sig_caught()) {
		status = EXIT_SIGNAL_BASE + sig_caught();
		goto finish;
	}

	eopts.timeout_sec = a.timeout;
	eopts.cwd = a.cwd;
	eopts.env = a.env.v;
	eopts.on_output = forward_output;
	cli_exec(&o, sb, a.command, &eopts);
	status = report_outcome(&o, id);

finish:
	if (keep) {
		cli_say("%s", id);
	} else if (hangar_sandbox_kill(sb) != 0 && hangar_error_last()->code != HANGAR_EGONE) {
		cli_fail("cannot kill sandbox %s", id);
		if (status == 0)
			status = EXIT_FAIL;
	}
	if (o.rc == EXEC_INTERRUPTED) {
		fflush(NULL);
		_exit(status); /* the worker may still be inside the library */
	}
out:
	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	strv_free(&a.env);
	free(a.command);
	return status;
usage:
	strv_free(&a.env);
	return EXIT_USAGE;
}

/* The sandbox a "sandbox exec" or "session exec" operand names. */
typedef int (*resolve_fn)(hangar_ctx *ctx, const char *id, hangar_sandbox **out);

static int resolve_session(hangar_ctx *ctx, const char *id, hangar_sandbox **out)
{
	hangar_session *s = NULL;
	int rc = hangar_session_open(&s, ctx, id);

	if (rc == 0)
		rc = hangar_session_sandbox(out, s);
	hangar_session_unref(s);
	if (rc == 0)
		return 0;
	if (rc == HANGAR_ENOTFOUND)
		return cli_fail("no session %s", cli_text(id));
	return cli_fail("cannot wake session %s", cli_text(id));
}

static int exec_in(struct cli *cli, int argc, char **argv, resolve_fn resolve, const char *what)
{
	struct exec_args a = { 0 };
	hangar_exec_opts eopts = HANGAR_EXEC_OPTS_INIT;
	struct exec_outcome o;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	const char *id = NULL;
	int dd, c, status;

	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, "t:C:e:h", exec_longopts, &dd);
		if (c == -1) {
			/* The id may come before or among the options, never after "--". */
			if (!dd && !id && optind < argc) {
				id = argv[optind++];
				continue;
			}
			break;
		}
		switch (c) {
		case 't':
			if (cli_parse_seconds(cli, "--timeout", optarg, CLI_EXEC_TIMEOUT_MAX, &a.timeout))
				goto usage;
			break;
		case 'C': a.cwd = optarg; break;
		case 'e':
			if ((status = cli_add_env(cli, &a.env, optarg)) != 0)
				goto out;
			break;
		case OPT_HELP:
			strv_free(&a.env);
			return cli_help_cmd(cli->cmd);
		default:
			goto usage;
		}
	}
	if (!id) {
		cli_usage(cli, "no %s id given", what);
		goto usage;
	}
	if (optind >= argc) {
		cli_usage(cli, "no command given: hangar %s exec ID [OPTIONS] -- COMMAND...", what);
		goto usage;
	}
	a.command = shell_join(argc - optind, argv + optind);
	if (!a.command) {
		fprintf(stderr, "hangar: out of memory\n");
		status = EXIT_FAIL;
		goto out;
	}
	if ((status = cli_open(cli, &ctx)) != 0 || (status = resolve(ctx, id, &sb)) != 0)
		goto out;
	if (sig_setup(stop_signals, N_STOP_SIGNALS) < 0) {
		status = EXIT_FAIL;
		goto out;
	}
	eopts.timeout_sec = a.timeout;
	eopts.cwd = a.cwd;
	eopts.env = a.env.v;
	eopts.on_output = forward_output;
	cli_exec(&o, sb, a.command, &eopts);
	status = report_outcome(&o, hangar_sandbox_id(sb));
	if (o.rc == EXEC_INTERRUPTED) {
		/* The library stopped the command (or gave up trying); leave at once. */
		fflush(NULL);
		_exit(status);
	}
out:
	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	strv_free(&a.env);
	free(a.command);
	return status;
usage:
	strv_free(&a.env);
	return EXIT_USAGE;
}

int cmd_sandbox_exec(struct cli *cli, int argc, char **argv)
{
	return exec_in(cli, argc, argv, cli_attach, "sandbox");
}

int cmd_session_exec(struct cli *cli, int argc, char **argv)
{
	return exec_in(cli, argc, argv, resolve_session, "session");
}
