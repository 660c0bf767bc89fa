/* hangar image pull|import|list|inspect|rm|gc: the image store. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- progress, on a terminal only ------------------------------------------------------ */

struct bar {
	int on, drawn;
	struct timespec last;
};

static void human(char *out, size_t size, uint64_t n)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(out, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static int on_progress(const hangar_image_progress *p, void *payload)
{
	struct bar *b = payload;
	struct timespec now;
	char d[32], t[32];

	if (!b->on)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (b->drawn && p->layers_done < p->layers_total &&
	    (now.tv_sec - b->last.tv_sec) * 1000 + (now.tv_nsec - b->last.tv_nsec) / 1000000 < 100)
		return 0;
	b->last = now;
	human(d, sizeof(d), p->bytes_done);
	human(t, sizeof(t), p->bytes_total);
	fprintf(stderr, "\r\033[K%s: layer %u/%u, %s of %s", p->phase, p->layers_done, p->layers_total, d, t);
	b->drawn = 1;
	return 0;
}

/* ---- printing one image -------------------------------------------------------------------- */

struct show {
	int json, first, status;
	enum { SHOW_LIST, SHOW_INSPECT } how;
};

static void json_strings(const char *const *v)
{
	putchar('[');
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			putchar(',');
		json_string(v[i]);
	}
	putchar(']');
}

static void print_json(const hangar_image_info *i)
{
	printf("{\"digest\":");
	json_string(i->digest);
	printf(",\"names\":");
	json_strings(i->names);
	printf(",\"config_digest\":");
	json_string(i->config_digest);
	printf(",\"os\":");
	json_string(i->os);
	printf(",\"architecture\":");
	json_string(i->architecture);
	printf(",\"size\":%llu,\"layers\":", (unsigned long long)i->size_bytes);
	json_strings(i->layers);
	printf(",\"env\":");
	json_strings(i->env);
	printf(",\"workdir\":");
	json_string(i->workdir);
	printf(",\"user\":");
	json_string(i->user);
	printf(",\"created_us\":%lld,\"in_use\":%s}", (long long)i->created_us, i->in_use ? "true" : "false");
}

static int show_one(const hangar_image_info *i, void *payload)
{
	struct show *s = payload;
	char size[32], when[64];

	human(size, sizeof(size), i->size_bytes);
	if (s->json) {
		if (!s->first)
			putchar(',');
		print_json(i);
		s->first = 0;
		return 0;
	}
	format_time_us(when, sizeof(when), i->created_us);
	if (s->how == SHOW_LIST) {
		if (s->first)
			printf("%-19s  %-10s  %-20s  %s\n", "IMAGE", "SIZE", "STORED", "NAMES");
		s->first = 0;
		printf("%-19.19s  %-10s  %-20s  ", i->digest + 7, size, when);
		for (size_t n = 0; i->names[n]; n++)
			printf("%s%s", n ? ", " : "", cli_text(i->names[n]));
		printf("%s%s\n", i->names[0] ? "" : "-", i->in_use ? "  (in use)" : "");
		return 0;
	}
	printf("digest:        %s\n", i->digest);
	for (size_t n = 0; i->names[n]; n++)
		printf("name:          %s\n", cli_text(i->names[n]));
	printf("config:        %s\nplatform:      %s/%s\nsize:          %s (%llu bytes)\nstored:        %s\n",
	       i->config_digest, i->os, i->architecture, size, (unsigned long long)i->size_bytes, when);
	printf("in use:        %s\n", i->in_use ? "yes" : "no");
	if (*i->workdir)
		printf("workdir:       %s\n", cli_text(i->workdir));
	if (*i->user)
		printf("user:          %s\n", cli_text(i->user));
	for (size_t n = 0; i->env[n]; n++)
		printf("env:           %s\n", cli_text(i->env[n]));
	for (uint32_t n = 0; n < i->layer_count; n++)
		printf("layer %-3u      %s\n", n + 1, i->layers[n]);
	return 0;
}

/* ---- the commands ------------------------------------------------------------------------ */

struct import_args {
	int json;
	const char *name;
};

static int import_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct import_args *a = payload;

	(void)cli;
	if (c == 'j')
		a->json = 1;
	else if (c == 'n')
		a->name = arg;
	else
		return EXIT_USAGE;
	return 0;
}

int cmd_image_import(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_image_opts opts = HANGAR_IMAGE_OPTS_INIT;
	struct import_args a = { 0, NULL };
	hangar_buf digest = HANGAR_BUF_INIT;
	struct bar bar = { 0 };
	hangar_ctx *ctx = NULL;
	char *path = NULL;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "n:jh", longopts, &path, 1, import_opt, &a), 1, "path");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = stop_signals_setup()) != 0)
		goto out;
	bar.on = isatty(STDERR_FILENO);
	opts.name = a.name;
	opts.progress = on_progress;
	opts.progress_payload = &bar;
	opts.cancel = stop_requested;
	rc = hangar_image_import(&digest, ctx, path, &opts);
	if (bar.drawn)
		fprintf(stderr, "\r\033[K");
	if (rc != 0) {
		status = stop_status(rc, "import image from", path);
		goto out;
	}
	if (a.json) {
		struct show s = { 1, 1, 0, SHOW_INSPECT };

		if (hangar_image_inspect(ctx, digest.ptr, show_one, &s) != 0)
			status = cli_fail("cannot inspect image %s", digest.ptr);
		else
			putchar('\n');
	} else {
		printf("%s\n", digest.ptr);
	}
out:
	hangar_buf_dispose(&digest);
	hangar_ctx_unref(ctx);
	return status;
}

/* Prints the stored image digest names (--json: the image as inspect --json shows it). */
static int print_stored(hangar_ctx *ctx, const char *digest, int json)
{
	struct show s = { 1, 1, 0, SHOW_INSPECT };

	if (!json) {
		printf("%s\n", digest);
		return 0;
	}
	if (hangar_image_inspect(ctx, digest, show_one, &s) != 0)
		return cli_fail("cannot inspect image %s", digest);
	putchar('\n');
	return 0;
}

static int pull_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	(void)cli;
	(void)arg;
	if (c != 'j')
		return EXIT_USAGE;
	*(int *)payload = 1;
	return 0;
}

int cmd_image_pull(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_image_opts opts = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	struct bar bar = { 0 };
	hangar_ctx *ctx = NULL;
	char *ref = NULL;
	int json = 0, status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "jh", longopts, &ref, 1, pull_opt, &json), 1, "image reference");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0 || (status = stop_signals_setup()) != 0)
		goto out;
	bar.on = isatty(STDERR_FILENO);
	opts.progress = on_progress;
	opts.progress_payload = &bar;
	opts.cancel = stop_requested;
	rc = hangar_image_pull(&digest, ctx, ref, &opts);
	if (bar.drawn)
		fprintf(stderr, "\r\033[K");
	if (rc != 0)
		status = stop_status(rc, "pull image", ref);
	else
		status = print_stored(ctx, digest.ptr, json);
out:
	hangar_buf_dispose(&digest);
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_image_list(struct cli *cli, int argc, char **argv)
{
	struct show s = { 0, 1, 0, SHOW_LIST };
	hangar_ctx *ctx = NULL;
	int status, rc;

	status = cli_want(cli, cli_parse(cli, argc, argv, "jh", cli_opts_json, NULL, 0, cli_opt_json, &s.json), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (s.json)
		putchar('[');
	rc = hangar_image_list(ctx, show_one, &s);
	if (s.json)
		printf("]\n");
	if (rc != 0)
		status = cli_fail("cannot list images");
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_image_inspect(struct cli *cli, int argc, char **argv)
{
	struct show s = { 0, 1, 0, SHOW_INSPECT };
	hangar_ctx *ctx = NULL;
	char *ref = NULL;
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "jh", cli_opts_json, &ref, 1, cli_opt_json, &s.json), 1,
			  "image");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_image_inspect(ctx, ref, show_one, &s) != 0)
		status = cli_fail("cannot inspect image %s", cli_text(ref));
	else if (s.json)
		putchar('\n');
	hangar_ctx_unref(ctx);
	return status;
}

int cmd_image_rm(struct cli *cli, int argc, char **argv)
{
	hangar_ctx *ctx = NULL;
	char *refs[64];
	int status, json = 0, got, n;

	got = cli_parse(cli, argc, argv, "jh", cli_opts_json, refs, 64, cli_opt_json, &json);
	status = cli_want(cli, got, 1, "image");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (json)
		putchar('[');
	for (n = 0; n < got; n++) {
		int rc = hangar_image_remove(ctx, refs[n]);

		if (json) {
			printf("%s{\"image\":", n ? "," : "");
			json_string(refs[n]);
			printf(",\"removed\":%s", rc == 0 ? "true" : "false");
			if (rc != 0) {
				printf(",\"error\":");
				json_string(hangar_error_name(rc));
				printf(",\"message\":");
				json_string(hangar_error_last()->message);
			}
			putchar('}');
		}
		if (rc != 0) {
			if (!json)
				cli_fail("cannot remove image %s", cli_text(refs[n]));
			status = EXIT_FAIL;
		} else if (!json) {
			printf("%s\n", refs[n]);
		}
	}
	if (json)
		printf("]\n");
	hangar_ctx_unref(ctx);
	return status;
}

struct gc_args {
	int json;
	uint64_t max_bytes;
};

static int gc_opt(const struct cli *cli, int c, const char *arg, void *payload)
{
	struct gc_args *a = payload;
	char *end;
	unsigned long long v;

	if (c == 'j') {
		a->json = 1;
		return 0;
	}
	if (c != 'm')
		return EXIT_USAGE;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (!*arg || *end || errno || *arg == '-' || *arg == '+' || v == 0 || v > (1ULL << 30))
		return cli_usage(cli, "--max-mb wants a whole number of MiB from 1 to %llu, not '%s'", 1ULL << 30,
				 cli_text(arg));
	a->max_bytes = (uint64_t)v << 20;
	return 0;
}

int cmd_image_gc(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "max-mb", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct gc_args a = { 0, 0 };
	hangar_ctx *ctx = NULL;
	uint64_t freed = 0;
	char h[32];
	int status;

	status = cli_want(cli, cli_parse(cli, argc, argv, "m:jh", longopts, NULL, 0, gc_opt, &a), 0, "");
	if (status)
		return status < 0 ? 0 : status;
	if ((status = cli_open(cli, &ctx)) != 0)
		return status;
	if (hangar_image_gc(&freed, ctx, a.max_bytes) != 0) {
		status = cli_fail("cannot collect the image store's garbage");
	} else if (a.json) {
		printf("{\"freed_bytes\":%llu}\n", (unsigned long long)freed);
	} else {
		human(h, sizeof(h), freed);
		printf("freed %s\n", h);
	}
	hangar_ctx_unref(ctx);
	return status;
}
