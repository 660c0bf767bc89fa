/* hangar checkpoint create, list, info, restore, export, blob and delete. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"


/* The longest a capture or restore may take from the command line (a day). */
#define CKPT_TIMEOUT_MAX 86400

/* ---- progress ------------------------------------------------------------------------ */

/* A progress line on stderr, when it is a terminal, redrawn at most ten times a second. */
struct progress {
	int on;
	const char *verb;
	struct timespec last;
	int drawn;
};

static void human_bytes(char *buf, size_t size, uint64_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", n);
	else
		snprintf(buf, size, "%.1f %s", v, units[u]);
}

static int on_progress(uint64_t done, uint64_t total, void *payload)
{
	struct progress *p = payload;
	struct timespec now;
	char d[32], t[32];

	if (sig_caught())
		return 1;
	if (!p->on)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (p->drawn && (now.tv_sec - p->last.tv_sec) * 1000 + (now.tv_nsec - p->last.tv_nsec) / 1000000 < 100)
		return 0;
	p->last = now;
	p->drawn = 1;
	human_bytes(d, sizeof(d), done);
	if (total > 0 && done <= total) {
		int width = 30, fill = (int)((double)done / (double)total * width);

		human_bytes(t, sizeof(t), total);
		fprintf(stderr, "\r%s [%.*s%*s] %s / %s\033[K", p->verb, fill, "##############################",
			width - fill, "", d, t);
	} else {
		fprintf(stderr, "\r%s %s\033[K", p->verb, d);
	}
	return 0;
}

static void progress_start(struct progress *p, const char *verb)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO);
	p->verb = verb;
}

static void progress_end(struct progress *p)
{
	if (p->on && p->drawn)
		fprintf(stderr, "\r\033[K");
}

/* ---- printing ------------------------------------------------------------------------- */

static void print_info_text(const hangar_checkpoint_info *in)
{
	char created[64], stored[32], archive[32];

	format_time_us(created, sizeof(created), in->created_at_us);
	human_bytes(stored, sizeof(stored), in->stored_bytes);
	human_bytes(archive, sizeof(archive), in->archive_bytes);
	printf("id:         %s\n", in->id);
	printf("session:    %s\n", *in->session_id ? in->session_id : "-");
	printf("parent:     %s\n", *in->parent_id ? in->parent_id : "-");
	printf("created:    %s\n", created);
	printf("workspace:  %s (%s)\n", in->workspace, in->selection);
	printf("files:      %" PRIu64 "\n", in->files);
	printf("stored:     %s (%" PRIu64 " bytes, archive %s)\n", stored, in->stored_bytes, archive);
	printf("blob:       %" PRIu64 " bytes\n", in->blob_bytes);
	printf("labels:     %s\n", in->labels_json);
	printf("hash:       %s\n", in->content_hash);
	printf("store:      %s\n", in->store_url);
}

static void print_info_json(const hangar_checkpoint_info *in)
{
	printf("{\"id\":");
	json_string(in->id);
	printf(",\"session\":");
	json_string(in->session_id);
	printf(",\"parent\":");
	json_string(in->parent_id);
	printf(",\"created_us\":%" PRId64 ",\"workspace\":", in->created_at_us);
	json_string(in->workspace);
	printf(",\"selection\":");
	json_string(in->selection);
	printf(",\"files\":%" PRIu64 ",\"stored_bytes\":%" PRIu64 ",\"archive_bytes\":%" PRIu64
	       ",\"blob_bytes\":%" PRIu64 ",\"labels\":",
	       in->files, in->stored_bytes, in->archive_bytes, in->blob_bytes);
	json_value(in->labels_json);
	printf(",\"content_hash\":");
	json_string(in->content_hash);
	printf(",\"store\":");
	json_string(in->store_url);
	printf("}");
}

static int get_info(hangar_checkpoint_info *in, hangar_checkpoint *cp)
{
	*in = (hangar_checkpoint_info)HANGAR_CHECKPOINT_INFO_INIT;
	if (hangar_checkpoint_get_info(in, cp) != 0)
		return cli_fail("cannot read checkpoint %s", cli_text(hangar_checkpoint_id(cp)));
	return 0;
}

static int lookup(hangar_ctx *ctx, const char *id, hangar_checkpoint **out)
{
	if (hangar_checkpoint_lookup(out, ctx, id) == 0)
		return 0;
	if (hangar_error_last()->code == HANGAR_ENOTFOUND)
		return cli_fail("no checkpoint %s", cli_text(id));
	return cli_fail("cannot find checkpoint %s", cli_text(id));
}

/* ---- create --------------------------------------------------------------------------- */

struct create_args {
	hangar_checkpoint_opts opts;
	struct strv labels;
	const char *blob_file;
	int json;
};

static int create_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct create_args *a = payload;

	switch (c) {
	case 'w': a->opts.workspace = arg; return 0;
	case 'a': a->opts.select = HANGAR_CHECKPOINT_SELECT_ALL; return 0;
	case 's': a->opts.session_id = arg; return 0;
	case 'P': a->opts.parent_id = arg; return 0;
	case 'u': a->opts.user = arg; return 0;
	case 'b': a->blob_file = arg; return 0;
	case 'N': a->opts.flags |= HANGAR_CHECKPOINT_NO_NATIVE; return 0;
	case 'j': a->json = 1; return 0;
	case 'l':
		if (!strchr(arg, '=') || *arg == '=')
			return cli_usage(cli, "--label wants KEY=VALUE, not '%s'", arg);
		if (strv_push(&a->labels, arg) != 0)
			return cli_fail("out of memory");
		return 0;
	case 't': return cli_parse_seconds(cli, "--timeout", arg, CKPT_TIMEOUT_MAX, &a->opts.timeout_sec);
	default: return EXIT_USAGE;
	}
}

int cmd_checkpoint_create(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workspace", required_argument, NULL, 'w' },
		{ "all", no_argument, NULL, 'a' },
		{ "session", required_argument, NULL, 's' },
		{ "parent", required_argument, NULL, 'P' },
		{ "label", required_argument, NULL, 'l' },
		{ "blob", required_argument, NULL, 'b' },
		{ "user", required_argument, NULL, 'u' },
		{ "timeout", required_argument, NULL, 't' },
		{ "no-native", no_argument, NULL, 'N' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct create_args a = { .opts = HANGAR_CHECKPOINT_OPTS_INIT };
	struct progress prog;
	hangar_checkpoint_info info;
	hangar_checkpoint *cp = NULL;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *id = NULL, *blob = NULL;
	size_t blob_len = 0;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "w:as:P:l:b:u:t:Njh", longopts, &id, 1, create_opt, &a), 1,
		      "sandbox id");
	if (status)
		goto out;
	if (a.blob_file) {
		if ((status = cli_read_file(a.blob_file, &blob, &blob_len)) != 0)
			goto out;
		a.opts.blob = blob;
		a.opts.blob_len = blob_len;
	}
	a.opts.labels = a.labels.v;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0 ||
	    (status = stop_signals_setup()) != 0)
		goto out;
	progress_start(&prog, "checkpoint");
	a.opts.cancel = stop_requested;
	a.opts.progress = on_progress;
	a.opts.progress_payload = &prog;
	rc = hangar_checkpoint_create(&cp, sb, &a.opts);
	progress_end(&prog);
	if (rc != 0) {
		status = stop_status(rc, "checkpoint sandbox", id);
		goto out;
	}
	if (a.json) {
		if ((status = get_info(&info, cp)) != 0)
			goto out;
		print_info_json(&info);
		putchar('\n');
	} else {
		printf("%s\n", hangar_checkpoint_id(cp));
	}
out:
	if (status < 0)
		status = 0;
	hangar_checkpoint_unref(cp);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	strv_free(&a.labels);
	free(blob);
	return status;
}

/* ---- list ----------------------------------------------------------------------------- */

struct list_args {
	const char *session;
	int json;
	int count;
	int status;
};

static int list_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct list_args *a = payload;

	(void)cli;
	switch (c) {
	case 's': a->session = arg; return 0;
	case 'j': a->json = 1; return 0;
	default: return EXIT_USAGE;
	}
}

static int list_one(hangar_checkpoint *cp, void *payload)
{
	struct list_args *a = payload;
	hangar_checkpoint_info in;
	char created[64], stored[32];

	if ((a->status = get_info(&in, cp)) != 0)
		return 1;
	if (a->json) {
		printf("%s", a->count ? ",\n " : "");
		print_info_json(&in);
	} else {
		if (a->count == 0)
			printf("%-32s %-24s %-20s %10s %8s\n", "ID", "SESSION", "CREATED", "STORED", "FILES");
		format_time_us(created, sizeof(created), in.created_at_us);
		human_bytes(stored, sizeof(stored), in.stored_bytes);
		printf("%-32s %-24s %-20s %10s %8" PRIu64 "\n", in.id, *in.session_id ? in.session_id : "-", created,
		       stored, in.files);
	}
	a->count++;
	return 0;
}

int cmd_checkpoint_list(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct list_args a = { 0 };
	hangar_ctx *ctx = NULL;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "s:jh", longopts, NULL, 0, list_opt, &a), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (a.json)
		printf("[");
	rc = hangar_checkpoint_list(ctx, a.session, list_one, &a);
	if (a.json)
		printf("]\n");
	if (a.status)
		status = a.status;
	else if (rc != 0)
		status = cli_fail("cannot list checkpoints");
	hangar_ctx_unref(ctx);
	return status;
}

/* ---- info, blob, delete --------------------------------------------------------------- */

enum one { ONE_INFO, ONE_BLOB, ONE_DELETE };

static int one_checkpoint(struct cli *cli, int argc, char **argv, enum one what)
{
	hangar_checkpoint_info info;
	hangar_checkpoint *cp = NULL;
	hangar_ctx *ctx = NULL;
	hangar_buf blob = HANGAR_BUF_INIT;
	char *id = NULL;
	int json = 0, status;

	status = cli_want(cli,
		      cli_parse(cli, argc, argv, what == ONE_INFO ? "jh" : "h", what == ONE_INFO ? cli_opts_json : cli_opts_help,
			    &id, 1, cli_opt_json, &json),
		      1, "checkpoint id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = lookup(ctx, id, &cp)) != 0)
		goto out;
	switch (what) {
	case ONE_INFO:
		if ((status = get_info(&info, cp)) != 0)
			break;
		if (json) {
			print_info_json(&info);
			putchar('\n');
		} else {
			print_info_text(&info);
		}
		break;
	case ONE_BLOB:
		if (hangar_checkpoint_read_blob(&blob, cp) != 0)
			status = cli_fail("cannot read the blob of checkpoint %s", cli_text(id));
		else if (write_all(STDOUT_FILENO, blob.ptr, blob.size) != 0)
			status = cli_fail("cannot write the blob: %s", strerror(errno));
		break;
	case ONE_DELETE:
		if (hangar_checkpoint_delete(cp) != 0)
			status = cli_fail("cannot delete checkpoint %s", cli_text(id));
		break;
	}
out:
	hangar_buf_dispose(&blob);
	hangar_checkpoint_unref(cp);
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_checkpoint_info(struct cli *cli, int argc, char **argv)
{
	return one_checkpoint(cli, argc, argv, ONE_INFO);
}

int cmd_checkpoint_blob(struct cli *cli, int argc, char **argv)
{
	return one_checkpoint(cli, argc, argv, ONE_BLOB);
}

int cmd_checkpoint_delete(struct cli *cli, int argc, char **argv)
{
	return one_checkpoint(cli, argc, argv, ONE_DELETE);
}

/* ---- restore, export ------------------------------------------------------------------ */

static int restore_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	hangar_restore_opts *o = payload;

	switch (c) {
	case 'w': o->workspace = arg; return 0;
	case 'm': o->flags |= HANGAR_RESTORE_MERGE; return 0;
	case 'u': o->user = arg; return 0;
	case 'N': o->flags |= HANGAR_RESTORE_NO_NATIVE; return 0;
	case 't': return cli_parse_seconds(cli, "--timeout", arg, CKPT_TIMEOUT_MAX, &o->timeout_sec);
	default: return EXIT_USAGE;
	}
}

int cmd_checkpoint_restore(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workspace", required_argument, NULL, 'w' },
		{ "merge", no_argument, NULL, 'm' },
		{ "user", required_argument, NULL, 'u' },
		{ "timeout", required_argument, NULL, 't' },
		{ "no-native", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_restore_opts opts = HANGAR_RESTORE_OPTS_INIT;
	struct progress prog;
	hangar_checkpoint *cp = NULL;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	char *ops[2];
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "w:mu:t:Nh", longopts, ops, 2, restore_opt, &opts), 2,
		      "checkpoint id and sandbox id");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = lookup(ctx, ops[0], &cp)) != 0 ||
	    (status = cli_attach(ctx, ops[1], &sb)) != 0 || (status = stop_signals_setup()) != 0)
		goto out;
	progress_start(&prog, "restore");
	opts.cancel = stop_requested;
	opts.progress = on_progress;
	opts.progress_payload = &prog;
	rc = hangar_checkpoint_restore(sb, cp, &opts);
	progress_end(&prog);
	if (rc != 0)
		status = stop_status(rc, "restore checkpoint", ops[0]);
out:
	hangar_checkpoint_unref(cp);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_checkpoint_export(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_restore_opts opts = HANGAR_RESTORE_OPTS_INIT;
	struct progress prog;
	hangar_checkpoint *cp = NULL;
	hangar_ctx *ctx = NULL;
	char *ops[2];
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "t:h", longopts, ops, 2, restore_opt, &opts), 2,
		      "checkpoint id and FILE");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = lookup(ctx, ops[0], &cp)) != 0 ||
	    (status = stop_signals_setup()) != 0)
		goto out;
	progress_start(&prog, "export");
	opts.cancel = stop_requested;
	opts.progress = on_progress;
	opts.progress_payload = &prog;
	rc = hangar_checkpoint_export(cp, ops[1], &opts);
	progress_end(&prog);
	if (rc != 0)
		status = stop_status(rc, "export checkpoint", ops[0]);
out:
	hangar_checkpoint_unref(cp);
	hangar_ctx_unref(ctx);
	return status;
}
