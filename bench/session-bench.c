/*
 * session-bench: hot resume against cold restore, on the local provider and
 * on the e2b fake (cloud flavour).
 *
 * A session's workspace holds a git repository with tracked_mib of tracked
 * files and ignored_mib of ignored ones (.venv/), and a background process
 * runs. For each target it times, best of `runs`:
 *   suspend      hangar_session_suspend: the checkpoint, then the park
 *   hot          hangar_session_resume of the parked sandbox + the first command
 *   cold         the same after a suspend that did not park: a new sandbox,
 *                the checkpoint restored, the first command
 *   plain        hangar_sandbox_resume of a paused sandbox + the first command
 *   fork         hangar_session_fork of N sessions (native on the fake,
 *                a checkpoint restored N times on local)
 * and prints hot/cold (goal: cold >= 10x hot) and hot/plain (goal: <= 2x).
 *   session-bench [--quick] [--tracked-mib N] [--ignored-mib N] [--runs N] [--forks N]
 * Needs root (local jails) and bubblewrap; the fake needs FAKE_E2B and
 * HANGAR_ENVD_PATH.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <hangar/hangar.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"

#define API_KEY "e2b_bench_0123456789abcdef0123456789abcdef"

static char g_dir[64];
static pid_t g_fake;
static int g_api, g_edge;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void cleanup(void)
{
	if (g_fake > 0) {
		kill(g_fake, SIGTERM);
		waitpid(g_fake, NULL, 0);
		g_fake = 0;
	}
	if (g_dir[0])
		nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "session-bench: %s: %s\n", what, e && e->message ? e->message : "failed");
	exit(1);
}

static void run(hangar_sandbox *sb, const char *cmd)
{
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	o.timeout_sec = 1800;
	if (hangar_sandbox_exec(&r, sb, cmd, &o) != 0)
		die("exec");
	if (r.exit_code != 0) {
		fprintf(stderr, "session-bench: `%.200s` exited %d: %.*s\n", cmd, (int)r.exit_code,
			(int)(r.err.size > 2000 ? 2000 : r.err.size), r.err.ptr);
		exit(1);
	}
	hangar_exec_result_dispose(&r);
}

static void fake_start(void)
{
	const char *fake = getenv("FAKE_E2B"), *envd = getenv("HANGAR_ENVD_PATH");
	char line[128] = "";
	size_t n = 0;
	int pfd[2];

	if (pipe2(pfd, O_CLOEXEC) < 0 || (g_fake = fork()) < 0)
		die("start the fake");
	if (g_fake == 0) {
		dup2(pfd[1], 3);
		execl(fake, fake, "--flavour", "cloud", "--envd", envd, "--ready-fd", "3", "--api-key", API_KEY,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		ssize_t r;

		if (poll(&p, 1, 20000) <= 0 || (r = read(pfd[0], line + n, sizeof(line) - 1 - n)) <= 0) {
			fprintf(stderr, "session-bench: the fake did not get ready\n");
			exit(1);
		}
		n += (size_t)r;
		line[n] = '\0';
	}
	close(pfd[0]);
	if (sscanf(line, "ready %d %d", &g_api, &g_edge) != 2) {
		fprintf(stderr, "session-bench: the fake said %s\n", line);
		exit(1);
	}
}

static void set(hangar_ctx *ctx, const char *name, const char *value)
{
	if (hangar_ctx_set(ctx, name, value) != 0)
		die(name);
}

static hangar_ctx *ctx_for(int fake)
{
	hangar_ctx *ctx = NULL;
	char v[4200];

	if (hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV) != 0)
		die("context");
	snprintf(v, sizeof(v), "%s/state", g_dir);
	set(ctx, "HANGAR_STATE_DIR", v);
	set(ctx, "HANGAR_SECRET_KEY", "session bench key, not a secret");
	set(ctx, "HANGAR_LOCAL_DISK_MB", "4096");
	if (getenv("HANGAR_ENVD_PATH"))
		set(ctx, "HANGAR_ENVD_PATH", getenv("HANGAR_ENVD_PATH"));
	if (getenv("HANGAR_JAIL_PATH"))
		set(ctx, "HANGAR_JAIL_PATH", getenv("HANGAR_JAIL_PATH"));
	if (fake) {
		set(ctx, "HANGAR_E2B_FLAVOR", "cloud");
		snprintf(v, sizeof(v), "http://127.0.0.1:%d", g_api);
		set(ctx, "HANGAR_E2B_API_URL", v);
		snprintf(v, sizeof(v), "http://127.0.0.1:%d", g_edge);
		set(ctx, "HANGAR_E2B_SANDBOX_URL", v);
		set(ctx, "HANGAR_E2B_API_KEY", API_KEY);
	}
	return ctx;
}

struct forks {
	int ok, failed;
	hangar_session *s[100];
};

static void on_fork(const hangar_session_fork_result *r, void *payload)
{
	struct forks *f = payload;

	if (r->error) {
		f->failed++;
		return;
	}
	f->s[f->ok++] = hangar_session_ref(r->session);
}

static double best(const double *v, int n)
{
	double b = v[0];

	for (int i = 1; i < n; i++)
		if (v[i] < b)
			b = v[i];
	return b;
}

static void bench(const char *name, int fake, unsigned tracked, unsigned ignored, int runs, unsigned nforks)
{
	hangar_ctx *ctx = ctx_for(fake);
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_suspend_opts no_park = HANGAR_SUSPEND_OPTS_INIT;
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL, *plain = NULL;
	double suspend[16], hot[16], cold[16], plain_t[16], t0, fork_ms = 0;
	char ws[4200], cmd[8192];
	struct forks f = { 0, 0, { NULL } };

	co.provider = fake ? "e2b" : "local";
	co.timeout_sec = 3600;
	so.create = &co;
	snprintf(ws, sizeof(ws), fake ? "%s/ws" : "/workspace", g_dir);
	so.workspace = ws;
	if (hangar_session_create(&s, ctx, &so) != 0)
		die("create a session");
	if (hangar_session_sandbox(&sb, s) != 0)
		die("the session's sandbox");
	snprintf(cmd, sizeof(cmd),
		 "set -e; mkdir -p %s; cd \"$_\"; git init -q; git config user.email b@example.org; git config user.name b; "
		 "printf '.venv/\\n' > .gitignore; mkdir -p src .venv; "
		 "for i in $(seq 1 %u); do head -c 1048576 /dev/urandom > src/f$i.bin; done; "
		 "git add -A; git commit -qm tracked; "
		 "for i in $(seq 1 %u); do head -c 16777216 /dev/urandom > .venv/dep$i.so; done; "
		 "nohup setsid sleep 100000 </dev/null >/dev/null 2>&1 &",
		 ws, tracked, (ignored + 15) / 16);
	run(sb, cmd);
	hangar_sandbox_unref(sb);
	sb = NULL;
	no_park.flags = HANGAR_SUSPEND_NO_PARK;
	for (int i = 0; i < runs; i++) {
		/* suspend (checkpoint + park), then hot. */
		t0 = now_ms();
		if (hangar_session_suspend(s, NULL) != 0)
			die("suspend");
		suspend[i] = now_ms() - t0;
		if (hangar_session_get_info(&info, s) != 0 || info.state != HANGAR_SESSION_PARKED)
			die("the session was not parked");
		t0 = now_ms();
		if (hangar_session_resume(s, &sb) != 0)
			die("hot resume");
		run(sb, "true");
		hot[i] = now_ms() - t0;
		hangar_sandbox_unref(sb);
		sb = NULL;
		/* cold: not parked, then restored into a new sandbox. */
		if (hangar_session_suspend(s, &no_park) != 0)
			die("suspend without parking");
		if (fake)
			nftw(ws, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* the lost sandbox's disk */
		t0 = now_ms();
		if (hangar_session_resume(s, &sb) != 0)
			die("cold resume");
		run(sb, "true");
		cold[i] = now_ms() - t0;
		hangar_sandbox_unref(sb);
		sb = NULL;
		/* plain: a paused sandbox resumed. */
		if (hangar_sandbox_create(&plain, ctx, &co) != 0 || hangar_sandbox_pause(plain) != 0)
			die("a paused sandbox");
		t0 = now_ms();
		if (hangar_sandbox_resume(plain) != 0)
			die("resume");
		run(plain, "true");
		plain_t[i] = now_ms() - t0;
		hangar_sandbox_kill(plain);
		plain = hangar_sandbox_unref(plain);
	}
	t0 = now_ms();
	if (hangar_session_fork(s, nforks, on_fork, &f) != 0)
		die("fork");
	fork_ms = now_ms() - t0;
	for (int i = 0; i < f.ok; i++) {
		hangar_session_archive(f.s[i]);
		hangar_session_unref(f.s[i]);
	}
	printf("%-6s tracked %u MiB, ignored %u MiB, best of %d\n", name, tracked, ignored, runs);
	printf("  suspend (checkpoint + park)   %8.1f ms\n", best(suspend, runs));
	printf("  hot resume + first command    %8.1f ms\n", best(hot, runs));
	printf("  cold restore + first command  %8.1f ms   cold/hot %.1fx (goal >= 10x)\n", best(cold, runs),
	       best(cold, runs) / best(hot, runs));
	printf("  plain resume + first command  %8.1f ms   hot/plain %.2fx (goal <= 2x)\n", best(plain_t, runs),
	       best(hot, runs) / best(plain_t, runs));
	printf("  fork of %u                    %8.1f ms   (%d failed)\n", nforks, fork_ms, f.failed);
	fflush(stdout);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}

int main(int argc, char **argv)
{
	unsigned tracked = 50, ignored = 300, nforks = 10;
	int runs = 3;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			tracked = 5;
			ignored = 32;
			runs = 1;
			nforks = 3;
		} else if (i + 1 < argc && !strcmp(argv[i], "--tracked-mib")) {
			tracked = (unsigned)atoi(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--ignored-mib")) {
			ignored = (unsigned)atoi(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--runs")) {
			runs = atoi(argv[++i]);
		} else if (i + 1 < argc && !strcmp(argv[i], "--forks")) {
			nforks = (unsigned)atoi(argv[++i]);
		} else {
			fprintf(stderr, "usage: session-bench [--quick] [--tracked-mib N] [--ignored-mib N] [--runs N] "
					"[--forks N]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 16 || nforks < 1 || nforks > 100)
		return 2;
	snprintf(g_dir, sizeof(g_dir), "/tmp/session-bench-XXXXXX");
	if (!mkdtemp(g_dir))
		die("a temporary directory");
	chmod(g_dir, 0777);
	atexit(cleanup);
	bench("local", 0, tracked, ignored, runs, nforks);
	if (getenv("FAKE_E2B")) {
		fake_start();
		bench("e2b", 1, tracked, ignored, runs, nforks);
	}
	return 0;
}
