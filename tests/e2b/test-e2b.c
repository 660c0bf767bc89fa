/*
 * The e2b provider, through the public API only, against the fake control
 * planes (tests/fakes/fake-e2b) in each flavour: cloud, selfhosted, cube.
 * Every fake sandbox is a real hangar-envd process behind the fake's edge.
 *
 * Each test starts its own fake (FAKE_E2B, with HANGAR_ENVD_PATH as its
 * envd) and its own HANGAR_STATE_DIR. Waits are on conditions with
 * deadlines; nothing sleeps.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>
#include "clock.h"

#define API_KEY "e2b_test_0123456789abcdef0123456789abcdef"
#define SECRET_KEY "a test secret key, long enough to derive from"

static const char *const flavours[] = { "cloud", "selfhosted", "cube" };

static char state_dir[64];
/*
 * The fake's sandboxes are hangar-envd processes on this host: what a
 * command writes to /tmp lands in the host's /tmp. Commands write under
 * this directory instead (open to the sandbox's user), which teardown removes.
 */
static char scratch_dir[64];
static pid_t fake_pid;
static int api_port, edge_port;
static const char *flavour;

/* ---- the fake ------------------------------------------------------------------------ */

static void fake_start(const char *fl, const char *extra)
{
	const char *fake = getenv("FAKE_E2B"), *envd = getenv("HANGAR_ENVD_PATH");
	char fdarg[16], line[128];
	int pfd[2];
	size_t n = 0;
	int64_t deadline = clock_mono_ms() + 20000;

	ck_assert_msg(fake && envd, "FAKE_E2B and HANGAR_ENVD_PATH must be set");
	flavour = fl;
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fake_pid = fork();
	ck_assert_int_ge(fake_pid, 0);
	if (fake_pid == 0) {
		const char *argv[16];
		int a = 0;

		dup2(pfd[1], 3);
		snprintf(fdarg, sizeof(fdarg), "3");
		argv[a++] = fake;
		argv[a++] = "--flavour";
		argv[a++] = fl;
		argv[a++] = "--envd";
		argv[a++] = envd;
		argv[a++] = "--ready-fd";
		argv[a++] = fdarg;
		argv[a++] = "--api-key";
		argv[a++] = API_KEY;
		/* extra: one more option, and its value after a space. */
		if (extra) {
			char *copy = strdup(extra), *sp = strchr(copy, ' ');

			if (sp)
				*sp = '\0';
			argv[a++] = copy;
			if (sp)
				argv[a++] = sp + 1;
		}
		argv[a] = NULL;
		execv(fake, (char **)argv);
		_exit(127);
	}
	close(pfd[1]);
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		ssize_t r;

		line[n] = '\0';
		ck_assert_msg(clock_mono_ms() < deadline, "the fake did not get ready");
		if (poll(&p, 1, (int)(deadline - clock_mono_ms())) <= 0)
			continue;
		r = read(pfd[0], line + n, sizeof(line) - 1 - n);
		ck_assert_msg(r > 0, "the fake exited before it was ready");
		n += (size_t)r;
	}
	line[n] = '\0';
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

struct body {
	char *data;
	size_t len;
};

static size_t body_cb(char *d, size_t s, size_t n, void *ud)
{
	struct body *b = ud;
	char *p = realloc(b->data, b->len + s * n + 1);

	if (!p)
		return 0;
	memcpy(p + b->len, d, s * n);
	b->data = p;
	b->len += s * n;
	p[b->len] = '\0';
	return s * n;
}

/* A request to the fake's own API; returns the HTTP status, the body in *out (may be NULL). */
static long fake_http(const char *method, const char *path, const char *json, char **out)
{
	struct body b = { NULL, 0 };
	struct curl_slist *h = NULL;
	char url[256];
	long status = 0;
	CURL *c = curl_easy_init();

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", api_port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	h = curl_slist_append(h, "Content-Type: application/json");
	h = curl_slist_append(h, "X-API-Key: " API_KEY);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (json)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = b.data;
	else
		free(b.data);
	return status;
}

/* The fake's record of a sandbox (a new object), or NULL when it has none. */
static cJSON *fake_sandbox(const char *id)
{
	char *body = NULL;
	cJSON *all, *found = NULL;

	ck_assert_int_eq(fake_http("GET", "/_fake/sandboxes", NULL, &body), 200);
	all = cJSON_Parse(body);
	free(body);
	ck_assert_ptr_nonnull(all);
	for (cJSON *s = all->child; s; s = s->next) {
		cJSON *i = cJSON_GetObjectItem(s, "id");

		if (cJSON_IsString(i) && !strcmp(i->valuestring, id))
			found = cJSON_Duplicate(s, 1);
	}
	cJSON_Delete(all);
	return found;
}

static int fake_count(void)
{
	char *body = NULL;
	cJSON *all;
	int n;

	ck_assert_int_eq(fake_http("GET", "/_fake/sandboxes", NULL, &body), 200);
	all = cJSON_Parse(body);
	free(body);
	n = cJSON_GetArraySize(all);
	cJSON_Delete(all);
	return n;
}

static void fault(const char *json)
{
	long s = fake_http("POST", "/_fake/faults", json, NULL);

	ck_assert_msg(s >= 200 && s < 300, "the fake refused the fault %s: %ld", json, s);
}

/* ---- fixtures and helpers ------------------------------------------------------------------ */

static void setup(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-e2b-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	snprintf(scratch_dir, sizeof(scratch_dir), "/tmp/hangar-e2b-scratch-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch_dir));
	ck_assert_int_eq(chmod(scratch_dir, 01777), 0);
}

static void teardown(void)
{
	char cmd[192];

	fake_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", state_dir, scratch_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s or %s\n", state_dir, scratch_dir);
}

static void set(hangar_ctx *ctx, const char *name, const char *value)
{
	int rc = hangar_ctx_set(ctx, name, value);

	ck_assert_msg(rc == 0, "%s: %s", name, hangar_error_last()->message);
}

static hangar_ctx *new_ctx_key(const char *key, const char *secret)
{
	hangar_ctx *ctx = NULL;
	char url[64];

	ck_assert_int_eq(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), 0);
	set(ctx, "HANGAR_STATE_DIR", state_dir);
	set(ctx, "HANGAR_E2B_FLAVOR", flavour);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", api_port);
	set(ctx, "HANGAR_E2B_API_URL", url);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", edge_port);
	set(ctx, "HANGAR_E2B_SANDBOX_URL", url);
	if (key)
		set(ctx, "HANGAR_E2B_API_KEY", key);
	if (secret)
		set(ctx, "HANGAR_SECRET_KEY", secret);
	set(ctx, "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", "10");
	if (!strcmp(flavour, "cube"))
		set(ctx, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", "true");
	return ctx;
}

static hangar_ctx *new_ctx(void)
{
	return new_ctx_key(API_KEY, SECRET_KEY);
}

static hangar_sandbox *create(hangar_ctx *ctx, int64_t timeout)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = "e2b";
	o.timeout_sec = timeout;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_msg(rc == 0, "create (%s): %s", flavour, hangar_error_last()->message);
	return sb;
}

/* Runs a command; returns its stdout (malloc'd), checking it exited 0. */
static char *run_env(hangar_sandbox *sb, const char *cmd, const char *const *env)
{
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	char *out;
	int rc;

	o.env = env;
	rc = hangar_sandbox_exec(&r, sb, cmd, &o);
	ck_assert_msg(rc == 0, "exec %s: %s", cmd, hangar_error_last()->message);
	ck_assert_msg(r.exit_code == 0, "exec %s: exit %d: %s", cmd, r.exit_code, r.err.ptr ? r.err.ptr : "");
	out = strdup(r.out.ptr ? r.out.ptr : "");
	hangar_exec_result_dispose(&r);
	return out;
}

static char *run(hangar_sandbox *sb, const char *cmd)
{
	return run_env(sb, cmd, NULL);
}

static void chomp(char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == '\n')
		s[--n] = '\0';
}

static int state_of(hangar_sandbox *sb)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	int rc = hangar_sandbox_get_info(&info, sb);

	return rc ? rc : info.state;
}

/* ---- create, exec, files, PTY ------------------------------------------------------------------ */

START_TEST(t_create_exec)
{
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	cJSON *rec;
	char *out, *dir, cmd[512], *env[2];
	hangar_buf buf = HANGAR_BUF_INIT;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	rec = fake_sandbox(hangar_sandbox_id(sb));
	ck_assert_ptr_nonnull(rec);
	/* Created private: the edge wants the traffic token. */
	ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(rec, "public")));
	cJSON_Delete(rec);

	out = run(sb, "echo hello");
	ck_assert_str_eq(out, "hello\n");
	free(out);

	/* Exactly one login shell per command: a profile in a fresh HOME runs once. */
	snprintf(cmd, sizeof(cmd), "mktemp -d -p %s", scratch_dir);
	dir = run(sb, cmd);
	chomp(dir);
	snprintf(cmd, sizeof(cmd), "printf 'echo x >> \"$HOME/profile-runs\"\\n' > %s/.bash_profile", dir);
	free(run(sb, cmd));
	snprintf(cmd, sizeof(cmd), "HOME=%s", dir);
	env[0] = cmd;
	env[1] = NULL;
	free(run_env(sb, "shopt -q login_shell && echo login", (const char *const *)env));
	{
		char path[600];

		snprintf(path, sizeof(path), "%s/profile-runs", dir);
		ck_assert_int_eq(hangar_sandbox_read_file(&buf, sb, path), 0);
		ck_assert_str_eq(buf.ptr, "x\n");
		hangar_buf_dispose(&buf);
	}

	/* Output is capped, head and tail kept; every byte counted. */
	eo.output_limit = 1000;
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "seq 1 100000", &eo), 0);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_uint_eq(r.out_bytes, 588895);
	ck_assert_uint_lt(r.out.size, 1200);
	ck_assert_ptr_nonnull(strstr(r.out.ptr, "100000\n"));
	hangar_exec_result_dispose(&r);

	/* Files and modes. */
	snprintf(cmd, sizeof(cmd), "%s/a/b.sh", dir);
	ck_assert_int_eq(hangar_sandbox_write_file(sb, cmd, "#!/bin/sh\necho ran\n", 19), 0);
	{
		char c2[2048];

		snprintf(c2, sizeof(c2), "chmod 750 %s && stat -c %%a %s && %s", cmd, cmd, cmd);
		out = run(sb, c2);
		ck_assert_str_eq(out, "750\nran\n");
		free(out);
	}
	ck_assert_int_eq(hangar_sandbox_read_file(&buf, sb, cmd), 0);
	ck_assert_str_eq(buf.ptr, "#!/bin/sh\necho ran\n");
	hangar_buf_dispose(&buf);

	/* Reads above the limit are refused, not cut. */
	set(ctx, "HANGAR_READ_LIMIT_BYTES", "10");
	ck_assert_int_eq(hangar_sandbox_read_file(&buf, sb, cmd), HANGAR_ETOOLARGE);
	set(ctx, "HANGAR_READ_LIMIT_BYTES", NULL);

	free(dir);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

struct collected {
	char data[4096];
	size_t len;
};

static void collect(int stream, const char *data, size_t len, void *payload)
{
	struct collected *c = payload;

	if (c->len + len < sizeof(c->data)) {
		memcpy(c->data + c->len, data, len);
		c->len += len;
		c->data[c->len] = '\0';
	}
}

START_TEST(t_pty)
{
	hangar_process_opts po = HANGAR_PROCESS_OPTS_INIT;
	struct collected c = { "", 0 };
	hangar_process *p = NULL;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	int32_t code = -1;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	po.pty = 1;
	po.cols = 100;
	po.rows = 30;
	po.on_output = collect;
	po.payload = &c;
	ck_assert_int_eq(hangar_process_start(&p, sb, "tty; stty size", &po), 0);
	ck_assert_int_eq(hangar_process_wait(&code, p, 20000), 0);
	ck_assert_int_eq(code, 0);
	ck_assert_msg(strstr(c.data, "/dev/pts/") && strstr(c.data, "30 100"), "pty output: %s", c.data);
	hangar_process_unref(p);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- pause and resume -------------------------------------------------------------------------- */

static long counter(hangar_sandbox *sb, const char *path)
{
	hangar_buf b = HANGAR_BUF_INIT;
	long v = -1;

	if (hangar_sandbox_read_file(&b, sb, path) == 0 && b.size)
		v = strtol(b.ptr, NULL, 10);
	hangar_buf_dispose(&b);
	return v;
}

/* Waits until the counter file passes min; returns its value. */
static long wait_counter(hangar_sandbox *sb, const char *path, long min)
{
	int64_t deadline = clock_mono_ms() + 15000;
	long v;

	while ((v = counter(sb, path)) <= min)
		ck_assert_msg(clock_mono_ms() < deadline, "the counter stayed at %ld", v);
	return v;
}

START_TEST(t_pause_resume)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char *dir, cmd[1200], path[300];
	long before, after;
	cJSON *rec;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	snprintf(cmd, sizeof(cmd), "mktemp -d -p %s", scratch_dir);
	dir = run(sb, cmd);
	chomp(dir);
	snprintf(path, sizeof(path), "%s/n", dir);
	snprintf(cmd, sizeof(cmd),
		 "nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > %s.t && mv %s.t %s; sleep 0.05; done' "
		 ">/dev/null 2>&1 &",
		 path, path, path);
	free(run(sb, cmd));
	before = wait_counter(sb, path, 2);

	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(state_of(sb), HANGAR_SANDBOX_PAUSED);
	rec = fake_sandbox(hangar_sandbox_id(sb));
	ck_assert_str_eq(cJSON_GetObjectItem(rec, "state")->valuestring, "paused");
	cJSON_Delete(rec);
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "true", NULL), HANGAR_EPAUSED);
	/* Pausing twice is not an error (E2B answers 409). */
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);

	/* A new context attaches without resuming it. */
	{
		hangar_ctx *ctx2 = new_ctx();
		hangar_sandbox *sb2 = NULL;

		ck_assert_int_eq(hangar_sandbox_attach(&sb2, ctx2, "e2b", hangar_sandbox_id(sb)), 0);
		ck_assert_int_eq(state_of(sb2), HANGAR_SANDBOX_PAUSED);
		hangar_sandbox_unref(sb2);
		hangar_ctx_unref(ctx2);
	}
	rec = fake_sandbox(hangar_sandbox_id(sb));
	ck_assert_str_eq(cJSON_GetObjectItem(rec, "state")->valuestring, "paused");
	cJSON_Delete(rec);

	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_int_eq(state_of(sb), HANGAR_SANDBOX_RUNNING);
	after = counter(sb, path);
	ck_assert_int_ge(after, before);
	/* The same process goes on counting. */
	wait_counter(sb, path, after + 2);

	/* A filesystem-only pause: E2B has it; Cube never, and is never downgraded. */
	if (!strcmp(flavour, "cube")) {
		ck_assert_int_eq(hangar_sandbox_pause_filesystem(sb), HANGAR_EUNSUPPORTED);
		ck_assert_int_eq(state_of(sb), HANGAR_SANDBOX_RUNNING);
		ck_assert(!(hangar_provider_capabilities(hangar_sandbox_provider(sb)) & HANGAR_CAP_FS_PAUSE));
	} else {
		ck_assert(hangar_provider_capabilities(hangar_sandbox_provider(sb)) & HANGAR_CAP_FS_PAUSE);
		ck_assert_int_eq(hangar_sandbox_pause_filesystem(sb), 0);
		ck_assert_int_eq(state_of(sb), HANGAR_SANDBOX_PAUSED);
		ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
		free(run(sb, "true"));
	}
	free(dir);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- a control-plane restart ------------------------------------------------------------------------ */

START_TEST(t_restart)
{
	hangar_ctx *ctx, *ctx2;
	hangar_sandbox *sb, *sb2 = NULL;
	char id[80], *out;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);

	/* Nothing of the old context is left but the state store. */
	ctx2 = new_ctx();
	ck_assert_int_eq(hangar_sandbox_attach(&sb2, ctx2, NULL, id), 0);
	out = run(sb2, "echo again");
	ck_assert_str_eq(out, "again\n");
	free(out);
	hangar_sandbox_unref(sb2);
	hangar_ctx_unref(ctx2);

	/* Cube hands the traffic token out only at create: without the key that sealed it, nothing works. */
	if (!strcmp(flavour, "cube")) {
		ctx2 = new_ctx_key(API_KEY, "another secret key, not the one that sealed it");
		ck_assert_int_ne(hangar_sandbox_attach(&sb2, ctx2, "e2b", id), 0);
		hangar_ctx_unref(ctx2);
	}
	ctx2 = new_ctx();
	ck_assert_int_eq(hangar_sandbox_attach(&sb2, ctx2, "e2b", id), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb2), 0);
	hangar_sandbox_unref(sb2);
	hangar_ctx_unref(ctx2);
}
END_TEST

/* ---- timeouts, kill ---------------------------------------------------------------------------- */

START_TEST(t_timeout_kill)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb, *sb2, *other = NULL;
	int64_t deadline;
	char id[80];

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 600);
	sb2 = create(ctx, 600);
	ck_assert_int_eq(hangar_sandbox_set_timeout(sb, 1), 0);
	deadline = clock_mono_ms() + 20000;
	while (state_of(sb) != HANGAR_EGONE)
		ck_assert_msg(clock_mono_ms() < deadline, "the sandbox outlived its timeout");
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "true", NULL), HANGAR_EGONE);
	ck_assert_ptr_null(fake_sandbox(hangar_sandbox_id(sb)));

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb2));
	ck_assert_int_eq(hangar_sandbox_kill(sb2), 0);
	ck_assert_ptr_null(fake_sandbox(id));
	ck_assert_int_eq(hangar_sandbox_kill(sb2), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&other, ctx, "e2b", id), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&other, ctx, "e2b", "no/such id"), HANGAR_EINVAL);
	hangar_sandbox_unref(sb);
	hangar_sandbox_unref(sb2);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- list ------------------------------------------------------------------------------------------ */

struct seen {
	int n, found;
	const char *want[8];
};

static int count_cb(const hangar_sandbox_info *info, void *payload)
{
	struct seen *s = payload;

	s->n++;
	ck_assert_str_eq(info->provider, "e2b");
	for (int i = 0; i < 8 && s->want[i]; i++)
		if (!strcmp(s->want[i], info->id))
			s->found++;
	return 0;
}

START_TEST(t_list)
{
	hangar_sandbox *sb[5];
	struct seen s = { 0 };
	hangar_ctx *ctx;
	int n = 5;

	fake_start(flavours[_i], getenv("FAKE_E2B_PAGE_ARG"));
	ctx = new_ctx();
	for (int i = 0; i < n; i++) {
		sb[i] = create(ctx, 120);
		s.want[i] = hangar_sandbox_id(sb[i]);
	}
	ck_assert_int_eq(hangar_sandbox_pause(sb[0]), 0);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "e2b", count_cb, &s), 0);
	ck_assert_int_eq(s.n, fake_count());
	ck_assert_int_eq(s.found, n);

	/* The list fails whole rather than coming back short. */
	s.n = s.found = 0;
	fault("{\"route\":\"list\",\"status\":503,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_list(ctx, "e2b", count_cb, &s), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(s.n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(hangar_sandbox_kill(sb[i]), 0);
		hangar_sandbox_unref(sb[i]);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- snapshots, templates ------------------------------------------------------------------------ */

START_TEST(t_snapshot)
{
	hangar_buf snap = HANGAR_BUF_INIT;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb, *clone = NULL;
	char *out, cmd[160];

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	snprintf(cmd, sizeof(cmd), "echo kept > %s/snapshot-marker-$PPID || true", scratch_dir);
	free(run(sb, cmd));
	ck_assert_int_eq(hangar_sandbox_snapshot(&snap, sb, "snap-test"), 0);
	ck_assert_uint_gt(snap.size, 0);
	/* It goes on running after. */
	out = run(sb, "echo alive");
	ck_assert_str_eq(out, "alive\n");
	free(out);
	o.provider = "e2b";
	o.template_id = snap.ptr;
	ck_assert_msg(hangar_sandbox_create(&clone, ctx, &o) == 0, "create from snapshot: %s",
		      hangar_error_last()->message);
	ck_assert_int_eq(hangar_sandbox_kill(clone), 0);
	hangar_sandbox_unref(clone);
	hangar_buf_dispose(&snap);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

struct progress {
	int calls, ready;
};

static void on_progress(const char *status, const char *message, void *payload)
{
	struct progress *p = payload;

	p->calls++;
	if (!strcmp(status, "ready"))
		p->ready++;
}

static int find_template(const hangar_template_info *info, void *payload)
{
	return !strcmp(info->template_id, payload) ? 1 : 0;
}

START_TEST(t_templates)
{
	hangar_template_build_opts o = HANGAR_TEMPLATE_BUILD_OPTS_INIT;
	hangar_buf id = HANGAR_BUF_INIT;
	struct progress p = { 0, 0 };
	hangar_ctx *ctx;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	o.name = "hangar-test";
	o.image = "registry.example/hangar-test:1";
	o.cpu_millis = 2000;
	o.memory_mb = 1024;
	o.disk_mb = 2048;
	o.progress = on_progress;
	o.payload = &p;
	ck_assert_msg(hangar_template_build(&id, ctx, "e2b", &o) == 0, "build: %s", hangar_error_last()->message);
	ck_assert_uint_gt(id.size, 0);
	ck_assert_int_gt(p.calls, 0);
	ck_assert_int_eq(hangar_template_list(ctx, "e2b", find_template, id.ptr), 1);
	hangar_buf_dispose(&id);
	o.image = NULL;
	ck_assert_int_eq(hangar_template_build(&id, ctx, "e2b", &o), HANGAR_EINVAL);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- forks ------------------------------------------------------------------------------------------ */

struct forks {
	int n, failed;
	hangar_sandbox *sb[8];
	int32_t errors[8];
	char message[256];
};

static void on_fork(const hangar_fork_result *res, void *payload)
{
	struct forks *f = payload;

	ck_assert_uint_eq(res->index, (uint32_t)(f->n + f->failed));
	if (res->error) {
		ck_assert_ptr_null(res->sandbox);
		f->errors[f->failed++] = res->error;
		snprintf(f->message, sizeof(f->message), "%s", res->message);
	} else {
		ck_assert_ptr_nonnull(res->sandbox);
		ck_assert_str_eq(res->message, "");
		f->sb[f->n++] = hangar_sandbox_ref(res->sandbox);
	}
}

START_TEST(t_fork)
{
	struct forks f = { 0 };
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	if (strcmp(flavour, "cloud") != 0) {
		/* Cube has no fork; the selfhosted fake models a cluster without one. */
		ck_assert(!(hangar_provider_capabilities(hangar_sandbox_provider(sb)) & HANGAR_CAP_FORK));
		ck_assert_int_eq(hangar_sandbox_fork(sb, 1, on_fork, &f), HANGAR_EUNSUPPORTED);
		ck_assert_int_eq(f.n + f.failed, 0);
		ck_assert_int_eq(fake_count(), 1);
		goto out;
	}
	ck_assert(hangar_provider_capabilities(hangar_sandbox_provider(sb)) & HANGAR_CAP_FORK);
	ck_assert_int_eq(hangar_sandbox_fork(sb, 0, on_fork, &f), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_fork(sb, 101, on_fork, &f), HANGAR_EINVAL);

	/* Three forks, the first of which the platform fails: two sandboxes and one error. */
	fault("{\"route\":\"fork\",\"fork_errors\":1}");
	ck_assert_msg(hangar_sandbox_fork(sb, 3, on_fork, &f) == 0, "fork: %s", hangar_error_last()->message);
	ck_assert_int_eq(f.failed, 1);
	ck_assert_int_eq(f.errors[0], HANGAR_ECREATE);
	ck_assert_msg(strstr(f.message, "this fork failed"), "%s", f.message);
	ck_assert_int_eq(f.n, 2);
	ck_assert_int_eq(fake_count(), 3);
	for (int i = 0; i < f.n; i++) {
		const char *id = hangar_sandbox_id(f.sb[i]);
		hangar_buf sealed = HANGAR_BUF_INIT;
		hangar_ctx *ctx2;
		hangar_sandbox *again = NULL;
		cJSON *rec = fake_sandbox(id);
		char *out;

		ck_assert_str_ne(id, hangar_sandbox_id(sb));
		/* Private like a created sandbox, its traffic token sealed like a created one's. */
		ck_assert_ptr_nonnull(rec);
		ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(rec, "public")));
		ck_assert_int_eq(hangar_sys_secret_get(&sealed, ctx, id, "traffic-token"), 0);
		ck_assert_str_eq(sealed.ptr, cJSON_GetObjectItem(rec, "traffic_token")->valuestring);
		hangar_buf_dispose(&sealed);
		cJSON_Delete(rec);
		out = run(f.sb[i], "echo forked");
		ck_assert_str_eq(out, "forked\n");
		free(out);
		/* Recorded in the store: a new context finds it without being told the provider. */
		ctx2 = new_ctx();
		ck_assert_int_eq(hangar_sandbox_attach(&again, ctx2, NULL, id), 0);
		ck_assert_int_eq(hangar_sandbox_kill(again), 0);
		hangar_sandbox_unref(again);
		hangar_ctx_unref(ctx2);
		hangar_sandbox_unref(f.sb[i]);
	}
	ck_assert_int_eq(fake_count(), 1);

	/* A paused sandbox is not forked, and nothing is reported. */
	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(hangar_sandbox_fork(sb, 1, on_fork, &f), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_error_last()->http_status, 409);
	/* Nor is one the control plane cannot fork right now. */
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	fault("{\"route\":\"fork\",\"status\":503,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_fork(sb, 2, on_fork, &f), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(f.n + f.failed, 0);
	ck_assert_int_eq(fake_count(), 1);
out:
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- metrics and logs ------------------------------------------------------------------------------- */

static int on_metric(const hangar_sandbox_metric *m, void *payload)
{
	int *n = payload;

	ck_assert_uint_ge(m->size, sizeof(*m));
	ck_assert_int_gt(m->timestamp_us, 1600000000LL * 1000000);
	ck_assert_uint_gt(m->cpu_count, 0);
	ck_assert_uint_gt(m->mem_total_bytes, 0);
	ck_assert(m->cpu_used_pct >= 0);
	(*n)++;
	return 0;
}

static int on_log_entry(const hangar_sandbox_log_entry *e, void *payload)
{
	struct collected *c = payload;
	size_t n = strlen(e->message);

	ck_assert_ptr_nonnull(e->level);
	ck_assert_int_gt(e->timestamp_us, 0);
	if (c->len + n + 1 < sizeof(c->data)) {
		memcpy(c->data + c->len, e->message, n);
		c->len += n;
		c->data[c->len++] = '\n';
		c->data[c->len] = '\0';
	}
	return 0;
}

static int stop_at_first(const hangar_sandbox_log_entry *e, void *payload)
{
	(*(int *)payload)++;
	return 7;
}

/* No address that would reach nothing: the port's host wants the traffic token, which stays here. */
START_TEST(t_expose_port)
{
	hangar_buf addr = HANGAR_BUF_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	ck_assert_int_eq(hangar_sandbox_expose_port(&addr, sb, 8000), HANGAR_EUNSUPPORTED);
	ck_assert_msg(strstr(hangar_error_last()->message, "traffic token") &&
			      strstr(hangar_error_last()->message, hangar_sandbox_id(sb)),
		      "message: %s", hangar_error_last()->message);
	ck_assert_ptr_null(addr.ptr);
	ck_assert_int_eq(hangar_sandbox_expose_port(&addr, sb, 0), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(t_metrics_logs)
{
	struct collected c = { "", 0 };
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	int n = 0;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	if (!strcmp(flavour, "cube")) {
		/* CubeAPI has no metrics route: said so, never an empty list. */
		ck_assert_int_eq(hangar_sandbox_metrics(sb, on_metric, &n), HANGAR_EUNSUPPORTED);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "metrics"));
	} else {
		ck_assert_msg(hangar_sandbox_metrics(sb, on_metric, &n) == 0, "metrics: %s",
			      hangar_error_last()->message);
		ck_assert_int_ge(n, 1);
	}
	ck_assert_msg(hangar_sandbox_logs(sb, on_log_entry, &c) == 0, "logs: %s", hangar_error_last()->message);
	ck_assert_msg(strstr(c.data, "sandbox created"), "logs: %s", c.data);
	n = 0;
	ck_assert_int_eq(hangar_sandbox_logs(sb, stop_at_first, &n), 7);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(hangar_sandbox_logs(sb, NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	/* A dead sandbox's logs (E2B keeps them a while) or its gone-ness; never a crash. */
	n = hangar_sandbox_metrics(sb, on_metric, &n);
	ck_assert(n == HANGAR_EGONE || n == HANGAR_EUNSUPPORTED);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- templates named by alias ---------------------------------------------------------------------- */

START_TEST(t_alias)
{
	hangar_template_build_opts bo = HANGAR_TEMPLATE_BUILD_OPTS_INIT;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_buf id = HANGAR_BUF_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;
	cJSON *rec;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	bo.name = "hangar-alias-test";
	bo.image = "registry.example/hangar-alias-test:1";
	ck_assert_msg(hangar_template_build(&id, ctx, "e2b", &bo) == 0, "build: %s", hangar_error_last()->message);
	ck_assert_str_ne(id.ptr, "hangar-alias-test");
	o.provider = "e2b";
	o.template_id = "hangar-alias-test";
	if (!strcmp(flavour, "cube")) {
		/* The create looks the alias up first: a failing lookup fails it, and nothing is created. */
		fault("{\"route\":\"template\",\"status\":503,\"count\":1}");
		ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
		ck_assert_int_eq(fake_count(), 0);
	} else {
		/* E2B's create takes the alias itself: no lookup that could fail. */
		fault("{\"route\":\"template\",\"status\":503,\"count\":1}");
	}
	ck_assert_msg(hangar_sandbox_create(&sb, ctx, &o) == 0, "create by alias: %s", hangar_error_last()->message);
	rec = fake_sandbox(hangar_sandbox_id(sb));
	ck_assert_str_eq(cJSON_GetObjectItem(rec, "template_id")->valuestring, id.ptr);
	cJSON_Delete(rec);
	free(run(sb, "true"));
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	sb = NULL;
	ck_assert_int_eq(fake_http("DELETE", "/_fake/faults", NULL, NULL) / 100, 2);

	/* An alias nobody has: the create fails as for a missing template. */
	o.template_id = "no-such-alias";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECREATE);
	if (!strcmp(flavour, "cube"))
		ck_assert_msg(strstr(hangar_error_last()->message, "no template has the alias no-such-alias"), "%s",
			      hangar_error_last()->message);
	ck_assert_int_eq(fake_count(), 0);
	hangar_buf_dispose(&id);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- list pages ------------------------------------------------------------------------------------ */

struct once {
	int n, bad;
	char ids[8][80];
	int seen[8];
};

static int once_cb(const hangar_sandbox_info *info, void *payload)
{
	struct once *o = payload;
	int known = 0;

	o->n++;
	for (int i = 0; i < 8; i++)
		if (!strcmp(o->ids[i], info->id)) {
			o->seen[i]++;
			known = 1;
		}
	o->bad += !known;
	return 0;
}

START_TEST(t_list_pages)
{
	hangar_sandbox *sb[5];
	struct once o;
	hangar_ctx *ctx;

	/* E2B pages its list; every page of this fake holds two sandboxes, whatever the limit asked. */
	fake_start(flavours[_i], "--page-size 2");
	ctx = new_ctx();
	memset(&o, 0, sizeof(o));
	for (int i = 0; i < 5; i++) {
		sb[i] = create(ctx, 120);
		snprintf(o.ids[i], sizeof(o.ids[i]), "%s", hangar_sandbox_id(sb[i]));
	}
	ck_assert_int_eq(hangar_sandbox_pause(sb[2]), 0);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "e2b", once_cb, &o), 0);
	ck_assert_int_eq(o.n, 5);
	ck_assert_int_eq(o.bad, 0);
	for (int i = 0; i < 5; i++)
		ck_assert_msg(o.seen[i] == 1, "%s listed %d times", o.ids[i], o.seen[i]);

	/* A page token that comes back again is an error, not a loop, and nothing is reported. */
	memset(o.seen, 0, sizeof(o.seen));
	o.n = 0;
	fault("{\"route\":\"list\",\"repeat_token\":true,\"count\":3}");
	ck_assert_int_eq(hangar_sandbox_list(ctx, "e2b", once_cb, &o), HANGAR_EPROTOCOL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "page token"));
	ck_assert_int_eq(o.n, 0);
	ck_assert_int_eq(fake_http("DELETE", "/_fake/faults", NULL, NULL) / 100, 2);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(hangar_sandbox_kill(sb[i]), 0);
		hangar_sandbox_unref(sb[i]);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- security ------------------------------------------------------------------------------------ */

START_TEST(t_cube_unauthenticated)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;
	char *out;

	fake_start("cube", NULL);
	ctx = new_ctx();
	set(ctx, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", NULL);
	o.provider = "e2b";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD"));
	ck_assert_ptr_null(sb);
	/* And it was killed. */
	ck_assert_int_eq(fake_count(), 0);
	hangar_ctx_unref(ctx);

	ctx = new_ctx(); /* with the flag */
	sb = create(ctx, 120);
	out = run(sb, "echo through-the-edge");
	ck_assert_str_eq(out, "through-the-edge\n");
	free(out);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);

	/*
	 * A sandbox the platform made public anyway (no traffic token) has
	 * neither token: refused and killed, whatever ALLOW_UNAUTHENTICATED_ENVD says.
	 */
	sb = NULL;
	fault("{\"route\":\"create\",\"public\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EREFUSED);
	ck_assert_msg(strstr(hangar_error_last()->message, "neither an envd access token nor a traffic token"), "%s",
		      hangar_error_last()->message);
	ck_assert_ptr_null(sb);
	ck_assert_int_eq(fake_count(), 0);

	/* No secret key: the traffic token cannot be kept, so the sandbox is not kept either. */
	set(ctx, "HANGAR_SECRET_KEY", NULL);
	sb = NULL;
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_SECRET_KEY"));
	ck_assert_int_eq(fake_count(), 0);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The id of the fake's only live sandbox (static), checking there is exactly one. */
static const char *only_sandbox(void)
{
	static char id[80];
	char *body = NULL;
	cJSON *all;

	ck_assert_int_eq(fake_http("GET", "/_fake/sandboxes", NULL, &body), 200);
	all = cJSON_Parse(body);
	free(body);
	ck_assert_int_eq(cJSON_GetArraySize(all), 1);
	snprintf(id, sizeof(id), "%s", cJSON_GetObjectItem(all->child, "id")->valuestring);
	cJSON_Delete(all);
	return id;
}

/*
 * A refused sandbox must die even when the platform is busy: CubeAPI answers
 * a DELETE with 503 and Retry-After while the sandbox's lifecycle lock is
 * held. When the kill still fails, the caller hears that the sandbox may be
 * running, with its id.
 */
START_TEST(t_refused_kill_retries)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;
	const char *id;
	int64_t t0;

	fake_start("cube", NULL);
	ctx = new_ctx();
	o.provider = "e2b";

	/* Busy twice, then the kill goes through, after the waits asked for. */
	fault("{\"route\":\"create\",\"public\":true,\"count\":1}");
	fault("{\"route\":\"kill\",\"status\":503,\"retry_after\":1,\"count\":2}");
	t0 = clock_mono_ms();
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EREFUSED);
	ck_assert_int_ge(clock_mono_ms() - t0, 2000);
	ck_assert_msg(strstr(hangar_error_last()->message, "neither an envd access token nor a traffic token"), "%s",
		      hangar_error_last()->message);
	ck_assert_msg(!strstr(hangar_error_last()->message, "may still be running"), "%s",
		      hangar_error_last()->message);
	ck_assert_ptr_null(sb);
	ck_assert_int_eq(fake_count(), 0);

	/* Asked to wait past the deadline: given up at once, and said so with the id. */
	fault("{\"route\":\"create\",\"public\":true,\"count\":1}");
	fault("{\"route\":\"kill\",\"status\":503,\"retry_after\":3600,\"count\":1}");
	t0 = clock_mono_ms();
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EREFUSED);
	ck_assert_int_lt(clock_mono_ms() - t0, 8000);
	ck_assert_ptr_null(sb);
	id = only_sandbox();
	ck_assert_msg(strstr(hangar_error_last()->message, "may still be running"), "%s", hangar_error_last()->message);
	ck_assert_msg(strstr(hangar_error_last()->message, id), "%s does not name %s", hangar_error_last()->message,
		      id);
	ck_assert_msg(strstr(hangar_error_last()->message, "neither an envd access token"), "%s",
		      hangar_error_last()->message);
	ck_assert_int_eq(hangar_error_last()->code, HANGAR_EREFUSED);
	{
		char path[128];

		snprintf(path, sizeof(path), "/sandboxes/%s", id);
		ck_assert_int_eq(fake_http("DELETE", path, NULL, NULL), 204);
	}

	/* A DELETE route that does not exist (an empty 404) is no proof the sandbox is gone. */
	fault("{\"route\":\"create\",\"public\":true,\"count\":1}");
	fault("{\"route\":\"kill\",\"no_route\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EREFUSED);
	id = only_sandbox();
	ck_assert_msg(strstr(hangar_error_last()->message, "may still be running"), "%s", hangar_error_last()->message);
	ck_assert_msg(strstr(hangar_error_last()->message, id), "%s", hangar_error_last()->message);
	hangar_ctx_unref(ctx);
}
END_TEST

/* An unknown route (404 without a JSON body) says nothing about the sandbox: never "gone". */
START_TEST(t_missing_route_is_not_gone)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	const char *id;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	id = only_sandbox();
	fault("{\"route\":\"get\",\"no_route\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EUNSUPPORTED);
	ck_assert_int_eq(hangar_error_last()->http_status, 404);
	ck_assert_msg(strstr(hangar_error_last()->message, "no such route"), "%s", hangar_error_last()->message);
	fault("{\"route\":\"kill\",\"no_route\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EUNSUPPORTED);
	ck_assert_str_eq(only_sandbox(), id);
	/* A sandbox that really is gone still is. */
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
	ck_assert_int_eq(fake_count(), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A create that reached the platform and got no answer may have made a
 * sandbox. It is found by the id the create put in its metadata, and killed,
 * before the caller hears of the failure.
 */
START_TEST(t_unanswered_create_leaks_nothing)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	o.provider = "e2b";

	/* The connection closes after the sandbox was made. */
	fault("{\"route\":\"create\",\"drop\":true,\"after\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_ptr_null(sb);
	ck_assert_str_eq(hangar_error_last()->provider_code, "create_orphan_killed");
	ck_assert_msg(strstr(hangar_error_last()->message, "killed"), "%s", hangar_error_last()->message);
	ck_assert_int_eq(fake_count(), 0);

	/* The connection closes before anything was done: nothing to find, nothing killed. */
	fault("{\"route\":\"create\",\"drop\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_str_eq(hangar_error_last()->provider_code, "");
	ck_assert_int_eq(fake_count(), 0);

	/* The answer comes after our deadline: the sandbox exists by then, and is killed. */
	hangar_ctx_unref(ctx);
	ctx = new_ctx();
	set(ctx, "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", "2");
	fault("{\"route\":\"create\",\"delay_ms\":5000,\"after\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_str_eq(hangar_error_last()->provider_code, "create_orphan_killed");
	ck_assert_int_eq(fake_count(), 0);

	/* It was made, and killing it fails: the caller is told it may be running, with its id. */
	fault("{\"route\":\"create\",\"drop\":true,\"after\":true,\"count\":1}");
	fault("{\"route\":\"kill\",\"status\":401,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_str_eq(hangar_error_last()->provider_code, "create_orphan_leaked");
	ck_assert_msg(strstr(hangar_error_last()->message, only_sandbox()), "%s", hangar_error_last()->message);
	hangar_ctx_unref(ctx);
}
END_TEST

struct logs {
	char text[1 << 16];
	size_t len;
};

static void on_log(int level, const char *message, void *payload)
{
	struct logs *l = payload;
	size_t n = strlen(message);

	if (l->len + n + 2 < sizeof(l->text)) {
		memcpy(l->text + l->len, message, n);
		l->len += n;
		l->text[l->len++] = '\n';
		l->text[l->len] = '\0';
	}
}

static void no_key_in(const char *what, const char *s)
{
	ck_assert_msg(!strstr(s, API_KEY), "the API key is in %s", what);
	ck_assert_msg(!strstr(s, "e2b_wrong_key_9876543210"), "the wrong API key is in %s", what);
}

START_TEST(t_key_never_shown)
{
	static struct logs logs;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	hangar_ctx_set_log(ctx, HANGAR_LOG_DEBUG, on_log, &logs);
	sb = create(ctx, 120);
	free(run(sb, "echo hi"));
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
	no_key_in("an error message", hangar_error_last()->message);
	hangar_sandbox_unref(sb);
	sb = NULL;
	fault("{\"route\":\"create\",\"status\":503,\"count\":1}");
	o.provider = "e2b";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	no_key_in("an error message", hangar_error_last()->message);
	hangar_ctx_unref(ctx);

	/* A rejected key. */
	if (strcmp(flavour, "cube") != 0) {
		ctx = new_ctx_key("e2b_wrong_key_9876543210", SECRET_KEY);
		hangar_ctx_set_log(ctx, HANGAR_LOG_DEBUG, on_log, &logs);
		ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
		ck_assert_int_eq(hangar_error_last()->http_status, 401);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "rejected the key"));
		no_key_in("an error message", hangar_error_last()->message);
		hangar_ctx_unref(ctx);
	}
	ck_assert_uint_gt(logs.len, 0);
	no_key_in("the log", logs.text);
}
END_TEST

/* ---- faults --------------------------------------------------------------------------------------- */

/*
 * An answer of the control plane that is not strict JSON (a member said
 * twice, the first time with another value; a second value after the
 * first) is a protocol error naming the call, never read as cJSON would.
 */
START_TEST(t_answers_not_strict_json)
{
	const char *const mangles[] = { "duplicate", "trailing" };
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	sb = create(ctx, 120);
	for (size_t m = 0; m < 2; m++) {
		char f[128];
		const char *msg;

		snprintf(f, sizeof(f), "{\"route\":\"get\",\"mangle\":\"%s\",\"count\":1}", mangles[m]);
		fault(f);
		ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EPROTOCOL);
		msg = hangar_error_last()->message;
		ck_assert_msg(strstr(msg, "control plane's answer") && strstr(msg, "not strict JSON"), "%s", msg);
		ck_assert_msg(strstr(msg, m == 0 ? "duplicate member" : "follows the value"), "%s", msg);
	}
	/* The next, honest answer is read as usual. */
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(t_faults)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;

	fake_start(flavours[_i], NULL);
	ctx = new_ctx();
	o.provider = "e2b";

	fault("{\"route\":\"create\",\"status\":429,\"count\":1,\"retry_after\":7}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECAPACITY);
	ck_assert_int_eq(hangar_error_last()->http_status, 429);
	ck_assert_msg(strstr(hangar_error_last()->message, "retry after 7 s"), "%s", hangar_error_last()->message);
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 7);
	/* A body's words are no Retry-After: only the header sets the field. */
	fault("{\"route\":\"create\",\"status\":429,\"count\":1,\"message\":\"rate limited; retry after 30 s\"}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECAPACITY);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "retry after 30 s"));
	ck_assert_int_eq(hangar_error_last()->retry_after_s, 0);

	fault("{\"route\":\"create\",\"status\":503,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	fault("{\"route\":\"create\",\"status\":502,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	fault("{\"route\":\"create\",\"status\":504,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	fault("{\"route\":\"create\",\"drop\":true,\"count\":1}");
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(fake_count(), 0);

	/* During an outage a sandbox is unreachable, never reported gone. */
	sb = create(ctx, 120);
	fault("{\"route\":\"get\",\"status\":503,\"count\":2}");
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EUNAVAILABLE);
	/* Twice: curl sends a request again, once, on a reused connection that died. */
	fault("{\"route\":\"get\",\"drop\":true,\"count\":2}");
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(fake_http("DELETE", "/_fake/faults", NULL, NULL) / 100, 2);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- settings ----------------------------------------------------------------------------------- */

START_TEST(t_settings)
{
	hangar_ctx *ctx = NULL;
	hangar_provider *p = NULL;

	/* cloud and selfhosted want a key; cube wants the API URL. */
	ck_assert_int_eq(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), 0);
	set(ctx, "HANGAR_STATE_DIR", state_dir);
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "e2b"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_E2B_API_KEY"));
	/* Not in use yet: another flavour may still be chosen. */
	set(ctx, "HANGAR_E2B_FLAVOR", "cube");
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "e2b"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_E2B_API_URL"));
	set(ctx, "HANGAR_E2B_API_URL", "http://127.0.0.1:9");
	set(ctx, "HANGAR_E2B_FLAVOR", "selfhosted");
	set(ctx, "HANGAR_E2B_FLAVOR", "cube");
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "e2b"), 0);
	ck_assert(!(hangar_provider_capabilities(p) & HANGAR_CAP_FS_PAUSE));
	ck_assert(!(hangar_provider_capabilities(p) & HANGAR_CAP_FORK));
	ck_assert(hangar_provider_capabilities(p) & HANGAR_CAP_PAUSE);
	ck_assert(hangar_provider_capabilities(p) & HANGAR_CAP_HOT_RESUME);
	hangar_provider_unref(p);
	/* In use now. */
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_E2B_FLAVOR", "cloud"), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_E2B_FLAVOR"));
	/* An unreachable control plane: status and list fail, they never say "gone". */
	{
		hangar_sandbox *sb = NULL;
		struct seen s = { 0 };

		ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "e2b", "abc123"), HANGAR_EUNAVAILABLE);
		ck_assert_int_eq(hangar_sandbox_list(ctx, "e2b", count_cb, &s), HANGAR_EUNAVAILABLE);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("e2b");
	TCase *tc = tcase_create("e2b");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, t_settings);
	tcase_add_loop_test(tc, t_create_exec, 0, 3);
	tcase_add_loop_test(tc, t_pty, 0, 3);
	tcase_add_loop_test(tc, t_pause_resume, 0, 3);
	tcase_add_loop_test(tc, t_restart, 0, 3);
	tcase_add_loop_test(tc, t_timeout_kill, 0, 3);
	tcase_add_loop_test(tc, t_list, 0, 3);
	tcase_add_loop_test(tc, t_snapshot, 0, 3);
	tcase_add_loop_test(tc, t_templates, 0, 3);
	tcase_add_loop_test(tc, t_fork, 0, 3);
	tcase_add_loop_test(tc, t_metrics_logs, 0, 3);
	tcase_add_loop_test(tc, t_expose_port, 0, 3);
	tcase_add_loop_test(tc, t_alias, 0, 3);
	tcase_add_loop_test(tc, t_list_pages, 0, 2);
	tcase_add_test(tc, t_cube_unauthenticated);
	tcase_add_loop_test(tc, t_key_never_shown, 0, 3);
	tcase_add_loop_test(tc, t_faults, 0, 3);
	tcase_add_loop_test(tc, t_answers_not_strict_json, 0, 3);
	tcase_add_test(tc, t_refused_kill_retries);
	tcase_add_loop_test(tc, t_missing_route_is_not_gone, 0, 3);
	tcase_add_loop_test(tc, t_unanswered_create_leaks_nothing, 0, 3);
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
