/* hangar sandbox fork, logs and metrics: what the platform itself offers. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/*
 * Options (those in longopts, with their short letters in shortopts) and
 * exactly one operand, the sandbox id. Returns 0, OPT_HELP, or EXIT_USAGE
 * after reporting. Each option seen calls opt(c, optarg, data); a non-zero
 * return from it is a usage error already reported.
 */
static int one_id(const struct cli *cli, int argc, char **argv, const char *shortopts,
		  const struct option *longopts, char **id, int (*opt)(const struct cli *, int, const char *, void *),
		  void *data)
{
	int dd, c;

	*id = NULL;
	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, shortopts, longopts, &dd);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (*id)
				return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
			*id = argv[optind++];
			if (dd && optind < argc)
				return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
			continue;
		}
		if (c == OPT_HELP)
			return OPT_HELP;
		if (c == '?' || opt(cli, c, optarg, data))
			return EXIT_USAGE;
	}
	if (!*id)
		return cli_usage(cli, "missing sandbox id");
	return 0;
}

static int attach_failed(const char *id, const char *what)
{
	return hangar_error_last()->code == HANGAR_EGONE ? cli_fail("sandbox %s is gone", id)
							 : cli_fail("cannot %s sandbox %s", what, id);
}

/* ---- fork ------------------------------------------------------------------------ */

static int fork_opt(const struct cli *cli, int c, const char *arg, void *data)
{
	uint32_t *count = data;
	char *end;
	unsigned long v;

	if (c != 'c')
		return 0;
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!*arg || *end || errno || *arg == '-' || *arg == '+' || v < 1 || v > 100)
		return cli_usage(cli, "--count wants a whole number from 1 to 100, not '%s'", arg);
	*count = (uint32_t)v;
	return 0;
}

struct fork_out {
	uint32_t failed;
};

static void print_fork(const hangar_fork_result *r, void *payload)
{
	struct fork_out *o = payload;

	if (r->error) {
		o->failed++;
		fprintf(stderr, "hangar: fork %u failed: %s\n", r->index + 1, r->message);
		return;
	}
	printf("%s\n", hangar_sandbox_id(r->sandbox));
	fflush(stdout);
}

int cmd_sandbox_fork(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct fork_out out = { 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	uint32_t count = 1;
	char *id;
	int status;

	status = one_id(cli, argc, argv, "c:h", longopts, &id, fork_opt, &count);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;
	if (hangar_sandbox_fork(sb, count, print_fork, &out) != 0)
		status = attach_failed(id, "fork");
	else if (out.failed)
		status = cli_fail("%u of %u forks of sandbox %s failed", out.failed, count, id);
out:
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- logs and metrics --------------------------------------------------------------- */

struct printing {
	int json, n;
};

static int print_log(const hangar_sandbox_log_entry *e, void *payload)
{
	struct printing *p = payload;
	char when[64];

	format_time_us(when, sizeof(when), e->timestamp_us);
	if (p->json) {
		printf("%s{\"timestamp\":", p->n++ ? ",\n " : "[");
		json_string(when);
		printf(",\"level\":");
		json_string(e->level);
		printf(",\"message\":");
		json_string(e->message);
		putchar('}');
	} else {
		printf("%s  %-5s  %s\n", when, e->level, e->message);
	}
	return 0;
}

/* What `sandbox logs` and `sandbox metrics` differ in: the call that reads. */
typedef int (*reader_fn)(hangar_sandbox *sb, struct printing *p);

/* Attaches to the sandbox named on the command line and prints what read() reports. */
static int print_from_sandbox(struct cli *cli, int argc, char **argv, const char *what, reader_fn read)
{
	struct printing p = { 0, 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *id;
	int status;

	status = one_id(cli, argc, argv, "jh", cli_opts_json, &id, cli_opt_json, &p.json);
	if (status == OPT_HELP)
		return cli_help_cmd(cli->cmd);
	if (status)
		return status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;
	if (read(sb, &p) != 0) {
		status = hangar_error_last()->code == HANGAR_EUNSUPPORTED ? cli_fail("%s", hangar_error_last()->message)
									  : attach_failed(id, what);
		goto out;
	}
	if (p.json)
		printf("%s]\n", p.n ? "" : "[");
out:
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

static int read_logs(hangar_sandbox *sb, struct printing *p)
{
	return hangar_sandbox_logs(sb, print_log, p);
}

int cmd_sandbox_logs(struct cli *cli, int argc, char **argv)
{
	return print_from_sandbox(cli, argc, argv, "read the logs of", read_logs);
}

static int print_metric(const hangar_sandbox_metric *m, void *payload)
{
	struct printing *p = payload;
	char when[64];

	format_time_us(when, sizeof(when), m->timestamp_us);
	if (p->json) {
		printf("%s{\"timestamp\":", p->n++ ? ",\n " : "[");
		json_string(when);
		printf(",\"cpu_count\":%" PRIu32 ",\"cpu_used_pct\":", m->cpu_count);
		/* JSON has no NaN or infinity: a figure the platform could not give is null. */
		if (isfinite(m->cpu_used_pct))
			printf("%.2f", m->cpu_used_pct);
		else
			printf("null");
		printf(",\"mem_used_bytes\":%" PRIu64 ",\"mem_total_bytes\":%" PRIu64 ",\"disk_used_bytes\":%" PRIu64
		       ",\"disk_total_bytes\":%" PRIu64 "}",
		       m->mem_used_bytes, m->mem_total_bytes, m->disk_used_bytes, m->disk_total_bytes);
		return 0;
	}
	if (!p->n++)
		printf("%-20s  %4s  %6s  %10s  %10s  %10s  %10s\n", "TIME", "CPUS", "CPU%", "MEM_MIB", "MEM_TOTAL",
		       "DISK_MIB", "DISK_TOTAL");
	printf("%-20s  %4" PRIu32 "  %6.1f  %10" PRIu64 "  %10" PRIu64 "  %10" PRIu64 "  %10" PRIu64 "\n", when,
	       m->cpu_count, m->cpu_used_pct, m->mem_used_bytes >> 20, m->mem_total_bytes >> 20,
	       m->disk_used_bytes >> 20, m->disk_total_bytes >> 20);
	return 0;
}

static int read_metrics(hangar_sandbox *sb, struct printing *p)
{
	return hangar_sandbox_metrics(sb, print_metric, p);
}

int cmd_sandbox_metrics(struct cli *cli, int argc, char **argv)
{
	return print_from_sandbox(cli, argc, argv, "read the metrics of", read_metrics);
}
