/* hangar sandbox create, list, info, cp, pause, resume, kill and timeout. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/*
 * The common shape of the commands below: options anywhere among exactly n
 * operands. Returns 0 with the operands in ops, OPT_HELP when --help was
 * asked for, or EXIT_USAGE after reporting the problem. Options other than
 * --help are stored in flags by their short letter (flags['j'] for --json).
 */
static int operands(const struct cli *cli, int argc, char **argv, const struct option *longopts, char **ops, int n,
		    const char *names, char *flags)
{
	int got = 0, dd, c;
	char shortopts[16] = "h";
	size_t len = 1;

	/* Flags only: each long option's letter works as a short one too. */
	for (const struct option *o = longopts; o->name && len + 1 < sizeof(shortopts); o++)
		if (o->val != OPT_HELP && o->has_arg == no_argument)
			shortopts[len++] = (char)o->val;
	shortopts[len] = '\0';
	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, shortopts, longopts, &dd);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (got == n)
				return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
			ops[got++] = argv[optind++];
			if (dd) {
				/* After "--" everything is an operand. */
				while (optind < argc) {
					if (got == n)
						return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
					ops[got++] = argv[optind++];
				}
				break;
			}
			continue;
		}
		if (c == OPT_HELP)
			return OPT_HELP;
		if (c == '?')
			return EXIT_USAGE;
		if (flags)
			flags[(unsigned char)c] = 1;
	}
	if (got < n)
		return cli_usage(cli, "missing %s", names);
	return 0;
}

/* ---- create ------------------------------------------------------------------ */

int cmd_sandbox_create(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "tier", required_argument, NULL, 'R' },
		{ "environment", required_argument, NULL, 'M' },
		{ "template", required_argument, NULL, 'T' },
		{ "image", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "network", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_create_opts opts = HANGAR_CREATE_OPTS_INIT;
	struct strv env = { 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	int64_t timeout;
	int dd, c, status = 0;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "p:T:t:e:n:h", longopts, &dd)) != -1) {
		switch (c) {
		case 'p': opts.provider = optarg; break;
		case 'R': opts.tier = optarg; break;
		case 'M': opts.environment = optarg; break;
		case 'T': opts.template_id = optarg; break;
		case 't':
			if (cli_parse_seconds(cli, "--timeout", optarg, CLI_LIFETIME_MAX, &timeout))
				goto out_usage;
			opts.timeout_sec = timeout ? timeout : -1;   /* 0: no limit */
			break;
		case 'e':
			if ((status = cli_add_env(cli, &env, optarg)) != 0)
				goto out;
			break;
		case 'n':
			if (strcmp(optarg, "on") == 0) {
				opts.network = HANGAR_NETWORK_ON;
			} else if (strcmp(optarg, "off") == 0) {
				opts.network = HANGAR_NETWORK_OFF;
			} else {
				cli_usage(cli, "--network wants 'on' or 'off', not '%s'", optarg);
				goto out_usage;
			}
			break;
		case OPT_HELP:
			strv_free(&env);
			return cli_help_cmd(cli->cmd);
		default:
			goto out_usage;
		}
	}
	if (optind < argc) {
		cli_usage(cli, "unexpected argument '%s'", argv[optind]);
		goto out_usage;
	}
	opts.env = env.v;
	if ((status = cli_open(cli, &ctx)) != 0)
		goto out;
	if (hangar_sandbox_create(&sb, ctx, &opts) != 0) {
		status = cli_fail("cannot create a sandbox");
		goto out;
	}
	printf("%s\n", hangar_sandbox_id(sb));
out:
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	strv_free(&env);
	return status;
out_usage:
	strv_free(&env);
	return EXIT_USAGE;
}

/* ---- list and info -------------------------------------------------------------- */

struct row {
	char *id, *provider, *template_id;
	int32_t state;
	int64_t created_us, expires_us;
};

struct rows {
	struct row *v;
	size_t n, cap;
	int failed;
};

static int collect_row(const hangar_sandbox_info *info, void *payload)
{
	struct rows *rows = payload;
	struct row *r;

	if (rows->n == rows->cap) {
		size_t cap = rows->cap ? rows->cap * 2 : 16;
		struct row *v = realloc(rows->v, cap * sizeof(*v));

		if (!v) {
			rows->failed = 1;
			return 1;
		}
		rows->v = v;
		rows->cap = cap;
	}
	r = &rows->v[rows->n];
	r->id = strdup(info->id ? info->id : "");
	r->provider = strdup(info->provider ? info->provider : "");
	r->template_id = strdup(info->template_id ? info->template_id : "");
	r->state = info->state;
	r->created_us = info->created_at_us;
	r->expires_us = info->expires_at_us;
	if (!r->id || !r->provider || !r->template_id) {
		free(r->id);
		free(r->provider);
		free(r->template_id);
		rows->failed = 1;
		return 1;
	}
	rows->n++;
	return 0;
}

static void free_rows(struct rows *rows)
{
	for (size_t i = 0; i < rows->n; i++) {
		free(rows->v[i].id);
		free(rows->v[i].provider);
		free(rows->v[i].template_id);
	}
	free(rows->v);
}

static void json_time(int64_t us)
{
	char t[64];

	if (us <= 0) {
		fputs("null", stdout);
		return;
	}
	format_time_us(t, sizeof(t), us);
	json_string(t);
}

static void print_json_row(const struct row *r)
{
	fputs("{\"id\":", stdout);
	json_string(r->id);
	fputs(",\"provider\":", stdout);
	json_string(r->provider);
	fputs(",\"template\":", stdout);
	json_string(r->template_id);
	fputs(",\"state\":", stdout);
	json_string(state_name(r->state));
	fputs(",\"created_at\":", stdout);
	json_time(r->created_us);
	fputs(",\"expires_at\":", stdout);
	json_time(r->expires_us);
	putchar('}');
}

static int column_width(const struct rows *rows, size_t offset, const char *title)
{
	size_t w = strlen(title);

	for (size_t i = 0; i < rows->n; i++) {
		const char *s = *(char *const *)((const char *)&rows->v[i] + offset);

		if (strlen(s) > w)
			w = strlen(s);
	}
	return (int)w;
}

int cmd_sandbox_list(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct rows rows = { 0 };
	const char *provider = NULL;
	hangar_ctx *ctx = NULL;
	int json = 0, dd, c, status, listed;

	cli_getopt_reset();
	while ((c = cli_getopt(cli, argc, argv, "p:jh", longopts, &dd)) != -1) {
		switch (c) {
		case 'p': provider = optarg; break;
		case 'j': json = 1; break;
		case OPT_HELP: return cli_help_cmd(cli->cmd);
		default: return EXIT_USAGE;
		}
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	listed = hangar_sandbox_list(ctx, provider, collect_row, &rows);
	if (listed != 0 && !rows.failed && (provider || rows.n == 0)) {
		status = provider ? cli_fail("cannot list the sandboxes of %s", provider)
				  : cli_fail("cannot list sandboxes");
		goto out;
	}
	if (rows.failed) {
		fprintf(stderr, "hangar: out of memory\n");
		status = EXIT_FAIL;
		goto out;
	}
	if (json) {
		putchar('[');
		for (size_t i = 0; i < rows.n; i++) {
			if (i)
				putchar(',');
			print_json_row(&rows.v[i]);
		}
		puts("]");
	} else {
		int wid = column_width(&rows, offsetof(struct row, id), "ID");
		int wprov = column_width(&rows, offsetof(struct row, provider), "PROVIDER");

		printf("%-*s  %-*s  %-8s  %-20s  %s\n", wid, "ID", wprov, "PROVIDER", "STATE", "CREATED", "EXPIRES");
		for (size_t i = 0; i < rows.n; i++) {
			const struct row *r = &rows.v[i];
			char created[64], expires[64];

			format_time_us(created, sizeof(created), r->created_us);
			format_time_us(expires, sizeof(expires), r->expires_us);
			printf("%-*s  %-*s  %-8s  %-20s  %s\n", wid, r->id, wprov, r->provider, state_name(r->state),
			       created, expires);
		}
	}
	/* What the others hold is shown; the list is still incomplete, and says so. */
	if (listed != 0)
		status = cli_fail("the list is incomplete");
out:
	free_rows(&rows);
	hangar_ctx_unref(ctx);
	return status;
}

static int keep_metric(const hangar_sandbox_metric *m, void *payload)
{
	*(hangar_sandbox_metric *)payload = *m;
	return 0;
}

/*
 * Limits and usage, where the provider reports them (local sandboxes do);
 * nothing otherwise. A CPU count or memory total of 0 is a limit that does
 * not hold (`sandbox logs` says why); processes counted with no maximum, the
 * same.
 */
static void print_usage(hangar_sandbox *sb)
{
	hangar_sandbox_metric m = { 0 };
	int pids = 0;

	if (hangar_sandbox_metrics(sb, keep_metric, &m) != 0 || !m.version)
		return;
	if (m.cpu_count)
		printf("cpus:      %u\n", (unsigned)m.cpu_count);
	else
		printf("cpus:      not limited\n");
	if (m.mem_total_bytes)
		printf("memory:    %llu of %llu MiB\n", (unsigned long long)(m.mem_used_bytes >> 20),
		       (unsigned long long)(m.mem_total_bytes >> 20));
	else
		printf("memory:    not limited\n");
	pids = m.size >= offsetof(hangar_sandbox_metric, pids_max) + sizeof(m.pids_max);
	if (pids && m.pids_max)
		printf("processes: %u of %u\n", (unsigned)m.pids_used, (unsigned)m.pids_max);
	else if (pids && m.pids_used)
		printf("processes: %u, not limited\n", (unsigned)m.pids_used);
	if (m.disk_total_bytes)
		printf("disk:      %llu of %llu MiB\n", (unsigned long long)(m.disk_used_bytes >> 20),
		       (unsigned long long)(m.disk_total_bytes >> 20));
}

int cmd_sandbox_info(struct cli *cli, int argc, char **argv)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct rows rows = { 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char flags[256] = { 0 };
	char *id;
	int status;

	status = operands(cli, argc, argv, cli_opts_json, &id, 1, "sandbox id", flags);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;
	if (hangar_sandbox_get_info(&info, sb) != 0) {
		status = hangar_error_last()->code == HANGAR_EGONE ? cli_fail("sandbox %s is gone", id)
								   : cli_fail("cannot get the state of sandbox %s", id);
		goto out;
	}
	if (collect_row(&info, &rows) != 0) {
		fprintf(stderr, "hangar: out of memory\n");
		status = EXIT_FAIL;
		goto out;
	}
	if (flags['j']) {
		print_json_row(&rows.v[0]);
		putchar('\n');
	} else {
		const struct row *r = &rows.v[0];
		char created[64], expires[64];

		format_time_us(created, sizeof(created), r->created_us);
		format_time_us(expires, sizeof(expires), r->expires_us);
		printf("id:        %s\n", r->id);
		printf("provider:  %s\n", r->provider);
		printf("template:  %s\n", *r->template_id ? r->template_id : "-");
		printf("state:     %s\n", state_name(r->state));
		printf("created:   %s\n", created);
		printf("expires:   %s\n", expires);
		print_usage(sb);
	}
out:
	free_rows(&rows);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- cp ----------------------------------------------------------------------------- */

/* "ID:PATH" names a file in a sandbox: a colon with no slash before it. */
static int split_remote(const char *arg, char **id, const char **path)
{
	const char *colon = strchr(arg, ':');

	if (!colon || colon == arg || memchr(arg, '/', (size_t)(colon - arg)))
		return 0;
	*id = strndup(arg, (size_t)(colon - arg));
	*path = colon + 1;
	return 1;
}

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/* A copy's cancel callback: a stop signal arrived. */
static int signalled(void *payload)
{
	(void)payload;
	return sig_caught() != 0;
}

/* dir + "/" + the last component of name. */
static char *join_basename(const char *dir, const char *name)
{
	char *copy = strdup(name), *out = NULL;

	if (copy && asprintf(&out, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", basename(copy)) < 0)
		out = NULL;
	free(copy);
	return out;
}

int cmd_sandbox_cp(struct cli *cli, int argc, char **argv)
{
	char *ops[2], *id = NULL, *other = NULL, *target = NULL;
	const char *rpath = NULL, *opath, *lpath;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	hangar_copy_opts copy = HANGAR_COPY_OPTS_INIT;
	struct stat st;
	int status, src_remote, dst_remote, rc;

	status = operands(cli, argc, argv, cli_opts_help, ops, 2, "SRC and DST", NULL);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	src_remote = split_remote(ops[0], &id, &rpath);
	dst_remote = split_remote(ops[1], src_remote ? &other : &id, src_remote ? &opath : &rpath);
	if (src_remote && dst_remote) {
		status = cli_usage(cli, "only one of SRC and DST may be in a sandbox (write ./%s for a local path)",
				   ops[1]);
		goto out;
	}
	if (!src_remote && !dst_remote)
		return cli_usage(cli, "one of SRC and DST must be ID:PATH");
	if (!id)
		goto oom;
	if (!*rpath) {
		status = cli_usage(cli, "no path after '%s:'", id);
		goto out;
	}
	lpath = src_remote ? ops[1] : ops[0];
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;

	if (src_remote) {
		/* Into a local directory: keep the file's name. */
		if (stat(lpath, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (!(target = join_basename(lpath, rpath)))
				goto oom;
			lpath = target;
		}
		copy.cancel = signalled;
		/* A signal stops the copy, which removes its temporary file; then we exit as killed. */
		if (sig_setup(stop_signals, sizeof(stop_signals) / sizeof(stop_signals[0])) < 0) {
			status = EXIT_FAIL;
			goto out;
		}
		rc = hangar_sandbox_copy_out(sb, rpath, lpath, &copy);
		if (rc == HANGAR_ECANCELED && sig_caught())
			status = EXIT_SIGNAL_BASE + sig_caught();
		else if (rc != 0)
			status = cli_fail("cannot copy %s:%s to %s", cli_text(id), rpath, lpath);
	} else {
		if (rpath[strlen(rpath) - 1] == '/') {
			if (!(target = join_basename(rpath, lpath)))
				goto oom;
			rpath = target;
		}
		if (hangar_sandbox_copy_in(sb, lpath, rpath) != 0)
			status = cli_fail("cannot copy %s to %s:%s", lpath, id, rpath);
	}
out:
	free(target);
	free(other);
	free(id);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
oom:
	fprintf(stderr, "hangar: out of memory\n");
	status = EXIT_FAIL;
	goto out;
}

/* ---- pause, resume, kill, timeout ----------------------------------------------- */

enum lifecycle { LC_PAUSE, LC_RESUME, LC_KILL };

static int lifecycle(struct cli *cli, int argc, char **argv, enum lifecycle what)
{
	static const char *const verbs[] = { "pause", "resume", "kill" };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *id;
	int status, rc;

	status = operands(cli, argc, argv, cli_opts_help, &id, 1, "sandbox id", NULL);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;
	switch (what) {
	case LC_PAUSE: rc = hangar_sandbox_pause(sb); break;
	case LC_RESUME: rc = hangar_sandbox_resume(sb); break;
	default: rc = hangar_sandbox_kill(sb); break;
	}
	if (rc == HANGAR_EGONE)
		status = cli_fail("sandbox %s is gone", id);
	else if (rc)
		status = cli_fail("cannot %s sandbox %s", verbs[what], id);
out:
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_sandbox_pause(struct cli *cli, int argc, char **argv)
{
	return lifecycle(cli, argc, argv, LC_PAUSE);
}

int cmd_sandbox_resume(struct cli *cli, int argc, char **argv)
{
	return lifecycle(cli, argc, argv, LC_RESUME);
}

int cmd_sandbox_kill(struct cli *cli, int argc, char **argv)
{
	return lifecycle(cli, argc, argv, LC_KILL);
}

int cmd_sandbox_timeout(struct cli *cli, int argc, char **argv)
{
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *ops[2];
	int64_t seconds;
	int status, rc;

	status = operands(cli, argc, argv, cli_opts_help, ops, 2, "sandbox id and SECONDS", NULL);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if (cli_parse_seconds(cli, "SECONDS", ops[1], CLI_LIFETIME_MAX, &seconds))
		return EXIT_USAGE;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, ops[0], &sb)) != 0)
		goto out;
	rc = hangar_sandbox_set_timeout(sb, seconds);
	if (rc == HANGAR_EGONE)
		status = cli_fail("sandbox %s is gone", ops[0]);
	else if (rc)
		status = cli_fail("cannot set the timeout of sandbox %s", ops[0]);
out:
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- port ------------------------------------------------------------------------------- */

int cmd_sandbox_port(struct cli *cli, int argc, char **argv)
{
	hangar_buf addr = HANGAR_BUF_INIT;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	unsigned long port;
	char *ops[2], *end;
	int status, rc;

	status = operands(cli, argc, argv, cli_opts_help, ops, 2, "sandbox id and PORT", NULL);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	errno = 0;
	port = strtoul(ops[1], &end, 10);
	if (errno || end == ops[1] || *end || port < 1 || port > 65535 || ops[1][0] == '-' || ops[1][0] == '+') {
		cli_usage(cli, "PORT must be a number from 1 to 65535, not \"%s\"", cli_text(ops[1]));
		return EXIT_USAGE;
	}
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, ops[0], &sb)) != 0)
		goto out;
	rc = hangar_sandbox_expose_port(&addr, sb, (uint32_t)port);
	if (rc == HANGAR_EGONE)
		status = cli_fail("sandbox %s is gone", ops[0]);
	else if (rc == HANGAR_EUNSUPPORTED)
		status = cli_fail("the provider of sandbox %s cannot expose ports", ops[0]);
	else if (rc)
		status = cli_fail("cannot expose port %lu of sandbox %s", port, ops[0]);
	else
		printf("%s\n", addr.ptr);
out:
	hangar_buf_dispose(&addr);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}
