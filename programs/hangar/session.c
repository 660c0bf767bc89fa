/* hangar session create, list, info, suspend, resume, fork, keep, archive, delete and reap. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *session_state(int32_t s)
{
	switch (s) {
	case HANGAR_SESSION_ACTIVE: return "active";
	case HANGAR_SESSION_SUSPENDED: return "suspended";
	case HANGAR_SESSION_PARKED: return "parked";
	case HANGAR_SESSION_ARCHIVED: return "archived";
	default: return "unknown";
	}
}

static const char *resume_name(int32_t how)
{
	switch (how) {
	case HANGAR_RESUME_HOT: return "hot";
	case HANGAR_RESUME_COLD: return "cold";
	case HANGAR_RESUME_FRESH: return "fresh";
	default: return "none";
	}
}

static int open_session(hangar_ctx *ctx, const char *id, hangar_session **out)
{
	if (hangar_session_open(out, ctx, id) == 0)
		return 0;
	if (hangar_error_last()->code == HANGAR_ENOTFOUND)
		return cli_fail("no session %s", cli_text(id));
	return cli_fail("cannot open session %s", cli_text(id));
}

static int get_info(hangar_session *s, hangar_session_info *in)
{
	*in = (hangar_session_info)HANGAR_SESSION_INFO_INIT;
	if (hangar_session_get_info(in, s) != 0)
		return cli_fail("cannot read session %s", cli_text(hangar_session_id(s)));
	return 0;
}

static void print_text(const hangar_session_info *in)
{
	char created[64], updated[64], parked[64];

	format_time_us(created, sizeof(created), in->created_at_us);
	format_time_us(updated, sizeof(updated), in->updated_at_us);
	printf("id:           %s\n", in->id);
	printf("state:        %s\n", session_state(in->state));
	printf("sandbox:      %s%s%s%s\n", *in->sandbox_id ? in->sandbox_id : "-", *in->provider ? " (" : "",
	       in->provider, *in->provider ? ")" : "");
	printf("checkpoint:   %s\n", *in->checkpoint_id ? in->checkpoint_id : "-");
	if (in->parked_since_us) {
		format_time_us(parked, sizeof(parked), in->parked_since_us);
		printf("parked since: %s\n", parked);
	}
	printf("last resume:  %s%s%s\n", resume_name(in->last_resume), *in->last_resume_reason ? ": " : "",
	       in->last_resume_reason);
	if (*in->suspend_reason)
		printf("not parked:   %s\n", in->suspend_reason);
	printf("environment:  %s\n", *in->environment ? in->environment : "-");
	printf("workspace:    %s\n", in->workspace);
	if (*in->parent_id)
		printf("forked from:  %s (group %s)\n", in->parent_id, in->fork_group);
	if (in->flags & HANGAR_SESSION_EXCLUSIVE_CREDENTIAL)
		printf("flags:        exclusive-credential\n");
	printf("labels:       %s\n", in->labels_json);
	printf("created:      %s\n", created);
	printf("updated:      %s\n", updated);
}

static void print_json(const hangar_session_info *in)
{
	const char *keys[] = { "id", "state", "provider", "sandbox", "checkpoint", "last_resume",
			       "last_resume_reason", "suspend_reason", "environment", "workspace", "parent",
			       "fork_group" };
	const char *vals[] = { in->id, session_state(in->state), in->provider, in->sandbox_id, in->checkpoint_id,
			       resume_name(in->last_resume), in->last_resume_reason, in->suspend_reason,
			       in->environment, in->workspace, in->parent_id, in->fork_group };

	printf("{");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		printf("%s\"%s\":", i ? "," : "", keys[i]);
		json_string(vals[i]);
	}
	printf(",\"exclusive_credential\":%s,\"labels\":",
	       in->flags & HANGAR_SESSION_EXCLUSIVE_CREDENTIAL ? "true" : "false");
	json_value(in->labels_json);
	printf(",\"created_us\":%" PRId64 ",\"updated_us\":%" PRId64 ",\"parked_since_us\":%" PRId64 "}",
	       in->created_at_us, in->updated_at_us, in->parked_since_us);
}

/* ---- create ---------------------------------------------------------------------------- */

struct create_args {
	hangar_create_opts create;
	hangar_session_opts opts;
	struct strv env, labels;
	int quiet;
};

static int create_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct create_args *a = payload;

	switch (c) {
	case 'M': a->create.environment = arg; return 0;
	case 'R': a->create.tier = arg; return 0;
	case 'p': a->create.provider = arg; return 0;
	case 'T': a->create.template_id = arg; return 0;
	case 't': return cli_parse_seconds(cli, "--timeout", arg, CLI_LIFETIME_MAX, &a->create.timeout_sec);
	case 'e': return cli_add_env(cli, &a->env, arg);
	case 'n':
		if (!strcmp(arg, "on"))
			a->create.network = HANGAR_NETWORK_ON;
		else if (!strcmp(arg, "off"))
			a->create.network = HANGAR_NETWORK_OFF;
		else
			return cli_usage(cli, "--network wants 'on' or 'off', not '%s'", arg);
		return 0;
	case 'i': a->opts.id = arg; return 0;
	case 'w': a->opts.workspace = arg; return 0;
	case 'u': a->opts.user = arg; return 0;
	case 'x': a->opts.flags |= HANGAR_SESSION_EXCLUSIVE_CREDENTIAL; return 0;
	case 'q': a->quiet = 1; return 0;
	case 'l':
		if (!strchr(arg, '=') || *arg == '=')
			return cli_usage(cli, "--label wants KEY=VALUE, not '%s'", arg);
		return strv_push(&a->labels, arg) ? cli_fail("out of memory") : 0;
	default: return EXIT_USAGE;
	}
}

int cmd_session_create(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "environment", required_argument, NULL, 'M' },
		{ "tier", required_argument, NULL, 'R' },
		{ "provider", required_argument, NULL, 'p' },
		{ "template", required_argument, NULL, 'T' },
		{ "image", required_argument, NULL, 'T' },
		{ "timeout", required_argument, NULL, 't' },
		{ "env", required_argument, NULL, 'e' },
		{ "network", required_argument, NULL, 'n' },
		{ "id", required_argument, NULL, 'i' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ "label", required_argument, NULL, 'l' },
		{ "exclusive-credential", no_argument, NULL, 'x' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct create_args a = { .create = HANGAR_CREATE_OPTS_INIT, .opts = HANGAR_SESSION_OPTS_INIT };
	hangar_session *s = NULL;
	hangar_ctx *ctx = NULL;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "p:T:t:e:n:i:w:u:l:qh", longopts, NULL, 0, create_opt, &a), 0,
			  "");
	if (status)
		goto out;
	if (a.create.tier && a.create.provider) {
		status = cli_usage(cli, "--tier and --provider exclude each other");
		goto out;
	}
	a.create.env = a.env.v;
	a.opts.labels = a.labels.v;
	a.opts.create = &a.create;
	if ((status = cli_open(cli, &ctx)) != 0)
		goto out;
	if (hangar_session_create(&s, ctx, &a.opts) != 0) {
		status = cli_fail("cannot create a session");
		goto out;
	}
	if (a.quiet) {
		printf("%s\n", hangar_session_id(s));
	} else {
		hangar_session_info in;

		if ((status = get_info(s, &in)) != 0)
			goto out;
		printf("%s\n", in.id);
		cli_say("session %s: sandbox %s on %s", in.id, in.sandbox_id, in.provider);
	}
out:
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
	strv_free(&a.env);
	strv_free(&a.labels);
	return status < 0 ? 0 : status;
}

/* ---- list and info ------------------------------------------------------------------------ */

struct list_state {
	int json, n;
};

static int list_fn(const hangar_session_info *in, void *payload)
{
	struct list_state *l = payload;

	if (l->json) {
		printf(l->n ? "," : "");
		print_json(in);
	} else {
		char updated[64];

		if (l->n == 0)
			printf("%-32s %-10s %-10s %-30s %s\n", "ID", "STATE", "PROVIDER", "SANDBOX", "UPDATED");
		format_time_us(updated, sizeof(updated), in->updated_at_us);
		printf("%-32s %-10s %-10s %-30s %s\n", in->id, session_state(in->state),
		       *in->provider ? in->provider : "-", *in->sandbox_id ? in->sandbox_id : "-", updated);
	}
	l->n++;
	return 0;
}

int cmd_session_list(struct cli *cli, int argc, char **argv)
{
	struct list_state l = { 0, 0 };
	hangar_ctx *ctx = NULL;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "jh", cli_opts_json, NULL, 0, cli_opt_json, &l.json), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (l.json)
		printf("[");
	if (hangar_session_list(ctx, list_fn, &l) != 0)
		status = cli_fail("cannot list sessions");
	if (l.json)
		printf("]\n");
	hangar_ctx_unref(ctx);
	return status;
}

/* The common shape: one session id, maybe --json; then fn on the opened session. */
typedef int (*one_fn)(struct cli *cli, hangar_session *s, int json);

static int with_session(struct cli *cli, int argc, char **argv, int allow_json, one_fn fn)
{
	hangar_session *s = NULL;
	hangar_ctx *ctx = NULL;
	char *id = NULL;
	int json = 0, status;

	status = cli_want(cli,
			  cli_parse(cli, argc, argv, allow_json ? "jh" : "h", allow_json ? cli_opts_json : cli_opts_help, &id,
				    1, cli_opt_json, &json),
			  1, "session id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) == 0 && (status = open_session(ctx, id, &s)) == 0)
		status = fn(cli, s, json);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
	return status;
}

static int do_info(struct cli *cli, hangar_session *s, int json)
{
	hangar_session_info in;
	int status;

	(void)cli;
	if ((status = get_info(s, &in)) != 0)
		return status;
	if (json) {
		print_json(&in);
		printf("\n");
	} else {
		print_text(&in);
	}
	return 0;
}

int cmd_session_info(struct cli *cli, int argc, char **argv)
{
	return with_session(cli, argc, argv, 1, do_info);
}

/* ---- suspend ----------------------------------------------------------------------------- */

struct suspend_args {
	hangar_suspend_opts opts;
	struct strv labels;
	const char *blob_file;
};

static int suspend_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct suspend_args *a = payload;

	switch (c) {
	case 'b': a->blob_file = arg; return 0;
	case 'N': a->opts.flags |= HANGAR_SUSPEND_NO_PARK; return 0;
	case 't': return cli_parse_seconds(cli, "--timeout", arg, 86400, &a->opts.timeout_sec);
	case 'l':
		if (!strchr(arg, '=') || *arg == '=')
			return cli_usage(cli, "--label wants KEY=VALUE, not '%s'", arg);
		return strv_push(&a->labels, arg) ? cli_fail("out of memory") : 0;
	default: return EXIT_USAGE;
	}
}

int cmd_session_suspend(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "blob", required_argument, NULL, 'b' },
		{ "label", required_argument, NULL, 'l' },
		{ "no-park", no_argument, NULL, 'N' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct suspend_args a = { .opts = HANGAR_SUSPEND_OPTS_INIT };
	hangar_session_info in;
	hangar_session *s = NULL;
	hangar_ctx *ctx = NULL;
	char *id = NULL, *blob = NULL;
	size_t blob_len = 0;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "b:l:Nt:h", longopts, &id, 1, suspend_opt, &a), 1,
			  "session id");
	if (status)
		goto out;
	if (a.blob_file) {
		if ((status = cli_read_file(a.blob_file, &blob, &blob_len)) != 0)
			goto out;
		a.opts.blob = blob;
		a.opts.blob_len = blob_len;
	}
	a.opts.labels = a.labels.v;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = open_session(ctx, id, &s)) != 0 ||
	    (status = stop_signals_setup()) != 0)
		goto out;
	/* A stop signal cancels the capture: nothing is stored, the session stays active. */
	a.opts.cancel = stop_requested;
	if ((rc = hangar_session_suspend(s, &a.opts)) != 0) {
		status = stop_status(rc, "suspend session", id);
		goto out;
	}
	if ((status = get_info(s, &in)) != 0)
		goto out;
	if (in.state == HANGAR_SESSION_PARKED)
		printf("parked %s at checkpoint %s\n", in.sandbox_id, in.checkpoint_id);
	else
		printf("suspended at checkpoint %s%s%s\n", *in.checkpoint_id ? in.checkpoint_id : "-",
		       *in.suspend_reason ? "; not parked: " : "", in.suspend_reason);
out:
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
	strv_free(&a.labels);
	free(blob);
	return status < 0 ? 0 : status;
}

/* ---- resume, archive, delete, keep --------------------------------------------------------- */

static int do_resume(struct cli *cli, hangar_session *s, int json)
{
	hangar_session_info in;
	hangar_sandbox *sb = NULL;
	int status;

	(void)cli;
	(void)json;
	if (hangar_session_resume(s, &sb) != 0)
		return cli_fail("cannot resume session %s", cli_text(hangar_session_id(s)));
	hangar_sandbox_unref(sb);
	if ((status = get_info(s, &in)) != 0)
		return status;
	printf("%s\n", in.sandbox_id);
	cli_say("session %s: %s resume%s%s", in.id, resume_name(in.last_resume), *in.last_resume_reason ? ": " : "",
		in.last_resume_reason);
	return 0;
}

int cmd_session_resume(struct cli *cli, int argc, char **argv)
{
	return with_session(cli, argc, argv, 0, do_resume);
}

static int do_archive(struct cli *cli, hangar_session *s, int json)
{
	(void)cli;
	(void)json;
	if (hangar_session_archive(s) != 0)
		return cli_fail("cannot archive session %s", cli_text(hangar_session_id(s)));
	return 0;
}

int cmd_session_archive(struct cli *cli, int argc, char **argv)
{
	return with_session(cli, argc, argv, 0, do_archive);
}

static int do_delete(struct cli *cli, hangar_session *s, int json)
{
	(void)cli;
	(void)json;
	if (hangar_session_delete(s) != 0)
		return cli_fail("cannot delete session %s", cli_text(hangar_session_id(s)));
	return 0;
}

int cmd_session_delete(struct cli *cli, int argc, char **argv)
{
	return with_session(cli, argc, argv, 0, do_delete);
}

static int do_keep(struct cli *cli, hangar_session *s, int json)
{
	uint32_t n = 0;

	(void)cli;
	(void)json;
	if (hangar_session_keep(s, &n) != 0)
		return cli_fail("cannot keep session %s", cli_text(hangar_session_id(s)));
	cli_say("archived %u other session%s of the fork", n, n == 1 ? "" : "s");
	return 0;
}

int cmd_session_keep(struct cli *cli, int argc, char **argv)
{
	return with_session(cli, argc, argv, 0, do_keep);
}

/* ---- fork and reap ------------------------------------------------------------------------- */

struct fork_state {
	int failed;
};

static void on_fork(const hangar_session_fork_result *r, void *payload)
{
	struct fork_state *f = payload;
	static const char *const methods[] = { "", "native", "snapshot", "checkpoint" };
	const char *how = r->method >= 1 && r->method <= 3 ? methods[r->method] : "?";

	if (r->error) {
		fprintf(stderr, "hangar: fork %u failed (%s): %s\n", r->index, hangar_error_name(r->error),
			cli_text(r->message));
		f->failed = 1;
		return;
	}
	printf("%s\n", hangar_session_id(r->session));
	cli_say("fork %u: session %s by %s", r->index, hangar_session_id(r->session), how);
}

static int count_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	char *end;
	long v;

	if (c != 'c')
		return EXIT_USAGE;
	v = strtol(arg, &end, 10);
	if (*arg == '\0' || *end || v < 1 || v > 100)
		return cli_usage(cli, "--count wants 1 to 100, not '%s'", arg);
	*(uint32_t *)payload = (uint32_t)v;
	return 0;
}

int cmd_session_fork(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct fork_state f = { 0 };
	hangar_session *s = NULL;
	hangar_ctx *ctx = NULL;
	uint32_t count = 1;
	char *id = NULL;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "c:h", longopts, &id, 1, count_opt, &count), 1, "session id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) == 0 && (status = open_session(ctx, id, &s)) == 0 &&
	    (status = stop_signals_setup()) == 0) {
		/* A stop signal gives the fork up: nothing is kept, the parent stays active. */
		hangar_session_fork_opts fo = HANGAR_SESSION_FORK_OPTS_INIT;
		int rc;

		fo.cancel = stop_requested;
		if ((rc = hangar_session_fork_ext(s, count, &fo, on_fork, &f)) != 0)
			status = stop_status(rc, "fork session", id);
		else if (f.failed)
			status = EXIT_FAIL;
	}
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_session_reap(struct cli *cli, int argc, char **argv)
{
	hangar_ctx *ctx = NULL;
	uint32_t n = 0;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "h", cli_opts_help, NULL, 0, NULL, NULL), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_session_reap(ctx, &n) != 0)
		status = cli_fail("cannot reap parked sandboxes");
	else
		printf("%u\n", n);
	hangar_ctx_unref(ctx);
	return status;
}
