/*
 * Checkpoints end to end: capture, seal, store, index, restore, through the
 * public API, on real sandboxes: the local provider (bubblewrap jails) and
 * the e2b fakes (cloud and cube flavours, each sandbox a real hangar-envd
 * process), each through hangar-envd's archive endpoint (native) and the tar
 * fallback (HANGAR_CHECKPOINT_NO_NATIVE / HANGAR_RESTORE_NO_NATIVE).
 *
 * A hostile checkpoint (validly sealed, with a bad member) is forged with the
 * library's internals (seal, blob store, index) to show that the restore
 * checks members itself.
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
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hangar/hangar.h>
#include <sodium.h>
#include <sqlite3.h>

#include "checkpoint/blobstore.h"
#include "checkpoint/seal.h"
#include "helpers.h"
#include "leftovers.h"
#include "store/store.h"
#include "clock.h"

#define API_KEY "e2b_test_0123456789abcdef0123456789abcdef"
#define SECRET_KEY "checkpoint test key: long and random enough Xq7Lp2"
#define OTHER_KEY "another deployment's key, 9fJ3kQ"
#define S3_SECRET "t3st-s3cret-Zq81vLmN0pW2xY4kR7sT9uV"

enum { T_LOCAL, T_CLOUD, T_CUBE, T_COUNT };
static const char *const target_names[] = { "local", "cloud", "cube" };

static char *dir;            /* everything of one test */
static char state_dir[4200];
static pid_t fake_pid;
static int api_port, edge_port;
static int target, fallback;
static char logged[1 << 18];

static void log_fn(int level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	strncat(logged, msg, sizeof(logged) - strlen(logged) - 2);
	strcat(logged, "\n");
}

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

/* ---- contexts and sandboxes ---------------------------------------------------------- */

static void set(hangar_ctx *ctx, const char *name, const char *value)
{
	int rc = hangar_ctx_set(ctx, name, value);

	ck_assert_msg(rc == 0, "%s: %s", name, hangar_error_last()->message);
}

/* A context for target t (the fake of an e2b target is started once per test). */
static hangar_ctx *ctx_for(int t, const char *key)
{
	hangar_ctx *ctx = NULL;
	char url[64];

	ck_assert_int_eq(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), 0);
	hangar_ctx_set_log(ctx, HANGAR_LOG_DEBUG, log_fn, NULL);
	set(ctx, "HANGAR_STATE_DIR", state_dir);
	set(ctx, "HANGAR_SECRET_KEY", key ? key : SECRET_KEY);
	set(ctx, "HANGAR_CHECKPOINT_TIMEOUT_SECONDS", "300");
	if (getenv("HANGAR_ENVD_PATH"))
		set(ctx, "HANGAR_ENVD_PATH", getenv("HANGAR_ENVD_PATH"));
	if (getenv("HANGAR_JAIL_PATH"))
		set(ctx, "HANGAR_JAIL_PATH", getenv("HANGAR_JAIL_PATH"));
	if (t != T_LOCAL) {
		if (!fake_pid)
			fake_start(t == T_CUBE ? "cube" : "cloud");
		set(ctx, "HANGAR_E2B_FLAVOR", t == T_CUBE ? "cube" : "cloud");
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

static hangar_sandbox *sandbox_for(hangar_ctx *ctx, int t)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = t == T_LOCAL ? "local" : "e2b";
	o.timeout_sec = 600;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_msg(rc == 0, "create on %s: %s", target_names[t], hangar_error_last()->message);
	return sb;
}

/* The workspace of the nth sandbox of a test: /workspace in a jail; on the
 * fakes, whose sandboxes share this machine's filesystem, one of its own. */
static const char *ws_for(int t, int nth)
{
	static char ws[4][4300];

	if (t == T_LOCAL)
		return "/workspace";
	snprintf(ws[nth], sizeof(ws[nth]), "%s/sandbox%d/ws", dir, nth);
	return ws[nth];
}

/* Runs a command in the sandbox with $WS set; returns stdout (malloc'd); exit must be 0. */
static char *sh(hangar_sandbox *sb, const char *ws, const char *cmd)
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
	ck_assert_msg(r.exit_code == 0, "exec %s: exit %d: %s", cmd, r.exit_code, r.err.ptr ? r.err.ptr : "");
	out = strdup(r.out.ptr ? r.out.ptr : "");
	hangar_exec_result_dispose(&r);
	return out;
}

static void sh_ok(hangar_sandbox *sb, const char *ws, const char *cmd)
{
	free(sh(sb, ws, cmd));
}

/* A git workspace: three commits, modes, a symlink, odd names, then an
 * uncommitted edit, an untracked file, and ignored paths. */
static const char make_repo[] =
	"set -e; mkdir -p \"$WS\"; cd \"$WS\"; git init -q .; "
	"printf 'node_modules/\\n*.log\\nbuild/\\n' > .gitignore; "
	"mkdir -p src/deep/er; printf 'one\\n' > src/a.txt; printf '#!/bin/sh\\necho hi\\n' > run.sh; chmod 0755 run.sh; "
	"printf 'secretish\\n' > private.txt; chmod 0600 private.txt; ln -s src/a.txt link-to-a; "
	"printf 'odd\\n' > 'name with spaces é.txt'; printf 'deep\\n' > src/deep/er/x; "
	"git add -A; git commit -qm first; "
	"printf 'two\\n' >> src/a.txt; git commit -qam second; "
	"head -c 300000 /dev/urandom > src/blob.bin; git add src/blob.bin; git commit -qm third; "
	"printf 'uncommitted\\n' >> src/a.txt; printf 'untracked\\n' > src/new.txt; "
	"mkdir -p node_modules/pkg build; printf 'dep\\n' > node_modules/pkg/index.js; printf 'log\\n' > debug.log; "
	"printf 'out\\n' > build/out.o";

/* What must come back: every kept path with kind, mode, link target and content hash. */
static const char manifest_git[] =
	"cd \"$WS\" && { git ls-files -z --cached --others --exclude-standard; find .git -print0; } | "
	"LC_ALL=C sort -zu | while IFS= read -r -d '' f; do [ -e \"$f\" ] || [ -L \"$f\" ] || continue; "
	"if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then h=$(sha256sum < \"$f\" | cut -c1-16); else h=-; fi; "
	"printf '%s %s %s\\n' \"$(stat -c '%A %s' -- \"$f\" | sed 's/^d\\([^ ]*\\) [0-9]*/d\\1 -/')\" \"$h\" \"$f$( [ -L \"$f\" ] && printf ' -> %s' \"$(readlink \"$f\")\")\"; done";

static const char manifest_all[] =
	"cd \"$WS\" && find . -mindepth 1 -print0 | LC_ALL=C sort -z | while IFS= read -r -d '' f; do "
	"if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then h=$(sha256sum < \"$f\" | cut -c1-16); else h=-; fi; "
	"printf '%s %s %s\\n' \"$(stat -c '%A' -- \"$f\")\" \"$h\" \"$f$( [ -L \"$f\" ] && printf ' -> %s' \"$(readlink \"$f\")\")\"; done";

static void setup(void)
{
	dir = temp_dir();
	ck_assert_int_eq(chmod(dir, 0777), 0); /* the fakes' sandboxes run as the test user */
	snprintf(state_dir, sizeof(state_dir), "%s/state", dir);
	leftovers_watch(state_dir, dir);
	logged[0] = '\0';
	fake_pid = 0;
}

static void teardown(void)
{
	/* Kill the jails a failed test left running, before their directory goes. */
	hangar_ctx *ctx = NULL;

	if ((ctx = leftovers_ctx(state_dir)) != NULL)
		kill_local_leftovers(ctx, state_dir);
	hangar_ctx_unref(ctx);
	fake_stop();
	rm_tree(dir);
	free(dir);
}

static hangar_checkpoint *capture(hangar_sandbox *sb, const char *ws, int select, const char *session,
				  const void *blob, size_t blob_len)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	const char *labels[] = { "purpose=test", "turn=3", NULL };
	int rc;

	o.workspace = ws;
	o.select = select;
	o.flags = fallback ? HANGAR_CHECKPOINT_NO_NATIVE : 0;
	o.session_id = session;
	o.blob = blob;
	o.blob_len = blob_len;
	o.labels = labels;
	rc = hangar_checkpoint_create(&cp, sb, &o);
	ck_assert_msg(rc == 0, "capture on %s (%s): %d %s", target_names[target], fallback ? "fallback" : "native", rc,
		      hangar_error_last()->message);
	return cp;
}

static int restore(hangar_sandbox *sb, hangar_checkpoint *cp, const char *ws, uint32_t flags)
{
	hangar_restore_opts o = HANGAR_RESTORE_OPTS_INIT;

	o.workspace = ws;
	o.flags = flags | (fallback ? HANGAR_RESTORE_NO_NATIVE : 0);
	return hangar_checkpoint_restore(sb, cp, &o);
}

/* The native variants need hangar-envd's archive endpoint; until the daemon has it they say so. */
static int native_missing(void)
{
	return !fallback && strstr(logged, "envd lacks the archive endpoint") != NULL;
}

static void assert_path(const char *expected)
{
	if (!fallback && !native_missing())
		ck_assert_msg(strstr(logged, expected ? "native path)" : "tar path)"), "the path taken:\n%s", logged);
	if (fallback)
		ck_assert_msg(strstr(logged, "tar path)") && !strstr(logged, "native path)"), "the path taken:\n%s",
			      logged);
}

/* Lines of a manifest that are files or symlinks (not directories). */
static uint64_t count_files(const char *manifest)
{
	uint64_t n = 0;

	for (const char *p = manifest; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (*p != 'd' && *p != '\n')
			n++;
	return n;
}


static int to_blob(void *payload, const void *data, size_t len)
{
	return blob_write(payload, data, len);
}

/* ---- the store's objects ------------------------------------------------------------- */

static void object_path(char *out, size_t cap, const hangar_checkpoint *cp, const char *kind)
{
	snprintf(out, cap, "%s/checkpoints/%s.%s.sealed", state_dir, hangar_checkpoint_id(cp), kind);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[9000];

	snprintf(cmd, sizeof(cmd), "cp -p '%s' '%s'", from, to);
	ck_assert_int_eq(system(cmd), 0);
}

/* Names in the file store's directory, sorted, one per line (malloc'd). */
static char *store_listing(const char *store)
{
	char cmd[4400], buf[8192];
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' 2>/dev/null | sort", store);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	pclose(f);
	return strdup(buf);
}

static int count_in_index(hangar_checkpoint *cp, void *payload)
{
	(void)cp;
	(*(int *)payload)++;
	return 0;
}

static int index_size(hangar_ctx *ctx, const char *session)
{
	int n = 0;

	must(hangar_checkpoint_list(ctx, session, count_in_index, &n), "list");
	return n;
}

/* The workspace of a restore target, and what it must still hold after a refusal. */
static const char *target_ws(int t)
{
	return t == T_LOCAL ? "/home/user/target" : ws_for(t, 1);
}

static const char target_state[] =
	"cd \"$WS\" && find . -mindepth 1 -printf '%y %m %s %p\\n' | LC_ALL=C sort && cat keep.txt";

/*
 * The target's state once hangar-envd has cleaned up after an aborted PUT:
 * it removes its staging directory when it sees the body break off, which
 * may be just after our call returned. Waits for that, with a deadline.
 */
static char *settled(hangar_sandbox *sb, const char *ws)
{
	int64_t deadline = clock_mono_ms() + 30000;

	for (;;) {
		char *state = sh(sb, ws, target_state);

		if (!strstr(state, ".hangar-restore-") || clock_mono_ms() > deadline)
			return state;
		free(state);
	}
}

static void assert_refused(int rc, const char *what)
{
	ck_assert_msg(rc == HANGAR_EREFUSED, "%s: expected HANGAR_EREFUSED, got %d %s", what, rc,
		      hangar_error_last()->message);
}

static void assert_no_secret(void)
{
	ck_assert_msg(!strstr(logged, SECRET_KEY) && !strstr(logged, OTHER_KEY) && !strstr(logged, S3_SECRET),
		      "a secret reached the log:\n%s", logged);
}

/* ---- capture and round trip ------------------------------------------------------------ */

START_TEST(git_round_trip)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_checkpoint *cp;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	hangar_buf blob = HANGAR_BUF_INIT;
	const char *wa, *wb;
	char *before, *after, *log_a, *log_b, *status_b;
	static const char conversation[] = "user: fix the bug\nassistant: done\n";

	target = _i / 2;
	fallback = _i % 2;
	ctx = ctx_for(target, NULL);
	a = sandbox_for(ctx, target);
	wa = ws_for(target, 0);
	wb = ws_for(target, 1);
	sh_ok(a, wa, make_repo);
	before = sh(a, wa, manifest_git);
	log_a = sh(a, wa, "cd \"$WS\" && git log --format=%H%n%s");
	cp = capture(a, wa, HANGAR_CHECKPOINT_SELECT_AUTO, "session-1", conversation, sizeof(conversation) - 1);
	if (native_missing()) {
		fprintf(stderr, "git_round_trip %s native: skipped, hangar-envd has no archive endpoint yet\n",
			target_names[target]);
		goto out;
	}
	assert_path(fallback ? NULL : "native");
	must(hangar_checkpoint_get_info(&info, cp), "info");
	ck_assert_str_eq(info.selection, "git");
	ck_assert_str_eq(info.session_id, "session-1");
	ck_assert_str_eq(info.workspace, wa);
	ck_assert_str_eq(info.labels_json, "{\"purpose\":\"test\",\"turn\":\"3\"}");
	ck_assert_ptr_nonnull(strstr(info.content_hash, "blake2b-256:"));
	ck_assert_uint_eq(strlen(info.content_hash), 12 + 64);
	ck_assert_uint_eq(info.blob_bytes, sizeof(conversation) - 1);
	ck_assert_uint_gt(info.stored_bytes, info.archive_bytes);
	must(hangar_checkpoint_read_blob(&blob, cp), "read blob");
	ck_assert_uint_eq(blob.size, sizeof(conversation) - 1);
	ck_assert(memcmp(blob.ptr, conversation, blob.size) == 0);
	hangar_buf_dispose(&blob);

	/* A fresh sandbox gets it back byte for byte, with modes and history. */
	b = sandbox_for(ctx, target);
	if (target != T_LOCAL)
		sh_ok(b, wb, "mkdir -p \"$WS\" && echo stale > \"$WS/stale-file\"");
	else
		sh_ok(b, wb, "echo stale > \"$WS/stale-file\"");
	logged[0] = '\0';
	must(restore(b, cp, wb, 0), "restore");
	assert_path(fallback ? NULL : "native");
	after = sh(b, wb, manifest_git);
	ck_assert_str_eq(after, before);
	log_b = sh(b, wb, "cd \"$WS\" && git log --format=%H%n%s");
	ck_assert_str_eq(log_b, log_a);
	status_b = sh(b, wb, "cd \"$WS\" && git status --porcelain && git fsck --no-progress 2>&1 && ls -A");
	ck_assert_msg(strstr(status_b, " M src/a.txt") && strstr(status_b, "?? src/new.txt"), "%s", status_b);
	/* ignored paths were left out, the stale file replaced, no staging left behind */
	ck_assert_msg(!strstr(status_b, "node_modules") && !strstr(status_b, "debug.log") && !strstr(status_b, "build") &&
			      !strstr(status_b, "stale-file") && !strstr(status_b, ".hangar-restore"),
		      "%s", status_b);
	ck_assert_uint_eq(info.files, count_files(before));
	free(after);
	free(log_b);
	free(status_b);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(b);
out:
	free(before);
	free(log_a);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(a);
	hangar_sandbox_unref(a);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A workspace that is not a repository is kept whole, ignored-looking paths included. */
START_TEST(all_round_trip)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_checkpoint *cp;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	const char *wa, *wb;
	char *before, *after;

	target = _i / 2;
	fallback = _i % 2;
	ctx = ctx_for(target, NULL);
	a = sandbox_for(ctx, target);
	wa = ws_for(target, 0);
	wb = ws_for(target, 1);
	sh_ok(a, wa, "set -e; mkdir -p \"$WS/node_modules/p\" \"$WS/empty-dir\" \"$WS/ro\"; cd \"$WS\"; "
		     "printf x > node_modules/p/i.js; printf y > .hidden; ln -s /etc/passwd abs-link; "
		     "ln -s ../nowhere dangling; printf z > ro/f; chmod 0444 ro/f; chmod 0555 ro; "
		     "mkfifo fifo-left-out; touch -d '2001-02-03 04:05:06' .hidden");
	before = sh(a, wa, manifest_all);
	cp = capture(a, wa, HANGAR_CHECKPOINT_SELECT_ALL, NULL, NULL, 0);
	if (native_missing())
		goto out;
	must(hangar_checkpoint_get_info(&info, cp), "info");
	ck_assert_str_eq(info.selection, "all");
	ck_assert_str_eq(info.session_id, "");
	ck_assert_uint_eq(info.blob_bytes, 0);
	b = sandbox_for(ctx, target);
	must(restore(b, cp, wb, 0), "restore");
	after = sh(b, wb, manifest_all);
	/* the fifo is left out, everything else comes back as it was, mtimes included */
	{
		char *fifo = strstr(before, "fifo-left-out");
		char *line = fifo;

		ck_assert_ptr_nonnull(fifo);
		while (line > before && line[-1] != '\n')
			line--;
		memmove(line, strchr(fifo, '\n') + 1, strlen(strchr(fifo, '\n') + 1) + 1);
	}
	ck_assert_str_eq(after, before);
	free(after);
	after = sh(b, wb, "stat -c %Y \"$WS/.hidden\"");
	ck_assert_str_eq(after, "981173106\n");
	free(after);
	sh_ok(b, wb, "chmod -R u+w \"$WS\"");
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(b);
out:
	sh_ok(a, wa, "chmod -R u+w \"$WS\"");
	free(before);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(a);
	hangar_sandbox_unref(a);
	hangar_ctx_unref(ctx);
}
END_TEST


/* ---- streaming ------------------------------------------------------------------------- */

/* AddressSanitizer keeps freed memory in quarantine (256 MiB by default): peak RSS then
 * measures the sanitizer, not the library, and the bound is not checked. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif

static long peak_rss_kib(void)
{
	struct rusage ru;

	ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/*
 * A checkpoint far larger than what the library may hold streams through:
 * 192 MiB that do not compress, captured and restored (native and fallback),
 * while this process's peak memory grows by less than a third of that.
 */
START_TEST(larger_than_memory_streams)
{
	const long big_kib = 192 * 1024, bound_kib = 64 * 1024;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_checkpoint *cp;
	char *want, *got;
	long before;

	target = T_LOCAL;
	fallback = _i;
	ctx = ctx_for(target, NULL);
	a = sandbox_for(ctx, target);
	sh_ok(a, "/workspace", "head -c 201326592 /dev/urandom > \"$WS/big\"");
	want = sh(a, "/workspace", "sha256sum < \"$WS/big\"");
	before = peak_rss_kib();
	cp = capture(a, "/workspace", HANGAR_CHECKPOINT_SELECT_ALL, NULL, NULL, 0);
	must(hangar_checkpoint_get_info(&info, cp), "info");
	ck_assert_uint_gt(info.archive_bytes, (uint64_t)big_kib * 1024);
	ck_assert_msg(!RSS_MEANINGFUL || peak_rss_kib() - before < bound_kib,
		      "capture: peak RSS grew by %ld KiB for %ld KiB", peak_rss_kib() - before, big_kib);
	hangar_sandbox_kill(a);
	hangar_sandbox_unref(a);

	b = sandbox_for(ctx, target);
	must(restore(b, cp, "/workspace", 0), "restore");
	ck_assert_msg(!RSS_MEANINGFUL || peak_rss_kib() - before < bound_kib,
		      "restore: peak RSS grew by %ld KiB for %ld KiB", peak_rss_kib() - before, big_kib);
	got = sh(b, "/workspace", "sha256sum < \"$WS/big\"");
	ck_assert_str_eq(got, want);
	free(got);
	free(want);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- refusals ---------------------------------------------------------------------------- */

/* Tampered, truncated, swapped and wrong-key checkpoints are refused and change nothing. */
START_TEST(refusals)
{
	hangar_ctx *ctx, *other;
	hangar_sandbox *sb;
	hangar_checkpoint *cp1, *cp2, *cp1_other = NULL;
	hangar_buf blob = HANGAR_BUF_INIT;
	const char *ws, *tws;
	char p1[4400], p2[4400], b1[4400], saved1[4400], saved2[4400], exported[4400];
	char *before, *after;
	struct stat st;
	int fd;

	target = _i / 2;
	fallback = _i % 2;
	ctx = ctx_for(target, NULL);
	sb = sandbox_for(ctx, target);
	ws = ws_for(target, 0);
	tws = target_ws(target);
	sh_ok(sb, ws, "mkdir -p \"$WS\" && cd \"$WS\" && head -c 200000 /dev/urandom > big && echo one > f");
	cp1 = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, "s", "the blob", 8);
	if (native_missing())
		goto out_early;
	sh_ok(sb, ws, "echo two > \"$WS/f\"");
	cp2 = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, "s", NULL, 0);
	sh_ok(sb, tws, "mkdir -p \"$WS/sub\" && echo precious > \"$WS/keep.txt\" && echo x > \"$WS/sub/y\"");
	before = sh(sb, tws, target_state);
	object_path(p1, sizeof(p1), cp1, "tar.zst");
	object_path(p2, sizeof(p2), cp2, "tar.zst");
	object_path(b1, sizeof(b1), cp1, "blob");
	snprintf(saved1, sizeof(saved1), "%s/saved1", dir);
	snprintf(saved2, sizeof(saved2), "%s/saved2", dir);
	copy_file(p1, saved1);
	copy_file(p2, saved2);

	/* tampered: one byte in the middle */
	ck_assert_int_eq(stat(p1, &st), 0);
	fd = open(p1, O_RDWR);
	ck_assert_int_ge(fd, 0);
	{
		unsigned char c;

		ck_assert_int_eq(pread(fd, &c, 1, st.st_size / 2), 1);
		c ^= 0x20;
		ck_assert_int_eq(pwrite(fd, &c, 1, st.st_size / 2), 1);
	}
	close(fd);
	assert_refused(restore(sb, cp1, tws, 0), "tampered");
	after = settled(sb, tws);
	ck_assert_str_eq(after, before);
	free(after);

	/* truncated: the final chunk's end cut off, then the final chunk gone */
	copy_file(saved1, p1);
	ck_assert_int_eq(truncate(p1, st.st_size - 100), 0);
	assert_refused(restore(sb, cp1, tws, 0), "truncated");
	ck_assert_int_eq(truncate(p1, 65536 + 17 + 49), 0);
	assert_refused(restore(sb, cp1, tws, HANGAR_RESTORE_MERGE), "truncated to its first chunk");
	after = settled(sb, tws);
	ck_assert_str_eq(after, before);
	free(after);

	/* swapped: the two checkpoints' archives exchanged; the blob put in place of the archive */
	copy_file(saved2, p1);
	copy_file(saved1, p2);
	assert_refused(restore(sb, cp1, tws, 0), "swapped");
	assert_refused(restore(sb, cp2, tws, 0), "swapped");
	copy_file(b1, p1);
	assert_refused(restore(sb, cp1, tws, 0), "the blob as the archive");
	copy_file(saved1, b1);
	assert_refused(hangar_checkpoint_read_blob(&blob, cp1), "the archive as the blob");
	ck_assert_ptr_null(blob.ptr);
	after = settled(sb, tws);
	ck_assert_str_eq(after, before);
	free(after);

	/* wrong key: the same index, another deployment's key */
	copy_file(saved1, p1);
	copy_file(saved2, p2);
	{
		const char *bl = "the blob";
		struct seal_keyring kr;
		struct blobstore *bs;
		struct blob_writer *bw;
		struct seal_writer *sw;
		char seal_id[300], name[300];

		/* the blob object back as it was: sealed again under the right key */
		must(seal_keyring_load(&kr, ctx), "keys");
		must(blobstore_open(&bs, ctx, NULL), "store");
		snprintf(name, sizeof(name), "%s.blob.sealed", hangar_checkpoint_id(cp1));
		snprintf(seal_id, sizeof(seal_id), "%s/blob", hangar_checkpoint_id(cp1));
		must(blob_write_begin(&bw, bs, name), "begin");
		must(seal_writer_new(&sw, &kr, seal_id, "s", to_blob, bw), "writer");
		must(seal_writer_write(sw, bl, 8), "write");
		must(seal_writer_finish(sw), "finish");
		seal_writer_free(sw);
		must(blob_write_commit(bw), "commit");
		blobstore_free(bs);
		seal_keyring_wipe(&kr);
	}
	other = ctx_for(target, OTHER_KEY);
	must(hangar_checkpoint_lookup(&cp1_other, other, hangar_checkpoint_id(cp1)), "lookup");
	assert_refused(restore(sb, cp1_other, tws, 0), "wrong key");
	assert_refused(hangar_checkpoint_read_blob(&blob, cp1_other), "wrong key, blob");
	snprintf(exported, sizeof(exported), "%s/export.tar.zst", dir);
	assert_refused(hangar_checkpoint_export(cp1_other, exported, NULL), "wrong key, export");
	ck_assert_int_eq(access(exported, F_OK), -1);
	after = settled(sb, tws);
	ck_assert_str_eq(after, before);
	free(after);
	if (target == T_LOCAL) {
		after = sh(sb, tws, "ls -A /tmp \"$WS\" | grep -c hangar || true");
		ck_assert_str_eq(after, "0\n");
		free(after);
	}

	/* and with everything back in place, the same calls succeed */
	must(hangar_checkpoint_read_blob(&blob, cp1), "read blob");
	ck_assert_uint_eq(blob.size, 8);
	hangar_buf_dispose(&blob);
	must(restore(sb, cp1, tws, 0), "restore");
	after = sh(sb, tws, "cat \"$WS/f\"; ls -A \"$WS\"");
	ck_assert_str_eq(after, "one\nbig\nf\n");
	free(after);
	must(hangar_checkpoint_export(cp1, exported, NULL), "export");
	{
		char cmd[9000];

		snprintf(cmd, sizeof(cmd), "zstd -dc '%s' | tar -t | sort | tr '\\n' ' ' | grep -qx 'big f '", exported);
		ck_assert_int_eq(system(cmd), 0);
	}
	assert_no_secret();
	free(before);
	hangar_checkpoint_unref(cp1_other);
	hangar_checkpoint_unref(cp2);
	hangar_ctx_unref(other);
out_early:
	hangar_checkpoint_unref(cp1);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A validly sealed checkpoint whose archive holds a hostile member: the
 * library's own check refuses it, names it, and nothing reaches the sandbox. */
static hangar_checkpoint *forge(hangar_ctx *ctx, const unsigned char *tar, size_t len)
{
	struct seal_keyring kr;
	struct blobstore *bs;
	struct blob_writer *bw;
	struct seal_writer *sw;
	struct bytes zst = { 0 };
	struct store_ckpt row = { 0 };
	hangar_checkpoint *cp;
	unsigned char digest[32];
	char hash[80], hex[65], name[200];
	static int n;
	char id[40];
	FILE *p;
	char path[4400], cmd[9000];

	/* compressed with the zstd tool, as any tar.zst */
	snprintf(path, sizeof(path), "%s/forged.tar", dir);
	{
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		ck_assert_int_eq(write(fd, tar, len), (ssize_t)len);
		close(fd);
	}
	snprintf(cmd, sizeof(cmd), "zstd -q -c '%s'", path);
	p = popen(cmd, "r");
	for (;;) {
		char buf[4096];
		size_t r = fread(buf, 1, sizeof(buf), p);

		if (!r)
			break;
		bytes_sink(&zst, buf, r);
	}
	ck_assert_int_eq(pclose(p), 0);
	crypto_generichash(digest, 32, zst.p, zst.n, NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), digest, 32);
	snprintf(hash, sizeof(hash), "blake2b-256:%s", hex);
	snprintf(id, sizeof(id), "ckpt-forged%d", n++);
	must(seal_keyring_load(&kr, ctx), "keys");
	must(blobstore_open(&bs, ctx, NULL), "store");
	snprintf(name, sizeof(name), "%s.tar.zst.sealed", id);
	must(blob_write_begin(&bw, bs, name), "begin");
	must(seal_writer_new(&sw, &kr, id, "", to_blob, bw), "writer");
	must(seal_writer_write(sw, zst.p, zst.n), "write");
	must(seal_writer_finish(sw), "finish");
	seal_writer_free(sw);
	must(blob_write_commit(bw), "commit");
	row.id = id;
	row.session_id = row.parent_id = "";
	row.workspace = "/nowhere";
	row.selection = "all";
	row.store_url = (char *)blobstore_url(bs);
	row.content_hash = hash;
	row.labels_json = "{}";
	row.created_us = 1;
	row.archive_bytes = zst.n;
	must(store_ckpt_put(ctx, &row), "index");
	blobstore_free(bs);
	seal_keyring_wipe(&kr);
	bytes_free(&zst);
	must(hangar_checkpoint_lookup(&cp, ctx, id), "lookup");
	return cp;
}

/* A ustar header (name, type, size, link) into b. */
static void tar_member(struct bytes *b, const char *name, char type, const char *data, const char *link)
{
	unsigned char h[512] = { 0 };
	unsigned sum = 0;
	size_t len = data ? strlen(data) : 0;
	static const unsigned char zero[512];

	memcpy(h, name, strlen(name));
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)len);
	snprintf((char *)h + 136, 12, "%011o", 1);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strlen(link));
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	bytes_sink(b, h, 512);
	if (len) {
		bytes_sink(b, data, len);
		bytes_sink(b, zero, (512 - len % 512) % 512);
	}
}

START_TEST(hostile_members)
{
	static const unsigned char zero[1024];
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_checkpoint *cp;
	struct bytes dotdot = { 0 }, through = { 0 }, device = { 0 };
	const char *tws;
	char *before, *after;
	int rc;

	target = _i / 2 ? T_CLOUD : T_LOCAL;
	fallback = _i % 2;
	ctx = ctx_for(target, NULL);
	sb = sandbox_for(ctx, target);
	tws = target_ws(target);
	sh_ok(sb, tws, "mkdir -p \"$WS\" && echo precious > \"$WS/keep.txt\"");
	before = sh(sb, tws, target_state);
	/* a good member first, so a streamed upload has begun when the bad one comes */
	tar_member(&dotdot, "fine.txt", '0', "fine", NULL);
	tar_member(&dotdot, "../escaped.txt", '0', "EVIL", NULL);
	bytes_sink(&dotdot, zero, sizeof(zero));
	tar_member(&through, "a", '2', NULL, "/tmp");
	tar_member(&through, "a/pwned.txt", '0', "EVIL", NULL);
	bytes_sink(&through, zero, sizeof(zero));
	tar_member(&device, "fine.txt", '0', "fine", NULL);
	tar_member(&device, "dev-null", '3', NULL, NULL);
	bytes_sink(&device, zero, sizeof(zero));

	cp = forge(ctx, dotdot.p, dotdot.n);
	rc = restore(sb, cp, tws, 0);
	assert_refused(rc, "dotdot");
	ck_assert_msg(strstr(hangar_error_last()->message, "member \"../escaped.txt\""), "%s",
		      hangar_error_last()->message);
	hangar_checkpoint_unref(cp);
	cp = forge(ctx, through.p, through.n);
	assert_refused(restore(sb, cp, tws, HANGAR_RESTORE_MERGE), "through a symlink");
	ck_assert_msg(strstr(hangar_error_last()->message, "member \"a/pwned.txt\""), "%s",
		      hangar_error_last()->message);
	hangar_checkpoint_unref(cp);
	cp = forge(ctx, device.p, device.n);
	assert_refused(restore(sb, cp, tws, 0), "device");
	ck_assert_msg(strstr(hangar_error_last()->message, "member \"dev-null\""), "%s", hangar_error_last()->message);
	hangar_checkpoint_unref(cp);
	after = settled(sb, tws);
	ck_assert_str_eq(after, before);
	free(after);
	after = sh(sb, tws, "ls \"$WS/../escaped.txt\" /tmp/pwned.txt 2>&1 | grep -c 'No such' || true");
	ck_assert_str_eq(after, "2\n");
	free(after);
	free(before);
	bytes_free(&dotdot);
	bytes_free(&through);
	bytes_free(&device);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- keys, limits, stores ------------------------------------------------------------------ */

START_TEST(key_rotation)
{
	hangar_ctx *old, *rotated, *forgot;
	hangar_sandbox *sb;
	hangar_checkpoint *cp, *again;
	char prev[256], *out;
	const char *ws, *tws;

	target = T_CLOUD;
	fallback = _i;
	old = ctx_for(target, NULL);
	sb = sandbox_for(old, target);
	ws = ws_for(target, 0);
	tws = target_ws(target);
	sh_ok(sb, ws, "mkdir -p \"$WS\" && echo rotated > \"$WS/f\"");
	cp = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, NULL, "b", 1);
	if (native_missing())
		goto out;
	hangar_sandbox_unref(sb);
	/* The new key seals; the old one, listed as previous, still opens. */
	rotated = ctx_for(target, OTHER_KEY);
	snprintf(prev, sizeof(prev), "not this one,%s", SECRET_KEY);
	set(rotated, "HANGAR_SECRET_KEY_PREVIOUS", prev);
	must(hangar_checkpoint_lookup(&again, rotated, hangar_checkpoint_id(cp)), "lookup");
	sb = sandbox_for(rotated, target);
	must(restore(sb, again, tws, 0), "restore with a previous key");
	out = sh(sb, tws, "cat \"$WS/f\"");
	ck_assert_str_eq(out, "rotated\n");
	free(out);
	hangar_checkpoint_unref(again);
	/* Without it, refused. */
	forgot = ctx_for(target, OTHER_KEY);
	must(hangar_checkpoint_lookup(&again, forgot, hangar_checkpoint_id(cp)), "lookup");
	assert_refused(restore(sb, again, tws, 0), "the old key forgotten");
	hangar_checkpoint_unref(again);
	assert_no_secret();
	hangar_ctx_unref(forgot);
	hangar_ctx_unref(rotated);
out:
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(old);
}
END_TEST

START_TEST(max_bytes)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_checkpoint *cp0, *cp = NULL;
	char store[4400], *listing, *out;
	const char *ws;
	int rc;

	target = _i / 2;
	fallback = _i % 2;
	ctx = ctx_for(target, NULL);
	set(ctx, "HANGAR_CHECKPOINT_MAX_BYTES", "65536");
	sb = sandbox_for(ctx, target);
	ws = ws_for(target, 0);
	sh_ok(sb, ws, "mkdir -p \"$WS\" && echo small > \"$WS/f\"");
	cp0 = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, "s", NULL, 0);
	if (native_missing())
		goto out;
	snprintf(store, sizeof(store), "%s/checkpoints", state_dir);
	listing = store_listing(store);
	sh_ok(sb, ws, "head -c 1000000 /dev/urandom > \"$WS/big\"");
	o.workspace = ws;
	o.flags = fallback ? HANGAR_CHECKPOINT_NO_NATIVE : 0;
	o.session_id = "s";
	rc = hangar_checkpoint_create(&cp, sb, &o);
	ck_assert_int_eq(rc, HANGAR_ETOOLARGE);
	ck_assert_ptr_null(cp);
	ck_assert_msg(strstr(hangar_error_last()->message, "HANGAR_CHECKPOINT_MAX_BYTES"), "%s",
		      hangar_error_last()->message);
	out = store_listing(store);
	ck_assert_str_eq(out, listing);
	free(out);
	free(listing);
	ck_assert_int_eq(index_size(ctx, NULL), 1);
	sh_ok(sb, ws, "rm -rf \"$WS\"/*");
	must(restore(sb, cp0, ws, 0), "the previous checkpoint");
	out = sh(sb, ws, "ls -A \"$WS\"; cat \"$WS/f\"");
	ck_assert_str_eq(out, "f\nsmall\n");
	free(out);
out:
	hangar_checkpoint_unref(cp0);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(disk_full)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_checkpoint *cp0, *cp = NULL;
	char small[4400], url[4500], *listing, *out;
	const char *ws;
	int rc;

	if (geteuid() != 0) {
		fprintf(stderr, "disk_full: skipped: mounting a small tmpfs needs root\n");
		return;
	}
	target = T_CLOUD;
	fallback = _i;
	snprintf(small, sizeof(small), "%s/small", dir);
	ck_assert_int_eq(mkdir(small, 0700), 0);
	ck_assert_msg(mount("tmpfs", small, "tmpfs", 0, "size=256k") == 0, "mount: %s", strerror(errno));
	ctx = ctx_for(target, NULL);
	snprintf(url, sizeof(url), "file://%s", small);
	set(ctx, "HANGAR_CHECKPOINT_STORE", url);
	sb = sandbox_for(ctx, target);
	ws = ws_for(target, 0);
	sh_ok(sb, ws, "mkdir -p \"$WS\" && echo small > \"$WS/f\"");
	cp0 = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, NULL, NULL, 0);
	if (native_missing())
		goto out;
	listing = store_listing(small);
	sh_ok(sb, ws, "head -c 2000000 /dev/urandom > \"$WS/big\"");
	o.workspace = ws;
	o.flags = fallback ? HANGAR_CHECKPOINT_NO_NATIVE : 0;
	rc = hangar_checkpoint_create(&cp, sb, &o);
	ck_assert_msg(rc == HANGAR_EOS, "a full disk: %d %s", rc, hangar_error_last()->message);
	ck_assert_ptr_null(cp);
	out = store_listing(small);
	ck_assert_str_eq(out, listing);
	free(out);
	free(listing);
	ck_assert_int_eq(index_size(ctx, NULL), 1);
	sh_ok(sb, ws, "rm -rf \"$WS\"/*");
	must(restore(sb, cp0, ws, 0), "the previous checkpoint");
	out = sh(sb, ws, "cat \"$WS/f\"");
	ck_assert_str_eq(out, "small\n");
	free(out);
out:
	hangar_checkpoint_unref(cp0);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	umount2(small, MNT_DETACH);
}
END_TEST

/* s3rver (tests/checkpoints/s3-server.mjs), as test-s3store starts it. */
static pid_t s3_pid;

static int s3_start(void)
{
	const char *node = getenv("NODE"), *script = getenv("S3_SERVER");
	char data[4400], line[64] = "";
	int out[2], port = 0;
	size_t n = 0;
	int64_t deadline = clock_mono_ms() + 30000;

	ck_assert_msg(node && script, "NODE and S3_SERVER must be set (meson test sets them)");
	snprintf(data, sizeof(data), "%s/s3", dir);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	s3_pid = fork();
	ck_assert_int_ge(s3_pid, 0);
	if (s3_pid == 0) {
		dup2(out[1], 1);
		setenv("S3_TEST_SECRET", S3_SECRET, 1);
		execl(node, node, script, data, "ckpt-bucket", (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	while (!strchr(line, '\n')) {
		struct pollfd p = { out[0], POLLIN, 0 };
		ssize_t r;

		ck_assert_msg(clock_mono_ms() < deadline, "s3-server.mjs did not report READY");
		if (poll(&p, 1, (int)(deadline - clock_mono_ms())) <= 0)
			continue;
		r = read(out[0], line + n, sizeof(line) - 1 - n);
		ck_assert_msg(r > 0, "s3-server.mjs exited before it was ready");
		n += (size_t)r;
		line[n] = '\0';
	}
	close(out[0]);
	ck_assert_int_eq(sscanf(line, "READY %d", &port), 1);
	return port;
}

START_TEST(s3_store)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_checkpoint *cp;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	hangar_buf blob = HANGAR_BUF_INIT;
	char url[64], *out;
	const char *ws, *tws;
	int port;

	target = T_CLOUD;
	fallback = _i;
	port = s3_start();
	ctx = ctx_for(target, NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	set(ctx, "HANGAR_S3_ENDPOINT", url);
	set(ctx, "HANGAR_S3_ACCESS_KEY_ID", "S3RVER");
	set(ctx, "HANGAR_S3_SECRET_ACCESS_KEY", S3_SECRET);
	set(ctx, "HANGAR_CHECKPOINT_STORE", "s3://ckpt-bucket/sessions");
	sb = sandbox_for(ctx, target);
	ws = ws_for(target, 0);
	tws = target_ws(target);
	sh_ok(sb, ws, "mkdir -p \"$WS/d\" && cd \"$WS\" && head -c 3000000 /dev/urandom > d/big && echo s3 > f");
	cp = capture(sb, ws, HANGAR_CHECKPOINT_SELECT_ALL, "s3-session", "conversation", 12);
	if (native_missing())
		goto out;
	must(hangar_checkpoint_get_info(&info, cp), "info");
	ck_assert_str_eq(info.store_url, "s3://ckpt-bucket/sessions");
	must(restore(sb, cp, tws, 0), "restore from s3");
	out = sh(sb, tws, "cd \"$WS\" && cat f && ls -A && cmp d/big \"$OLDPWD\" 2>/dev/null; true");
	ck_assert_ptr_nonnull(strstr(out, "s3\n"));
	free(out);
	{
		char cmd[9000];

		snprintf(cmd, sizeof(cmd), "cmp '%s/d/big' '%s/d/big'", ws, tws);
		if (target != T_LOCAL)
			ck_assert_int_eq(system(cmd), 0);
	}
	must(hangar_checkpoint_read_blob(&blob, cp), "blob");
	ck_assert_uint_eq(blob.size, 12);
	hangar_buf_dispose(&blob);
	must(hangar_checkpoint_delete(cp), "delete");
	ck_assert_int_eq(restore(sb, cp, tws, 0), HANGAR_ENOTFOUND);
	assert_no_secret();
out:
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	if (s3_pid > 0) {
		kill(s3_pid, SIGKILL);
		waitpid(s3_pid, NULL, 0);
	}
}
END_TEST

/* A checkpoint of a local jail restored into a sandbox of the cloud fake. */
START_TEST(across_providers)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_checkpoint *cp;
	char *before, *after;
	const char *wb;

	fallback = _i;
	target = T_LOCAL;
	ctx = ctx_for(T_CLOUD, NULL); /* both providers: the local one is always there */
	a = sandbox_for(ctx, T_LOCAL);
	sh_ok(a, "/workspace", make_repo);
	before = sh(a, "/workspace", manifest_git);
	cp = capture(a, "/workspace", HANGAR_CHECKPOINT_SELECT_AUTO, NULL, NULL, 0);
	if (native_missing())
		goto out;
	b = sandbox_for(ctx, T_CLOUD);
	wb = ws_for(T_CLOUD, 1);
	target = T_CLOUD;
	must(restore(b, cp, wb, 0), "restore on the cloud fake");
	after = sh(b, wb, manifest_git);
	ck_assert_str_eq(after, before);
	free(after);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(b);
out:
	free(before);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(a);
	hangar_sandbox_unref(a);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- the index and the API's edges --------------------------------------------------------- */

static int collect_ids(hangar_checkpoint *cp, void *payload)
{
	strcat(payload, hangar_checkpoint_id(cp));
	strcat(payload, " ");
	return 0;
}

static int progress_calls;
static uint64_t progress_last;

static int on_progress(uint64_t done, uint64_t total, void *payload)
{
	(void)total;
	(void)payload;
	ck_assert_uint_ge(done, progress_last);
	progress_last = done;
	progress_calls++;
	return 0;
}

static int cancel_now(void *payload)
{
	(void)payload;
	return 1;
}

START_TEST(index_and_edges)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_checkpoint *c1, *c2, *c3, *cp = NULL;
	char ids[512] = "", want[512], path[4400], *listing;
	const char *ws;
	const char *bad_labels[] = { "no-equals-sign", NULL };

	target = T_CLOUD;
	fallback = _i;
	ctx = ctx_for(target, NULL);
	sb = sandbox_for(ctx, target);
	ws = ws_for(target, 0);
	sh_ok(sb, ws, "mkdir -p \"$WS\" && head -c 500000 /dev/urandom > \"$WS/f\"");
	progress_calls = 0;
	progress_last = 0;
	o.workspace = ws;
	o.flags = fallback ? HANGAR_CHECKPOINT_NO_NATIVE : 0;
	o.session_id = "s1";
	o.progress = on_progress;
	must(hangar_checkpoint_create(&c1, sb, &o), "c1");
	if (native_missing()) {
		hangar_checkpoint_unref(c1);
		goto out;
	}
	must(hangar_checkpoint_get_info(&info, c1), "info");
	ck_assert_int_ge(progress_calls, 2);
	ck_assert_uint_eq(progress_last, info.stored_bytes);
	o.progress = NULL;
	/* a restore reports progress up to the stored size, and can be cancelled, changing nothing */
	{
		hangar_restore_opts ro = HANGAR_RESTORE_OPTS_INIT;
		const char *tws = target_ws(target);
		char *before, *after;

		ro.workspace = tws;
		ro.flags = fallback ? HANGAR_RESTORE_NO_NATIVE : 0;
		ro.progress = on_progress;
		progress_calls = 0;
		progress_last = 0;
		must(hangar_checkpoint_restore(sb, c1, &ro), "restore with progress");
		ck_assert_int_ge(progress_calls, 2);
		ck_assert_uint_eq(progress_last, info.stored_bytes);
		sh_ok(sb, tws, "rm -f \"$WS/f\" && echo precious > \"$WS/keep.txt\"");
		before = settled(sb, tws);
		ro.progress = NULL;
		ro.cancel = cancel_now;
		ck_assert_int_eq(hangar_checkpoint_restore(sb, c1, &ro), HANGAR_ECANCELED);
		after = settled(sb, tws);
		ck_assert_str_eq(after, before);
		free(before);
		free(after);
	}
	o.parent_id = hangar_checkpoint_id(c1);
	must(hangar_checkpoint_create(&c2, sb, &o), "c2");
	must(hangar_checkpoint_get_info(&info, c2), "info");
	ck_assert_str_eq(info.parent_id, hangar_checkpoint_id(c1));
	o.parent_id = NULL;
	o.session_id = "s2";
	must(hangar_checkpoint_create(&c3, sb, &o), "c3");

	/* by session, oldest first */
	must(hangar_checkpoint_list(ctx, "s1", collect_ids, ids), "list s1");
	snprintf(want, sizeof(want), "%s %s ", hangar_checkpoint_id(c1), hangar_checkpoint_id(c2));
	ck_assert_str_eq(ids, want);
	ids[0] = '\0';
	must(hangar_checkpoint_list(ctx, NULL, collect_ids, ids), "list");
	snprintf(want, sizeof(want), "%s %s %s ", hangar_checkpoint_id(c1), hangar_checkpoint_id(c2),
		 hangar_checkpoint_id(c3));
	ck_assert_str_eq(ids, want);

	/* refused before anything is captured */
	snprintf(path, sizeof(path), "%s/checkpoints", state_dir);
	listing = store_listing(path);
	o.session_id = "bad/session";
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_EINVAL);
	o.session_id = NULL;
	o.parent_id = "ckpt-missing";
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_ENOTFOUND);
	o.parent_id = NULL;
	o.labels = bad_labels;
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_EINVAL);
	o.labels = NULL;
	o.workspace = "relative/ws";
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_EINVAL);
	o.workspace = "/no/such/workspace";
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_ENOTFOUND);
	o.workspace = ws;
	o.cancel = cancel_now;
	ck_assert_int_eq(hangar_checkpoint_create(&cp, sb, &o), HANGAR_ECANCELED);
	ck_assert_ptr_null(cp);
	o.cancel = NULL;
	{
		char *now = store_listing(path);

		ck_assert_str_eq(now, listing);
		free(now);
	}
	free(listing);
	ck_assert_int_eq(index_size(ctx, NULL), 3);
	ck_assert_int_eq(hangar_checkpoint_lookup(&cp, ctx, "ckpt-missing"), HANGAR_ENOTFOUND);
	ck_assert_int_eq(hangar_checkpoint_lookup(&cp, ctx, "../x"), HANGAR_EINVAL);

	/* delete: objects, then the entry; explicit only */
	must(hangar_checkpoint_delete(c2), "delete");
	object_path(path, sizeof(path), c2, "tar.zst");
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(hangar_checkpoint_lookup(&cp, ctx, hangar_checkpoint_id(c2)), HANGAR_ENOTFOUND);
	ck_assert_int_eq(hangar_checkpoint_delete(c2), HANGAR_ENOTFOUND);
	ck_assert_int_eq(index_size(ctx, "s1"), 1);
	hangar_checkpoint_unref(c1);
	hangar_checkpoint_unref(c2);
	hangar_checkpoint_unref(c3);
out:
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A state store made before the index existed keeps its rows and gains the table. */
START_TEST(schema_migration)
{
	sqlite3 *db;
	hangar_ctx *ctx;
	char path[4400], *provider = NULL;

	ck_assert_int_eq(mkdir(state_dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/hangar.db", state_dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db,
				      "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, provider TEXT NOT NULL, "
				      "recorded_us INTEGER NOT NULL);"
				      "CREATE TABLE secrets (id TEXT NOT NULL, name TEXT NOT NULL, sealed BLOB NOT NULL, "
				      "PRIMARY KEY (id, name));"
				      "INSERT INTO sandboxes VALUES ('sb-old', 'local', 1);",
				      NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	ctx = ctx_for(T_LOCAL, NULL);
	ck_assert_int_eq(index_size(ctx, NULL), 0);
	must(store_lookup(ctx, "sb-old", &provider), "the old row");
	ck_assert_str_eq(provider, "local");
	free(provider);
	hangar_ctx_unref(ctx);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	{
		sqlite3_stmt *st;

		ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
		ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
		ck_assert_int_eq(sqlite3_column_int(st, 0), store_schema_version());
		sqlite3_finalize(st);
	}
	/* a newer schema than this library knows is refused, not damaged */
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ctx = ctx_for(T_LOCAL, NULL);
	{
		int n = 0;

		ck_assert_int_eq(hangar_checkpoint_list(ctx, NULL, count_in_index, &n), HANGAR_ECONFIG);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "newer"));
	}
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("checkpoint");
	TCase *tc = tcase_create("round trip");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, git_round_trip, 0, T_COUNT * 2);
	tcase_add_loop_test(tc, all_round_trip, 0, T_COUNT * 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("streaming");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, larger_than_memory_streams, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, refusals, 0, T_COUNT * 2);
	tcase_add_loop_test(tc, hostile_members, 0, 4);
	tcase_add_loop_test(tc, key_rotation, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("limits and stores");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, max_bytes, 0, T_COUNT * 2);
	tcase_add_loop_test(tc, disk_full, 0, 2);
	if (getenv("NODE"))
		tcase_add_loop_test(tc, s3_store, 0, 2);
	tcase_add_loop_test(tc, across_providers, 0, 2);
	tcase_add_loop_test(tc, index_and_edges, 0, 2);
	tcase_add_test(tc, schema_migration);
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
