/*
 * e2b-bench: figures for the e2b provider through the public API, against
 * the fake control plane (tests/fakes/fake-e2b, cloud flavour) on loopback,
 * every sandbox a real hangar-envd.
 *
 *   a. create -> first command (control-API create + exec through the edge)
 *   b. exec round trip of `true` through the edge, against the same exec
 *      sent straight to the sandbox's envd (the edge and provider left out)
 *   c. the control-API client's cost per call: a status (GET /sandboxes/{id})
 *      and a set-timeout, each a whole round trip to the fake
 *
 * It prints medians and 90th percentiles and never judges them.
 * usage: e2b-bench [-n N]; needs FAKE_E2B and HANGAR_ENVD_PATH.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <hangar/hangar.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"

#define KEY "e2b_bench_0123456789abcdef"

static pid_t fake;
static int api_port, edge_port;
static char state_dir[64];

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("  %-44s p50 %8.3f ms   p90 %8.3f ms   (n=%d)\n", what, v[n / 2] / 1000.0, v[(n * 9) / 10] / 1000.0, n);
}

static void die(const char *what)
{
	fprintf(stderr, "e2b-bench: %s: %s\n", what, hangar_error_last()->message);
	if (fake > 0)
		kill(fake, SIGTERM);
	exit(1);
}

static void start_fake(void)
{
	const char *bin = getenv("FAKE_E2B"), *envd = getenv("HANGAR_ENVD_PATH");
	char line[128] = "";
	size_t n = 0;
	int p[2];

	if (!bin || !envd) {
		fprintf(stderr, "e2b-bench: FAKE_E2B and HANGAR_ENVD_PATH must be set\n");
		exit(77);
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		exit(1);
	fake = fork();
	if (fake == 0) {
		dup2(p[1], 3);
		execl(bin, bin, "--flavour", "cloud", "--envd", envd, "--ready-fd", "3", "--api-key", KEY,
		      (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		ssize_t r = read(p[0], line + n, sizeof(line) - 1 - n);

		if (r <= 0) {
			fprintf(stderr, "e2b-bench: the fake did not start\n");
			exit(1);
		}
		n += (size_t)r;
		line[n] = '\0';
	}
	close(p[0]);
	if (sscanf(line, "ready %d %d", &api_port, &edge_port) != 2)
		exit(1);
}

static hangar_ctx *open_ctx(const char *sandbox_url)
{
	hangar_ctx *ctx = NULL;
	char url[64];

	if (hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV))
		die("context");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", api_port);
	if (hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) || hangar_ctx_set(ctx, "HANGAR_E2B_FLAVOR", "cloud") ||
	    hangar_ctx_set(ctx, "HANGAR_E2B_API_URL", url) || hangar_ctx_set(ctx, "HANGAR_E2B_API_KEY", KEY) ||
	    hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "bench secret key") ||
	    hangar_ctx_set(ctx, "HANGAR_E2B_SANDBOX_URL", sandbox_url))
		die("settings");
	return ctx;
}

static void exec_true(hangar_sandbox *sb)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	if (hangar_sandbox_exec(&r, sb, "true", NULL) || r.exit_code != 0)
		die("exec");
	hangar_exec_result_dispose(&r);
}

int main(int argc, char **argv)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	int n = argc > 2 && !strcmp(argv[1], "-n") ? atoi(argv[2]) : 50;
	int64_t *v = calloc((size_t)(n > 0 ? n : 1), sizeof(*v));
	char edge[64], cmd[128];
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;

	if (n < 2 || !v)
		return 2;
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-e2b-bench-XXXXXX");
	if (!mkdtemp(state_dir))
		return 1;
	start_fake();
	snprintf(edge, sizeof(edge), "http://127.0.0.1:%d", edge_port);
	ctx = open_ctx(edge);
	o.provider = "e2b";
	printf("e2b provider (cloud flavour) on the fake control plane, loopback\n");

	/* a. create -> first command */
	for (int i = 0; i < n; i++) {
		int64_t t0 = clock_mono_us();

		if (hangar_sandbox_create(&sb, ctx, &o))
			die("create");
		exec_true(sb);
		v[i] = clock_mono_us() - t0;
		hangar_sandbox_kill(sb);
		sb = hangar_sandbox_unref(sb);
	}
	report("create -> first command (true)", v, n);

	/* b. exec through the edge, and straight to envd */
	if (hangar_sandbox_create(&sb, ctx, &o))
		die("create");
	exec_true(sb);
	for (int i = 0; i < n; i++) {
		int64_t t0 = clock_mono_us();

		exec_true(sb);
		v[i] = clock_mono_us() - t0;
	}
	report("exec true, through the edge", v, n);
	{
		/* The sandbox's envd port, from the fake's own listing. */
		char *line = NULL;
		size_t cap = 0;
		int port = 0;
		FILE *f;

		snprintf(cmd, sizeof(cmd), "curl -s http://127.0.0.1:%d/_fake/sandboxes", api_port);
		f = popen(cmd, "r");
		if (f && getline(&line, &cap, f) > 0) {
			char *p = strstr(line, "\"envd_port\":");

			if (p)
				port = atoi(p + 12);
		}
		if (f)
			pclose(f);
		free(line);
		if (port > 0) {
			hangar_ctx *raw;
			hangar_sandbox *direct = NULL;
			char url[64];

			snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
			raw = open_ctx(url);
			if (hangar_sandbox_attach(&direct, raw, "e2b", hangar_sandbox_id(sb)))
				die("attach");
			exec_true(direct);
			for (int i = 0; i < n; i++) {
				int64_t t0 = clock_mono_us();

				exec_true(direct);
				v[i] = clock_mono_us() - t0;
			}
			report("exec true, straight to envd (no edge)", v, n);
			hangar_sandbox_unref(direct);
			hangar_ctx_unref(raw);
		} else {
			printf("  (the envd port is unknown: no curl? straight-to-envd figure skipped)\n");
		}
	}

	/* c. the control-API client per call */
	for (int i = 0; i < n; i++) {
		int64_t t0 = clock_mono_us();

		if (hangar_sandbox_get_info(&info, sb))
			die("status");
		v[i] = clock_mono_us() - t0;
	}
	report("status (GET /sandboxes/{id})", v, n);
	for (int i = 0; i < n; i++) {
		int64_t t0 = clock_mono_us();

		if (hangar_sandbox_set_timeout(sb, 300))
			die("set timeout");
		v[i] = clock_mono_us() - t0;
	}
	report("set timeout (POST /sandboxes/{id}/timeout)", v, n);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	kill(fake, SIGTERM);
	waitpid(fake, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	if (system(cmd) != 0)
		return 1;
	free(v);
	return 0;
}
