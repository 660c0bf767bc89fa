/*
 * The sandbox layer over a fake provider whose sandboxes are real
 * hangar-envd processes: uniform exec, files, processes, and how failures
 * are classified (a dead sandbox is gone, a silent one is a timeout).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-provider.h"

static char tmpdir[] = "/tmp/hangar-core-XXXXXX";
static struct fake fake;
static hangar_ctx *ctx;
static hangar_sandbox *sb;

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static const char *state_dir(void)
{
	static char p[200];

	snprintf(p, sizeof(p), "%s/state", tmpdir);
	return p;
}

static void setup(void)
{
	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-core-XXXXXX")));
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.dir, sizeof(fake.dir), "%s", tmpdir);
	fake.envd = getenv("HANGAR_ENVD");
	ck_assert_msg(fake.envd, "HANGAR_ENVD must name the hangar-envd binary");
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(fake_register(ctx, &fake), "register");
	must(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "fake"), "set provider");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir()), "set state dir");
	must(hangar_sandbox_create(&sb, ctx, NULL), "create");
}

static void teardown(void)
{
	char cmd[300];

	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	fake_cleanup(&fake);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static int run(hangar_exec_result *r, const char *cmd, const hangar_exec_opts *o)
{
	hangar_exec_result_dispose(r);
	return hangar_sandbox_exec(r, sb, cmd, o);
}

/* ---- exec --------------------------------------------------------------- */

START_TEST(exec_result)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	must(run(&r, "echo out; echo err >&2; exit 3", NULL), "exec");
	ck_assert_int_eq(r.exit_code, 3);
	ck_assert_int_eq(r.timed_out, 0);
	ck_assert_str_eq(r.out.ptr, "out\n");
	ck_assert_str_eq(r.err.ptr, "err\n");
	ck_assert_int_eq(r.out_bytes, 4);
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(exec_env_cwd_stdin)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	const char *env[] = { "FOO=bar baz", NULL };
	static const char input[] = "line one\nline two\n";

	o.env = env;
	o.cwd = "/tmp";
	must(run(&r, "echo \"$CI|$FOO|$(pwd)\"", &o), "exec env");
	ck_assert_str_eq(r.out.ptr, "true|bar baz|/tmp\n");
	o.stdin_data = input;
	o.stdin_len = strlen(input);
	must(run(&r, "tac", &o), "exec stdin");
	ck_assert_str_eq(r.out.ptr, "line two\nline one\n");
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(exec_timeout_kills)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;

	o.timeout_sec = 1;
	/* A child of the shell too, to see the whole group go. */
	must(run(&r, "sleep 37.25 & sleep 37.5", &o), "exec");
	ck_assert_int_eq(r.timed_out, 1);
	ck_assert_int_eq(r.exit_code, 124);
	ck_assert_msg(r.duration_us < 8000000, "took %lld us", (long long)r.duration_us);
	must(run(&r, "pgrep -f 'sleep 37\\.[25]'", NULL), "pgrep");
	ck_assert_msg(r.exit_code == 1, "still running: %s", r.out.ptr);
	hangar_exec_result_dispose(&r);
}
END_TEST

/*
 * A command that ignores SIGTERM outlives the timeout's first signal and
 * is killed at the end of its grace: still a timed-out command, and gone.
 */
START_TEST(exec_timeout_kills_a_stubborn_command)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;

	o.timeout_sec = 1;
	must(run(&r, "trap '' TERM; sleep 37.75; echo survived", &o), "exec");
	ck_assert_msg(r.timed_out == 1, "exit %d, timed_out %d", r.exit_code, r.timed_out);
	ck_assert_ptr_null(r.out.ptr ? strstr(r.out.ptr, "survived") : NULL);
	hangar_exec_result_dispose(&r);
	must(run(&r, "pgrep -f 'sleep 37\\.75'", NULL), "pgrep");
	ck_assert_msg(r.exit_code == 1, "still running: %s", r.out.ptr);
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(exec_output_cap)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	char *all = NULL, marker[128];
	size_t all_len = 0;
	FILE *mem = open_memstream(&all, &all_len);

	/* The same text seq prints, computed here to know the head and tail. */
	for (int i = 1; i <= 3000; i++)
		fprintf(mem, "%d\n", i);
	fclose(mem);
	o.output_limit = 1000;
	must(run(&r, "seq 1 3000", &o), "exec");
	ck_assert_int_eq(r.out_bytes, all_len);
	snprintf(marker, sizeof(marker), "\n[... %zu bytes of output omitted ...]\n", all_len - 1000);
	ck_assert_int_eq(r.out.size, 500 + strlen(marker) + 500);
	ck_assert(memcmp(r.out.ptr, all, 500) == 0);
	ck_assert(memcmp(r.out.ptr + 500, marker, strlen(marker)) == 0);
	ck_assert(memcmp(r.out.ptr + 500 + strlen(marker), all + all_len - 500, 500) == 0);
	free(all);
	hangar_exec_result_dispose(&r);
}
END_TEST

struct chunks {
	char log[4096];
	size_t len;
};

static void collect(int stream, const char *data, size_t len, void *payload)
{
	struct chunks *c = payload;
	int n = snprintf(c->log + c->len, sizeof(c->log) - c->len, "%d:%.*s", stream, (int)len, data);

	if (n > 0)
		c->len += (size_t)n;
}

START_TEST(exec_streams_in_order)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	struct chunks c = { .len = 0 };

	o.on_output = collect;
	o.payload = &c;
	/* Each write waits for the previous one to be read, so the order is the command's. */
	must(run(&r, "echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c", &o), "exec");
	ck_assert_str_eq(c.log, "1:a\n2:b\n1:c\n");
	ck_assert_str_eq(r.out.ptr, "a\nc\n");
	hangar_exec_result_dispose(&r);
}
END_TEST

/* The caller's side of a cancel: raised once the command has said it started. */
struct canceller {
	int raised;
	int said_stop;
	int asked;              /* calls of the cancel callback */
	int asked_after;        /* calls after it had returned non-zero */
};

static void cancel_on_output(int stream, const char *data, size_t len, void *payload)
{
	struct canceller *c = payload;

	(void)stream;
	if (memmem(data, len, "started", 7))
		c->raised = 1;
}

static int cancel_asked(void *payload)
{
	struct canceller *c = payload;

	if (c->said_stop)
		c->asked_after++;
	c->asked++;
	c->said_stop = c->raised;
	return c->raised;
}

START_TEST(exec_cancel_stops_the_command)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	struct canceller c = { 0 };
	struct timespec t0, t1;

	o.cancel = cancel_asked;
	o.on_output = cancel_on_output;
	o.payload = &c;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(run(&r, "echo started; sleep 41.75", &o), HANGAR_ECANCELED);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_msg(t1.tv_sec - t0.tv_sec < 10, "cancel took %ld s", (long)(t1.tv_sec - t0.tv_sec));
	ck_assert_int_gt(c.asked, 0);
	ck_assert_int_eq(c.asked_after, 0); /* once it said stop, it was not asked again */
	/* The command is gone from the sandbox too (a moment after: wait with a deadline). */
	for (int i = 0; i < 100; i++) {
		struct timespec pause = { 0, 50 * 1000 * 1000 };

		must(run(&r, "pgrep -f 'sleep 41\\.75' || true", NULL), "pgrep");
		if (r.out.size == 0)
			break;
		nanosleep(&pause, NULL); /* polling a condition, bounded by the loop */
	}
	ck_assert_msg(r.out.size == 0, "still running: %s", r.out.ptr);
	hangar_exec_result_dispose(&r);
}
END_TEST

/* A caller built against an older, smaller hangar_exec_result: it ends before duration_us. */
struct old_result {
	uint32_t version;
	uint32_t size;
	int32_t exit_code;
	int32_t timed_out;
	hangar_buf out;
	hangar_buf err;
	uint64_t out_bytes;
	uint64_t err_bytes;
	unsigned char after[64]; /* what the caller keeps right after its struct */
};

START_TEST(exec_result_never_written_past_its_size)
{
	struct old_result r;
	unsigned char canary[sizeof(r.after)];

	memset(&r, 0, sizeof(r));
	memset(r.after, 0xa5, sizeof(r.after));
	memcpy(canary, r.after, sizeof(canary));
	r.version = HANGAR_EXEC_RESULT_VERSION;
	r.size = (uint32_t)offsetof(struct old_result, after);
	ck_assert_uint_lt(r.size, sizeof(hangar_exec_result));
	must(hangar_sandbox_exec((hangar_exec_result *)&r, sb, "echo hi; exit 5", NULL), "exec");
	ck_assert_int_eq(r.exit_code, 5);
	ck_assert_str_eq(r.out.ptr, "hi\n");
	ck_assert_uint_eq(r.out_bytes, 3);
	ck_assert_msg(memcmp(r.after, canary, sizeof(canary)) == 0, "the library wrote past the caller's struct");
	hangar_exec_result_dispose((hangar_exec_result *)&r);

	/* Smaller still: no room for the buffers, so none are handed over (or leaked: see valgrind). */
	memset(&r, 0, sizeof(r));
	memset(r.after, 0xa5, sizeof(r.after));
	r.version = HANGAR_EXEC_RESULT_VERSION;
	r.size = (uint32_t)offsetof(struct old_result, out);
	memset(&r.out, 0x5a, sizeof(r.out) + sizeof(r.err));
	must(hangar_sandbox_exec((hangar_exec_result *)&r, sb, "echo hi; exit 6", NULL), "exec small");
	ck_assert_int_eq(r.exit_code, 6);
	for (size_t i = 0; i < sizeof(r.out) + sizeof(r.err); i++)
		ck_assert_uint_eq(((unsigned char *)&r.out)[i], 0x5a);
	hangar_exec_result_dispose((hangar_exec_result *)&r);
}
END_TEST

START_TEST(exec_refuses_what_it_cannot_honour)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_process_opts po = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p = NULL;
	size_t big = 128 * 1024;
	char *cmd = malloc(big + 16);

	/* A struct from a newer library than this one. */
	o.version = HANGAR_EXEC_OPTS_VERSION + 1;
	ck_assert_int_eq(run(&r, "true", &o), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "newer"));
	o.version = HANGAR_EXEC_OPTS_VERSION;
	r.version = HANGAR_EXEC_RESULT_VERSION + 1;
	ck_assert_int_eq(run(&r, "true", NULL), HANGAR_EINVAL);
	r.version = HANGAR_EXEC_RESULT_VERSION;
	po.version = HANGAR_PROCESS_OPTS_VERSION + 1;
	ck_assert_int_eq(hangar_process_start(&p, sb, "true", &po), HANGAR_EINVAL);
	po.version = HANGAR_PROCESS_OPTS_VERSION;

	/* Numbers that would overflow a deadline. */
	o.timeout_sec = 99999999999LL;
	ck_assert_int_eq(run(&r, "true", &o), HANGAR_EINVAL);
	o.timeout_sec = INT64_MAX;
	ck_assert_int_eq(run(&r, "true", &o), HANGAR_EINVAL);
	o.timeout_sec = 0;
	o.output_limit = UINT64_MAX;
	ck_assert_int_eq(run(&r, "true", &o), HANGAR_EINVAL);
	o.output_limit = 0;
	po.timeout_sec = INT64_MAX / 100;
	ck_assert_int_eq(hangar_process_start(&p, sb, "true", &po), HANGAR_EINVAL);

	/* A command line longer than a program in the sandbox may get: a clear error, not exit 126. */
	memcpy(cmd, "echo ", 5);
	memset(cmd + 5, 'x', big);
	cmd[5 + big] = '\0';
	ck_assert_int_eq(run(&r, cmd, NULL), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "command line"));
	ck_assert_int_eq(hangar_process_start(&p, sb, cmd, NULL), HANGAR_EINVAL);
	/* Just under it still runs. */
	cmd[big - 64] = '\0';
	must(run(&r, cmd, NULL), "long command");
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_uint_eq(r.out_bytes, big - 64 - 5 + 1);
	free(cmd);
	hangar_exec_result_dispose(&r);
}
END_TEST

/* ---- files -------------------------------------------------------------- */

/* A path under the test's directory; four calls may be used in one expression. */
static char *path_in(const char *name)
{
	static char p[4][512];
	static int next;
	char *r = p[next++ % 4];

	snprintf(r, sizeof(p[0]), "%s/files/%s", tmpdir, name);
	return r;
}

START_TEST(files_round_trip_binary_unicode)
{
	unsigned char bytes[512];
	hangar_buf got = HANGAR_BUF_INIT;
	char *p = path_in("deep/dir/héllo wörld ✓.bin");

	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 7);
	must(hangar_sandbox_write_file(sb, p, bytes, sizeof(bytes)), "write");
	must(hangar_sandbox_read_file(&got, sb, p), "read");
	ck_assert_int_eq(got.size, sizeof(bytes));
	ck_assert(memcmp(got.ptr, bytes, sizeof(bytes)) == 0);
	ck_assert_int_eq(hangar_sandbox_exists(sb, p), 1);
	ck_assert_int_eq(hangar_sandbox_exists(sb, path_in("nope")), 0);
	hangar_buf_dispose(&got);
}
END_TEST

START_TEST(files_errors)
{
	hangar_buf got = HANGAR_BUF_INIT;
	char big[2000];

	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(hangar_sandbox_read_file(&got, sb, path_in("missing")), HANGAR_EFILE);
	must(hangar_sandbox_mkdir(sb, path_in("d")), "mkdir");
	ck_assert_int_eq(hangar_sandbox_mkdir(sb, path_in("d")), HANGAR_EEXISTS);
	ck_assert_int_eq(hangar_sandbox_read_file(&got, sb, path_in("d")), HANGAR_EFILE);
	must(hangar_sandbox_write_file(sb, path_in("big"), big, sizeof(big)), "write big");
	must(hangar_ctx_set(ctx, "HANGAR_READ_LIMIT_BYTES", "1000"), "limit");
	ck_assert_int_eq(hangar_sandbox_read_file(&got, sb, path_in("big")), HANGAR_ETOOLARGE);
	ck_assert_ptr_null(got.ptr); /* refused, never truncated */
	ck_assert_int_eq(hangar_sandbox_write_file(sb, path_in("big/under"), "x", 1), HANGAR_EFILE);
}
END_TEST

struct names {
	char all[2048];
};

static int add_name(const hangar_file_info *fi, void *payload)
{
	struct names *n = payload;
	size_t len = strlen(n->all);

	snprintf(n->all + len, sizeof(n->all) - len, "%s%s:%d ", fi->path + strlen(tmpdir), "", fi->type);
	return 0;
}

START_TEST(files_list_stat_rename_remove)
{
	struct names n = { "" };

	must(hangar_sandbox_write_file(sb, path_in("t/a.txt"), "a", 1), "w1");
	must(hangar_sandbox_write_file(sb, path_in("t/sub/b.txt"), "bb", 2), "w2");
	must(hangar_sandbox_list_files(sb, path_in("t"), 1, add_name, &n), "list 1");
	ck_assert_str_eq(n.all, "/files/t/a.txt:1 /files/t/sub:2 ");
	n.all[0] = '\0';
	must(hangar_sandbox_list_files(sb, path_in("t"), 2, add_name, &n), "list 2");
	ck_assert_str_eq(n.all, "/files/t/a.txt:1 /files/t/sub:2 /files/t/sub/b.txt:1 ");
	ck_assert_int_eq(hangar_sandbox_list_files(sb, path_in("t/a.txt"), 1, add_name, &n), HANGAR_EFILE);
	must(hangar_sandbox_rename(sb, path_in("t/a.txt"), path_in("u/v/a2.txt")), "rename");
	ck_assert_int_eq(hangar_sandbox_exists(sb, path_in("u/v/a2.txt")), 1);
	ck_assert_int_eq(hangar_sandbox_rename(sb, path_in("t/a.txt"), path_in("x")), HANGAR_EFILE);
	must(hangar_sandbox_remove(sb, path_in("t")), "remove");
	must(hangar_sandbox_remove(sb, path_in("t")), "remove again");
	ck_assert_int_eq(hangar_sandbox_exists(sb, path_in("t/sub/b.txt")), 0);
}
END_TEST

static int stat_cb(const hangar_file_info *fi, void *payload)
{
	*(hangar_file_info *)payload = *fi;
	((hangar_file_info *)payload)->name = NULL; /* borrowed: do not keep */
	return 0;
}

START_TEST(files_stat)
{
	hangar_file_info fi;

	must(hangar_sandbox_write_file(sb, path_in("s.txt"), "12345", 5), "write");
	must(hangar_sandbox_stat(sb, path_in("s.txt"), stat_cb, &fi), "stat");
	ck_assert_int_eq(fi.type, HANGAR_FILE_REGULAR);
	ck_assert_int_eq(fi.bytes, 5);
	ck_assert_msg(llabs(fi.mtime_us / 1000000 - (long long)time(NULL)) < 60, "mtime %lld", (long long)fi.mtime_us);
	ck_assert_int_eq(hangar_sandbox_stat(sb, path_in("none"), stat_cb, &fi), HANGAR_EFILE);
}
END_TEST

START_TEST(files_copy_in_out)
{
	char local[300], back[300];
	size_t size = 5 * 1024 * 1024 + 17;
	unsigned char *data = malloc(size), *got = malloc(size);
	FILE *f;

	for (size_t i = 0; i < size; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	snprintf(local, sizeof(local), "%s/local.bin", tmpdir);
	snprintf(back, sizeof(back), "%s/back.bin", tmpdir);
	f = fopen(local, "wb");
	ck_assert(f && fwrite(data, 1, size, f) == size && fclose(f) == 0);
	must(hangar_sandbox_copy_in(sb, local, path_in("copied.bin")), "copy in");
	must(hangar_sandbox_copy_out(sb, path_in("copied.bin"), back, NULL), "copy out");
	f = fopen(back, "rb");
	ck_assert(f && fread(got, 1, size, f) == size && fgetc(f) == EOF);
	fclose(f);
	ck_assert(memcmp(data, got, size) == 0);
	/* A failed copy leaves no partial local file behind. */
	ck_assert_int_eq(hangar_sandbox_copy_out(sb, path_in("missing"), back, NULL), HANGAR_EFILE);
	ck_assert_int_eq(access(back, F_OK), 0); /* the earlier complete copy is untouched */
	free(data);
	free(got);
}
END_TEST

/* ---- processes ------------------------------------------------------------ */

struct watch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char buf[8192];
	size_t len;
};

static void watch_output(int stream, const char *data, size_t len, void *payload)
{
	struct watch *w = payload;

	(void)stream;
	pthread_mutex_lock(&w->mu);
	if (len > sizeof(w->buf) - 1 - w->len)
		len = sizeof(w->buf) - 1 - w->len;
	memcpy(w->buf + w->len, data, len);
	w->len += len;
	w->buf[w->len] = '\0';
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Waits until the output contains s, for at most 10 s. */
static int wait_for(struct watch *w, const char *s)
{
	struct timespec until;
	int found;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;     /* a login shell on a loaded machine can take seconds to start */
	pthread_mutex_lock(&w->mu);
	while (!(found = strstr(w->buf, s) != NULL))
		if (pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0)
			break;
	found = strstr(w->buf, s) != NULL;
	pthread_mutex_unlock(&w->mu);
	return found;
}

static struct watch *watch_new(void)
{
	struct watch *w = calloc(1, sizeof(*w));

	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	return w;
}

START_TEST(copy_out_of_a_huge_file_is_bounded)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	char local[300], cmd[600];
	int rc;

	/*
	 * A sandbox offers a file far larger than the limit, sparse so it
	 * costs nothing (envd refuses devices such as /dev/zero outright).
	 */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/files && truncate -s 64G %s/files/zero", tmpdir, tmpdir);
	must(run(&r, cmd, NULL), "symlink");
	ck_assert_int_eq(r.exit_code, 0);
	snprintf(local, sizeof(local), "%s/zero-copy", tmpdir);
	o.limit_bytes = 4 << 20;
	rc = hangar_sandbox_copy_out(sb, path_in("zero"), local, &o);
	ck_assert_msg(rc == HANGAR_ETOOLARGE, "copy gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	/* Neither the file nor its temporary copy is left behind. */
	snprintf(cmd, sizeof(cmd), "ls %s | grep -q zero-copy", tmpdir);
	ck_assert_int_ne(system(cmd), 0);
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(process_pty)
{
	struct watch *w = watch_new();
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p;
	int32_t code = 99;

	o.pty = 1;
	o.cols = 80;
	o.rows = 24;
	o.on_output = watch_output;
	o.payload = w;
	must(hangar_process_start(&p, sb, NULL, &o), "start pty");
	ck_assert_uint_gt(hangar_process_pid(p), 0);
	must(hangar_process_write(p, "echo $((6*7)) $TERM\n", 20), "write");
	ck_assert_msg(wait_for(w, "42 xterm-256color"), "no answer: %s", w->buf);
	must(hangar_process_resize(p, 100, 30), "resize");
	must(hangar_process_write(p, "stty size\n", 10), "write");
	ck_assert_msg(wait_for(w, "30 100"), "size not seen: %s", w->buf);
	ck_assert_int_eq(hangar_process_close_stdin(p), HANGAR_EUNSUPPORTED);
	must(hangar_process_write(p, "exit 5\n", 7), "exit");
	must(hangar_process_wait(&code, p, 10000), "wait");
	ck_assert_int_eq(code, 5);
	hangar_process_unref(p);
	free(w);
}
END_TEST

START_TEST(process_stdin_and_wait)
{
	struct watch *w = watch_new();
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p;
	int32_t code = 99;

	o.stdin_enabled = 1;
	o.on_output = watch_output;
	o.payload = w;
	must(hangar_process_start(&p, sb, "read x; echo got $x; cat; echo done", &o), "start");
	ck_assert_int_eq(hangar_process_wait(&code, p, 100), HANGAR_ETIMEOUT);
	must(hangar_process_write(p, "hi\nmore\n", 8), "write");
	ck_assert(wait_for(w, "got hi\nmore\n"));
	must(hangar_process_close_stdin(p), "close stdin");
	must(hangar_process_wait(&code, p, 10000), "wait");
	ck_assert_int_eq(code, 0);
	ck_assert(wait_for(w, "done\n"));
	hangar_process_unref(p);
	free(w);
}
END_TEST

START_TEST(process_attach_and_signal)
{
	struct watch *w1 = watch_new(), *w2 = watch_new();
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p, *q;
	int32_t code = 99;

	o.on_output = watch_output;
	o.payload = w1;
	must(hangar_process_start(&p, sb, "i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.05; done", &o), "start");
	ck_assert(wait_for(w1, "tick2\n"));
	o.payload = w2;
	must(hangar_process_attach(&q, sb, hangar_process_pid(p), &o), "attach");
	ck_assert(wait_for(w2, "tick"));
	ck_assert(strstr(w2->buf, "tick1\n") == NULL); /* live output only */
	must(hangar_process_signal(q, HANGAR_SIGKILL), "kill");
	must(hangar_process_wait(&code, p, 10000), "wait p");
	ck_assert_int_eq(code, -1);
	must(hangar_process_wait(&code, q, 10000), "wait q");
	ck_assert_int_eq(code, -1);
	ck_assert_int_eq(hangar_process_signal(p, HANGAR_SIGTERM), HANGAR_ENOTFOUND);
	hangar_process_unref(q);
	hangar_process_unref(p);
	free(w1);
	free(w2);
}
END_TEST

/* ---- failures ---------------------------------------------------------------- */

START_TEST(dead_sandbox_is_gone)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_buf b = HANGAR_BUF_INIT;
	struct fake_box *box = fake_find(&fake, hangar_sandbox_id(sb));

	/* Killed behind the library's back; the provider knows it is dead. */
	kill(box->pid, SIGKILL);
	waitpid(box->pid, NULL, 0);
	box->killed = 1;
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "true", NULL), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_read_file(&b, sb, "/etc/hostname"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_exists(sb, "/"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
}
END_TEST

/* As the command's first output arrives, its sandbox dies: envd killed, the provider knows. */
static void die_on_output(int stream, const char *data, size_t len, void *payload)
{
	struct fake_box *box = payload;

	(void)stream;
	(void)data;
	(void)len;
	if (box->killed)
		return;
	box->killed = 1;
	kill(box->pid, SIGKILL);
	waitpid(box->pid, NULL, 0);
}

START_TEST(sandbox_dying_mid_command_is_gone)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	int rc;

	o.on_output = die_on_output;
	o.payload = fake_find(&fake, hangar_sandbox_id(sb));
	rc = run(&r, "echo started; sleep 30", &o);
	ck_assert_msg(rc == HANGAR_EGONE, "exec gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
}
END_TEST

START_TEST(process_of_a_dying_sandbox_is_gone)
{
	hangar_process_opts o = HANGAR_PROCESS_OPTS_INIT;
	hangar_process *p = NULL;
	int rc;

	o.on_output = die_on_output;
	o.payload = fake_find(&fake, hangar_sandbox_id(sb));
	must(hangar_process_start(&p, sb, "echo started; sleep 30", &o), "start");
	rc = hangar_process_wait(NULL, p, 20000);
	ck_assert_msg(rc == HANGAR_EGONE, "wait gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	hangar_process_unref(p);
}
END_TEST

START_TEST(silent_sandbox_is_a_timeout)
{
	hangar_buf b = HANGAR_BUF_INIT;
	struct fake_box *box = fake_find(&fake, hangar_sandbox_id(sb));

	must(hangar_ctx_set(ctx, "HANGAR_REQUEST_TIMEOUT_SECONDS", "1"), "timeout");
	kill(box->pid, SIGSTOP); /* alive, but not answering */
	ck_assert_int_eq(hangar_sandbox_read_file(&b, sb, "/etc/hostname"), HANGAR_ETIMEOUT);
	/* Copies have no overall deadline, but silence still ends them. */
	{
		char local[300];

		snprintf(local, sizeof(local), "%s/never", tmpdir);
		ck_assert_int_eq(hangar_sandbox_copy_out(sb, "/etc/hostname", local, NULL), HANGAR_ETIMEOUT);
		ck_assert_int_eq(access(local, F_OK), -1);
	}
	kill(box->pid, SIGCONT);
	must(hangar_sandbox_read_file(&b, sb, "/etc/hostname"), "read after");
	hangar_buf_dispose(&b);
}
END_TEST

START_TEST(paused_sandbox_refuses)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_sandbox *again;

	must(hangar_sandbox_pause(sb), "pause");
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "true", NULL), HANGAR_EPAUSED);
	/* Attaching does not resume it. */
	must(hangar_sandbox_attach(&again, ctx, NULL, hangar_sandbox_id(sb)), "attach");
	must(hangar_sandbox_get_info(&info, again), "info");
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_str_eq(info.provider, "fake");
	must(hangar_sandbox_resume(again), "resume");
	must(hangar_sandbox_exec(&r, sb, "echo back", NULL), "exec after resume");
	ck_assert_str_eq(r.out.ptr, "back\n");
	hangar_exec_result_dispose(&r);
	hangar_sandbox_unref(again);
}
END_TEST

static int count_cb(const hangar_sandbox_info *info, void *payload)
{
	(void)info;
	++*(int *)payload;
	return 0;
}

START_TEST(list_failure_is_not_empty)
{
	int n = 0;

	must(hangar_sandbox_list(ctx, "fake", count_cb, &n), "list");
	ck_assert_int_eq(n, 1);
	fake.list_fails = HANGAR_EUNAVAILABLE;
	n = 0;
	ck_assert_int_eq(hangar_sandbox_list(ctx, "fake", count_cb, &n), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(n, 0);
}
END_TEST

static int down_init(void **state, hangar_ctx *c, void *data)
{
	(void)state;
	(void)c;
	(void)data;
	return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_DOWN_PATH: \"/nonexistent\" is not there");
}

static int down_create(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out)
{
	(void)state;
	(void)o;
	(void)out;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0, "down");
}

static int down_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	(void)state;
	(void)id;
	(void)out;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0, "down");
}

static int down_kill(void *state, const char *id)
{
	(void)state;
	(void)id;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0, "down");
}

static const struct hangar_provider_ops down_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "broken",
	.init = down_init, .create = down_create, .connect = down_connect, .kill = down_kill,
};

START_TEST(list_names_a_broken_provider)
{
	int n = 0, rc;

	must(hangar_provider_register(ctx, &down_ops, NULL), "register");
	/* Nobody configured it and it holds nothing: it is left out. */
	must(hangar_sandbox_list(ctx, NULL, count_cb, &n), "list");
	ck_assert_int_eq(n, 1);
	/* The default provider cannot be left out: the others are listed, the failure named. */
	must(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "broken"), "default");
	n = 0;
	rc = hangar_sandbox_list(ctx, NULL, count_cb, &n);
	ck_assert_int_eq(rc, HANGAR_ECONFIG);
	ck_assert_int_eq(n, 1);
	ck_assert_msg(strstr(hangar_error_last()->message, "broken") &&
			      strstr(hangar_error_last()->message, "HANGAR_DOWN_PATH"),
		      "message: %s", hangar_error_last()->message);
}
END_TEST

static int has_secret(const char *id)
{
	hangar_buf b = HANGAR_BUF_INIT;
	int rc = hangar_sys_secret_get(&b, ctx, id, "token");

	hangar_buf_dispose(&b);
	ck_assert_msg(rc == 0 || rc == HANGAR_ENOTFOUND, "secret_get: %s", hangar_error_name(rc));
	return rc == 0;
}

START_TEST(store_forgets_gone_sandboxes)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *b2, *b3;
	struct fake_box *box;
	int n = 0;

	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "a key for the tests, long enough"), "key");
	must(hangar_sandbox_create(&b2, ctx, NULL), "create 2");
	must(hangar_sandbox_create(&b3, ctx, NULL), "create 3");
	must(hangar_sys_secret_put(ctx, hangar_sandbox_id(sb), "token", "t1"), "put 1");
	must(hangar_sys_secret_put(ctx, hangar_sandbox_id(b2), "token", "t2"), "put 2");
	must(hangar_sys_secret_put(ctx, hangar_sandbox_id(b3), "token", "t3"), "put 3");

	/* b2 expires behind the library's back: the next list forgets it, and only it. */
	box = fake_find(&fake, hangar_sandbox_id(b2));
	kill(box->pid, SIGKILL);
	waitpid(box->pid, NULL, 0);
	box->killed = 1;
	must(hangar_sandbox_list(ctx, NULL, count_cb, &n), "list");
	ck_assert_int_eq(n, 2);
	ck_assert(!has_secret(hangar_sandbox_id(b2)));
	ck_assert(has_secret(hangar_sandbox_id(sb)));
	ck_assert(has_secret(hangar_sandbox_id(b3)));

	/* b3 dies; the next call that finds it gone forgets it. */
	box = fake_find(&fake, hangar_sandbox_id(b3));
	kill(box->pid, SIGKILL);
	waitpid(box->pid, NULL, 0);
	box->killed = 1;
	ck_assert_int_eq(hangar_sandbox_exec(&r, b3, "true", NULL), HANGAR_EGONE);
	ck_assert(!has_secret(hangar_sandbox_id(b3)));
	ck_assert(has_secret(hangar_sandbox_id(sb)));
	hangar_sandbox_unref(b2);
	hangar_sandbox_unref(b3);
}
END_TEST

START_TEST(create_failure_keeps_its_kind)
{
	hangar_sandbox *other;

	fake.create_fails = HANGAR_ECAPACITY;
	ck_assert_int_eq(hangar_sandbox_create(&other, ctx, NULL), HANGAR_ECAPACITY);
	ck_assert_ptr_null(other);
	ck_assert_int_eq(hangar_error_last()->http_status, 429);
}
END_TEST

START_TEST(attach_checks_ids)
{
	hangar_sandbox *other;

	ck_assert_int_eq(hangar_sandbox_attach(&other, ctx, NULL, "../etc"), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_attach(&other, ctx, "fake", "fake-999"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&other, ctx, "nosuch", "fake-1"), HANGAR_ENOTFOUND);
}
END_TEST

/* ---- settings --------------------------------------------------------------------- */

START_TEST(bad_setting_names_the_variable)
{
	hangar_ctx *c;

	setenv("HANGAR_EXEC_TIMEOUT_SECONDS", "soon", 1);
	ck_assert_int_eq(hangar_ctx_new(&c, 0), HANGAR_ECONFIG);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_EXEC_TIMEOUT_SECONDS"));
	unsetenv("HANGAR_EXEC_TIMEOUT_SECONDS");
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_NETWORK", "maybe"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_LOCAL_NETWORK"));
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_NO_SUCH", "1"), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", "relative/dir"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\": [\"e2b\", \"local\"], \"isolated\": []}"), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"speedy\": [\"e2b\"]}"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "speedy"));
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_TIERS", "[\"e2b\"]"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_E2B_API_URL", "ftp://x"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_E2B_API_URL", "http://127.0.0.1:3000"), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_E2B_FLAVOR", "cubic"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_E2B_ENVIRONMENT_TEMPLATES", "{\"py\": 3}"), HANGAR_ECONFIG);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_TIER_HEDGE", "{\"fast\": 250}"), 0);
}
END_TEST

static int find_masked(const char *name, const char *value, int source, void *payload)
{
	(void)source;
	if (!strcmp(name, "HANGAR_E2B_API_KEY"))
		*(int *)payload = strcmp(value, "********") == 0;
	return 0;
}

START_TEST(secrets_are_masked)
{
	int masked = 0;

	must(hangar_ctx_set(ctx, "HANGAR_E2B_API_KEY", "e2b_supersecret"), "set key");
	must(hangar_ctx_foreach_setting(ctx, find_masked, &masked), "foreach");
	ck_assert_int_eq(masked, 1);
}
END_TEST

static int other_create(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out);
static int other_connect(void *state, const char *id, hangar_sys_sandbox *out);
static int other_kill(void *state, const char *id);

/* A provider that cannot be set up says why every time, and is tried again after a fix. */
static int flaky_ready;

static int flaky_init(void **state, hangar_ctx *c, void *data)
{
	(void)c;
	(void)data;
	*state = NULL;
	if (!flaky_ready)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "flaky: not ready yet");
	return 0;
}

START_TEST(provider_setup_is_retried)
{
	static const struct hangar_provider_ops flaky = {
		.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "flaky",
		.init = flaky_init, .create = other_create, .connect = other_connect, .kill = other_kill,
	};
	hangar_provider *p = NULL;

	flaky_ready = 0;
	must(hangar_provider_register(ctx, &flaky, NULL), "register");
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "flaky"), HANGAR_ECONFIG);
	ck_assert_str_eq(hangar_error_last()->message, "flaky: not ready yet");
	must(hangar_provider_lookup(&p, ctx, "fake"), "fake");
	p = hangar_provider_unref(p);
	/* The second failure reports its own reason, not whatever came last. */
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "flaky"), HANGAR_ECONFIG);
	ck_assert_str_eq(hangar_error_last()->message, "flaky: not ready yet");
	flaky_ready = 1;
	must(hangar_provider_lookup(&p, ctx, "flaky"), "after the fix");
	hangar_provider_unref(p);
}
END_TEST

START_TEST(null_arguments)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	ck_assert_int_eq(hangar_sandbox_exec(&r, NULL, "true", NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_exec(NULL, sb, "true", NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_create(NULL, ctx, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_new(NULL, 0), HANGAR_EINVAL);
	ck_assert_ptr_null(hangar_sandbox_unref(NULL));
	ck_assert_str_eq(hangar_error_name(HANGAR_EGONE), "gone");
}
END_TEST

/* ---- the state store ------------------------------------------------------------- */

static int count_fake_calls;

START_TEST(store_secrets_sealed)
{
	hangar_buf b = HANGAR_BUF_INIT;
	char cmd[400];
	const char *id = hangar_sandbox_id(sb);

	ck_assert_int_eq(hangar_sys_secret_put(ctx, id, "traffic-token", "tt-123"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_SECRET_KEY"));
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "a key for the tests, long enough"), "key");
	must(hangar_sys_secret_put(ctx, id, "traffic-token", "tt-123"), "put");
	must(hangar_sys_secret_get(&b, ctx, id, "traffic-token"), "get");
	ck_assert_str_eq(b.ptr, "tt-123");
	ck_assert_int_eq(hangar_sys_secret_get(&b, ctx, id, "other"), HANGAR_ENOTFOUND);
	ck_assert_int_eq(hangar_sys_secret_get(&b, ctx, "fake-999", "traffic-token"), HANGAR_ENOTFOUND);
	/* Never in clear on disk. */
	snprintf(cmd, sizeof(cmd), "grep -rqa tt-123 %s", state_dir());
	ck_assert_int_ne(system(cmd), 0);
	/* Another key does not open it. */
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "some other key entirely"), "key 2");
	ck_assert_int_eq(hangar_sys_secret_get(&b, ctx, id, "traffic-token"), HANGAR_EREFUSED);
	/* Killing the sandbox forgets its secrets. */
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "a key for the tests, long enough"), "key back");
	must(hangar_sandbox_kill(sb), "kill");
	ck_assert_int_eq(hangar_sys_secret_get(&b, ctx, id, "traffic-token"), HANGAR_ENOTFOUND);
	hangar_buf_dispose(&b);
}
END_TEST

static int other_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	(void)state;
	(void)out;
	count_fake_calls++;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 503, 0, "the other provider is down: %s", id);
}

static int other_init(void **state, hangar_ctx *c, void *data)
{
	(void)c;
	*state = data;
	return 0;
}

static int other_create(void *state, const struct hangar_create_opts *o, hangar_sys_sandbox *out)
{
	(void)state;
	(void)o;
	(void)out;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 503, 0, "down");
}

static int other_kill(void *state, const char *id)
{
	(void)state;
	(void)id;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 503, 0, "down");
}

START_TEST(store_finds_the_provider_after_a_restart)
{
	static const struct hangar_provider_ops other = {
		.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "aaa-down",
		.init = other_init, .create = other_create, .connect = other_connect, .kill = other_kill,
	};
	hangar_ctx *c2;
	hangar_sandbox *again;
	int rc;

	/* A new context, as a new process would open, with a broken provider registered first. */
	must(hangar_ctx_new(&c2, HANGAR_CTX_NO_ENV), "ctx 2");
	must(hangar_ctx_set(c2, "HANGAR_STATE_DIR", state_dir()), "state dir");
	must(hangar_provider_register(c2, &other, NULL), "register other");
	must(fake_register(c2, &fake), "register fake");
	count_fake_calls = 0;
	must(hangar_sandbox_attach(&again, c2, NULL, hangar_sandbox_id(sb)), "attach by record");
	ck_assert_int_eq(count_fake_calls, 0); /* went straight to the recorded provider */
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(again)), "fake");
	must(hangar_sandbox_kill(again), "kill");
	hangar_sandbox_unref(again);
	/* Without a record every provider is asked; with one of them down, gone cannot be claimed. */
	rc = hangar_sandbox_attach(&again, c2, NULL, hangar_sandbox_id(sb));
	ck_assert_msg(rc != 0 && rc != HANGAR_EGONE, "attach gave %s", hangar_error_name(rc));
	ck_assert_int_eq(count_fake_calls, 1);
	hangar_ctx_unref(c2);
}
END_TEST

static int forging_list(void *state, hangar_sys_list *out)
{
	(void)state;
	(void)out;
	return hangar_sys_error(HANGAR_EUNAVAILABLE, 503, 0, "down\nhangar: sandbox sb-1 killed\r\x1b[2J");
}

START_TEST(messages_are_one_line_and_numbers_bounded)
{
	static const struct hangar_provider_ops forging = {
		.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "forging",
		.init = other_init, .create = other_create, .connect = other_connect, .kill = other_kill,
		.list = forging_list,
	};
	static const char *const bad[] = { "0", " 5", "+5", "5 ", "-1", "0x10", "99999999999999999999", "" };
	int n = 0;

	/* Text a provider or sandbox sent cannot forge lines. */
	must(hangar_provider_register(ctx, &forging, NULL), "register");
	ck_assert_int_eq(hangar_sandbox_list(ctx, "forging", count_cb, &n), HANGAR_EUNAVAILABLE);
	ck_assert_ptr_null(strchr(hangar_error_last()->message, '\n'));
	ck_assert_ptr_null(strchr(hangar_error_last()->message, '\r'));
	ck_assert_ptr_null(strchr(hangar_error_last()->message, '\x1b'));
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "down\\x0ahangar"));

	/* Numeric settings: digits only, within bounds. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(hangar_ctx_set(ctx, "HANGAR_READ_LIMIT_BYTES", bad[i]) == HANGAR_ECONFIG,
			      "HANGAR_READ_LIMIT_BYTES=\"%s\" was taken", bad[i]);
		ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_COPY_LIMIT_BYTES", bad[i]), HANGAR_ECONFIG);
	}
	must(hangar_ctx_set(ctx, "HANGAR_READ_LIMIT_BYTES", "5"), "read limit 5");
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_COPY_TIMEOUT_SECONDS", "86401"), HANGAR_ECONFIG);
	must(hangar_ctx_set(ctx, "HANGAR_COPY_TIMEOUT_SECONDS", "86400"), "copy timeout");

	/* Lifetimes that would overflow an expiry. */
	{
		hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
		hangar_sandbox *other = NULL;

		co.timeout_sec = 99999999999LL;
		ck_assert_int_eq(hangar_sandbox_create(&other, ctx, &co), HANGAR_EINVAL);
		ck_assert_int_eq(hangar_sandbox_set_timeout(sb, INT64_MAX), HANGAR_EINVAL);
	}
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("core");
	TCase *t = tcase_create("sandbox");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, exec_result);
	tcase_add_test(t, exec_env_cwd_stdin);
	tcase_add_test(t, exec_timeout_kills);
	tcase_add_test(t, exec_timeout_kills_a_stubborn_command);
	tcase_add_test(t, exec_output_cap);
	tcase_add_test(t, exec_streams_in_order);
	tcase_add_test(t, exec_cancel_stops_the_command);
	tcase_add_test(t, exec_result_never_written_past_its_size);
	tcase_add_test(t, exec_refuses_what_it_cannot_honour);
	tcase_add_test(t, files_round_trip_binary_unicode);
	tcase_add_test(t, files_errors);
	tcase_add_test(t, files_list_stat_rename_remove);
	tcase_add_test(t, files_stat);
	tcase_add_test(t, files_copy_in_out);
	tcase_add_test(t, copy_out_of_a_huge_file_is_bounded);
	tcase_add_test(t, process_pty);
	tcase_add_test(t, process_stdin_and_wait);
	tcase_add_test(t, process_attach_and_signal);
	tcase_add_test(t, dead_sandbox_is_gone);
	tcase_add_test(t, silent_sandbox_is_a_timeout);
	tcase_add_test(t, sandbox_dying_mid_command_is_gone);
	tcase_add_test(t, process_of_a_dying_sandbox_is_gone);
	tcase_add_test(t, list_names_a_broken_provider);
	tcase_add_test(t, store_forgets_gone_sandboxes);
	tcase_add_test(t, messages_are_one_line_and_numbers_bounded);
	tcase_add_test(t, paused_sandbox_refuses);
	tcase_add_test(t, list_failure_is_not_empty);
	tcase_add_test(t, create_failure_keeps_its_kind);
	tcase_add_test(t, attach_checks_ids);
	tcase_add_test(t, bad_setting_names_the_variable);
	tcase_add_test(t, secrets_are_masked);
	tcase_add_test(t, null_arguments);
	tcase_add_test(t, provider_setup_is_retried);
	tcase_add_test(t, store_secrets_sealed);
	tcase_add_test(t, store_finds_the_provider_after_a_restart);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
