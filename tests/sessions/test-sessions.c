/*
 * Sessions end to end through the public API, with a scripted agent using
 * real git, on real sandboxes: the local provider (bubblewrap jails, whose
 * freezer keeps memory) and the e2b fakes in every flavour (each sandbox a
 * real hangar-envd process, paused with SIGSTOP).
 *
 * The fakes' sandboxes share this machine's filesystem, so their workspace
 * outlives them: where a test needs a destroyed sandbox's files to be gone,
 * it removes them itself, as the platform would have.
 */
#define _GNU_SOURCE
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hangar/hangar.h>
#include <sqlite3.h>

#include "../checkpoints/helpers.h"
#include "leftovers.h"
#include "sandbox/sandbox.h"
#include "session/sess.h"
#include "store/store.h"
#include "clock.h"

#define API_KEY "e2b_test_0123456789abcdef0123456789abcdef"
#define SECRET_KEY "session test key: long and random enough 4kPq"

enum { T_LOCAL, T_CLOUD, T_CUBE, T_SELFHOSTED, T_COUNT };
static const char *const target_names[] = { "local", "cloud", "cube", "selfhosted" };

static char *dir;
static char state_dir[4200], fake_ws[4300];
static pid_t fake_pid;
static int api_port, edge_port;

/* ---- the e2b fake ----------------------------------------------------------------- */

static void fake_start(const char *flavour)
{
	const char *fake = getenv("FAKE_E2B"), *envd = getenv("HANGAR_ENVD_PATH");
	char line[128] = "";
	int pfd[2];
	size_t n = 0;
	int64_t deadline = clock_mono_ms() + 20000;

	ck_assert_msg(fake && envd, "FAKE_E2B and HANGAR_ENVD_PATH must be set");
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fake_pid = fork();
	ck_assert_int_ge(fake_pid, 0);
	if (fake_pid == 0) {
		dup2(pfd[1], 3);
		execl(fake, fake, "--flavour", flavour, "--envd", envd, "--ready-fd", "3", "--api-key", API_KEY,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		ssize_t r;

		ck_assert_msg(clock_mono_ms() < deadline, "the fake did not get ready");
		if (poll(&p, 1, (int)(deadline - clock_mono_ms())) <= 0)
			continue;
		r = read(pfd[0], line + n, sizeof(line) - 1 - n);
		ck_assert_msg(r > 0, "the fake exited before it was ready");
		n += (size_t)r;
		line[n] = '\0';
	}
	close(pfd[0]);
	ck_assert_int_eq(sscanf(line, "ready %d %d", &api_port, &edge_port), 2);
}

static void fake_stop(void)
{
	if (fake_pid > 0) {
		kill(fake_pid, SIGTERM);
		waitpid(fake_pid, NULL, 0);
	}
	fake_pid = 0;
}

static size_t discard(char *d, size_t s, size_t n, void *ud)
{
	(void)d;
	(void)ud;
	return s * n;
}

/* Queues a fault in the fake (its /_fake/faults hook). */
static void fault(const char *json)
{
	char url[128];
	long status = 0;
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_fake/faults", api_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	ck_assert_msg(status >= 200 && status < 300, "the fake refused the fault %s: %ld", json, status);
}

/* ---- contexts, sessions and commands ---------------------------------------------- */

static void set(hangar_ctx *ctx, const char *name, const char *value)
{
	int rc = hangar_ctx_set(ctx, name, value);

	ck_assert_msg(rc == 0, "%s: %s", name, hangar_error_last()->message);
}

static hangar_ctx *ctx_for(int t)
{
	hangar_ctx *ctx = NULL;
	char url[64];

	ck_assert_int_eq(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), 0);
	set(ctx, "HANGAR_STATE_DIR", state_dir);
	set(ctx, "HANGAR_SECRET_KEY", SECRET_KEY);
	set(ctx, "HANGAR_CHECKPOINT_TIMEOUT_SECONDS", "300");
	if (getenv("HANGAR_ENVD_PATH"))
		set(ctx, "HANGAR_ENVD_PATH", getenv("HANGAR_ENVD_PATH"));
	if (getenv("HANGAR_JAIL_PATH"))
		set(ctx, "HANGAR_JAIL_PATH", getenv("HANGAR_JAIL_PATH"));
	if (t != T_LOCAL) {
		if (!fake_pid)
			fake_start(target_names[t]);
		set(ctx, "HANGAR_E2B_FLAVOR", target_names[t]);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", api_port);
		set(ctx, "HANGAR_E2B_API_URL", url);
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", edge_port);
		set(ctx, "HANGAR_E2B_SANDBOX_URL", url);
		set(ctx, "HANGAR_E2B_API_KEY", API_KEY);
		if (t == T_CUBE)
			set(ctx, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", "true");
	}
	return ctx;
}

static const char *ws_of(int t)
{
	return t == T_LOCAL ? "/workspace" : fake_ws;
}

static hangar_session *session_for(hangar_ctx *ctx, int t, uint32_t flags)
{
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	const char *labels[] = { "agent=test", NULL };
	hangar_session *s = NULL;
	int rc;

	co.provider = t == T_LOCAL ? "local" : "e2b";
	co.timeout_sec = 900;
	so.create = &co;
	so.workspace = ws_of(t);
	so.labels = labels;
	so.flags = flags;
	rc = hangar_session_create(&s, ctx, &so);
	ck_assert_msg(rc == 0, "session on %s: %s", target_names[t], hangar_error_last()->message);
	if (t != T_LOCAL) {
		/* Made by the sandbox's user, as git wants its repositories owned. */
		hangar_sandbox *sb = NULL;
		hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
		hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
		char cmd[4400];

		ck_assert_int_eq(hangar_session_sandbox(&sb, s), 0);
		snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", fake_ws);
		ck_assert_int_eq(hangar_sandbox_exec(&r, sb, cmd, &eo), 0);
		ck_assert_int_eq(r.exit_code, 0);
		hangar_exec_result_dispose(&r);
		hangar_sandbox_unref(sb);
	}
	return s;
}

static hangar_sandbox *live(hangar_session *s)
{
	hangar_sandbox *sb = NULL;
	int rc = hangar_session_sandbox(&sb, s);

	ck_assert_msg(rc == 0, "session sandbox: %s", hangar_error_last()->message);
	return sb;
}

/* Runs cmd with $WS set; returns its stdout (malloc'd) and its exit code in *code. */
static char *run(hangar_sandbox *sb, const char *ws, const char *cmd, int *code)
{
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	char env0[4400];
	const char *env[] = { env0, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t",
			      "GIT_COMMITTER_EMAIL=t@example.org", NULL };
	char *out;
	int rc;

	snprintf(env0, sizeof(env0), "WS=%s", ws);
	o.env = env;
	o.timeout_sec = 120;
	rc = hangar_sandbox_exec(&r, sb, cmd, &o);
	ck_assert_msg(rc == 0, "exec %s: %s", cmd, hangar_error_last()->message);
	*code = r.exit_code;
	if (r.exit_code != 0)
		fprintf(stderr, "exec %.120s: exit %d: %s\n", cmd, r.exit_code, r.err.ptr ? r.err.ptr : "");
	out = strdup(r.out.ptr ? r.out.ptr : "");
	hangar_exec_result_dispose(&r);
	return out;
}

static char *sh(hangar_sandbox *sb, const char *ws, const char *cmd)
{
	int code;
	char *out = run(sb, ws, cmd, &code);

	ck_assert_msg(code == 0, "exec %s: exit %d", cmd, code);
	return out;
}

static void sh_ok(hangar_sandbox *sb, const char *ws, const char *cmd)
{
	free(sh(sb, ws, cmd));
}

static void info_of(hangar_session *s, hangar_session_info *i)
{
	hangar_session_info z = HANGAR_SESSION_INFO_INIT;
	int rc;

	*i = z;
	rc = hangar_session_get_info(i, s);
	ck_assert_msg(rc == 0, "session info: %s", hangar_error_last()->message);
}

/* The agent's turn: a repository, commits, an uncommitted edit, an ignored .venv,
 * and a background process that only memory keeps. */
static const char agent_turn[] =
	"set -e; mkdir -p \"$WS\"; cd \"$WS\"; git init -q . 2>/dev/null || true; "
	"printf '.venv/\\n' > .gitignore; printf 'one\\n' > a.txt; git add -A; git commit -qm first; "
	"printf 'two\\n' >> a.txt; git commit -qam second; printf 'uncommitted\\n' >> a.txt; "
	"mkdir -p .venv/lib; printf 'cached\\n' > .venv/lib/dep.py; "
	"nohup setsid sleep 100000 </dev/null >/dev/null 2>&1 & echo $!";

/* The checkpointed state, as text: commits and the working tree. */
static const char state_cmd[] =
	"cd \"$WS\" && git log --format=%s | tr '\\n' ' ' && echo && cat a.txt && "
	"{ [ -e .venv/lib/dep.py ] && echo venv || echo no-venv; }";

/* Whether the agent's background process runs in the sandbox: by its command line in a
 * jail (its pid namespace is its own), by its pid on the fakes (which share the host's). */
static int bg_alive(hangar_sandbox *sb, int t, const char *pid)
{
	char cmd[256];
	int code;

	if (t == T_LOCAL)
		snprintf(cmd, sizeof(cmd), "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | "
					   "grep -q '^sleep 100000 *$' && exit 0; done; exit 1");
	else
		snprintf(cmd, sizeof(cmd), "kill -0 %s", pid);
	free(run(sb, "/", cmd, &code));
	return code == 0;
}

static void setup(void)
{
	dir = temp_dir();
	ck_assert_int_eq(chmod(dir, 0777), 0); /* the fakes' sandboxes run as the test user */
	snprintf(state_dir, sizeof(state_dir), "%s/state", dir);
	leftovers_watch(state_dir, dir);
	snprintf(fake_ws, sizeof(fake_ws), "%s/ws", dir);
	fake_pid = 0;
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void teardown(void)
{
	hangar_ctx *ctx;

	/* Kill the jails a failed test left running, before their directory goes. */
	if ((ctx = leftovers_ctx(state_dir)) != NULL)
		kill_local_leftovers(ctx, state_dir);
	hangar_ctx_unref(ctx);
	fake_stop();
	rm_tree(dir);
	free(dir);
}

static int count_ckpt(hangar_checkpoint *cp, void *payload)
{
	(void)cp;
	(*(int *)payload)++;
	return 0;
}

static int checkpoints_of(hangar_ctx *ctx, const char *session)
{
	int n = 0;

	ck_assert_int_eq(hangar_checkpoint_list(ctx, session, count_ckpt, &n), 0);
	return n;
}

/* Whether sandbox id still exists (attach finds it). */
static int sandbox_exists(hangar_ctx *ctx, const char *id)
{
	hangar_sandbox *sb = NULL;
	int rc = hangar_sandbox_attach(&sb, ctx, NULL, id);

	hangar_sandbox_unref(sb);
	if (rc == 0)
		return 1;
	ck_assert_msg(rc == HANGAR_EGONE || rc == HANGAR_ENOTFOUND, "attach %s: %d %s", id, rc,
		      hangar_error_last()->message);
	return 0;
}

static void suspend(hangar_session *s, const char *blob)
{
	hangar_suspend_opts o = HANGAR_SUSPEND_OPTS_INIT;
	int rc;

	o.blob = blob;
	o.blob_len = blob ? strlen(blob) : 0;
	rc = hangar_session_suspend(s, &o);
	ck_assert_msg(rc == 0, "suspend: %s", hangar_error_last()->message);
}

/* Whether hangar_sandbox_list() reports sandbox id, paused. */
struct seen {
	const char *id;
	int paused;
};

static int seen_fn(const hangar_sandbox_info *info, void *payload)
{
	struct seen *w = payload;

	if (!strcmp(info->id, w->id))
		w->paused = info->state == HANGAR_SANDBOX_PAUSED ? 1 : -1;
	return 0;
}

/* ---- hot resume ------------------------------------------------------------------- */

START_TEST(hot_resume)
{
	int t = _i;
	hangar_ctx *ctx = ctx_for(t), *again;
	hangar_session *s = session_for(ctx, t, 0), *reopened = NULL;
	hangar_sandbox *sb = live(s), *back;
	hangar_session_info i;
	hangar_checkpoint *cp = NULL;
	hangar_buf blob = HANGAR_BUF_INIT;
	char *pid, *before, *after, sid[128], *nl;

	pid = sh(sb, ws_of(t), agent_turn);
	if ((nl = strchr(pid, '\n')))
		*nl = '\0';
	before = sh(sb, ws_of(t), state_cmd);
	snprintf(sid, sizeof(sid), "%s", hangar_sandbox_id(sb));
	hangar_sandbox_unref(sb);

	suspend(s, "the conversation so far");
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	ck_assert_str_eq(i.sandbox_id, sid);
	ck_assert_str_ne(i.checkpoint_id, "");
	ck_assert_int_gt(i.parked_since_us, 0);
	ck_assert_str_eq(i.suspend_reason, "");
	/* The blob went into the checkpoint, with the session's labels. */
	ck_assert_int_eq(hangar_checkpoint_lookup(&cp, ctx, i.checkpoint_id), 0);
	ck_assert_int_eq(hangar_checkpoint_read_blob(&blob, cp), 0);
	ck_assert_str_eq(blob.ptr, "the conversation so far");
	{
		hangar_checkpoint_info ci = HANGAR_CHECKPOINT_INFO_INIT;

		ck_assert_int_eq(hangar_checkpoint_get_info(&ci, cp), 0);
		ck_assert_str_eq(ci.session_id, hangar_session_id(s));
		ck_assert_ptr_nonnull(strstr(ci.labels_json, "\"agent\":\"test\""));
	}
	hangar_buf_dispose(&blob);
	hangar_checkpoint_unref(cp);

	/* A listing (which forgets sandboxes the provider says are gone) keeps it: parked is not orphaned. */
	{
		struct seen w = { sid, 0 };

		ck_assert_int_eq(hangar_sandbox_list(ctx, NULL, seen_fn, &w), 0);
		ck_assert_int_eq(w.paused, 1);
	}
	/* Another process (a new context) finds it parked, and resumes the same machine. */
	again = ctx_for(t);
	ck_assert_int_eq(hangar_session_open(&reopened, again, hangar_session_id(s)), 0);
	info_of(reopened, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	ck_assert_int_eq(hangar_session_resume(reopened, &back), 0);
	ck_assert_str_eq(hangar_sandbox_id(back), sid);
	info_of(reopened, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_int_eq(i.last_resume, HANGAR_RESUME_HOT);
	ck_assert_int_eq(i.parked_since_us, 0);
	after = sh(back, ws_of(t), state_cmd);
	ck_assert_str_eq(after, before);
	ck_assert_ptr_nonnull(strstr(after, "\nvenv")); /* ignored, so only the machine kept it */
	ck_assert_msg(bg_alive(back, t, pid), "the background process did not survive the park");
	/* Resuming an active session changes nothing. */
	{
		hangar_sandbox *same = NULL;

		ck_assert_int_eq(hangar_session_resume(s, &same), 0);
		ck_assert_str_eq(hangar_sandbox_id(same), sid);
		hangar_sandbox_unref(same);
	}
	ck_assert_int_eq(checkpoints_of(ctx, hangar_session_id(s)), 1);
	hangar_sandbox_unref(back);
	ck_assert_int_eq(hangar_session_archive(reopened), 0);
	ck_assert(!sandbox_exists(ctx, sid));
	free(pid);
	free(before);
	free(after);
	hangar_session_unref(reopened);
	hangar_session_unref(s);
	hangar_ctx_unref(again);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- every fallback to the checkpoint ---------------------------------------------------- */

enum { F_NEWER, F_GONE, F_RESUME_FAILS, F_CHECK_FAILS, F_WAKE_HOOK, F_COUNT };
static const char *const fallback_names[] = { "newer checkpoint", "sandbox gone", "resume fails", "check fails",
					       "wake hook fails" };

static int hook_calls[4];
static int hook_fail;   /* the hook kind that fails */

static int hook(hangar_session *s, hangar_sandbox *sb, int kind, void *payload)
{
	(void)s;
	(void)payload;
	ck_assert_ptr_nonnull(sb);
	if (kind >= 1 && kind <= 3)
		hook_calls[kind]++;
	return kind == hook_fail ? -1 : 0;
}

/* Kills the hangar-envd serving sandbox id (found by its environment on the fakes,
 * under the jail in a local sandbox). */
static void kill_envd(int t, const char *id)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int killed = 0, jail = 0;

	ck_assert_ptr_nonnull(d);
	if (t == T_LOCAL) {
		char path[4600];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), id);
		f = fopen(path, "r");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
		fclose(f);
	}
	while ((de = readdir(d))) {
		char path[300], buf[8192], want[200];
		ssize_t n;
		int fd, pid = atoi(de->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0 || strncmp(buf, "hangar-envd", 11) != 0)
			continue;
		if (t == T_LOCAL) {
			/* An ancestor is the jail. */
			int p = pid;

			for (int depth = 0; p > 1 && p != jail && depth < 32; depth++) {
				snprintf(path, sizeof(path), "/proc/%d/stat", p);
				if ((fd = open(path, O_RDONLY)) < 0)
					break;
				n = read(fd, buf, sizeof(buf) - 1);
				close(fd);
				if (n <= 0)
					break;
				buf[n] = '\0';
				p = atoi(strrchr(buf, ')') + 4);
			}
			if (p != jail)
				continue;
		} else {
			/* The fake passes it as -env E2B_SANDBOX_ID=<id>. */
			snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
			if ((fd = open(path, O_RDONLY)) < 0)
				continue;
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n <= 0)
				continue;
			for (ssize_t k = 0; k < n; k++)
				if (!buf[k])
					buf[k] = '\n';
			buf[n] = '\0';
			snprintf(want, sizeof(want), "E2B_SANDBOX_ID=%s\n", id);
			if (!strstr(buf, want))
				continue;
		}
		/* Gone already is as good: the sandbox's pid 1 (hangar-envd-init) may be killed first, and takes envd with it. */
		ck_assert_msg(kill(pid, SIGKILL) == 0 || errno == ESRCH, "kill %d: %s", pid, strerror(errno));
		killed++;
	}
	closedir(d);
	ck_assert_msg(killed > 0, "no envd found for sandbox %s", id);
}

START_TEST(fallbacks)
{
	int t = _i / F_COUNT, f = _i % F_COUNT;
	hangar_ctx *ctx = ctx_for(t);
	hangar_session *s = session_for(ctx, t, 0);
	hangar_sandbox *sb = live(s), *back = NULL;
	hangar_session_info i;
	char *before, *after, parked[128], *pid, *nl;
	int ckpts;

	memset(hook_calls, 0, sizeof(hook_calls));
	hook_fail = f == F_WAKE_HOOK ? HANGAR_SESSION_HOOK_WAKE : 0;
	hangar_session_set_hook(ctx, hook, NULL);
	pid = sh(sb, ws_of(t), agent_turn);
	if ((nl = strchr(pid, '\n')))
		*nl = '\0';
	before = sh(sb, ws_of(t), "cd \"$WS\" && git log --format=%s | tr '\\n' ' ' && cat a.txt");
	hangar_sandbox_unref(sb);
	suspend(s, NULL);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	ck_assert_int_eq(hook_calls[HANGAR_SESSION_HOOK_PARK], 1);
	snprintf(parked, sizeof(parked), "%s", i.sandbox_id);

	switch (f) {
	case F_NEWER: {
		/* The session's work, checkpointed from another sandbox meanwhile. */
		hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
		hangar_checkpoint_opts cpo = HANGAR_CHECKPOINT_OPTS_INIT;
		hangar_sandbox *other = NULL;
		hangar_checkpoint *cp = NULL;

		co.provider = t == T_LOCAL ? "local" : "e2b";
		ck_assert_int_eq(hangar_sandbox_create(&other, ctx, &co), 0);
		cpo.workspace = ws_of(t);
		cpo.session_id = hangar_session_id(s);
		/* On the fakes the workspace is shared: the newer checkpoint holds the same files. */
		if (t == T_LOCAL)
			sh_ok(other, ws_of(t),
			      "set -e; mkdir -p \"$WS\"; cd \"$WS\"; git init -q .; printf 'elsewhere\\n' > a.txt; "
			      "git add -A; git commit -qm elsewhere");
		ck_assert_int_eq(hangar_checkpoint_create(&cp, other, &cpo), 0);
		hangar_checkpoint_unref(cp);
		hangar_sandbox_kill(other);
		hangar_sandbox_unref(other);
		if (t == T_LOCAL) {
			free(before);
			before = strdup("elsewhere elsewhere\n");
		}
		break;
	}
	case F_GONE: {
		hangar_sandbox *p = NULL;

		ck_assert_int_eq(hangar_sandbox_attach(&p, ctx, NULL, parked), 0);
		ck_assert_int_eq(hangar_sandbox_kill(p), 0);
		hangar_sandbox_unref(p);
		break;
	}
	case F_RESUME_FAILS:
		if (t == T_LOCAL) {
			/* The jail's supervisor dies while the sandbox is frozen: nothing can thaw it. */
			char path[4600];
			FILE *fp;
			int jail = 0;

			snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), parked);
			fp = fopen(path, "r");
			ck_assert_ptr_nonnull(fp);
			ck_assert_int_eq(fscanf(fp, "%d", &jail), 1);
			fclose(fp);
			ck_assert_int_eq(kill(jail, SIGKILL), 0);
		} else {
			fault("{\"route\":\"connect\",\"status\":500,\"count\":20}");
			fault("{\"route\":\"resume\",\"status\":500,\"count\":20}");
		}
		break;
	case F_CHECK_FAILS:
		kill_envd(t, parked);
		break;
	default:
		break;
	}
	ckpts = checkpoints_of(ctx, hangar_session_id(s));
	if (t != T_LOCAL && f != F_NEWER)
		rm_tree(fake_ws); /* the platform lost the sandbox's disk with it */

	ck_assert_msg(hangar_session_resume(s, &back) == 0, "%s: resume: %s", fallback_names[f],
		      hangar_error_last()->message);
	if (f == F_RESUME_FAILS && t != T_LOCAL) {
		char url[128];

		/* Clear what is left of the faults. */
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/_fake/faults", api_port);
		{
			CURL *c = curl_easy_init();

			curl_easy_setopt(c, CURLOPT_URL, url);
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
			curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
			curl_easy_perform(c);
			curl_easy_cleanup(c);
		}
	}
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_msg(i.last_resume == HANGAR_RESUME_COLD, "%s: resumed %d (%s)", fallback_names[f], i.last_resume,
		      i.last_resume_reason);
	ck_assert_str_ne(i.last_resume_reason, "");
	ck_assert_str_ne(hangar_sandbox_id(back), parked);
	ck_assert_msg(!sandbox_exists(ctx, parked), "%s: the parked sandbox was left behind", fallback_names[f]);
	if (f == F_NEWER)
		ck_assert_ptr_nonnull(strstr(i.last_resume_reason, "newer checkpoint"));
	if (f == F_WAKE_HOOK) {
		ck_assert_ptr_nonnull(strstr(i.last_resume_reason, "wake hook"));
		ck_assert_int_eq(hook_calls[HANGAR_SESSION_HOOK_WAKE], 1);
	}
	ck_assert_int_eq(hook_calls[HANGAR_SESSION_HOOK_COLD], 1);
	/* The checkpoint came back: commits and the uncommitted edit, not the ignored .venv. */
	after = sh(back, ws_of(t), "cd \"$WS\" && git log --format=%s | tr '\\n' ' ' && cat a.txt");
	ck_assert_str_eq(after, before);
	if (t == T_LOCAL) {
		free(after);
		after = sh(back, ws_of(t), "[ -e \"$WS\"/.venv ] && echo venv || echo no-venv");
		ck_assert_str_eq(after, "no-venv\n");
		ck_assert(!bg_alive(back, t, pid));
	}
	/* No checkpoint was deleted. */
	ck_assert_int_eq(checkpoints_of(ctx, hangar_session_id(s)), ckpts);
	hangar_sandbox_unref(back);
	ck_assert_int_eq(hangar_session_archive(s), 0);
	free(before);
	free(after);
	free(pid);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- bounds --------------------------------------------------------------------------- */

/* A session on local with a small workspace, suspended; returns its state. */
static int park_one(hangar_ctx *ctx, hangar_session **out, uint32_t flags)
{
	hangar_session *s = session_for(ctx, T_LOCAL, flags);
	hangar_sandbox *sb = live(s);
	hangar_session_info i;

	sh_ok(sb, "/workspace", "printf 'x\\n' > /workspace/x");
	hangar_sandbox_unref(sb);
	suspend(s, NULL);
	info_of(s, &i);
	*out = s;
	return i.state;
}

/*
 * A caller who sees a session's new state finds it free: the last write of
 * a suspend or resume gives the lease up in the same statement. A trigger
 * in the state store refuses any write that changes a session's state while
 * leaving its lease held, so a suspend or resume that wrote its state and
 * gave the lease up afterwards, as two writes, fails here.
 */
START_TEST(a_new_state_is_never_seen_under_a_held_lease)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = session_for(ctx, T_LOCAL, 0);
	hangar_suspend_opts no_park = HANGAR_SUSPEND_OPTS_INIT;
	hangar_session_info i;
	hangar_sandbox *sb;
	char path[4400];
	sqlite3 *db = NULL;

	snprintf(path, sizeof(path), "%s/hangar.db", state_dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	ck_assert_int_eq(sqlite3_exec(db,
				      "CREATE TRIGGER state_under_lease AFTER UPDATE OF state ON sessions"
				      " WHEN OLD.state <> NEW.state AND NEW.lease_holder <> ''"
				      " BEGIN SELECT RAISE(ABORT, 'a new state written under a held lease'); END;",
				      NULL, NULL, NULL),
			 SQLITE_OK);

	sb = live(s);
	sh_ok(sb, "/workspace", "printf 'kept\\n' > /workspace/kept");
	hangar_sandbox_unref(sb);
	suspend(s, NULL); /* parked */
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	sb = live(s);     /* hot */
	hangar_sandbox_unref(sb);
	no_park.flags = HANGAR_SUSPEND_NO_PARK;
	ck_assert_msg(hangar_session_suspend(s, &no_park) == 0, "suspend: %s", hangar_error_last()->message);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	sb = live(s);     /* cold */
	sh_ok(sb, "/workspace", "grep -qx kept /workspace/kept");
	hangar_sandbox_unref(sb);

	ck_assert_int_eq(sqlite3_exec(db, "DROP TRIGGER state_under_lease", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(cap_evicts_longest_parked)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s[3];
	hangar_session_info i;
	char first_sb[128];

	set(ctx, "HANGAR_SESSION_HOT_RESUME_MAX", "2");
	ck_assert_int_eq(park_one(ctx, &s[0], 0), HANGAR_SESSION_PARKED);
	info_of(s[0], &i);
	snprintf(first_sb, sizeof(first_sb), "%s", i.sandbox_id);
	ck_assert_int_eq(park_one(ctx, &s[1], 0), HANGAR_SESSION_PARKED);
	ck_assert_int_eq(park_one(ctx, &s[2], 0), HANGAR_SESSION_PARKED);
	/* The longest-parked went to make room; the other two stay. */
	info_of(s[0], &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert_ptr_nonnull(strstr(i.suspend_reason, "HANGAR_SESSION_HOT_RESUME_MAX"));
	ck_assert(!sandbox_exists(ctx, first_sb));
	info_of(s[1], &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	/* The reaper: past a lowered cap, and past the age. */
	{
		uint32_t n = 99;

		set(ctx, "HANGAR_SESSION_HOT_RESUME_MAX", "1");
		ck_assert_int_eq(hangar_session_reap(ctx, &n), 0);
		ck_assert_uint_eq(n, 1);
		info_of(s[1], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
		info_of(s[2], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
		ck_assert_int_eq(hangar_session_reap(ctx, &n), 0);
		ck_assert_uint_eq(n, 0);
	}
	{
		/* An hour ago, with a 30-minute limit, reaped through the leased
		 * reaper: not while another context holds the lease, then at once. */
		hangar_ctx *other = ctx_for(T_LOCAL);
		hangar_reap_result r = HANGAR_REAP_RESULT_INIT;
		char path[4400], sql[256];
		sqlite3 *db = NULL;
		int released = 0;

		ck_assert_int_eq(hangar_ctx_reap(&r, other, "reaper", 60), 0);
		ck_assert_int_eq(r.leader, 1);
		ck_assert_uint_eq(r.sessions_reaped, 0);
		snprintf(path, sizeof(path), "%s/hangar.db", state_dir);
		ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
		sqlite3_busy_timeout(db, 5000);
		snprintf(sql, sizeof(sql), "UPDATE sessions SET parked_us = parked_us - 3600000000 WHERE id = '%s'",
			 hangar_session_id(s[2]));
		ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
		set(ctx, "HANGAR_SESSION_HOT_RESUME_MINUTES", "30");
		ck_assert_int_eq(hangar_ctx_reap(&r, ctx, "reaper", 60), 0);
		ck_assert_int_eq(r.leader, 0);
		ck_assert_uint_eq(r.sessions_reaped, 0);
		info_of(s[2], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
		ck_assert_int_eq(hangar_ctx_reap_release(other, "reaper", &released), 0);
		ck_assert_int_eq(released, 1);
		ck_assert_int_eq(hangar_ctx_reap(&r, ctx, "reaper", 60), 0);
		ck_assert_int_eq(r.leader, 1);
		ck_assert_uint_eq(r.sessions_reaped, 1);
		ck_assert_int_eq(hangar_ctx_reap_release(ctx, "reaper", NULL), 0);
		hangar_ctx_unref(other);
		info_of(s[2], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
		ck_assert_ptr_nonnull(strstr(i.suspend_reason, "reaped"));
	}
	/* Every one of them resumes from its checkpoint. */
	for (int k = 0; k < 3; k++) {
		hangar_sandbox *sb = NULL;
		char *x;

		ck_assert_int_eq(hangar_session_resume(s[k], &sb), 0);
		info_of(s[k], &i);
		ck_assert_int_eq(i.last_resume, HANGAR_RESUME_COLD);
		x = sh(sb, "/workspace", "cat /workspace/x");
		ck_assert_str_eq(x, "x\n");
		free(x);
		hangar_sandbox_unref(sb);
		hangar_session_archive(s[k]);
		hangar_session_unref(s[k]);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(not_parked)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = NULL, *t = NULL;
	hangar_session_info i;
	hangar_sandbox *extra[2] = { NULL, NULL };

	/* An exclusive, rotating credential is never parked. */
	ck_assert_int_eq(park_one(ctx, &s, HANGAR_SESSION_EXCLUSIVE_CREDENTIAL), HANGAR_SESSION_SUSPENDED);
	info_of(s, &i);
	ck_assert_ptr_nonnull(strstr(i.suspend_reason, "exclusive credential"));
	ck_assert_str_eq(i.sandbox_id, "");
	hangar_session_delete(s);
	hangar_session_unref(s);

	/* Hot resume off. */
	set(ctx, "HANGAR_SESSION_HOT_RESUME_MINUTES", "0");
	ck_assert_int_eq(park_one(ctx, &s, 0), HANGAR_SESSION_SUSPENDED);
	info_of(s, &i);
	ck_assert_ptr_nonnull(strstr(i.suspend_reason, "HANGAR_SESSION_HOT_RESUME_MINUTES"));
	hangar_session_delete(s);
	hangar_session_unref(s);
	set(ctx, "HANGAR_SESSION_HOT_RESUME_MINUTES", "1440");

	/* Three quarters of the fleet: 3 of 4. */
	set(ctx, "HANGAR_MAX_SANDBOXES", "4");
	for (int k = 0; k < 2; k++) {
		hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;

		co.provider = "local";
		ck_assert_int_eq(hangar_sandbox_create(&extra[k], ctx, &co), 0);
	}
	ck_assert_int_eq(park_one(ctx, &s, 0), HANGAR_SESSION_SUSPENDED);
	info_of(s, &i);
	ck_assert_ptr_nonnull(strstr(i.suspend_reason, "three-quarters"));
	/* Below it, it parks. */
	hangar_sandbox_kill(extra[1]);
	ck_assert_int_eq(park_one(ctx, &t, 0), HANGAR_SESSION_PARKED);
	hangar_sandbox_kill(extra[0]);
	for (int k = 0; k < 2; k++)
		hangar_sandbox_unref(extra[k]);
	hangar_session_archive(t);
	hangar_session_unref(t);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(full_fleet_evicts_parked)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = NULL;
	hangar_session_info i;
	hangar_sandbox *sb[3] = { NULL, NULL, NULL }, *refused = NULL;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	char parked[128];

	set(ctx, "HANGAR_MAX_SANDBOXES", "3");
	co.provider = "local";
	ck_assert_int_eq(park_one(ctx, &s, 0), HANGAR_SESSION_PARKED);
	info_of(s, &i);
	snprintf(parked, sizeof(parked), "%s", i.sandbox_id);
	ck_assert_int_eq(hangar_sandbox_create(&sb[0], ctx, &co), 0);
	ck_assert_int_eq(hangar_sandbox_create(&sb[1], ctx, &co), 0);
	/* Full: the parked sandbox makes room. */
	ck_assert_int_eq(hangar_sandbox_create(&sb[2], ctx, &co), 0);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert(!sandbox_exists(ctx, parked));
	/* Nothing parked left: refused. */
	ck_assert_int_eq(hangar_sandbox_create(&refused, ctx, &co), HANGAR_ECAPACITY);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_MAX_SANDBOXES"));
	for (int k = 0; k < 3; k++) {
		hangar_sandbox_kill(sb[k]);
		hangar_sandbox_unref(sb[k]);
	}
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- checkpoints that fail, hooks that fail ----------------------------------------------- */

START_TEST(failed_checkpoint)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = session_for(ctx, T_LOCAL, 0);
	hangar_sandbox *sb = live(s), *same = NULL;
	hangar_session_info i;
	char sid[128], *out;
	int rc;

	snprintf(sid, sizeof(sid), "%s", hangar_sandbox_id(sb));
	sh_ok(sb, "/workspace", "head -c 200000 /dev/urandom > /workspace/big");
	/* Too big to checkpoint, and nothing earlier: the sandbox stays, running. */
	set(ctx, "HANGAR_CHECKPOINT_MAX_BYTES", "1024");
	rc = hangar_session_suspend(s, NULL);
	ck_assert_int_eq(rc, HANGAR_ETOOLARGE);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "keeps running"));
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_str_eq(i.sandbox_id, sid);
	ck_assert_str_eq(i.checkpoint_id, "");
	out = sh(sb, "/workspace", "wc -c < /workspace/big");
	ck_assert_str_eq(out, "200000\n");
	free(out);
	hangar_sandbox_unref(sb);

	/* With an earlier checkpoint, a failing one suspends on it. */
	set(ctx, "HANGAR_CHECKPOINT_MAX_BYTES", "1073741824");
	suspend(s, NULL);
	ck_assert_int_eq(hangar_session_resume(s, &same), 0);
	info_of(s, &i);
	{
		char first[128];

		snprintf(first, sizeof(first), "%s", i.checkpoint_id);
		set(ctx, "HANGAR_CHECKPOINT_MAX_BYTES", "1024");
		suspend(s, NULL);
		info_of(s, &i);
		ck_assert_int_ne(i.state, HANGAR_SESSION_ACTIVE);
		ck_assert_str_eq(i.checkpoint_id, first);
	}
	hangar_sandbox_unref(same);

	/* A failing park hook: not parked. */
	set(ctx, "HANGAR_CHECKPOINT_MAX_BYTES", "1073741824");
	hook_fail = HANGAR_SESSION_HOOK_PARK;
	hangar_session_set_hook(ctx, hook, NULL);
	ck_assert_int_eq(hangar_session_resume(s, NULL), 0);
	suspend(s, NULL);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert_ptr_nonnull(strstr(i.suspend_reason, "park hook"));
	/* A failing cold hook fails the resume and leaves no sandbox. */
	hook_fail = HANGAR_SESSION_HOOK_COLD;
	ck_assert_int_eq(hangar_session_resume(s, NULL), HANGAR_EREFUSED);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert_str_eq(i.sandbox_id, "");
	hook_fail = 0;
	ck_assert_int_eq(hangar_session_resume(s, NULL), 0);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- two processes, one session -------------------------------------------------------- */

START_TEST(concurrent_resumes)
{
	int t = _i;
	hangar_ctx *ctx = ctx_for(t);
	hangar_session *s = session_for(ctx, t, 0);
	hangar_session_info i;
	int pfd[2][2];
	pid_t kid[2];
	char got[2][128];

	suspend(s, NULL);
	if (_i == T_LOCAL) {
		/* Make both go cold: the slow path, where a race would make two sandboxes. */
		hangar_sandbox *p = NULL;

		info_of(s, &i);
		ck_assert_int_eq(hangar_sandbox_attach(&p, ctx, NULL, i.sandbox_id), 0);
		hangar_sandbox_kill(p);
		hangar_sandbox_unref(p);
	}
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(pipe(pfd[k]), 0);
		kid[k] = fork();
		ck_assert_int_ge(kid[k], 0);
		if (kid[k] == 0) {
			hangar_ctx *c = ctx_for(t);
			hangar_session *mine = NULL;
			hangar_sandbox *sb = NULL;
			char line[160];
			int n;

			if (hangar_session_open(&mine, c, hangar_session_id(s)) != 0 ||
			    hangar_session_resume(mine, &sb) != 0)
				_exit(1);
			n = snprintf(line, sizeof(line), "%s\n", hangar_sandbox_id(sb));
			if (write(pfd[k][1], line, (size_t)n) != n)
				_exit(2);
			_exit(0);
		}
		close(pfd[k][1]);
	}
	for (int k = 0; k < 2; k++) {
		int status = 0;
		ssize_t n = read(pfd[k][0], got[k], sizeof(got[k]) - 1);

		ck_assert_int_gt(n, 0);
		got[k][n] = '\0';
		close(pfd[k][0]);
		ck_assert_int_eq(waitpid(kid[k], &status, 0), kid[k]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "resumer %d failed", k);
	}
	ck_assert_str_eq(got[0], got[1]);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_msg(!strncmp(got[0], i.sandbox_id, strlen(i.sandbox_id)), "store %s, resumers %s", i.sandbox_id, got[0]);
	hangar_session_archive(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- forks ----------------------------------------------------------------------------- */

struct forks {
	hangar_session *s[16];
	int method[16], errors;
	uint32_t n;
};

static void on_fork(const hangar_session_fork_result *r, void *payload)
{
	struct forks *f = payload;

	ck_assert_uint_lt(r->index, 16);
	if (r->error) {
		f->errors++;
		fprintf(stderr, "fork %u: %s\n", r->index, r->message);
		return;
	}
	f->s[r->index] = hangar_session_ref(r->session);
	f->method[r->index] = r->method;
	f->n++;
}

static const char *token_of(hangar_sandbox *sb)
{
	const char *t = sb->view && sb->view->desc.access_token ? sb->view->desc.access_token : "";

	return t;
}

START_TEST(fork_n)
{
	int t = _i;
	/* Local: by snapshot for a root caller (the only one it snapshots for), else by checkpoint. */
	const int expect[] = { geteuid() == 0 ? HANGAR_FORK_SNAPSHOT : HANGAR_FORK_CHECKPOINT, HANGAR_FORK_NATIVE,
			       HANGAR_FORK_SNAPSHOT, HANGAR_FORK_SNAPSHOT };
	hangar_ctx *ctx = ctx_for(t);
	hangar_session *parent = session_for(ctx, t, 0);
	hangar_sandbox *psb = live(parent);
	struct forks f = { { NULL }, { 0 }, 0, 0 };
	const uint32_t n = 3;
	hangar_session_info i;
	char ptoken[512];

	sh_ok(psb, ws_of(t), "mkdir -p \"$WS\" && printf 'parent\\n' > \"$WS\"/p.txt");
	snprintf(ptoken, sizeof(ptoken), "%s", token_of(psb));
	ck_assert_int_eq(hangar_session_fork(parent, n, on_fork, &f), 0);
	ck_assert_int_eq(f.errors, 0);
	ck_assert_uint_eq(f.n, n);
	for (uint32_t k = 0; k < n; k++) {
		hangar_sandbox *sb = live(f.s[k]);
		char *out, cmd[128];

		ck_assert_int_eq(f.method[k], expect[t]);
		info_of(f.s[k], &i);
		ck_assert_str_eq(i.parent_id, hangar_session_id(parent));
		ck_assert_str_ne(i.fork_group, "");
		ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
		ck_assert_str_ne(hangar_sandbox_id(sb), hangar_sandbox_id(psb));
		/* No fork shares its parent's or a sibling's envd token. */
		if (*ptoken)
			ck_assert_str_ne(token_of(sb), ptoken);
		for (uint32_t m = 0; m < k; m++) {
			hangar_sandbox *other = live(f.s[m]);

			ck_assert_str_ne(hangar_sandbox_id(sb), hangar_sandbox_id(other));
			if (*token_of(sb))
				ck_assert_str_ne(token_of(sb), token_of(other));
			hangar_sandbox_unref(other);
		}
		out = sh(sb, ws_of(t), "cat \"$WS\"/p.txt");
		ck_assert_str_eq(out, "parent\n");
		free(out);
		if (t == T_LOCAL) {
			/* Each one's changes are its own. */
			snprintf(cmd, sizeof(cmd), "printf '%u\\n' > \"$WS\"/mine-%u; ls \"$WS\" | grep -c mine-", k, k);
			out = sh(sb, ws_of(t), cmd);
			ck_assert_str_eq(out, "1\n");
			free(out);
		}
		hangar_sandbox_unref(sb);
	}
	/* The winner stays; its siblings are archived; the parent is untouched. */
	{
		uint32_t archived = 0;

		ck_assert_int_eq(hangar_session_keep(f.s[1], &archived), 0);
		ck_assert_uint_eq(archived, n - 1);
		info_of(f.s[0], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_ARCHIVED);
		info_of(f.s[1], &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
		info_of(parent, &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
		ck_assert_int_eq(hangar_session_keep(parent, NULL), HANGAR_EINVAL);
	}
	/* A fork suspends and resumes like any session. */
	suspend(f.s[1], NULL);
	ck_assert_int_eq(hangar_session_resume(f.s[1], NULL), 0);
	for (uint32_t k = 0; k < n; k++) {
		hangar_session_archive(f.s[k]);
		hangar_session_unref(f.s[k]);
	}
	hangar_sandbox_unref(psb);
	hangar_session_archive(parent);
	hangar_session_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- a cancelled fork keeps nothing ---------------------------------------------------- */

struct fork_cancel {
	int calls, after;       /* cancel from the after-th question on (0: at once) */
	int reported;           /* fn calls: none expected */
	hangar_ctx *ctx;        /* with after < 0: cancel once the fork's checkpoint is stored */
	const char *parent;
	int checkpoints;
};

static int checkpoints_of(hangar_ctx *ctx, const char *session);

static int cancel_after(void *payload)
{
	struct fork_cancel *c = payload;

	c->calls++;
	if (c->after < 0)
		return checkpoints_of(c->ctx, c->parent) > c->checkpoints;
	return c->calls > c->after;
}

static void on_cancelled_fork(const hangar_session_fork_result *r, void *payload)
{
	(void)r;
	((struct fork_cancel *)payload)->reported++;
}

static int count_sandbox(const hangar_sandbox_info *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 0;
}

static int count_session(const hangar_session_info *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 0;
}

static int sandboxes_of(hangar_ctx *ctx, int t)
{
	int n = 0;
	int rc = hangar_sandbox_list(ctx, t == T_LOCAL ? "local" : "e2b", count_sandbox, &n);

	ck_assert_msg(rc == 0, "list: %s", hangar_error_last()->message);
	return n;
}

static int sessions_in(hangar_ctx *ctx)
{
	int n = 0;

	ck_assert_int_eq(hangar_session_list(ctx, count_session, &n), 0);
	return n;
}

START_TEST(fork_cancel)
{
	int t = _i / 2, late = _i % 2;
	hangar_ctx *ctx = ctx_for(t);
	hangar_session *parent = session_for(ctx, t, 0);
	hangar_sandbox *psb = live(parent);
	hangar_session_fork_opts fo = HANGAR_SESSION_FORK_OPTS_INIT;
	hangar_suspend_opts so = HANGAR_SUSPEND_OPTS_INIT;
	/*
	 * Late: once the fork is under way. On the local provider forking by
	 * checkpoint (a caller other than root), once its checkpoint is stored
	 * and the sandboxes are being made; by snapshot (the fakes, and local
	 * for root) or native fork, at the second question, after it.
	 */
	struct fork_cancel c = { 0, !late ? 0 : t == T_LOCAL && geteuid() != 0 ? -1 : 1, 0, ctx,
				 hangar_session_id(parent), 0 };
	int sandboxes, sessions, checkpoints, rc;
	hangar_session_info i;

	sh_ok(psb, ws_of(t), "mkdir -p \"$WS\" && printf 'parent\\n' > \"$WS\"/p.txt");
	sandboxes = sandboxes_of(ctx, t);
	sessions = sessions_in(ctx);
	checkpoints = c.checkpoints = checkpoints_of(ctx, hangar_session_id(parent));
	fo.cancel = cancel_after;
	fo.cancel_payload = &c;
	rc = hangar_session_fork_ext(parent, 3, &fo, on_cancelled_fork, &c);
	ck_assert_msg(rc == HANGAR_ECANCELED, "fork: %d %s", rc, hangar_error_last()->message);
	ck_assert_int_gt(c.calls, c.after);
	if (late && t == T_LOCAL)
		ck_assert_int_gt(c.calls, 1);
	ck_assert_int_eq(c.reported, 0);
	/* Nothing kept: no sandbox, no session, no checkpoint. */
	ck_assert_int_eq(sandboxes_of(ctx, t), sandboxes);
	ck_assert_int_eq(sessions_in(ctx), sessions);
	ck_assert_int_eq(checkpoints_of(ctx, hangar_session_id(parent)), checkpoints);
	info_of(parent, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	/* The lease is free at once: a caller that will not wait gets it. */
	set(ctx, "HANGAR_SESSION_BUSY_WAIT_SECONDS", "0");
	rc = hangar_session_suspend(parent, &so);
	ck_assert_msg(rc == 0, "suspend after the cancel: %s", hangar_error_last()->message);
	/* A fork with no cancel still works on the same parent. */
	{
		struct forks f = { { NULL }, { 0 }, 0, 0 };

		ck_assert_int_eq(hangar_session_fork_ext(parent, 1, NULL, on_fork, &f), 0);
		ck_assert_uint_eq(f.n, 1);
		hangar_session_archive(f.s[0]);
		hangar_session_unref(f.s[0]);
	}
	hangar_sandbox_unref(psb);
	hangar_session_archive(parent);
	hangar_session_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(eviction_passes_over_a_held_session)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s[3];
	hangar_session_info i;

	set(ctx, "HANGAR_SESSION_HOT_RESUME_MAX", "2");
	ck_assert_int_eq(park_one(ctx, &s[0], 0), HANGAR_SESSION_PARKED);
	ck_assert_int_eq(park_one(ctx, &s[1], 0), HANGAR_SESSION_PARKED);
	/* Another caller holds the longest-parked one: the next goes instead. */
	ck_assert_int_eq(store_session_lease(ctx, hangar_session_id(s[0]), "another-caller", 60000000, NULL, NULL, NULL), 1);
	ck_assert_int_eq(park_one(ctx, &s[2], 0), HANGAR_SESSION_PARKED);
	info_of(s[0], &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_PARKED);
	info_of(s[1], &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert_int_eq(store_session_unlease(ctx, hangar_session_id(s[0]), "another-caller"), 0);
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(hangar_session_delete(s[k]), 0);
		hangar_session_unref(s[k]);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* A holder's name tells whether it still runs, on this machine only. */
START_TEST(lease_holders_known_dead)
{
	char me[96], other[128];
	const char *s;

	hproc_identity(me, sizeof(me));
	ck_assert_int_eq(hproc_dead(me), 0);
	/* The same pid with another start time: the pid was used again, the holder is gone. */
	s = strstr(me, ".s");
	ck_assert_ptr_nonnull(s);
	snprintf(other, sizeof(other), "%.*s.s1.00000000", (int)(s - me), me);
	ck_assert_int_eq(hproc_dead(other), 1);
	/* Another machine (boot), or a name of another making: only the lease's end tells. */
	snprintf(other, sizeof(other), "bzzzzzzzz%s", strchr(me, '.'));
	ck_assert_int_eq(hproc_dead(other), 0);
	ck_assert_int_eq(hproc_dead("another-caller"), 0);
	ck_assert_int_eq(hproc_dead(""), 0);
	ck_assert_int_eq(hproc_dead(NULL), 0);
}
END_TEST

/*
 * A child process names itself as a lease holder and stays alive until
 * told; the lease is written in its name. While it runs, a resume answers
 * HANGAR_EBUSY at once (no wait asked) with the time left; once it is
 * killed with SIGKILL, the next resume takes the lease over at once.
 */
START_TEST(lease_of_a_killed_holder_is_taken_over)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = session_for(ctx, T_LOCAL, 0);
	hangar_sandbox *sb = NULL;
	char holder[96] = "";
	int to_child[2], from_child[2], status;
	ssize_t n;
	pid_t pid;

	set(ctx, "HANGAR_SESSION_BUSY_WAIT_SECONDS", "0");
	ck_assert_int_eq(pipe(to_child), 0);
	ck_assert_int_eq(pipe(from_child), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char name[96], c;

		hproc_identity(name, sizeof(name));
		if (write(from_child[1], name, strlen(name) + 1) < 0)
			_exit(1);
		while (read(to_child[0], &c, 1) < 0)
			;
		_exit(0);
	}
	close(from_child[1]);
	close(to_child[0]);
	n = read(from_child[0], holder, sizeof(holder) - 1);
	ck_assert_int_gt(n, 1);
	ck_assert_int_eq(store_session_lease(ctx, hangar_session_id(s), holder, 60000000, NULL, NULL, NULL), 1);

	/* Alive: busy, with how long the lease still runs. */
	ck_assert_int_eq(hangar_session_resume(s, &sb), HANGAR_EBUSY);
	ck_assert_ptr_null(sb);
	ck_assert_int_ge(hangar_error_last()->retry_after_s, 50);
	ck_assert_int_le(hangar_error_last()->retry_after_s, 60);

	/* Killed: its lease is taken over without waiting it out. */
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(hangar_session_resume(s, &sb), 0);
	ck_assert_ptr_nonnull(sb);
	hangar_sandbox_unref(sb);
	close(from_child[0]);
	close(to_child[1]);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A holder that stays alive past the wait asked gets HANGAR_EBUSY, not a hang. */
START_TEST(busy_wait_is_bounded)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = session_for(ctx, T_LOCAL, 0);
	hangar_sandbox *sb = NULL;
	char other[96];

	set(ctx, "HANGAR_SESSION_BUSY_WAIT_SECONDS", "1");
	hproc_identity(other, sizeof(other)); /* this process: alive */
	ck_assert_int_eq(store_session_lease(ctx, hangar_session_id(s), other, 60000000, NULL, NULL, NULL), 1);
	ck_assert_int_eq(hangar_session_suspend(s, NULL), HANGAR_EBUSY);
	ck_assert_int_gt(hangar_error_last()->retry_after_s, 0);
	ck_assert_int_eq(store_session_unlease(ctx, hangar_session_id(s), other), 0);
	/* Given up: the next caller gets it at once. */
	ck_assert_int_eq(hangar_session_resume(s, &sb), 0);
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(delete_keeps_a_forks_base)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *parent = session_for(ctx, T_LOCAL, 0);
	hangar_sandbox *sb = live(parent);
	struct forks f = { { NULL }, { 0 }, 0, 0 };
	hangar_session_info i;
	hangar_suspend_opts so = HANGAR_SUSPEND_OPTS_INIT;
	const char *bad[] = { "=no key", NULL };
	char *out;

	sh_ok(sb, "/workspace", "printf 'base\\n' > /workspace/b");
	hangar_sandbox_unref(sb);
	/* A bad label is refused before anything happens. */
	so.labels = bad;
	ck_assert_int_eq(hangar_session_suspend(parent, &so), HANGAR_EINVAL);
	info_of(parent, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_int_eq(checkpoints_of(ctx, hangar_session_id(parent)), 0);
	/* A checkpoint the fork names as its base whichever way it is made (a snapshot fork names the parent's). */
	so.labels = NULL;
	so.flags = HANGAR_SUSPEND_NO_PARK;
	ck_assert_int_eq(hangar_session_suspend(parent, &so), 0);

	ck_assert_int_eq(hangar_session_fork(parent, 1, on_fork, &f), 0);
	ck_assert_uint_eq(f.n, 1);
	ck_assert_int_eq(hangar_session_delete(parent), 0);
	/* The fork loses its sandbox; its base checkpoint, the parent's, brings it back. */
	info_of(f.s[0], &i);
	{
		hangar_sandbox *p = NULL;

		ck_assert_int_eq(hangar_sandbox_attach(&p, ctx, NULL, i.sandbox_id), 0);
		hangar_sandbox_kill(p);
		hangar_sandbox_unref(p);
	}
	sb = live(f.s[0]);
	out = sh(sb, "/workspace", "cat /workspace/b");
	ck_assert_str_eq(out, "base\n");
	free(out);
	info_of(f.s[0], &i);
	ck_assert_int_eq(i.last_resume, HANGAR_RESUME_COLD);
	hangar_sandbox_unref(sb);
	hangar_session_delete(f.s[0]);
	hangar_session_unref(f.s[0]);
	hangar_session_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- records: archive, delete, careless callers, tampering ----------------------------------- */

static int count_sessions(const hangar_session_info *i, void *payload)
{
	(void)i;
	(*(int *)payload)++;
	return 0;
}

START_TEST(records)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s = NULL, *o = NULL, *dup = NULL;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session_info i;
	char sid[128];
	int n = 0;

	/* Careless callers. */
	ck_assert_int_eq(hangar_session_create(NULL, ctx, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_session_open(&o, ctx, "../etc"), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_session_open(&o, ctx, "ses-nothere"), HANGAR_ENOTFOUND);
	so.id = "bad id";
	ck_assert_int_eq(hangar_session_create(&o, ctx, &so), HANGAR_EINVAL);
	so.id = NULL;
	so.flags = 0x80;
	ck_assert_int_eq(hangar_session_create(&o, ctx, &so), HANGAR_EINVAL);
	so.flags = 0;
	so.workspace = "relative";
	ck_assert_int_eq(hangar_session_create(&o, ctx, &so), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_session_suspend(NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_session_fork(NULL, 1, on_fork, NULL), HANGAR_EINVAL);
	{
		hangar_session_opts bad = HANGAR_SESSION_OPTS_INIT;
		const char *labels[] = { "no equals sign", NULL };

		bad.labels = labels;
		ck_assert_int_eq(hangar_session_create(&o, ctx, &bad), HANGAR_EINVAL);
	}
	ck_assert_int_eq(hangar_session_list(ctx, count_sessions, &n), 0);
	ck_assert_int_eq(n, 0); /* no refusal left a record */

	/* A chosen id; taken twice is refused before any sandbox exists. */
	{
		hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;

		co.provider = "local";
		so = (hangar_session_opts)HANGAR_SESSION_OPTS_INIT;
		so.id = "agent-7.turns";
		so.create = &co;
		ck_assert_int_eq(hangar_session_create(&s, ctx, &so), 0);
		ck_assert_int_eq(hangar_session_create(&dup, ctx, &so), HANGAR_EEXISTS);
		ck_assert_ptr_null(dup);
	}
	info_of(s, &i);
	snprintf(sid, sizeof(sid), "%s", i.sandbox_id);
	suspend(s, "one");
	ck_assert_int_eq(hangar_session_resume(s, NULL), 0);
	suspend(s, "two");
	ck_assert_int_eq(checkpoints_of(ctx, "agent-7.turns"), 2);
	/* The second checkpoint chains to the first. */
	{
		hangar_checkpoint *cp = NULL;
		hangar_checkpoint_info ci = HANGAR_CHECKPOINT_INFO_INIT;

		info_of(s, &i);
		ck_assert_int_eq(hangar_checkpoint_lookup(&cp, ctx, i.checkpoint_id), 0);
		ck_assert_int_eq(hangar_checkpoint_get_info(&ci, cp), 0);
		ck_assert_str_ne(ci.parent_id, "");
		hangar_checkpoint_unref(cp);
	}

	/* Options sealed to another session do not open: nothing is created from them. */
	{
		hangar_session *other = session_for(ctx, T_LOCAL, 0);
		char path[4400], sql[512];
		sqlite3 *db = NULL;

		hangar_session_archive(other);
		snprintf(path, sizeof(path), "%s/hangar.db", state_dir);
		ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
		sqlite3_busy_timeout(db, 5000);
		snprintf(sql, sizeof(sql),
			 "UPDATE sessions SET spec = (SELECT spec FROM sessions WHERE id = '%s') WHERE id = 'agent-7.turns'",
			 hangar_session_id(other));
		ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(db);
		/* Parked: the hot path needs no options, so break the parked sandbox first. */
		info_of(s, &i);
		if (i.state == HANGAR_SESSION_PARKED) {
			hangar_sandbox *p = NULL;

			ck_assert_int_eq(hangar_sandbox_attach(&p, ctx, NULL, i.sandbox_id), 0);
			hangar_sandbox_kill(p);
			hangar_sandbox_unref(p);
		}
		ck_assert_int_eq(hangar_session_resume(s, NULL), HANGAR_EREFUSED);
		info_of(s, &i);
		ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
		ck_assert_str_eq(i.sandbox_id, "");
		hangar_session_delete(other);
		hangar_session_unref(other);
	}

	/* Archived: no resume, checkpoints kept. Deleted: gone with its checkpoints. */
	ck_assert_int_eq(hangar_session_archive(s), 0);
	ck_assert_int_eq(hangar_session_archive(s), 0);
	ck_assert_int_eq(hangar_session_resume(s, NULL), HANGAR_EGONE);
	ck_assert_int_eq(hangar_session_suspend(s, NULL), HANGAR_EGONE);
	ck_assert_int_eq(checkpoints_of(ctx, "agent-7.turns"), 2);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	ck_assert_int_eq(checkpoints_of(ctx, "agent-7.turns"), 0);
	ck_assert_int_eq(hangar_session_open(&o, ctx, "agent-7.turns"), HANGAR_ENOTFOUND);
	{
		hangar_session_info z = HANGAR_SESSION_INFO_INIT;

		ck_assert_int_eq(hangar_session_get_info(&z, s), HANGAR_ENOTFOUND);
	}
	ck_assert(!sandbox_exists(ctx, sid));
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The pid in the parked sandbox's jail.pid. */
static pid_t jail_pid_of(const char *sandbox_id)
{
	char path[4400];
	FILE *f;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), sandbox_id);
	f = fopen(path, "re");
	ck_assert_msg(f != NULL, "%s", path);
	ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return pid;
}

/* The parent of pid, from /proc; 0 when unknown. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	const char *p;
	FILE *f;
	long ppid = 0;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %ld", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/* The process named comm below root (its descendant), or 0. */
static pid_t descendant_named(pid_t root, const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d))) {
		char path[300], name[64] = "";
		pid_t pid = (pid_t)atol(e->d_name), up;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, comm) != 0)
			continue;
		for (up = parent_of(pid); up > 1; up = parent_of(up))
			if (up == root) {
				found = pid;
				break;
			}
	}
	closedir(d);
	return found;
}

/*
 * The parked sandbox's envd hangs (stopped): the resume's check gives up
 * after HANGAR_SESSION_CHECK_SECONDS, not the exec's own deadline, and the
 * session comes back cold with the reason saying so.
 */
START_TEST(hung_envd_is_given_up_at_the_check_bound)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s;
	hangar_session_info i;
	hangar_sandbox *sb = NULL;
	char parked[128];
	pid_t envd;
	int64_t t0;

	set(ctx, "HANGAR_SESSION_CHECK_SECONDS", "2");
	ck_assert_int_eq(park_one(ctx, &s, 0), HANGAR_SESSION_PARKED);
	info_of(s, &i);
	snprintf(parked, sizeof(parked), "%s", i.sandbox_id);
	envd = descendant_named(jail_pid_of(parked), "hangar-envd");
	ck_assert_int_gt(envd, 0);
	ck_assert_int_eq(kill(envd, SIGSTOP), 0);
	t0 = clock_mono_ms();
	ck_assert_int_eq(hangar_session_resume(s, &sb), 0);
	/* The old deadline was the check plus 35 s; a stated margin of 15 s over the check. */
	ck_assert_int_lt(clock_mono_ms() - t0, (2 + 15) * 1000);
	info_of(s, &i);
	ck_assert_int_eq(i.last_resume, HANGAR_RESUME_COLD);
	ck_assert_msg(strstr(i.last_resume_reason, "hung") && strstr(i.last_resume_reason, "HANGAR_SESSION_CHECK_SECONDS"),
		      "%s", i.last_resume_reason);
	ck_assert_str_ne(i.sandbox_id, parked);
	/* The hung one was destroyed. */
	ck_assert(!sandbox_exists(ctx, parked));
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * The parked sandbox's supervisor is stopped: the resume falls back cold,
 * and the sandbox it could not destroy is recorded; once the supervisor
 * runs again, the reaper destroys it. It is never left paused, unowned.
 */
START_TEST(stopped_supervisor_strands_nothing)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_session *s;
	hangar_session_info i;
	hangar_sandbox *sb = NULL;
	char parked[128], **ids = NULL, **providers = NULL;
	uint32_t n = 0;
	pid_t jail;
	int listed = 0;

	set(ctx, "HANGAR_SESSION_CHECK_SECONDS", "2");
	ck_assert_int_eq(park_one(ctx, &s, 0), HANGAR_SESSION_PARKED);
	info_of(s, &i);
	snprintf(parked, sizeof(parked), "%s", i.sandbox_id);
	jail = jail_pid_of(parked);
	ck_assert_int_eq(kill(jail, SIGSTOP), 0);
	/* Another process resumes it: it must ask the stopped supervisor for envd's token. */
	{
		hangar_ctx *other = ctx_for(T_LOCAL);
		hangar_session *s2 = NULL;

		set(other, "HANGAR_SESSION_CHECK_SECONDS", "2");
		ck_assert_int_eq(hangar_session_open(&s2, other, hangar_session_id(s)), 0);
		ck_assert_int_eq(hangar_session_resume(s2, &sb), 0);
		hangar_sandbox_unref(sb);
		info_of(s2, &i);
		ck_assert_msg(strstr(i.last_resume_reason, "did not answer (hung)"), "%s", i.last_resume_reason);
		hangar_session_unref(s2);
		hangar_ctx_unref(other);
	}
	info_of(s, &i);
	ck_assert_int_eq(i.last_resume, HANGAR_RESUME_COLD);
	ck_assert_str_ne(i.sandbox_id, parked);
	/* Recorded for the reaper. */
	ck_assert_int_eq(store_doomed_list(ctx, 16, &ids, &providers), 0);
	for (size_t k = 0; ids[k]; k++)
		listed |= !strcmp(ids[k], parked);
	store_ids_free(ids);
	store_ids_free(providers);
	ck_assert_msg(listed, "%s is not recorded for the reaper", parked);
	/* The supervisor runs again: the reaper destroys it and forgets it. */
	ck_assert_int_eq(kill(jail, SIGCONT), 0);
	ck_assert_int_eq(hangar_session_reap(ctx, &n), 0);
	ck_assert_uint_ge(n, 1);
	ck_assert(!sandbox_exists(ctx, parked));
	ck_assert_int_eq(store_doomed_list(ctx, 16, &ids, &providers), 0);
	ck_assert_ptr_null(ids[0]);
	store_ids_free(ids);
	store_ids_free(providers);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/* One of the racers of adoptions_race: a session for the shared sandbox, once both threads are ready. */
struct adopter {
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	pthread_barrier_t *start;
	hangar_session *s;
	int rc;
	char message[256];
};

static void *adopt_racer(void *arg)
{
	struct adopter *a = arg;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;

	so.workspace = "/workspace";
	so.sandbox = a->sb;
	pthread_barrier_wait(a->start);
	a->rc = hangar_session_create(&a->s, a->ctx, &so);
	snprintf(a->message, sizeof(a->message), "%s", a->rc ? hangar_error_last()->message : "");
	return NULL;
}

/*
 * Two threads adopting one sandbox at the same moment: one session gets
 * it, the other is refused (another session's, or being taken), never
 * both. Each round is a fresh sandbox.
 */
START_TEST(adoptions_race)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;

	co.provider = "local";
	co.timeout_sec = 120;
	co.network = HANGAR_NETWORK_OFF;
	for (int round = 0; round < 4; round++) {
		pthread_barrier_t start;
		struct adopter a[2];
		pthread_t t[2];
		hangar_sandbox *sb = NULL;
		int won = 0;

		ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &co), 0);
		ck_assert_int_eq(pthread_barrier_init(&start, NULL, 2), 0);
		for (int i = 0; i < 2; i++) {
			a[i] = (struct adopter){ ctx, sb, &start, NULL, -1, "" };
			ck_assert_int_eq(pthread_create(&t[i], NULL, adopt_racer, &a[i]), 0);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&start);
		for (int i = 0; i < 2; i++) {
			if (a[i].rc == 0) {
				won++;
				continue;
			}
			ck_assert_msg(a[i].rc == HANGAR_EINVAL || a[i].rc == HANGAR_EBUSY, "round %d: %d %s", round,
				      a[i].rc, a[i].message);
			ck_assert_msg(strstr(a[i].message, "another session's") || strstr(a[i].message, "being taken"),
				      "round %d: %s", round, a[i].message);
		}
		ck_assert_msg(won == 1, "round %d: %d sessions took sandbox %s", round, won, hangar_sandbox_id(sb));
		for (int i = 0; i < 2; i++)
			if (a[i].s) {
				ck_assert_int_eq(hangar_session_delete(a[i].s), 0);
				hangar_session_unref(a[i].s);
			}
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A sandbox made without a session becomes one's (opts->sandbox): the
 * session is active with that very sandbox, suspends and resumes it like
 * its own; a paused sandbox, one another session holds, and a failed
 * create leave the sandbox as it was, the caller's.
 */
START_TEST(adopted_sandbox)
{
	hangar_ctx *ctx = ctx_for(T_LOCAL);
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL, *other = NULL;
	hangar_sandbox *sb = NULL, *paused = NULL, *back = NULL;
	hangar_session_info i;
	char id[128], *out;
	int rc;

	co.provider = "local";
	co.timeout_sec = 900;
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &co), 0);
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	sh_ok(sb, "/workspace", "mkdir -p \"$WS\" && printf adopted > \"$WS/kept\"");

	so.create = &co;
	so.workspace = "/workspace";
	so.sandbox = sb;
	rc = hangar_session_create(&s, ctx, &so);
	ck_assert_msg(rc == 0, "adopt: %s", hangar_error_last()->message);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_ACTIVE);
	ck_assert_str_eq(i.sandbox_id, id);
	ck_assert_str_eq(i.provider, "local");

	/* Held by a session: no other takes it, and it runs on. */
	ck_assert_int_eq(hangar_session_create(&other, ctx, &so), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "another session's"));
	ck_assert_ptr_null(other);
	ck_assert_int_eq(sandbox_exists(ctx, id), 1);

	/* A taken id: the sandbox brought is not destroyed. */
	ck_assert_int_eq(hangar_sandbox_create(&paused, ctx, &co), 0);
	so.sandbox = paused;
	so.id = hangar_session_id(s);
	ck_assert_int_eq(hangar_session_create(&other, ctx, &so), HANGAR_EEXISTS);
	ck_assert_int_eq(sandbox_exists(ctx, hangar_sandbox_id(paused)), 1);
	/* A paused one is refused before anything is recorded. */
	so.id = NULL;
	ck_assert_int_eq(hangar_sandbox_pause(paused), 0);
	ck_assert_int_eq(hangar_session_create(&other, ctx, &so), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "not running"));
	ck_assert_int_eq(sandbox_exists(ctx, hangar_sandbox_id(paused)), 1);
	hangar_sandbox_kill(paused);
	hangar_sandbox_unref(paused);

	/* Suspended cold and resumed: a new sandbox, the adopted one's files. */
	set(ctx, "HANGAR_SESSION_HOT_RESUME_MINUTES", "0");
	suspend(s, NULL);
	info_of(s, &i);
	ck_assert_int_eq(i.state, HANGAR_SESSION_SUSPENDED);
	ck_assert_int_eq(sandbox_exists(ctx, id), 0);
	rc = hangar_session_resume(s, &back);
	ck_assert_msg(rc == 0, "resume: %s", hangar_error_last()->message);
	ck_assert_str_ne(hangar_sandbox_id(back), id);
	out = sh(back, "/workspace", "cat \"$WS/kept\"");
	ck_assert_str_eq(out, "adopted");
	free(out);
	info_of(s, &i);
	ck_assert_int_eq(i.last_resume, HANGAR_RESUME_COLD);
	hangar_sandbox_unref(back);
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sessions");
	TCase *tc = tcase_create("hot resume");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, hot_resume, 0, T_COUNT);
	tcase_add_loop_test(tc, fallbacks, 0, T_COUNT * F_COUNT);
	suite_add_tcase(s, tc);
	tc = tcase_create("bounds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, a_new_state_is_never_seen_under_a_held_lease);
	tcase_add_test(tc, cap_evicts_longest_parked);
	tcase_add_test(tc, not_parked);
	tcase_add_test(tc, full_fleet_evicts_parked);
	tcase_add_test(tc, failed_checkpoint);
	tcase_add_test(tc, eviction_passes_over_a_held_session);
	tcase_add_test(tc, lease_holders_known_dead);
	tcase_add_test(tc, lease_of_a_killed_holder_is_taken_over);
	tcase_add_test(tc, busy_wait_is_bounded);
	tcase_add_test(tc, hung_envd_is_given_up_at_the_check_bound);
	tcase_add_test(tc, stopped_supervisor_strands_nothing);
	suite_add_tcase(s, tc);
	tc = tcase_create("concurrency and forks");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, concurrent_resumes, 0, T_COUNT);
	tcase_add_loop_test(tc, fork_n, 0, T_COUNT);
	tcase_add_loop_test(tc, fork_cancel, 0, 2 * T_COUNT);
	tcase_add_test(tc, records);
	tcase_add_test(tc, delete_keeps_a_forks_base);
	tcase_add_test(tc, adopted_sandbox);
	tcase_add_test(tc, adoptions_race);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
