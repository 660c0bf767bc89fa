/*
 * lib-exec: hangar_sandbox_exec("true") round trips against an envd that is
 * already running, for comparing libhangar with the E2B SDK on one daemon
 * (bench/sdk-run.mjs starts the daemon and runs both).
 *
 * The daemon is reached through a provider registered here, "bench", whose
 * create() describes the existing daemon (id "bench", its URL, a user) and
 * starts nothing; kill() leaves it alone, since it belongs to whoever
 * started it. Everything else is the library's own envd client, as for any
 * provider.
 *
 * usage: lib-exec [-n N] [--warmup N] [--user NAME] [--token TOKEN] URL
 *        lib-exec [-n N] [--warmup N] --attach ID
 *   URL is http://127.0.0.1:PORT. The user defaults to the one running
 *   lib-exec, which is the daemon's own user when both are started by the
 *   same process: what the SDK gets when it names no user.
 *   --attach runs against an existing sandbox instead, found by id with the
 *   HANGAR_* settings of the environment (bench/py-bench.py compares the
 *   Python bindings with this on one sandbox).
 * Prints one line, "libhangar exec('true')  n=N  p50 X ms  p95 Y ms", in
 * the layout of sdk-run.mjs. Exit status 1 when a call failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <hangar/hangar.h>
#include <hangar/sys/provider.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

struct target {
	const char *url;
	const char *user;
	const char *token;
};

static int describe(const struct target *t, hangar_sys_sandbox *out)
{
	int rc = hangar_sys_sandbox_set_id(out, "bench");

	if (!rc)
		rc = hangar_sys_sandbox_set_envd_url(out, t->url);
	if (!rc)
		rc = hangar_sys_sandbox_set_user(out, t->user);
	if (!rc && t->token)
		rc = hangar_sys_sandbox_set_access_token(out, t->token);
	return rc;
}

static int b_init(void **state, hangar_ctx *ctx, void *data)
{
	(void)ctx;
	*state = data;
	return 0;
}

static int b_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	(void)opts;
	return describe(state, out);
}

static int b_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	if (strcmp(id, "bench") != 0)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no sandbox %s here", id);
	return describe(state, out);
}

static int b_kill(void *state, const char *id)
{
	(void)state;
	(void)id;
	return 0; /* the daemon is not ours to stop */
}


static int count_arg(const char *s, int min)
{
	char *end;
	long v;

	errno = 0;
	v = s ? strtol(s, &end, 10) : -1;
	if (!s || errno || *end || v < min || v > 1000000)
		return -1;
	return (int)v;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: lib-exec [-n N] [--warmup N] [--user NAME] [--token TOKEN] http://127.0.0.1:PORT\n"
		   "       lib-exec [-n N] [--warmup N] --attach ID\n");
}

int main(int argc, char **argv)
{
	struct hangar_provider_ops ops = {
		.version = HANGAR_PROVIDER_OPS_VERSION,
		.size = sizeof(struct hangar_provider_ops),
		.name = "bench",
		.init = b_init,
		.create = b_create,
		.connect = b_connect,
		.kill = b_kill,
	};
	struct target t = { 0 };
	const char *attach = NULL;
	hangar_create_opts copts = HANGAR_CREATE_OPTS_INIT;
	int n = 200, warmup = 20, fail = 0, got = 0, rc;
	struct passwd *pw = getpwuid(geteuid());
	const char *first = NULL;
	char first_buf[512];
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	double *v;
	struct stats st;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "-n") == 0 && (n = count_arg(val, 1)) > 0)
			i++;
		else if (strcmp(a, "--warmup") == 0 && (warmup = count_arg(val, 0)) >= 0)
			i++;
		else if (strcmp(a, "--user") == 0 && val)
			t.user = argv[++i];
		else if (strcmp(a, "--token") == 0 && val)
			t.token = argv[++i];
		else if (strcmp(a, "--attach") == 0 && val)
			attach = argv[++i];
		else if (a[0] != '-' && !t.url)
			t.url = a;
		else {
			usage(stderr);
			return 2;
		}
	}
	if (!t.url == !attach || n < 1 || warmup < 0) {
		usage(stderr);
		return 2;
	}
	if (!t.user)
		t.user = pw ? pw->pw_name : "root";
	v = calloc((size_t)n, sizeof(*v));
	if (!v)
		return 1;

	if (attach) {
		if ((rc = hangar_ctx_new(&ctx, 0)) != 0 || (rc = hangar_sandbox_attach(&sb, ctx, NULL, attach)) != 0) {
			fprintf(stderr, "lib-exec: attach: %s\n", hangar_error_last()->message);
			hangar_ctx_unref(ctx);
			return 1;
		}
		goto run;
	}
	/* No HANGAR_* environment: the figures must not depend on the caller's settings. */
	if ((rc = hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV)) != 0 || (rc = hangar_provider_register(ctx, &ops, &t)) != 0) {
		fprintf(stderr, "lib-exec: %s\n", hangar_error_last()->message);
		return 1;
	}
	copts.provider = "bench";
	if ((rc = hangar_sandbox_create(&sb, ctx, &copts)) != 0) {
		fprintf(stderr, "lib-exec: create: %s\n", hangar_error_last()->message);
		hangar_ctx_unref(ctx);
		return 1;
	}
run:
	for (int i = 0; i < warmup + n; i++) {
		hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
		double t0 = now_ms(), ms;

		rc = hangar_sandbox_exec(&res, sb, "true", NULL);
		ms = now_ms() - t0;
		if (rc == 0 && res.exit_code != 0) {
			snprintf(first_buf, sizeof(first_buf), "`true` exited %d: %s", (int)res.exit_code,
				 res.err.ptr ? res.err.ptr : "");
			rc = 1;
		} else if (rc) {
			snprintf(first_buf, sizeof(first_buf), "%s (%s)", hangar_error_last()->message,
				 hangar_error_name(rc));
		}
		hangar_exec_result_dispose(&res);
		if (rc) {
			fail += i >= warmup;
			if (!first)
				first = strdup(first_buf);
		} else if (i >= warmup) {
			v[got++] = ms;
		}
	}
	stats_of(v, (size_t)got, &st);
	if (got)
		printf("%-28s n=%d  p50 %8.2f ms  p95 %8.2f ms\n", "libhangar exec('true')", got, st.p50, st.p95);
	else
		printf("%-28s n=0\n", "libhangar exec('true')");
	if (first)
		printf("  %d timed calls failed; first failure: %s\n", fail, first);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	free(v);
	free((void *)first);
	return first ? 1 : 0;
}
